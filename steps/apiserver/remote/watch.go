package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/podlab/podlab/steps/apiserver"
)

// Watch implements apiserver.Interface (see the package doc for how a
// watch over the wire starts, resumes and ends).
func (c *Client) Watch(ctx context.Context, resource, namespace string, opts apiserver.ListOptions) (apiserver.Watcher, error) {
	res, rc, ns, err := c.target(resource, namespace, true)
	if err != nil {
		return nil, err
	}
	w := &watcher{c: c, rc: rc, res: res, ns: ns, opts: opts,
		events: make(chan apiserver.WatchEvent, 64), done: make(chan struct{})}
	stream, err := w.open(ctx, opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	go w.run(ctx, stream)
	return w, nil
}

type watcher struct {
	c    *Client
	rc   *rest.RESTClient
	res  apiserver.Resource
	ns   string
	opts apiserver.ListOptions

	events chan apiserver.WatchEvent
	done   chan struct{}
	err    error
}

func (w *watcher) Events() <-chan apiserver.WatchEvent { return w.events }

func (w *watcher) Err() error {
	<-w.done
	return w.err
}

// open starts one watch request after rv ("" or "0": from now).
func (w *watcher) open(ctx context.Context, rv string) (watch.Interface, error) {
	req := w.rc.Get().NamespaceIfScoped(w.ns, w.res.Namespaced && w.ns != "").Resource(w.res.Name).
		Param("watch", "true").Param("allowWatchBookmarks", "true")
	if rv == "" || rv == "0" {
		// from now: no ADDED event per existing object, as the
		// in-process watch
		req = req.Param("sendInitialEvents", "false").
			Param("resourceVersionMatch", string(metav1.ResourceVersionMatchNotOlderThan))
	} else {
		req = req.Param("resourceVersion", rv)
	}
	if w.opts.LabelSelector != "" {
		req = req.Param("labelSelector", w.opts.LabelSelector)
	}
	if w.opts.FieldSelector != "" {
		req = req.Param("fieldSelector", w.opts.FieldSelector)
	}
	s, err := req.Watch(ctx)
	if err = w.c.wireError("watching "+w.res.Name, err); err != nil {
		return nil, err
	}
	return s, nil
}

// reopen resumes the watch after rv. Without WithReconnect it tries once;
// with it, while the server does not answer, it tries again with the
// reflector's back-off until ctx ends.
func (w *watcher) reopen(ctx context.Context, rv string) (watch.Interface, error) {
	b := backoff()
	for {
		s, err := w.open(ctx, rv)
		if err == nil || !w.c.reconnect || !errors.Is(err, ErrUnreachable) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(b.Step()):
		}
	}
}

// run delivers the stream's events, resuming from the last
// resourceVersion when the server ends a stream, until ctx ends or an
// error (an ERROR event, a failed resume) does.
func (w *watcher) run(ctx context.Context, s watch.Interface) {
	defer close(w.done)
	defer close(w.events)
	last := w.opts.ResourceVersion
	for {
		var err error
		last, err = w.drain(ctx, s, last)
		s.Stop()
		if ctx.Err() != nil {
			return // cancelled: no error, as the in-process watch
		}
		if err != nil {
			w.err = err
			return
		}
		if last == "" || last == "0" {
			w.err = fmt.Errorf("watching %s: the API server %s ended the watch before any event, so it cannot resume: %w (list, then watch from the list's resourceVersion)", w.res.Name, w.c.host, ErrUnreachable)
			return
		}
		if s, err = w.reopen(ctx, last); err != nil {
			if ctx.Err() == nil {
				w.err = err
			}
			return
		}
	}
}

// drain delivers one stream's events; it returns the last
// resourceVersion seen, and the error an ERROR event carried.
func (w *watcher) drain(ctx context.Context, s watch.Interface, last string) (string, error) {
	for {
		select {
		case <-ctx.Done():
			return last, nil
		case ev, ok := <-s.ResultChan():
			if !ok {
				return last, nil
			}
			switch ev.Type {
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok {
					return last, apierrors.FromObject(st)
				}
				return last, fmt.Errorf("watching %s: the API server %s sent an ERROR event with a %T", w.res.Name, w.c.host, ev.Object)
			case watch.Bookmark:
				if o, ok := ev.Object.(apiserver.Object); ok && o.GetResourceVersion() != "" {
					last = o.GetResourceVersion()
				}
				continue
			}
			obj, err := typed(ev.Object)
			if err != nil {
				return last, fmt.Errorf("watching %s: %w", w.res.Name, err)
			}
			last = obj.GetResourceVersion()
			select {
			case w.events <- apiserver.WatchEvent{Type: apiserver.EventType(ev.Type), Object: obj}:
			case <-ctx.Done():
				return last, nil
			}
		}
	}
}
