package kubelet

// The node's Lease: the kubelet's NodeLease controller
// (k8s.io/component-helpers/apimachinery/lease). A Node's status is big
// (images, conditions, capacity); writing it every 10 seconds from every
// node costs the API server and etcd a lot. So the kubelet proves it is
// alive with a tiny object instead: the Lease kube-node-lease/NODE, whose
// spec.renewTime it renews every quarter of its duration (10 s of 40 s).
// The node lifecycle controller in the controller-manager reads the Lease
// and the Ready condition's lastHeartbeatTime, and marks a node whose both
// are older than its grace period Unknown.

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultNodeLeaseDuration is the kubelet's nodeLeaseDurationSeconds (40):
// the Lease's spec.leaseDurationSeconds. The kubelet renews it every
// quarter of that (its renewIntervalFraction, 0.25): 10 s.
const DefaultNodeLeaseDuration = 40 * time.Second

// LeaseResult is what a renewal of the node's Lease did.
type LeaseResult struct {
	Lease *coordinationv1.Lease
	// Created is true when this renewal created the Lease.
	Created bool
	Took    time.Duration
}

// leaseRenewInterval is how often the Lease is renewed: a quarter of its
// duration, as the kubelet's NodeLease controller does.
func (k *Kubelet) leaseRenewInterval() time.Duration {
	return k.cfg.NodeLeaseDuration / 4
}

// RenewLease creates the node's Lease kube-node-lease/NODE, or renews it:
// holderIdentity NODE, leaseDurationSeconds, renewTime now, and the Node as
// its owner (so that deleting the Node deletes its Lease).
func (k *Kubelet) RenewLease(ctx context.Context) (*LeaseResult, error) {
	start := time.Now()
	for try := 0; ; try++ {
		obj, err := k.client.Get(ctx, "leases", corev1.NamespaceNodeLease, k.node)
		if apierrors.IsNotFound(err) {
			lease := k.newLease(ctx)
			created, err := k.client.Create(ctx, lease)
			if apierrors.IsAlreadyExists(err) && try < 5 {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating the Lease %s/%s of node %s: %w", corev1.NamespaceNodeLease, k.node, k.node, err)
			}
			return &LeaseResult{Lease: created.(*coordinationv1.Lease), Created: true, Took: time.Since(start)}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the Lease %s/%s of node %s: %w", corev1.NamespaceNodeLease, k.node, k.node, err)
		}
		lease := obj.(*coordinationv1.Lease).DeepCopy()
		k.setLeaseSpec(lease)
		if len(lease.OwnerReferences) == 0 {
			lease.OwnerReferences = k.leaseOwner(ctx)
		}
		updated, err := k.client.Update(ctx, lease)
		if (apierrors.IsConflict(err) || apierrors.IsNotFound(err)) && try < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("renewing the Lease %s/%s of node %s: %w", corev1.NamespaceNodeLease, k.node, k.node, err)
		}
		return &LeaseResult{Lease: updated.(*coordinationv1.Lease), Took: time.Since(start)}, nil
	}
}

func (k *Kubelet) newLease(ctx context.Context) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: k.node, OwnerReferences: k.leaseOwner(ctx)},
	}
	k.setLeaseSpec(lease)
	return lease
}

func (k *Kubelet) setLeaseSpec(lease *coordinationv1.Lease) {
	holder := k.node
	seconds := int32(k.cfg.NodeLeaseDuration / time.Second)
	lease.Spec.HolderIdentity = &holder
	lease.Spec.LeaseDurationSeconds = &seconds
	lease.Spec.RenewTime = &metav1.MicroTime{Time: k.now()}
}

// leaseOwner is the Node as the Lease's owner, or none when the Node
// cannot be read (the next renewal tries again, as the kubelet does).
func (k *Kubelet) leaseOwner(ctx context.Context) []metav1.OwnerReference {
	obj, err := k.client.Get(ctx, "nodes", "", k.node)
	if err != nil {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k.node, UID: obj.GetUID()}}
}

func (k *Kubelet) notifyLease(res *LeaseResult, err error) {
	if k.cfg.OnLease != nil {
		k.cfg.OnLease(res, err)
	}
}
