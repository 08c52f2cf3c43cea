package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// namespacesResource is the GroupResource of namespaces, for NotFound errors.
var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// podsResource is the GroupResource admission errors about pods name.
var podsResource = schema.GroupResource{Resource: "pods"}

// ImmortalNamespaces are the namespaces kube-apiserver's NamespaceLifecycle
// plugin refuses to delete.
var ImmortalNamespaces = []string{"default", "kube-system", "kube-public"}

// NamespaceLifecycle is kube-apiserver's NamespaceLifecycle admission plugin
// for a create of a namespaced object: the object named name of resource
// may only be created in a namespace that exists (ns is nil when it does
// not) and is not being deleted. A Terminating namespace is one whose
// deletion has started; its objects are being removed, and letting new ones
// in would keep it alive forever.
func NamespaceLifecycle(ns *corev1.Namespace, namespace string, resource schema.GroupResource, name string) ([]string, error) {
	if ns == nil {
		return nil, apierrors.NewNotFound(namespacesResource, namespace)
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return nil, apierrors.NewForbidden(resource, name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	}
	phase := ns.Status.Phase
	if phase == "" {
		phase = corev1.NamespaceActive
	}
	return []string{fmt.Sprintf("namespace %q is %s", namespace, phase)}, nil
}

// NamespaceDelete is NamespaceLifecycle's check on deleting a namespace:
// default, kube-system and kube-public may not be deleted.
func NamespaceDelete(name string) ([]string, error) {
	for _, immortal := range ImmortalNamespaces {
		if name == immortal {
			return nil, apierrors.NewForbidden(namespacesResource, name, fmt.Errorf("this namespace may not be deleted"))
		}
	}
	return []string{fmt.Sprintf("namespace %q may be deleted", name)}, nil
}
