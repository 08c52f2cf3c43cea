package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"

	"github.com/podlab/podlab/steps/apiserver"
)

// lookup finds the resource a path names in its group and version.
func lookup(info requestInfo) (apiserver.Resource, bool) {
	for _, r := range apiserver.Resources() {
		if r.Name == info.resource && r.Group == info.group && r.Version == info.version {
			return r, true
		}
	}
	return apiserver.Resource{}, false
}

// serveResource dispatches a resource request by method, subresource and
// whether it names an object.
func (h *Handler) serveResource(w http.ResponseWriter, r *http.Request, c *apiserver.Client, info requestInfo) {
	if info.group == "authorization.k8s.io" && info.version == "v1" && info.name == "" && r.Method == http.MethodPost {
		switch info.resource {
		case "selfsubjectaccessreviews":
			h.accessReview(w, r, c)
			return
		case "selfsubjectrulesreviews":
			h.rulesReview(w, r, c)
			return
		case "subjectaccessreviews":
			h.subjectAccessReview(w, r, c)
			return
		}
	}
	res, ok := lookup(info)
	if !ok {
		writeError(w, r, apiserver.NotServed(schema.GroupResource{Group: info.group, Resource: info.resource}))
		return
	}
	if info.namespace != "" && !res.Namespaced {
		writeError(w, r, errNotFound)
		return
	}
	ctx := r.Context()
	if info.watchPrefix || (r.Method == http.MethodGet && info.name == "" && boolParam(r, "watch")) {
		if r.Method != http.MethodGet {
			writeError(w, r, methodNotSupported(res, info, r.Method))
			return
		}
		h.watch(w, r, c, res, info)
		return
	}
	switch info.subresource {
	case "", "status", "scale", "binding":
	case "log", "exec":
		if res.Name != "pods" || info.name == "" {
			writeError(w, r, errNotFound)
			return
		}
		if info.subresource == "log" {
			h.podLog(w, r, c, info)
		} else {
			h.podExec(w, r, c, info)
		}
		return
	case "attach", "portforward", "proxy", "eviction", "ephemeralcontainers", "resize":
		writeStatus(w, http.StatusNotImplemented, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotImplemented,
			Message: fmt.Sprintf("%s/%s is not served by podlab's API server yet: only pods/log and pods/exec reach the kubelets", res.Name, info.subresource)})
		return
	default:
		writeError(w, r, errNotFound)
		return
	}
	if !subresourceServed(res, info.subresource) {
		writeError(w, r, errNotFound)
		return
	}
	acc, err := negotiate(r, h.tables != nil)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if info.subresource != "" {
		acc.table = false
	}
	// an admission webhook's warnings reach the client as Warning headers,
	// as kube-apiserver sends them
	r = r.WithContext(apiserver.WithWarnings(r.Context(), func(msg string) {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	}))
	var obj apiserver.Object
	code := http.StatusOK
	switch {
	case r.Method == http.MethodGet && info.name == "":
		h.list(w, r, c, res, info, acc)
		return
	case r.Method == http.MethodGet:
		obj, err = c.Get(ctx, res.Name, info.namespace, info.name)
		if err == nil && info.subresource == "scale" {
			obj = apiserver.ScaleOf(obj)
		}
	case r.Method == http.MethodPost && info.name == "":
		code = http.StatusCreated
		obj, err = h.create(w, r, c, res, info)
	case r.Method == http.MethodPost && info.subresource == "binding":
		err = h.bind(w, r, c, info)
		if err == nil {
			writeStatus(w, http.StatusCreated, metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated})
			return
		}
	case r.Method == http.MethodPut && info.name != "" && info.subresource != "binding":
		obj, err = h.update(w, r, c, res, info)
	case r.Method == http.MethodPatch && info.name != "" && info.subresource != "binding":
		var created bool
		obj, created, err = h.patch(r, c, res, info)
		if created {
			code = http.StatusCreated
		}
	case r.Method == http.MethodDelete && info.name == "" && info.subresource == "":
		h.deleteCollection(w, r, c, res, info, acc)
		return
	case r.Method == http.MethodDelete && info.name != "" && info.subresource == "":
		obj, code, err = h.delete(w, r, c, res, info)
		if err == nil && obj == nil {
			writeStatus(w, code, metav1.Status{Status: metav1.StatusSuccess, Details: &metav1.StatusDetails{
				Name: info.name, Group: res.Group, Kind: res.Name}})
			return
		}
	default:
		err = methodNotSupported(res, info, r.Method)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	h.writeResult(w, r, code, obj, acc)
}

