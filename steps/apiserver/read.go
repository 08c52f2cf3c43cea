package apiserver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
			c.report(Phase{Name: PhaseStorage, Plugin: c.s.storagePlugin(), Summary: fmt.Sprintf("read %s (mod_revision %s)", res.Key(namespace, name), obj.GetResourceVersion())})
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

func parseSelectors(res Resource, opts ListOptions) (selector, error) {
	var s selector
	var err error
	if s.labels, err = labels.Parse(opts.LabelSelector); err != nil {
		return s, apierrors.NewBadRequest(fmt.Sprintf("unable to parse the label selector %q: %v", opts.LabelSelector, err))
	}
	if s.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
		return s, apierrors.NewBadRequest(fmt.Sprintf("unable to parse the field selector %q: %v", opts.FieldSelector, err))
	}
	supported := fieldLabels(res)
	for _, r := range s.fields.Requirements() {
		if !slices.Contains(supported, r.Field) {
			return s, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s (podlab supports %s for %s)", r.Field, strings.Join(supported, ", "), res.Name))
		}
	}
	return s, nil
}

// fieldLabels are the fields a field selector on res may name, as
// kube-apiserver's registry strategies for the resource select them
// (GetAttrs): every object's name and namespace, a pod's node and phase,
// and an event's involvedObject, which `kubectl describe` asks for.
func fieldLabels(res Resource) []string {
	common := []string{"metadata.name", "metadata.namespace"}
	switch res.Name {
	case "pods":
		return append(common, "spec.nodeName", "status.phase")
	case "events":
		return append(common, "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
			"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
			"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")
	}
	return common
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
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"] = o.Spec.NodeName
		set["status.phase"] = string(o.Status.Phase)
	case *corev1.Event:
		io := o.InvolvedObject
		set["involvedObject.kind"] = io.Kind
		set["involvedObject.namespace"] = io.Namespace
		set["involvedObject.name"] = io.Name
		set["involvedObject.uid"] = string(io.UID)
		set["involvedObject.apiVersion"] = io.APIVersion
		set["involvedObject.resourceVersion"] = io.ResourceVersion
		set["involvedObject.fieldPath"] = io.FieldPath
		set["reason"] = o.Reason
		set["reportingComponent"] = o.ReportingController
		set["source"] = o.Source.Component
		set["type"] = o.Type
	}
	return s.fields.Matches(set)
}

// List implements Interface.
func (c *Client) List(ctx context.Context, resource, namespace string, opts ListOptions) (*List, error) {
	r, err := c.readList(ctx, resource, namespace, opts)
	if err != nil {
		return nil, err
	}
	// Decode outside the transaction, so the store's lock is held only
	// for the read itself.
	items, err := decodeAll(ctx, r.res, r.raw, r.sel)
	if err != nil {
		return nil, err
	}
	c.reportList(r, len(items))
	l := &List{Items: items, ResourceVersion: strconv.FormatInt(r.rev, 10)}
	beyond := r.beyond
	if opts.Limit > 0 && (beyond > 0 || int64(len(items)) > opts.Limit) {
		if int64(len(items)) > opts.Limit {
			beyond = 0 // with a selector: more match, how many is not counted (as kube)
			l.Items = items[:opts.Limit]
		} else {
			l.RemainingItemCount = &beyond
		}
		last := l.Items[len(l.Items)-1]
		l.Continue = encodeContinue(r.res.Key(last.GetNamespace(), last.GetName())+"\x00", r.prefix, r.rev)
	}
	return l, nil
}

// StoredList is a list whose items are as the store holds them, not
// decoded: what an answer in protobuf is made of (kube-apiserver's watch
// cache keeps each object's serialization for the same reason).
type StoredList struct {
	Items           []StoredItem
	ResourceVersion string
	// Continue and RemainingItemCount are List's.
	Continue           string
	RemainingItemCount *int64
}

// StoredItem is one object of a StoredList: its protobuf, as stored (its
// resourceVersion, which is not stored, left out), and its
// resourceVersion.
type StoredItem struct {
	Protobuf        []byte
	ResourceVersion string
}

