package controllers

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// garbageCollector is kube-controller-manager's garbage collector
// (pkg/controller/garbagecollector), for the objects podlab's controllers
// watch: an object whose owners (its metadata.ownerReferences, matched by
// uid) are all gone is deleted, with background propagation. Deleting a
// Deployment therefore takes its ReplicaSets, and each ReplicaSet its pods
// (a pod on a node is deleted gracefully: the API server marks it, its
// kubelet stops it). kubectl delete --cascade=orphan, which keeps the
// dependents, and foreground deletion, which deletes them first, are not
// reproduced: podlab's API server deletes at once, without finalizers.
type garbageCollector struct {
	r   *run
	log klog.Logger
	q   *queue
}

func newGarbageCollector(r *run) *garbageCollector {
	return &garbageCollector{r: r, q: newQueue(r.singlePass), log: r.m.log.Logger(garbageCollectorName)}
}

func (gc *garbageCollector) queue() *queue { return gc.q }

// gcKey names an item: "replicasets/default/web-7d4b9c8f6".
func gcKey(resource string, o apiserver.Object) string {
	return resource + "/" + o.GetNamespace() + "/" + o.GetName()
}

// observe queues an object with an owner the graph does not know (the
// owner may be gone, or just not seen yet: sync asks the API server).
func (gc *garbageCollector) observe(resource string, o apiserver.Object) {
	for _, ref := range o.GetOwnerReferences() {
		if gc.r.object(ref.UID) == nil {
			gc.q.Add(gcKey(resource, o))
			return
		}
	}
}

// ownerGone queues the dependents of an object that was deleted.
func (gc *garbageCollector) ownerGone(owner apiserver.Object) {
	for _, d := range gc.r.dependents(owner.GetUID()) {
		res, err := apiserver.ResourceOf(d.DeepCopyObject().(apiserver.Object))
		if err == nil {
			gc.q.Add(gcKey(res.Name, d))
		}
	}
}

func (gc *garbageCollector) handleErr(_ context.Context, key string, err error) {
	gc.r.failed("garbage collector", key, err)
	if err == nil {
		gc.q.Forget(key)
		return
	}
	gc.r.handleError(at("garbagecollector.go", 365), fmt.Errorf("error syncing item %s: %w", key, err))
	gc.q.AddRateLimited(key)
}

// sync is attemptToDeleteItem: an item none of whose owners exists is
// deleted.
func (gc *garbageCollector) sync(ctx context.Context, key string) error {
	resource, rest, _ := strings.Cut(key, "/")
	ns, name := splitKey(rest)
	inf := gc.r.informers[resource]
	if inf == nil {
		return nil
	}
	o, ok := inf.Get(ns, name)
	if !ok {
		return nil
	}
	res, err := apiserver.LookupResource(resource)
	if err != nil {
		return err
	}
	item := itemRef{APIVersion: res.GroupVersion().String(), Kind: res.Kind, Namespace: ns, Name: name, UID: string(o.GetUID())}
	gc.log.V(2).Info(at("garbagecollector.go", 506), "Processing item", "item", item, "virtual", false)
	if o.GetDeletionTimestamp() != nil {
		gc.log.V(5).Info(at("garbagecollector.go", 513), "processing item returned at once, because its DeletionTimestamp is non-nil", "item", item)
		return nil
	}
	refs := o.GetOwnerReferences()
	if len(refs) == 0 {
		gc.log.V(2).Info(at("garbagecollector.go", 553), "item doesn't have an owner, continue on next item", "item", item)
		return nil
	}
	var solid []metav1.OwnerReference
	for _, ref := range refs {
		exists, err := gc.ownerExists(ctx, ns, ref)
		if err != nil {
			return err
		}
		if exists {
			solid = append(solid, ref)
		}
	}
	if len(solid) > 0 {
		gc.log.V(2).Info(at("garbagecollector.go", 572), "item has at least one existing owner, will not garbage collect", "item", item, "owner", solid)
		return nil
	}
	gc.log.V(2).Info(at("garbagecollector.go", 650), "Deleting item", "item", item, "propagationPolicy", metav1.DeletePropagationBackground)
	if _, err := gc.r.client.Delete(ctx, resource, ns, name, apiserver.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	gc.r.record(func(rep *Report) { rep.Collected = append(rep.Collected, key) })
	return nil
}

// ownerExists looks for the owner in the watched objects by uid, then asks
// the API server (the cache may lag, and the owner may be of a kind the
// controllers do not watch). A name now used by an object with another
// uid is a different owner: the one referenced is gone.
func (gc *garbageCollector) ownerExists(ctx context.Context, namespace string, ref metav1.OwnerReference) (bool, error) {
	if gc.r.object(ref.UID) != nil {
		return true, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return true, nil // cannot tell: keep the dependent
	}
	res, err := apiserver.ResourceForKind(gv.WithKind(ref.Kind))
	if err != nil {
		return true, nil // a kind podlab does not serve: keep the dependent
	}
	if !res.Namespaced {
		namespace = ""
	}
	owner, err := gc.r.client.Get(ctx, res.Name, namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return owner.GetUID() == ref.UID, nil
}

// itemRef prints an item as the garbage collector's objectReference:
// [apps/v1/ReplicaSet, namespace: default, name: web-7d4b9c8f6, uid: ...].
type itemRef struct {
	APIVersion, Kind, Namespace, Name, UID string
}

func (i itemRef) String() string {
	return fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", i.APIVersion, i.Kind, i.Namespace, i.Name, i.UID)
}
