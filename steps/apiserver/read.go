package apiserver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// Get implements Interface.
func (c *Client) Get(ctx context.Context, resource, namespace, name string) (Object, error) {
	res, namespace, err := c.target(resource, namespace, false)
	if err != nil {
		return nil, err
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	var out Object
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "get", APIGroup: res.Group, Resource: res.Name, Namespace: namespace, Name: name}); err != nil {
			return err
		}
		obj, err := getTyped[Object](tx, res, namespace, name)
		if err != nil {
			return err
		}
		if obj == nil {
			return apierrors.NewNotFound(res.GroupResource(), name)
		}
		if c.phases != nil {
			c.report(Phase{Name: PhaseStorage, Plugin: "etcd (bbolt)", Summary: fmt.Sprintf("read %s (mod_revision %s)", res.Key(namespace, name), obj.GetResourceVersion())})
		}
		out = obj
		return nil
	})
	return out, err
}

// target resolves a resource name and the namespace a request is about.
// For List and Watch, "" means every namespace; otherwise it means
// "default".
func (c *Client) target(resource, namespace string, all bool) (Resource, string, error) {
	res, err := LookupResource(resource)
	if err != nil {
		return res, "", err
	}
	switch {
	case !res.Namespaced:
		namespace = ""
	case namespace == "" && !all:
		namespace = DefaultNamespace
	}
	return res, namespace, nil
}

// selector is a parsed label and field selector.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelectors(opts ListOptions) (selector, error) {
	var s selector
	var err error
	if s.labels, err = labels.Parse(opts.LabelSelector); err != nil {
		return s, apierrors.NewBadRequest(fmt.Sprintf("unable to parse the label selector %q: %v", opts.LabelSelector, err))
	}
	if s.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
		return s, apierrors.NewBadRequest(fmt.Sprintf("unable to parse the field selector %q: %v", opts.FieldSelector, err))
	}
	for _, r := range s.fields.Requirements() {
		switch r.Field {
		case "metadata.name", "metadata.namespace", "spec.nodeName", "status.phase":
		default:
			return s, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s (podlab supports metadata.name, metadata.namespace, spec.nodeName, status.phase)", r.Field))
		}
	}
	return s, nil
}

func (s selector) empty() bool { return s.labels.Empty() && s.fields.Empty() }

func (s selector) matches(obj Object) bool {
	if !s.labels.Empty() && !s.labels.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	if s.fields.Empty() {
		return true
	}
	set := fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}
	if pod, ok := obj.(*corev1.Pod); ok {
		set["spec.nodeName"] = pod.Spec.NodeName
		set["status.phase"] = string(pod.Status.Phase)
	}
	return s.fields.Matches(set)
}

// List implements Interface.
func (c *Client) List(ctx context.Context, resource, namespace string, opts ListOptions) (*List, error) {
	res, namespace, err := c.target(resource, namespace, true)
	if err != nil {
		return nil, err
	}
	sel, err := parseSelectors(opts)
	if err != nil {
		return nil, err
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	var raw []store.KV
	var rev int64
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "list", APIGroup: res.Group, Resource: res.Name, Namespace: namespace, FieldSelector: sel.fields.Requirements()}); err != nil {
			return err
		}
		rev = tx.Revision()
		raw, err = tx.List(res.Prefix(namespace))
		return err
	})
	if err != nil {
		return nil, err
	}
	// Decode outside the transaction, so the store's lock is held only
	// for the read itself.
	items, err := decodeAll(ctx, res, raw, sel)
	if err != nil {
		return nil, err
	}
	if c.phases != nil {
		c.report(Phase{Name: PhaseStorage, Plugin: "etcd (bbolt)", Summary: fmt.Sprintf("listed %d keys under %s at revision %d, %d match", len(raw), res.Prefix(namespace), rev, len(items))})
	}
	return &List{Items: items, ResourceVersion: strconv.FormatInt(rev, 10)}, nil
}

// decodeAll decodes stored objects and keeps those sel matches, in key
// order. Decoding JSON is most of a large list's cost, so a large list is
// decoded by one goroutine per CPU, each taking every n-th object.
func decodeAll(ctx context.Context, res Resource, raw []store.KV, sel selector) ([]Object, error) {
	decoded := make([]Object, len(raw))
	workers := min(runtime.GOMAXPROCS(0), len(raw)/256+1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(raw); i += workers {
				if i%(256*workers) == w {
					if errs[w] = ctxErr(ctx); errs[w] != nil {
						return
					}
				}
				obj, err := decode(res, raw[i].Value, raw[i].ModRevision)
				if err != nil {
					errs[w] = fmt.Errorf("%s: %w", raw[i].Key, err)
					return
				}
				if sel.matches(obj) {
					decoded[i] = obj
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	items := make([]Object, 0, len(raw))
	for _, o := range decoded {
		if o != nil {
			items = append(items, o)
		}
	}
	return items, nil
}

// Watch implements Interface.
func (c *Client) Watch(ctx context.Context, resource, namespace string, opts ListOptions) (Watcher, error) {
	res, namespace, err := c.target(resource, namespace, true)
	if err != nil {
		return nil, err
	}
	sel, err := parseSelectors(opts)
	if err != nil {
		return nil, err
	}
	from, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "watch", APIGroup: res.Group, Resource: res.Name, Namespace: namespace, FieldSelector: sel.fields.Requirements()}); err != nil {
			return err
		}
		if from == 0 {
			from = tx.Revision()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	prefix := res.Prefix(namespace)
	sw, err := c.s.store.Watch(ctx, prefix, from)
	if err != nil {
		return nil, storeError(res.GroupResource(), "", err)
	}
	if c.phases != nil {
		c.report(Phase{Name: PhaseStorage, Plugin: "etcd (bbolt)", Summary: fmt.Sprintf("watching %s after revision %d", prefix, from)})
	}
	w := &watcher{events: make(chan WatchEvent, 64), done: make(chan struct{})}
	go w.run(ctx, res, sw, sel)
	return w, nil
}

type watcher struct {
	events chan WatchEvent
	done   chan struct{}
	err    error
}

func (w *watcher) Events() <-chan WatchEvent { return w.events }

func (w *watcher) Err() error {
	<-w.done
	return w.err
}

func (w *watcher) run(ctx context.Context, res Resource, sw *store.Watcher, sel selector) {
	defer close(w.done)
	defer close(w.events)
	for ev := range sw.Events() {
		obj, err := decode(res, ev.KV.Value, ev.Revision)
		if err != nil {
			w.err = err
			return
		}
		typ := EventType(ev.Type)
		if !sel.empty() && ev.Type == store.Modified {
			// As kube-apiserver's watch cache does: an object that starts
			// matching the selector is ADDED, one that stops is DELETED.
			prevMatched := false
			if ev.PrevKV != nil {
				if prev, err := decode(res, ev.PrevKV.Value, ev.Revision); err == nil {
					prevMatched = sel.matches(prev)
					if prevMatched && !sel.matches(obj) {
						typ, obj = Deleted, prev
					}
				}
			}
			if !prevMatched && sel.matches(obj) {
				typ = Added
			}
		}
		if typ != Deleted && !sel.matches(obj) {
			continue
		}
		select {
		case w.events <- WatchEvent{Type: typ, Object: obj}:
		case <-ctx.Done():
			return
		}
	}
	if err := sw.Err(); err != nil {
		w.err = storeError(res.GroupResource(), "", err)
	}
}
