package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/store"
)

// patchOptionsErrors is kube-apiserver's ValidatePatchOptions: an apply
// names its manager, only an apply may force, and a manager's name is
// short and printable. The answer is 422 Invalid, of kind PatchOptions.
func patchOptionsErrors(pt types.PatchType, opts PatchOptions) field.ErrorList {
	mo := &metav1.PatchOptions{FieldManager: opts.FieldManager}
	if opts.Force {
		mo.Force = &opts.Force
	}
	return metav1validation.ValidatePatchOptions(mo, pt)
}

// as is c writing under another manager's name.
func (c *Client) as(manager string) *Client {
	cp := *c
	cp.fieldManager = manager
	return &cp
}

// Apply is a server-side apply (PATCH with Content-Type
// application/apply-patch+yaml, `kubectl apply --server-side`): data is the
// object as opts.FieldManager wants it, in YAML or JSON, with only the
// fields that manager cares about. The server merges it into the stored
// object with apimachinery's field manager: the manager comes to own the
// fields it sets, gives up the ones it set before and leaves out (they are
// removed unless another manager owns them too), and a field another
// manager owns with a different value is a conflict (409, naming each field
// and its manager) unless opts.Force takes it over. An object that does
// not exist is created, if the user may also create it (kube-apiserver
// authorizes the patch, then the create). created says which happened.
func (c *Client) Apply(ctx context.Context, resource, namespace, name string, data []byte, opts PatchOptions) (obj Object, created bool, err error) {
	c = c.forRequest(ctx)
	res, namespace, err := c.target(resource, namespace, false)
	if err != nil {
		return nil, false, err
	}
	if errs := patchOptionsErrors(types.ApplyPatchType, opts); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	switch opts.Subresource {
	case "":
	case "status":
		if !res.HasStatus {
			return nil, false, apierrors.NewMethodNotSupported(res.GroupResource(), "patch status")
		}
	default:
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("server-side apply to %s/%s is not served by podlab: apply the object, or its status", res.Name, opts.Subresource))
	}
	applied := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(data, &applied.Object); err != nil {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	fm, err := c.s.fieldManager(res, opts.Subresource)
	if err != nil {
		return nil, false, err
	}
	u, err := c.authenticate()
	if err != nil {
		return nil, false, err
	}
	c = c.as(opts.FieldManager)
	err = c.write(ctx, func(tx *store.Tx) error {
		obj, created = nil, false
		if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "patch", APIGroup: res.Group, Resource: res.Name, Subresource: opts.Subresource, Namespace: namespace, Name: name}); err != nil {
			return err
		}
		old, err := getTyped[Object](tx, res, namespace, name)
		if err != nil {
			return err
		}
		if old == nil {
			if opts.Subresource != "" {
				return apierrors.NewNotFound(res.GroupResource(), name)
			}
			obj, err = c.applyCreate(tx, u, res, namespace, name, applied, opts)
			created = err == nil
			return err
		}
		out, err := fm.Apply(old, applied, opts.FieldManager, opts.Force)
		if err != nil {
			return err
		}
		next, err := typed(res, out)
		if err != nil {
			return err
		}
		if err := checkPatched(res, old, next); err != nil {
			return err
		}
		obj, err = c.replace(tx, u, res, old, next, opts.Subresource == "status", true)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return obj, created, nil
}

// applyCreate creates the object an apply names, as kube-apiserver's
// patch handler does when the object is missing: authorized as a create
// of that name, applied to an empty object, then created.
func (c *Client) applyCreate(tx *store.Tx, u authn.User, res Resource, namespace, name string, applied *unstructured.Unstructured, opts PatchOptions) (Object, error) {
	if _, err := c.authorize(tx, rbac.Attributes{User: u, Verb: "create", APIGroup: res.Group, Resource: res.Name, Namespace: namespace, Name: name}); err != nil {
		return nil, err
	}
	fm, err := c.s.fieldManager(res, "")
	if err != nil {
		return nil, err
	}
	empty := res.New()
	empty.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
	out, err := fm.Apply(empty, applied, opts.FieldManager, opts.Force)
	if err != nil {
		return nil, err
	}
	obj, err := typed(res, out)
	if err != nil {
		return nil, err
	}
	if obj.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), name))
	}
	if res.Namespaced {
		switch obj.GetNamespace() {
		case "":
			obj.SetNamespace(namespace)
		case namespace:
		default:
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	}
	if _, err := c.s.create(tx, c, u, res, obj, true); err != nil {
		return nil, err
	}
	return obj, nil // its resourceVersion set at the commit
}

// typed is what the field manager returned as res's Go type.
func typed(res Resource, out any) (Object, error) {
	obj, ok := out.(Object)
	if !ok || fmt.Sprintf("%T", obj) != fmt.Sprintf("%T", res.New()) {
		return nil, fmt.Errorf("the field manager returned a %T, not a %s", out, res.Kind)
	}
	obj.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
	return obj, nil
}
