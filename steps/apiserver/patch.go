package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// Patch implements Interface, as kube-apiserver's PATCH handler
// (k8s.io/apiserver/pkg/endpoints/handlers/patch.go) does: the patch is
// applied to the stored object, the result is decoded strictly into the
// object's type, checked (same name, same namespace, same uid, and the
// resourceVersion the patch names, if any), then stored as an update.
//
// kube-apiserver applies a patch inside etcd's GuaranteedUpdate loop: it
// reads the object, patches it, writes it only if nobody wrote in between,
// and otherwise reads and patches again. Here the read, the patch and the
// write are one transaction of the store, which holds the store's lock
// from the read to the write: nobody can write in between, and a patch
// that names no resourceVersion never conflicts.
func (c *Client) Patch(ctx context.Context, resource, namespace, name string, pt types.PatchType, data []byte, opts PatchOptions) (Object, error) {
	c = c.forRequest(ctx)
	res, namespace, err := c.target(resource, namespace, false)
	if err != nil {
		return nil, err
	}
	switch pt {
	case types.StrategicMergePatchType, types.MergePatchType, types.JSONPatchType, types.ApplyPatchType:
	default:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s, %s", types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType),
		}}
	}
	if errs := patchOptionsErrors(pt, opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	if pt == types.ApplyPatchType {
		obj, _, err := c.Apply(ctx, resource, namespace, name, data, opts)
		return obj, err
	}
	if !json.Valid(data) {
		return nil, apierrors.NewBadRequest("invalid JSON patch")
	}
	switch opts.Subresource {
	case "":
	case "status":
		if !res.HasStatus {
			return nil, apierrors.NewMethodNotSupported(res.GroupResource(), "patch status")
		}
	case "scale":
		if res.Name != "deployments" && res.Name != "replicasets" {
			return nil, apierrors.NewMethodNotSupported(res.GroupResource(), "patch scale")
		}
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s have no subresource %q: patch the object, or its status or scale", res.Name, opts.Subresource))
	}
	if opts.FieldManager != "" {
		c = c.as(opts.FieldManager)
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, err
	}
	var out Object
	err = c.write(ctx, func(tx *store.Tx) error {
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "patch", APIGroup: res.Group, Resource: res.Name, Subresource: opts.Subresource, Namespace: namespace, Name: name}); err != nil {
			return err
		}
		old, err := getTyped[Object](tx, res, namespace, name)
		if err != nil {
			return err
		}
		if old == nil {
			return apierrors.NewNotFound(res.GroupResource(), name)
		}
		if opts.Subresource == "scale" {
			out, err = c.patchScale(tx, u, res, old, pt, data)
			return err
		}
		patched := res.New()
		if err := applyPatch(old, pt, data, patched); err != nil {
			return err
		}
		patched.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
		if err := checkPatched(res, old, patched); err != nil {
			return err
		}
		out, err = c.replace(tx, u, res, old, patched, opts.Subresource == "status", false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxJSONPatchOperations is kube-apiserver's limit on the operations of
// one JSON patch.
const maxJSONPatchOperations = 10000

// applyPatch applies a patch of type pt to current and decodes the result,
// strictly, into into: a field the type does not have is 422 Invalid.
func applyPatch(current any, pt types.PatchType, patch []byte, into Object) error {
	cur, err := json.Marshal(current)
	if err != nil {
		return err
	}
	var patched []byte
	switch pt {
	case types.StrategicMergePatchType:
		// the Go type's patchStrategy and patchMergeKey tags say how each
		// list merges: containers by name, finalizers as a set...
		patched, err = strategicpatch.StrategicMergePatch(cur, patch, into)
		if err != nil {
			return strategicPatchError(err)
		}
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(cur, patch)
		if err != nil { // ErrBadJSONPatch, ErrBadJSONDoc
			return apierrors.NewBadRequest(err.Error())
		}
	case types.JSONPatchType:
		// RFC 6902, a list of operations, as kube-apiserver's jsonPatcher
		// applies it: a patch that does not parse is 400, one whose
		// operations cannot apply (a missing path, a failed test) is 422.
		// (kube's 422 says only "the server rejected our request due to
		// an error in our request": the library's reason is not sent.)
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > maxJSONPatchOperations {
			return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
		patched, err = ops.Apply(cur)
		if err != nil {
			return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	}
	strict, err := kjson.UnmarshalStrict(patched, into)
	if err == nil && len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		err = fmt.Errorf("strict decoding error: %s", strings.Join(msgs, ", "))
	}
	if err != nil {
		// kube-apiserver's answer, with the patch as the value
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patch), err.Error())})
	}
	return nil
}

