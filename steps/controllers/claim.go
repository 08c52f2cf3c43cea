package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/steps/apiserver"
)

// claim is the controller reference manager (ClaimReplicaSets, ClaimPods):
// of the candidates in owner's namespace it returns those owner controls.
// An object's controller is the owner reference with controller: true; an
// object owned by another controller is never touched. owner adopts an
// orphan its selector matches (it gets a controller reference to owner, so
// a ReplicaSet created by hand with the right labels joins a Deployment),
// and releases an object it controls that its selector no longer matches
// (someone changed the object's labels). Kubernetes patches; podlab's API
// server has no patch, so this is an update, which fails on a conflict and
// is retried with the next sync.
func claim(ctx context.Context, c apiserver.Interface, owner apiserver.Object, ownerKind schema.GroupVersionKind, sel labels.Selector, candidates []apiserver.Object) ([]apiserver.Object, error) {
	res, err := apiserver.ResourceForKind(ownerKind)
	if err != nil {
		return nil, err
	}
	// Adopting needs a fresh look at the owner: the cache may not know yet
	// that it is being deleted (RecheckDeletionTimestamp).
	canAdopt := sync.OnceValue(func() error {
		fresh, err := c.Get(ctx, res.Name, owner.GetNamespace(), owner.GetName())
		if err != nil {
			return err
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("original %s %s/%s is gone: got uid %v, wanted %v", ownerKind.Kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s %s/%s has just been deleted at %v", ownerKind.Kind, owner.GetNamespace(), owner.GetName(), fresh.GetDeletionTimestamp())
		}
		return nil
	})
	var claimed []apiserver.Object
	var errs []error
	for _, o := range candidates {
		ref := metav1.GetControllerOfNoCopy(o)
		matches := sel.Matches(labels.Set(o.GetLabels()))
		switch {
		case ref != nil && ref.UID != owner.GetUID():
			// Someone else's.
		case ref != nil && matches:
			claimed = append(claimed, o)
		case ref != nil:
			if owner.GetDeletionTimestamp() != nil {
				continue
			}
			released := o.DeepCopyObject().(apiserver.Object)
			var refs []metav1.OwnerReference
			for _, r := range released.GetOwnerReferences() {
				if r.UID != owner.GetUID() {
					refs = append(refs, r)
				}
			}
			released.SetOwnerReferences(refs)
			if _, err := c.Update(ctx, released); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("releasing %s: %w", o.GetName(), err))
			}
		default:
			if !matches || owner.GetDeletionTimestamp() != nil || o.GetDeletionTimestamp() != nil {
				continue
			}
			if err := canAdopt(); err != nil {
				errs = append(errs, fmt.Errorf("can't adopt %s: %w", o.GetName(), err))
				continue
			}
			adopted := o.DeepCopyObject().(apiserver.Object)
			adopted.SetOwnerReferences(append(adopted.GetOwnerReferences(), *metav1.NewControllerRef(owner, ownerKind)))
			out, err := c.Update(ctx, adopted)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, fmt.Errorf("adopting %s: %w", o.GetName(), err))
			default:
				claimed = append(claimed, out)
			}
		}
	}
	return claimed, errors.Join(errs...)
}
