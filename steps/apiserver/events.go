package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Recorder writes Events about objects, as client-go's event recorder does
// for every component: the scheduler's Scheduled, the kubelet's Pulling and
// Started, the controllers' SuccessfulCreate. An Event is an object like
// any other, stored in the involved object's namespace (default for
// cluster-scoped objects such as nodes), named after the object and the
// time: web.187d2c5f4a3b1e20. The same reason and message about the same
// object again bumps the Event's count and lastTimestamp instead of adding
// one, as client-go's correlator does, from its own memory (components may
// create and update events, not read them); kubectl describe shows it as
// "(x3 over 2m)".
type Recorder struct {
	c         Interface
	component string // source.component: "default-scheduler", "kubelet", "deployment-controller"
	host      string // source.host: the node, for the kubelet
	now       func() time.Time

	mu   sync.Mutex
	seen map[string]*corev1.Event // by involved object uid, reason and message
}

// NewRecorder returns a recorder writing Events from component (and host,
// for a kubelet) through c.
func NewRecorder(c Interface, component, host string) *Recorder {
	return &Recorder{c: c, component: component, host: host, now: time.Now, seen: map[string]*corev1.Event{}}
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
	key := string(obj.GetUID()) + "\x00" + reason + "\x00" + message
	now := metav1.NewTime(r.now())
	r.mu.Lock()
	prev := r.seen[key]
	r.mu.Unlock()
	if prev != nil {
		ev := prev.DeepCopy()
		ev.Count++
		ev.LastTimestamp = now
		updated, err := r.c.Update(ctx, ev)
		if err == nil {
			r.remember(key, updated.(*corev1.Event))
			return nil
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("recording event %s about %s: %w", reason, obj.GetName(), err)
		}
		// gone or changed elsewhere: record it anew
	}
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
	created, err := r.c.Create(ctx, ev)
	if err != nil {
		return fmt.Errorf("recording event %s about %s: %w", reason, obj.GetName(), err)
	}
	r.remember(key, created.(*corev1.Event))
	return nil
}

func (r *Recorder) remember(key string, ev *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[key] = ev
}