// strategicPatchError is kube-apiserver's interpretStrategicMergePatchError:
// a patch that is not a JSON object, or breaks the strategic merge patch
// format, is 400 Bad Request; a well-formed one that cannot apply is 422.
func strategicPatchError(err error) error {
	switch {
	case errors.Is(err, mergepatch.ErrBadJSONDoc), errors.Is(err, mergepatch.ErrBadPatchFormatForPrimitiveList),
		errors.Is(err, mergepatch.ErrBadPatchFormatForRetainKeys), errors.Is(err, mergepatch.ErrBadPatchFormatForSetElementOrderList),
		errors.Is(err, mergepatch.ErrUnsupportedStrategicMergePatchFormat):
		return apierrors.NewBadRequest(err.Error())
	default:
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
}

// checkPatched refuses a patch that changed what identifies the object, as
// kube-apiserver does, and takes a resourceVersion in the patch as a
// precondition.
func checkPatched(res Resource, old, patched Object) error {
	if patched.GetName() != old.GetName() {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", patched.GetName(), old.GetName()))
	}
	if res.Namespaced && patched.GetNamespace() != old.GetNamespace() {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	switch patched.GetUID() {
	case old.GetUID():
	case "": // the patch removed it (a manifest without the uid the last one had): keep it
		patched.SetUID(old.GetUID())
	default:
		return apierrors.NewInvalid(res.GroupVersion().WithKind(res.Kind).GroupKind(), old.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("metadata", "uid"), patched.GetUID(), "field is immutable")})
	}
	switch patched.GetResourceVersion() {
	case old.GetResourceVersion():
	case "": // the patch removed it: no precondition
		patched.SetResourceVersion(old.GetResourceVersion())
	default:
		return storeError(res.GroupResource(), old.GetName(), store.ErrConflict)
	}
	return nil
}

// patchScale patches the scale subresource of a Deployment or ReplicaSet:
// an autoscaling/v1 Scale made from the object, of which only
// spec.replicas goes back into it.
func (c *Client) patchScale(tx *store.Tx, u authn.User, res Resource, old Object, pt types.PatchType, data []byte) (Object, error) {
	cur := scaleOf(old)
	next := &autoscalingv1.Scale{}
	if err := applyPatch(cur, pt, data, next); err != nil {
		return nil, err
	}
	switch next.ResourceVersion {
	case cur.ResourceVersion, "":
	default:
		return nil, storeError(res.GroupResource(), old.GetName(), store.ErrConflict)
	}
	if next.Name != cur.Name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", next.Name, cur.Name))
	}
	if next.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), cur.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "replicas"), next.Spec.Replicas, "must be greater than or equal to 0")})
	}
	obj := old.DeepCopyObject().(Object)
	replicas := next.Spec.Replicas
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &replicas
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &replicas
	}
	// kube-apiserver records a write through the scale subresource as its
	// own entry: subresource scale, owning spec.replicas
	c.trackUpdate(res, "scale", old, obj)
	updated, err := c.replace(tx, u, res, old, obj, false, true)
	if err != nil {
		return nil, err
	}
	return scaleOf(updated), nil
}

// scaleOf is the Scale of a Deployment or ReplicaSet, as kube-apiserver's
// scale subresource shows it.
func scaleOf(obj Object) *autoscalingv1.Scale {
	s := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp()},
	}
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s.Spec.Replicas, s.Status.Replicas, sel = deref1(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	case *appsv1.ReplicaSet:
		s.Spec.Replicas, s.Status.Replicas, sel = deref1(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	}
	if sel != nil {
		if ls, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			s.Status.Selector = ls.String()
		}
	}
	return s
}

// deref1 is *p, or 1 (the default of replicas) when p is nil.
func deref1(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// ScaleOf is the autoscaling/v1 Scale of a Deployment or ReplicaSet, as the
// scale subresource shows it (GET .../deployments/web/scale).
func ScaleOf(obj Object) *autoscalingv1.Scale { return scaleOf(obj) }