// ListStored is List without decoding, for a list without selectors (a
// selector must look into each object: use List). It checks and reads as
// List does.
func (c *Client) ListStored(ctx context.Context, resource, namespace string, opts ListOptions) (*StoredList, error) {
	if opts.LabelSelector != "" || opts.FieldSelector != "" {
		return nil, fmt.Errorf("listing %s as stored: a selector needs the objects decoded (use List)", resource)
	}
	r, err := c.readList(ctx, resource, namespace, opts)
	if err != nil {
		return nil, err
	}
	l := &StoredList{Items: make([]StoredItem, len(r.raw)), ResourceVersion: strconv.FormatInt(r.rev, 10)}
	for i, kv := range r.raw {
		raw, gvk, err := unwrap(kv.Value)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: decoding a stored %s: %w", kv.Key, r.res.Kind, err)
		case gvk.Empty(): // JSON, as podlab stored before it stored protobuf
			obj, err := decode(r.res, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kv.Key, err)
			}
			obj.SetResourceVersion("")
			p := obj.(protoObject)
			raw = make([]byte, p.Size())
			n, err := p.MarshalTo(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kv.Key, err)
			}
			raw = raw[:n]
		case gvk.Kind != r.res.Kind || gvk.GroupVersion() != r.res.GroupVersion():
			return nil, fmt.Errorf("%s: the value holds a %s %s, not a %s", kv.Key, gvk.GroupVersion(), gvk.Kind, r.res.Kind)
		}
		l.Items[i] = StoredItem{Protobuf: raw, ResourceVersion: strconv.FormatInt(kv.ModRevision, 10)}
	}
	c.reportList(r, len(r.raw))
	if opts.Limit > 0 && r.beyond > 0 {
		beyond := r.beyond
		l.RemainingItemCount = &beyond
		l.Continue = encodeContinue(r.raw[len(r.raw)-1].Key+"\x00", r.prefix, r.rev)
	}
	return l, nil
}

// readRaw is a list as readList read it from the store: the stored
// values of its keys (a page of them without a selector), at revision rev.
type readRaw struct {
	res    Resource
	prefix string
	sel    selector
	raw    []store.KV
	rev    int64
	beyond int64 // keys after the page, counted, not read (no selector)
}

// readList checks a list's options and the user's right to list, and
// reads the stored values.
func (c *Client) readList(ctx context.Context, resource, namespace string, opts ListOptions) (readRaw, error) {
	var r readRaw
	res, namespace, err := c.target(resource, namespace, true)
	if err != nil {
		return r, err
	}
	sel, err := parseSelectors(res, opts)
	if err != nil {
		return r, err
	}
	prefix := res.Prefix(namespace)
	plan, err := planList(opts, prefix)
	if err != nil {
		return r, err
	}
	u, err := c.authenticate()
	if err != nil {
		return r, err
	}
	if plan.minRev > 0 {
		if err := c.s.waitForRevision(ctx, plan.minRev); err != nil {
			return r, err
		}
	}
	r = readRaw{res: res, prefix: prefix, sel: sel}
	err = c.s.store.View(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "list", APIGroup: res.Group, Resource: res.Name, Namespace: namespace, FieldSelector: sel.fields.Requirements()}); err != nil {
			return err
		}
		r.rev = tx.Revision()
		if plan.rev != 0 {
			r.rev = plan.rev
		}
		// Without a selector, a page reads only its own values and counts
		// the keys after it; with one, every key is read and matched.
		page := int64(0)
		if sel.empty() {
			page = opts.Limit
		}
		var err error
		r.beyond, err = tx.PageAt(prefix, plan.from, plan.rev, page, func(kv store.KV) error {
			r.raw = append(r.raw, kv)
			return nil
		})
		if err != nil {
			return plan.storeError(err, tx.Revision(), prefix)
		}
		return nil
	})
	return r, err
}

// reportList narrates a list's storage phase.
func (c *Client) reportList(r readRaw, matched int) {
	if c.phases != nil {
		c.report(Phase{Name: PhaseStorage, Plugin: c.s.storagePlugin(), Summary: fmt.Sprintf("listed %d keys under %s at revision %d, %d match", len(r.raw), r.prefix, r.rev, matched)})
	}
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
	sel, err := parseSelectors(res, opts)
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
	if errors.Is(err, store.ErrBadRevision) {
		// a revision the store has not reached (a client of another store,
		// or of this one before a restore): kube's 504, on which client-go's
		// reflector lists again, as after a 410
		current, rerr := c.s.store.Revision(ctx)
		if rerr != nil {
			return nil, rerr
		}
		return nil, tooLargeResourceVersion(from, current)
	}
	if err != nil {
		return nil, storeError(res.GroupResource(), "", err)
	}
	if c.phases != nil {
		c.report(Phase{Name: PhaseStorage, Plugin: c.s.storagePlugin(), Summary: fmt.Sprintf("watching %s after revision %d", prefix, from)})
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
