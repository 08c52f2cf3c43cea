package apiserver

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Object is any object the API server stores. Every type of k8s.io/api
// (*corev1.Pod, *appsv1.Deployment, ...) satisfies it.
type Object interface {
	metav1.Object
	runtime.Object
}

// Interface is the API server as its clients see it: kubectl, the
// controller-manager, the scheduler and the kubelets. It is the only way to
// the store: every call is authenticated (the client was made for one user),
// authorized, admitted (writes) and validated (writes), in that order.
//
// resource is a REST name such as "pods" (see LookupResource); namespace is
// "" for cluster-scoped resources, and for List and Watch it means all
// namespaces. Errors are Kubernetes status errors: test them with
// k8s.io/apimachinery/pkg/api/errors (IsNotFound, IsConflict, IsForbidden,
// IsUnauthorized, IsInvalid, IsAlreadyExists, IsResourceExpired).
type Interface interface {
	// Create stores a new object and returns it as stored: with uid,
	// creationTimestamp, generation 1, resourceVersion and every default.
	// The status obj carries is dropped (a pod starts Pending, with its QoS
	// class computed; a Node keeps the status it registers with); write it
	// afterwards with UpdateStatus. obj's resourceVersion must be empty or
	// "0": a create naming a revision is refused, as kube-apiserver refuses
	// it (500, "resourceVersion should not be set on objects to be created").
	Create(ctx context.Context, obj Object) (Object, error)
	// Get reads one object.
	Get(ctx context.Context, resource, namespace, name string) (Object, error)
	// List reads every object of a resource, in one namespace or all,
	// filtered by opts' selectors. The list's ResourceVersion is the store's
	// revision it was read at: watch from there to miss nothing.
	List(ctx context.Context, resource, namespace string, opts ListOptions) (*List, error)
	// Update replaces an object's spec and metadata. obj's resourceVersion
	// must be the stored one, or the update is a conflict. Status changes
	// are ignored for every resource with a status subresource (pods,
	// nodes, namespaces, resourcequotas, deployments, replicasets).
	Update(ctx context.Context, obj Object) (Object, error)
	// UpdateStatus replaces only the status (the status subresource), with
	// the same resourceVersion check.
	UpdateStatus(ctx context.Context, obj Object) (Object, error)
	// Patch changes part of an object: the server reads the stored object,
	// applies data to it (pt is types.StrategicMergePatchType, as kubectl
	// apply sends, types.MergePatchType, RFC 7386, or types.JSONPatchType,
	// RFC 6902's list of operations) and stores the result
	// through the same admission and validation as an Update, authorized
	// with the verb "patch". A patch without metadata.resourceVersion
	// cannot conflict: it is applied to whatever is stored when it arrives.
	// One with it is a precondition: 409 Conflict unless that is the stored
	// resourceVersion. With opts.Subresource "scale" (deployments,
	// replicasets) the patch is of an autoscaling/v1 Scale, which Patch
	// returns; with "status", only the status changes.
	Patch(ctx context.Context, resource, namespace, name string, pt types.PatchType, data []byte, opts PatchOptions) (Object, error)
	// Bind assigns a pod to a node (the pods/binding subresource): the
	// scheduler's only write to a pod.
	Bind(ctx context.Context, binding *corev1.Binding) error
	// Delete removes an object. A pod bound to a node is deleted gracefully:
	// it gets a deletionTimestamp and stays until its kubelet (or a Delete
	// with Force or a zero grace period) removes it. The returned object is
	// the pod as marked, or nil when the object is gone.
	Delete(ctx context.Context, resource, namespace, name string, opts DeleteOptions) (Object, error)
	// Watch streams every change to a resource after opts.ResourceVersion
	// ("" or "0": from now), across processes, in revision order.
	Watch(ctx context.Context, resource, namespace string, opts ListOptions) (Watcher, error)
}

// ListOptions select objects, as kubectl's -l and --field-selector do.
type ListOptions struct {
	// LabelSelector, in kubectl's syntax: "app=web,tier!=db", "env in (a,b)".
	LabelSelector string
	// FieldSelector supports metadata.name, metadata.namespace,
	// spec.nodeName and status.phase (=, ==, !=), as a kubelet's
	// "spec.nodeName=node-1".
	FieldSelector string
	// ResourceVersion: for Watch, the revision to start after.
	ResourceVersion string
}

// List is the result of a list call.
type List struct {
	Items           []Object
	ResourceVersion string
}

// PatchOptions control a patch.
type PatchOptions struct {
	// Subresource is "" (the object), "status" or "scale".
	Subresource string
}

// DeleteOptions control a delete.
type DeleteOptions struct {
	// GracePeriodSeconds overrides the pod's terminationGracePeriodSeconds;
	// 0 (with Force) removes the object at once.
	GracePeriodSeconds *int64
	// Force removes a pod at once, without waiting for its kubelet, as
	// kubectl delete --force --grace-period=0.
	Force bool
}

// EventType is the type of a watch event, as Kubernetes names them.
type EventType string

// The watch event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// WatchEvent is one change: the object after it (for Deleted, the last
// state), with its resourceVersion set to the change's revision.
type WatchEvent struct {
	Type   EventType
	Object Object
}

// Watcher delivers watch events in revision order.
type Watcher interface {
	// Events is closed when the watch ends: its context was cancelled, or
	// an error occurred (see Err).
	Events() <-chan WatchEvent
	// Err is nil after a cancelled context, or the reason the watch ended:
	// an IsResourceExpired error when the watcher fell behind the store's
	// compaction ("too old resource version: list again").
	Err() error
}
