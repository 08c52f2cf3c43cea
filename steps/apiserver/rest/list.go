package rest

import (
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