// subresourceServed: which subresources each resource has.
func subresourceServed(res apiserver.Resource, sub string) bool {
	switch sub {
	case "":
		return true
	case "status":
		return res.HasStatus
	case "scale":
		return res.Name == "deployments" || res.Name == "replicasets"
	case "binding":
		return res.Name == "pods"
	}
	return false
}

func methodNotSupported(res apiserver.Resource, info requestInfo, method string) error {
	gr := res.GroupResource()
	if info.subresource != "" {
		gr.Resource += "/" + info.subresource
	}
	return apierrors.NewMethodNotSupported(gr, strings.ToLower(method))
}

// writeResult answers one object, as a Table when the client asked for
// one.
func (h *Handler) writeResult(w http.ResponseWriter, r *http.Request, code int, obj apiserver.Object, acc accept) {
	if acc.table {
		t, err := h.tables.ConvertToTable(r.Context(), obj, acc.includeObject)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, code, t)
		return
	}
	writeObject(w, code, obj, acc)
}

// decodeObject decodes a request body into a new object of res, as
// kube-apiserver's decoder does: a missing apiVersion and kind are the
// path's; another kind is 400; unknown fields are refused
// (fieldValidation=Strict, what kubectl sends), reported in a Warning
// header (Warn, the default) or dropped (Ignore).
func decodeObject(w http.ResponseWriter, r *http.Request, into object, kind schema.GroupVersionKind) error {
	data, proto, err := readBody(r)
	if err != nil {
		return err
	}
	if proto {
		// what client-go's typed clients send: "k8s\x00", then a
		// runtime.Unknown naming the kind around the object's protobuf
		obj, gvk, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(data, &kind, into)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", kind.Kind, err, summarizeData(data, 30)))
		}
		if obj != into || gvk.Kind != kind.Kind {
			return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s", gvk.Kind, gvk.Version, kind.Kind))
		}
		into.GetObjectKind().SetGroupVersionKind(kind)
		return nil
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): couldn't get version/kind; json parse error: %v (%s)", kind.Kind, err, summarizeData(data, 30)))
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if tm.Kind == "" {
		gvk.Kind = kind.Kind
	}
	if tm.APIVersion == "" {
		gvk.Group, gvk.Version = kind.Group, kind.Version
	}
	if gvk != kind && !(kind.Kind == "DeleteOptions" && gvk.Kind == kind.Kind) { // DeleteOptions are in every group
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: no kind %q is registered for version %q in scheme", gvk.Kind, gvk.Version, kind.Kind, gvk.Kind, gvk.GroupVersion().String()))
	}
	strict, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, kind.Kind, err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		switch r.URL.Query().Get("fieldValidation") {
		case "Strict":
			return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s", gvk.Kind, gvk.Version, kind.Kind, strings.Join(msgs, ", ")))
		case "Ignore":
		default:
			for _, m := range msgs {
				w.Header().Add("Warning", fmt.Sprintf("299 - %q", m))
			}
		}
	}
	into.GetObjectKind().SetGroupVersionKind(kind)
	return nil
}

// object is what a request body decodes into.
type object interface {
	runtime.Object
}

// summarizeData is kube's: the start of a JSON body, or of its hex.
func summarizeData(data []byte, max int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		return summarize(data, max)
	default:
		if len(data) > max {
			return fmt.Sprintf("%x ...", data[:max])
		}
		return fmt.Sprintf("%x", data)
	}
}

// checkTarget checks that the object in the body is the one the URL names.
func checkTarget(obj apiserver.Object, res apiserver.Resource, info requestInfo) error {
	if res.Namespaced {
		switch obj.GetNamespace() {
		case "":
			obj.SetNamespace(info.namespace)
		case info.namespace:
		default:
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	}
	if info.name != "" && obj.GetName() != info.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), info.name))
	}
	return nil
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo) (apiserver.Object, error) {
	if info.namespace == "" && res.Namespaced {
		return nil, methodNotSupported(res, info, r.Method)
	}
	obj := res.New()
	if err := decodeObject(w, r, obj, res.GroupVersion().WithKind(res.Kind)); err != nil {
		return nil, err
	}
	if err := checkTarget(obj, res, info); err != nil {
		return nil, err
	}
	return c.Create(r.Context(), obj)
}

