package apiserver

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Recorder writes Events about objects, as client-go's event recorder does
// for every component: the scheduler's Scheduled, the kubelet's Pulling and
// Started, the controllers' SuccessfulCreate. An Event is an object like
// any other, stored in the involved object's namespace (default for
// cluster-scoped objects such as nodes), named after the object and the
// time: web.187d2c5f4a3b1e20.
//
// The same event again (the same source, involved object, type, reason and
// message: client-go's EventCorrelator key) is not a new Event: the
// recorder PATCHes the one it wrote, count+1 and a new lastTimestamp (a
// strategic merge patch of those fields, as client-go's event sink sends
// it), from its own memory of the last 4096 events (client-go's LRU cache:
// components may create and patch events, not read them). kubectl describe
// shows it as "(x3 over 2m)". An Event deleted meanwhile is created anew.
type Recorder struct {
	c         Interface
	component string // source.component: "default-scheduler", "kubelet", "deployment-controller"
	host      string // source.host: the node, for the kubelet
	now       func() time.Time

	mu    sync.Mutex
	seen  map[string]*list.Element // by correlation key; values are *seenEvent
	order *list.List               // most recently recorded first
}

// maxSeenEvents is client-go's maxLruCacheEntries: how many distinct events
// a recorder remembers.
const maxSeenEvents = 4096

type seenEvent struct {
	key string
	ev  *corev1.Event
}

// NewRecorder returns a recorder writing Events from component (and host,
// for a kubelet) through c.
func NewRecorder(c Interface, component, host string) *Recorder {
	return &Recorder{c: c, component: component, host: host, now: time.Now, seen: map[string]*list.Element{}, order: list.New()}
}

// eventKey is client-go's getEventKey: what makes two events the same.
func eventKey(ev *corev1.Event) string {
	return strings.Join([]string{
		ev.Source.Component, ev.Source.Host,
		ev.InvolvedObject.Kind, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name,
		ev.InvolvedObject.FieldPath, string(ev.InvolvedObject.UID), ev.InvolvedObject.APIVersion,
		ev.Type, ev.Reason, ev.ReportingController, ev.ReportingInstance, ev.Message,
	}, "")
}

// Event records one event. eventType is corev1.EventTypeNormal or
// corev1.EventTypeWarning.
func (r *Recorder) Event(ctx context.Context, obj Object, eventType, reason, message string) error {
	res, err := ResourceOf(obj)
	if err != nil {
		return err
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = DefaultNamespace
	}
	now := metav1.NewTime(r.now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj.GetName(), r.now().UnixNano()), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{
			Kind: res.Kind, APIVersion: res.GroupVersion().String(), Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Reason: reason, Message: message, Type: eventType, Count: 1,
		Source:         corev1.EventSource{Component: r.component, Host: r.host},
		FirstTimestamp: now, LastTimestamp: now,
		ReportingController: r.component, ReportingInstance: r.host,
	}
	key := eventKey(ev)
	if prev := r.lookup(key); prev != nil {
		patch, err := json.Marshal(map[string]any{"count": prev.Count + 1, "lastTimestamp": now, "message": message})
		if err != nil {
			return err
		}
		patched, err := r.c.Patch(ctx, "events", prev.Namespace, prev.Name, types.StrategicMergePatchType, patch, PatchOptions{})
		if err == nil {
			r.remember(key, patched.(*corev1.Event))
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("recording event %s about %s (patching %s/%s): %w", reason, obj.GetName(), prev.Namespace, prev.Name, err)
		}
		// deleted meanwhile (or expired): record it anew
	}
	created, err := r.c.Create(ctx, ev)
	if err != nil {
		return fmt.Errorf("recording event %s about %s: %w", reason, obj.GetName(), err)
	}
	r.remember(key, created.(*corev1.Event))
	return nil
}

func (r *Recorder) lookup(key string) *corev1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.seen[key]; ok {
		r.order.MoveToFront(e)
		return e.Value.(*seenEvent).ev
	}
	return nil
}

func (r *Recorder) remember(key string, ev *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.seen[key]; ok {
		e.Value.(*seenEvent).ev = ev
		r.order.MoveToFront(e)
		return
	}
	r.seen[key] = r.order.PushFront(&seenEvent{key: key, ev: ev})
	if r.order.Len() > maxSeenEvents {
		oldest := r.order.Back()
		r.order.Remove(oldest)
		delete(r.seen, oldest.Value.(*seenEvent).key)
	}
}
