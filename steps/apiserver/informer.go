package apiserver

import (
	"context"
	"fmt"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Informer keeps a local copy of one resource, the way client-go's
// informers feed every Kubernetes controller: list once, remember the
// list's resourceVersion, then watch from it, applying each change to the
// copy and telling the component. When the watch falls behind the store's
// compaction (410 Gone), it lists again. Components read the copy, never
// the API server, between changes.
type Informer struct {
	c         Interface
	resource  string
	namespace string
	opts      ListOptions

	mu    sync.RWMutex
	items map[string]Object // by namespace/name
	rv    string
}

// NewInformer returns an informer of resource in namespace ("" for all),
// filtered by opts' selectors (for instance a kubelet's
// spec.nodeName=NODE).
func NewInformer(c Interface, resource, namespace string, opts ListOptions) *Informer {
	return &Informer{c: c, resource: resource, namespace: namespace, opts: opts, items: map[string]Object{}}
}

func objectKey(o Object) string { return o.GetNamespace() + "/" + o.GetName() }

// Sync lists the resource and replaces the local copy, calling fn (if not
// nil) with an Added event for every object: what a component started with
// --once works from.
func (i *Informer) Sync(ctx context.Context, fn func(WatchEvent)) error {
	l, err := i.c.List(ctx, i.resource, i.namespace, ListOptions{LabelSelector: i.opts.LabelSelector, FieldSelector: i.opts.FieldSelector})
	if err != nil {
		return fmt.Errorf("listing %s: %w", i.resource, err)
	}
	items := make(map[string]Object, len(l.Items))
	for _, o := range l.Items {
		items[objectKey(o)] = o
	}
	i.mu.Lock()
	old := i.items
	i.items, i.rv = items, l.ResourceVersion
	i.mu.Unlock()
	if fn != nil {
		for k, o := range old { // gone while we were not watching
			if _, ok := items[k]; !ok {
				fn(WatchEvent{Type: Deleted, Object: o})
			}
		}
		for _, o := range sorted(l.Items) {
			fn(WatchEvent{Type: Added, Object: o})
		}
	}
	return nil
}

// Run lists, then watches until ctx ends, calling fn with every change
// after it is applied to the local copy. It lists again when the watch is
// too old. It returns nil when ctx ends.
func (i *Informer) Run(ctx context.Context, fn func(WatchEvent)) error {
	if err := i.Sync(ctx, fn); err != nil {
		return err
	}
	for {
		i.mu.RLock()
		rv := i.rv
		i.mu.RUnlock()
		opts := i.opts
		opts.ResourceVersion = rv
		w, err := i.c.Watch(ctx, i.resource, i.namespace, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if IsTooLargeResourceVersion(err) {
				// a revision the store has not reached (the API server's
				// store was switched, or restored): list again
				if err := i.Sync(ctx, fn); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("watching %s: %w", i.resource, err)
		}
		for ev := range w.Events() {
			i.apply(ev)
			if fn != nil {
				fn(ev)
			}
		}
		err = w.Err()
		switch {
		case ctx.Err() != nil:
			return nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || IsTooLargeResourceVersion(err):
			if err := i.Sync(ctx, fn); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("watching %s: %w", i.resource, err)
		}
	}
}

func (i *Informer) apply(ev WatchEvent) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if ev.Type == Deleted {
		delete(i.items, objectKey(ev.Object))
	} else {
		i.items[objectKey(ev.Object)] = ev.Object
	}
	i.rv = ev.Object.GetResourceVersion()
}

// List returns the local copy, sorted by namespace and name. The objects
// are shared: copy one (DeepCopyObject) before changing it.
func (i *Informer) List() []Object {
	i.mu.RLock()
	out := make([]Object, 0, len(i.items))
	for _, o := range i.items {
		out = append(out, o)
	}
	i.mu.RUnlock()
	return sorted(out)
}

// Get returns one object of the local copy (shared: copy before changing).
func (i *Informer) Get(namespace, name string) (Object, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	o, ok := i.items[namespace+"/"+name]
	return o, ok
}

// ResourceVersion is the revision the local copy is at.
func (i *Informer) ResourceVersion() string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.rv
}

func sorted(objs []Object) []Object {
	sort.Slice(objs, func(a, b int) bool { return objectKey(objs[a]) < objectKey(objs[b]) })
	return objs
}
