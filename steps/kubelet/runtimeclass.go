package kubelet

// RuntimeClass: which OCI runtime runs a pod.
//
// The kubelet's runtimeclass manager resolves spec.runtimeClassName to the
// RuntimeClass's handler through the API server (a RuntimeClass that does
// not exist when it looks is a NotFound error, and the sandbox is not made).
// The runtime then receives only the handler's name, as
// RunPodSandboxRequest.runtime_handler, looks it up in its own table
// (steps/cri) and keeps it with the sandbox: every container of the pod,
// and their kill and removal, use the same runtime. PodSandboxStatus
// reports it back (Sandbox.Handler).

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// lookupRuntimeHandler is the kubelet's runtimeclass manager's
// LookupRuntimeHandler: "" for a pod that names no RuntimeClass (the
// runtime's default), else the RuntimeClass's handler. A RuntimeClass that
// does not exist is a NotFound error, worded as the kubelet's informer
// cache words it (runtimeclass.node.k8s.io "NAME" not found).
func (k *Kubelet) lookupRuntimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	obj, err := k.client.Get(ctx, "runtimeclasses", "", name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// as the kubelet's RuntimeClass lister says it
			return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), name)
		}
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %v", name, err)
	}
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: the API server returned a %T", name, obj)
	}
	return rc.Handler, nil
}
