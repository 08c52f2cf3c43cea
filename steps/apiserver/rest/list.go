package rest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/podlab/podlab/steps/apiserver"
)

// continueToken is what a list's continue token holds, in kube-apiserver's
// format: base64 of {"v":"meta.k8s.io/v1","rv":12,"start":"default/web\u0000"},
// the revision of the first page and the key the next page starts at.
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(data, &t)
	}
	if err == nil && t.APIVersion != "meta.k8s.io/v1" {
		err = fmt.Errorf("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	if err != nil {
		return t, apierrors.NewBadRequest(fmt.Sprintf("continue key is not valid: %v", err))
	}
	return t, nil
}

func (t continueToken) encode() string {
	data, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(data)
}

// itemKey orders a list's items as the store's keys do.
func itemKey(o apiserver.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// list answers a typed list (a PodList...), a page of it when the client
// sets limit.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo, acc accept) {
	q := r.URL.Query()
	var limit int64
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("limit %q is not a number of items", v)))
			return
		}
		limit = n
	}
	var cont *continueToken
	if v := q.Get("continue"); v != "" {
		t, err := decodeContinue(v)
		if err != nil {
			writeError(w, r, err)
			return
		}
		cont = &t
	}
	l, err := c.List(r.Context(), res.Name, info.namespace, apiserver.ListOptions{
		LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector")})
	if err != nil {
		writeError(w, r, err)
		return
	}
	items, rv := l.Items, l.ResourceVersion
	if cont != nil {
		i := 0
		for i < len(items) && itemKey(items[i]) < cont.Start {
			i++
		}
		items, rv = items[i:], strconv.FormatInt(cont.RV, 10)
	}
	next := ""
	if limit > 0 && int64(len(items)) > limit {
		revision, _ := strconv.ParseInt(rv, 10, 64)
		next = continueToken{APIVersion: "meta.k8s.io/v1", RV: revision, Start: itemKey(items[limit])}.encode()
		items = items[:limit]
	}
	list, err := typedList(res, items)
	if err != nil {
		writeError(w, r, err)
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(rv)
	lm.SetContinue(next)
	if acc.table {
		t, err := h.tables.ConvertToTable(r.Context(), list, acc.includeObject)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
		return
	}
	writeJSON(w, http.StatusOK, list)
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
