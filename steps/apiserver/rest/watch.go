package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/podlab/podlab/steps/apiserver"
)

// The watch event types only the wire has.
const (
	eventBookmark = "BOOKMARK"
	eventError    = "ERROR"
)

// watchEvent is one event on the wire: metav1.WatchEvent with the object
// inline.
type watchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// watch streams the changes to a resource as kube-apiserver does (see the
// package doc): initial events when asked for (or when no resourceVersion
// is given), bookmarks when allowed, an ERROR event with the Status that
// ended the watch, and the end of the stream at timeoutSeconds.
func (h *Handler) watch(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo) {
	q := r.URL.Query()
	acc, err := negotiate(r, h.tables != nil)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rv := q.Get("resourceVersion")
	var sendInitial *bool
	if v := q.Get("sendInitialEvents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("sendInitialEvents %q is not a boolean", v)))
			return
		}
		sendInitial = &b
	}
	rvMatch := q.Get("resourceVersionMatch")
	if sendInitial != nil && rvMatch != string(metav1.ResourceVersionMatchNotOlderThan) {
		writeError(w, r, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", field.ErrorList{
			field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")}))
		return
	}
	initial := rv == "" || rv == "0"
	if sendInitial != nil {
		initial = *sendInitial
	}
	bookmarks := boolParam(r, "allowWatchBookmarks")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("timeoutSeconds %q is not a number of seconds", v)))
			return
		}
		if n > 0 {
			ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
			defer cancel()
		}
	}
	opts := apiserver.ListOptions{LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector"), ResourceVersion: rv}
	var items []apiserver.Object
	if initial {
		l, err := c.List(ctx, res.Name, info.namespace, opts)
		if err != nil {
			writeError(w, r, err)
			return
		}
		items, opts.ResourceVersion = l.Items, l.ResourceVersion
	}
	wt, err := c.Watch(ctx, res.Name, info.namespace, opts)
	// a compacted revision (410), or one the store has not reached (504,
	// as etcd3's watcher in kube-apiserver sends it): an ERROR event
	expired := apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apiserver.IsTooLargeResourceVersion(err)
	if err != nil && !expired {
		writeError(w, r, err)
		return
	}
	if acc.table {
		acc.protobuf = false
	}
	s := &stream{w: w, h: h, ctx: ctx, acc: acc}
	if acc.protobuf {
		s.frames = protobuf.LengthDelimitedFramer.NewFrameWriter(w)
		w.Header().Set("Content-Type", mediaProtobuf+";stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	s.flush()
	if err != nil { // 200, then one ERROR event
		s.sendError(err)
		return
	}
	for _, o := range items {
		if s.send(string(apiserver.Added), o) != nil {
			return
		}
	}
	last := opts.ResourceVersion
	if sendInitial != nil && *sendInitial {
		if s.bookmark(res, last, true) != nil {
			return
		}
	}
	var tick <-chan time.Time
	if bookmarks {
		t := time.NewTicker(h.bookmarkEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev, ok := <-wt.Events():
			if !ok {
				// A watch the server's stopping cut short just ends, as
				// kube-apiserver's do when it shuts down: the client
				// watches again from the last resourceVersion it saw.
				// (An ERROR event would tell it the watch failed.)
				if err := wt.Err(); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
					s.sendError(err)
				}
				return
			}
			if s.send(string(ev.Type), ev.Object) != nil {
				return
			}
			last = ev.Object.GetResourceVersion()
		case <-tick:
			if last != "" && last != "0" && s.bookmark(res, last, false) != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// stream writes watch events, flushing each.
type stream struct {
	w   http.ResponseWriter
	h   *Handler
	ctx context.Context
	acc accept
	// columnsSent: the first Table event carried the column definitions;
	// kube-apiserver leaves them out of the rest (TableOptions.NoHeaders),
	// so `kubectl get -w` prints its header once.
	columnsSent bool
	// frames writes a protobuf watch (acc.protobuf): each event a
	// metav1.WatchEvent in protobuf, its object encoded as a protobuf
	// response is ("k8s\x00" and a runtime.Unknown), behind its length in
	// 4 bytes, as kube-apiserver frames application/vnd.kubernetes.protobuf;stream=watch
	frames io.Writer
}

func (s *stream) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *stream) write(ev watchEvent) error {
	if s.frames != nil {
		return s.writeFrame(ev)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := s.w.Write(append(data, '\n')); err != nil {
		return err // the client went away
	}
	s.flush()
	return nil
}

// writeFrame writes one event of a protobuf watch.
func (s *stream) writeFrame(ev watchEvent) error {
	obj, ok := ev.Object.(runtime.Object)
	if !ok {
		return fmt.Errorf("a %T in a protobuf watch", ev.Object)
	}
	var raw bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &raw); err != nil {
		return fmt.Errorf("encoding a watch event in protobuf: %w", err)
	}
	we := metav1.WatchEvent{Type: ev.Type, Object: runtime.RawExtension{Raw: raw.Bytes()}}
	data, err := we.Marshal()
	if err != nil {
		return fmt.Errorf("encoding a watch event in protobuf: %w", err)
	}
	if _, err := s.frames.Write(data); err != nil {
		return err // the client went away
	}
	s.flush()
	return nil
}

func (s *stream) send(typ string, obj apiserver.Object) error {
	if s.acc.table {
		t, err := s.h.tables.ConvertToTable(s.ctx, obj, s.acc.includeObject)
		if err != nil {
			return s.sendError(err)
		}
		if s.columnsSent {
			t.ColumnDefinitions = nil
		}
		s.columnsSent = true
		return s.write(watchEvent{Type: typ, Object: t})
	}
	return s.write(watchEvent{Type: typ, Object: obj})
}

// bookmark sends a BOOKMARK: an empty object of the resource's kind that
// carries only a resourceVersion, and for the end of the initial events
// the annotation k8s.io/initial-events-end.
func (s *stream) bookmark(res apiserver.Resource, rv string, initialEnd bool) error {
	o := res.New()
	o.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
	o.SetResourceVersion(rv)
	if initialEnd {
		o.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return s.write(watchEvent{Type: eventBookmark, Object: o})
}

// sendError sends the Status that ends a watch as an ERROR event.
func (s *stream) sendError(err error) error {
	var st metav1.Status
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	return s.write(watchEvent{Type: eventError, Object: &st})
}