func (h *Handler) update(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo) (apiserver.Object, error) {
	if info.subresource == "scale" {
		s := &autoscalingv1.Scale{}
		if err := decodeObject(w, r, s, autoscalingv1.SchemeGroupVersion.WithKind("Scale")); err != nil {
			return nil, err
		}
		if err := checkTarget(s, res, info); err != nil {
			return nil, err
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": s.ResourceVersion}, "spec": map[string]any{"replicas": s.Spec.Replicas}})
		return c.Patch(r.Context(), res.Name, info.namespace, info.name, types.MergePatchType, patch, apiserver.PatchOptions{Subresource: "scale"})
	}
	obj := res.New()
	if err := decodeObject(w, r, obj, res.GroupVersion().WithKind(res.Kind)); err != nil {
		return nil, err
	}
	if err := checkTarget(obj, res, info); err != nil {
		return nil, err
	}
	if info.subresource == "status" {
		return c.UpdateStatus(r.Context(), obj)
	}
	return c.Update(r.Context(), obj)
}

// patch applies a patch; a server-side apply (application/apply-patch+yaml)
// may create the object, and then created is true (201).
func (h *Handler) patch(r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo) (obj apiserver.Object, created bool, err error) {
	pt := types.PatchType(mediaType(r.Header.Get("Content-Type")))
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType:
	default:
		return nil, false, unsupportedMediaType(string(pt), string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyPatchType))
	}
	data, err := readJSONBody(r)
	if err != nil {
		return nil, false, err
	}
	q := r.URL.Query()
	opts := apiserver.PatchOptions{Subresource: info.subresource, FieldManager: q.Get("fieldManager")}
	if v := q.Get("force"); v != "" {
		if opts.Force, err = strconv.ParseBool(v); err != nil {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("force=%q is not a boolean: use force=true to take over other managers' fields", v))
		}
	}
	if pt == types.ApplyPatchType {
		return c.Apply(r.Context(), res.Name, info.namespace, info.name, data, opts)
	}
	obj, err = c.Patch(r.Context(), res.Name, info.namespace, info.name, pt, data, opts)
	return obj, false, err
}

func (h *Handler) bind(w http.ResponseWriter, r *http.Request, c *apiserver.Client, info requestInfo) error {
	b := &corev1.Binding{}
	pods, _ := lookup(requestInfo{resource: "pods", version: "v1"})
	if err := decodeObject(w, r, b, corev1.SchemeGroupVersion.WithKind("Binding")); err != nil {
		return err
	}
	if err := checkTarget(b, pods, info); err != nil {
		return err
	}
	return c.Bind(r.Context(), b)
}

// delete deletes one object with the options of the body (a
// DeleteOptions) or the query. It answers 200 with the object when it is
// only marked (a pod its kubelet has yet to stop), and a Success Status
// naming it when it is gone, as kube-apiserver does for a store that does
// not return deleted objects.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo) (apiserver.Object, int, error) {
	opts, err := deleteOptions(w, r)
	if err != nil {
		return nil, 0, err
	}
	gone, err := c.Delete(r.Context(), res.Name, info.namespace, info.name, opts)
	if err != nil {
		return nil, 0, err
	}
	if gone != nil {
		return gone, http.StatusOK, nil
	}
	return nil, http.StatusOK, nil
}

// deleteCollection deletes what the selectors of the query match (DELETE
// on a collection, client-go's DeleteCollection) and answers, as
// kube-apiserver does, the list of the deleted objects (a PodList...),
// each as its delete left it.
func (h *Handler) deleteCollection(w http.ResponseWriter, r *http.Request, c *apiserver.Client, res apiserver.Resource, info requestInfo, acc accept) {
	if res.Namespaced && info.namespace == "" {
		writeError(w, r, methodNotSupported(res, info, r.Method))
		return
	}
	opts, err := deleteOptions(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	l, err := c.DeleteCollection(r.Context(), res.Name, info.namespace, opts, apiserver.ListOptions{
		LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector")})
	if err != nil {
		writeError(w, r, err)
		return
	}
	list, err := typedList(res, l.Items)
	if err != nil {
		writeError(w, r, err)
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(l.ResourceVersion)
	writeObject(w, http.StatusOK, list, acc)
}

// deleteOptions reads a delete's options from its body (a DeleteOptions)
// and its query.
func deleteOptions(w http.ResponseWriter, r *http.Request) (apiserver.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if r.ContentLength != 0 {
		if err := decodeObject(w, r, &opts, metav1.SchemeGroupVersion.WithKind("DeleteOptions")); err != nil {
			return apiserver.DeleteOptions{}, err
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return apiserver.DeleteOptions{}, apierrors.NewBadRequest(fmt.Sprintf("gracePeriodSeconds %q is not a number", v))
		}
		opts.GracePeriodSeconds = &n
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return apiserver.DeleteOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "DeleteOptions"}, "", field.ErrorList{
				field.NotSupported(field.NewPath("propagationPolicy"), *p, []string{string(metav1.DeletePropagationForeground), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan)})})
		}
	}
	return apiserver.DeleteOptions{
		GracePeriodSeconds: opts.GracePeriodSeconds,
		Force:              opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0,
	}, nil
}

// boolParam reads a boolean query parameter as kube does ("true", "1").
func boolParam(r *http.Request, name string) bool {
	b, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return b
}
