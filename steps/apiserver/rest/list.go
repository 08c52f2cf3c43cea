package rest

import (
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/podlab/podlab/steps/apiserver"
)

// list answers a typed list (a PodList...), a page of it when the client
// sets limit.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo, acc accept) {
	q := r.URL.Query()
	opts := apiserver.ListOptions{LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector"),
		ResourceVersion: q.Get("resourceVersion"), ResourceVersionMatch: q.Get("resourceVersionMatch"), Continue: q.Get("continue")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("limit %q is not a number of items", v)))
			return
		}
		opts.Limit = n
	}
	if acc.protobuf && opts.LabelSelector == "" && opts.FieldSelector == "" {
		// protobuf is how the store holds the objects: the answer is made
		// of the stored bytes, without decoding and encoding them again
		sl, err := c.ListStored(r.Context(), res.Name, info.namespace, opts)
		if err != nil {
			writeError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		w.WriteHeader(http.StatusOK)
		w.Write(storedListProtobuf(res, sl))
		return
	}
	l, err := c.List(r.Context(), res.Name, info.namespace, opts)
	if err != nil {
		writeError(w, r, err)
		return
	}
	items := l.Items
	list, err := typedList(res, items)
	if err != nil {
		writeError(w, r, err)
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(l.ResourceVersion)
	lm.SetContinue(l.Continue)
	lm.SetRemainingItemCount(l.RemainingItemCount)
	if acc.table {
		t, err := h.tables.ConvertToTable(r.Context(), list, acc.includeObject)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
		return
	}
	writeObject(w, http.StatusOK, list, acc)
}

// typedList puts items in the list type of res (*corev1.PodList...).
func typedList(res apiserver.Resource, items []apiserver.Object) (runtime.Object, error) {
	gvk := res.GroupVersion().WithKind(res.Kind + "List")
	list, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("making a %s: %w", gvk.Kind, err)
	}
	objs := make([]runtime.Object, len(items))
	for i, o := range items {
		objs[i] = o
	}
	if err := meta.SetList(list, objs); err != nil {
		return nil, fmt.Errorf("making a %s: %w", gvk.Kind, err)
	}
	list.GetObjectKind().SetGroupVersionKind(gvk)
	return list, nil
}

// storedListProtobuf writes a list in protobuf from its items' stored
// protobuf, as apimachinery's protobuf serializer would write the typed
// list: "k8s\x00", then a runtime.Unknown naming the list's kind around
// the list, whose field 1 is its ListMeta and field 2 each item (every
// list kind of Kubernetes' API is laid out so). The stored items lack
// their resourceVersion: each is followed by a field 1 (metadata)
// holding only field 6 (resourceVersion), which protobuf merges into the
// metadata before it (a message field met twice is merged, a scalar met
// twice takes the last value), so the client decodes the object whole.
func storedListProtobuf(res apiserver.Resource, l *apiserver.StoredList) []byte {
	lm := metav1.ListMeta{ResourceVersion: l.ResourceVersion, Continue: l.Continue, RemainingItemCount: l.RemainingItemCount}
	meta, _ := lm.Marshal() // a ListMeta of strings and an int always marshals
	rvField := func(rv string) int { return protowire.SizeTag(6) + protowire.SizeBytes(len(rv)) }
	itemSize := func(it apiserver.StoredItem) int {
		return len(it.Protobuf) + protowire.SizeTag(1) + protowire.SizeBytes(rvField(it.ResourceVersion))
	}
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(meta))
	for _, it := range l.Items {
		size += protowire.SizeTag(2) + protowire.SizeBytes(itemSize(it))
	}
	tm := runtime.TypeMeta{APIVersion: res.GroupVersion().String(), Kind: res.Kind + "List"}
	typeMeta, _ := tm.Marshal() // two strings always marshal
	// the runtime.Unknown: typeMeta (1), raw (2), contentEncoding (3) and
	// contentType (4), both empty, as its generated code writes them
	data := make([]byte, 0, len(apiserver.StorageMagic)+protowire.SizeTag(1)+protowire.SizeBytes(len(typeMeta))+
		protowire.SizeTag(2)+protowire.SizeBytes(size)+2*(protowire.SizeTag(3)+protowire.SizeBytes(0)))
	data = append(data, apiserver.StorageMagic...)
	data = protowire.AppendTag(data, 1, protowire.BytesType)
	data = protowire.AppendBytes(data, typeMeta)
	data = protowire.AppendTag(data, 2, protowire.BytesType)
	data = protowire.AppendVarint(data, uint64(size))
	data = protowire.AppendTag(data, 1, protowire.BytesType)
	data = protowire.AppendBytes(data, meta)
	for _, it := range l.Items {
		data = protowire.AppendTag(data, 2, protowire.BytesType)
		data = protowire.AppendVarint(data, uint64(itemSize(it)))
		data = append(data, it.Protobuf...)
		data = protowire.AppendTag(data, 1, protowire.BytesType)
		data = protowire.AppendVarint(data, uint64(rvField(it.ResourceVersion)))
		data = protowire.AppendTag(data, 6, protowire.BytesType)
		data = protowire.AppendString(data, it.ResourceVersion)
	}
	data = protowire.AppendTag(data, 3, protowire.BytesType)
	data = protowire.AppendString(data, "")
	data = protowire.AppendTag(data, 4, protowire.BytesType)
	return protowire.AppendString(data, "")
}
