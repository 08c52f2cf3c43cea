package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one kind of object the API server serves: its REST
// name, its kind, whether it lives in a namespace, and where it is stored.
type Resource struct {
	Name       string   // plural, as in the URL: "pods"
	Singular   string   // "pod"
	ShortNames []string // kubectl's: "po"
	Kind       string   // "Pod"
	Group      string   // "" for the core group, "apps", "rbac.authorization.k8s.io"
	Version    string   // "v1"
	Namespaced bool
	// StorePrefix is the etcd key prefix kube-apiserver uses, without the
	// trailing slash: "/registry/pods". Nodes live under "/registry/minions",
	// their name from before they were called nodes.
	StorePrefix string
	// HasStatus: the resource has a status subresource, so Update ignores
	// status changes and UpdateStatus ignores everything else.
	HasStatus bool
	new       func() Object
}

// GroupVersion is "v1" or "apps/v1", as in an object's apiVersion.
func (r Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// New returns an empty object of the resource's kind, with apiVersion and
// kind set.
func (r Resource) New() Object {
	o := r.new()
	o.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind))
	return o
}

// Key is the store key of the object: /registry/pods/default/web, or
// /registry/minions/node-1 for a cluster-scoped one.
func (r Resource) Key(namespace, name string) string {
	if r.Namespaced {
		return r.StorePrefix + "/" + namespace + "/" + name
	}
	return r.StorePrefix + "/" + name
}

// Prefix is the store prefix listing the resource in one namespace, or in
// all of them when namespace is "" (and always for cluster-scoped ones).
func (r Resource) Prefix(namespace string) string {
	if r.Namespaced && namespace != "" {
		return r.StorePrefix + "/" + namespace + "/"
	}
	return r.StorePrefix + "/"
}

// resources is the fixed table of what podlab's API server serves; it is
// never modified.
var resources = []Resource{
	{Name: "pods", Singular: "pod", ShortNames: []string{"po"}, Kind: "Pod", Version: "v1", Namespaced: true, StorePrefix: "/registry/pods", HasStatus: true, new: func() Object { return &corev1.Pod{} }},
	{Name: "nodes", Singular: "node", ShortNames: []string{"no"}, Kind: "Node", Version: "v1", StorePrefix: "/registry/minions", HasStatus: true, new: func() Object { return &corev1.Node{} }},
	{Name: "namespaces", Singular: "namespace", ShortNames: []string{"ns"}, Kind: "Namespace", Version: "v1", StorePrefix: "/registry/namespaces", HasStatus: true, new: func() Object { return &corev1.Namespace{} }},
	{Name: "events", Singular: "event", ShortNames: []string{"ev"}, Kind: "Event", Version: "v1", Namespaced: true, StorePrefix: "/registry/events", new: func() Object { return &corev1.Event{} }},
	{Name: "limitranges", Singular: "limitrange", ShortNames: []string{"limits"}, Kind: "LimitRange", Version: "v1", Namespaced: true, StorePrefix: "/registry/limitranges", new: func() Object { return &corev1.LimitRange{} }},
	{Name: "resourcequotas", Singular: "resourcequota", ShortNames: []string{"quota"}, Kind: "ResourceQuota", Version: "v1", Namespaced: true, StorePrefix: "/registry/resourcequotas", HasStatus: true, new: func() Object { return &corev1.ResourceQuota{} }},
	{Name: "deployments", Singular: "deployment", ShortNames: []string{"deploy"}, Kind: "Deployment", Group: "apps", Version: "v1", Namespaced: true, StorePrefix: "/registry/deployments", HasStatus: true, new: func() Object { return &appsv1.Deployment{} }},
	{Name: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"}, Kind: "ReplicaSet", Group: "apps", Version: "v1", Namespaced: true, StorePrefix: "/registry/replicasets", HasStatus: true, new: func() Object { return &appsv1.ReplicaSet{} }},
	{Name: "leases", Singular: "lease", Kind: "Lease", Group: "coordination.k8s.io", Version: "v1", Namespaced: true, StorePrefix: "/registry/leases", new: func() Object { return &coordinationv1.Lease{} }},
	{Name: "roles", Singular: "role", Kind: "Role", Group: "rbac.authorization.k8s.io", Version: "v1", Namespaced: true, StorePrefix: "/registry/roles", new: func() Object { return &rbacv1.Role{} }},
	{Name: "rolebindings", Singular: "rolebinding", Kind: "RoleBinding", Group: "rbac.authorization.k8s.io", Version: "v1", Namespaced: true, StorePrefix: "/registry/rolebindings", new: func() Object { return &rbacv1.RoleBinding{} }},
	{Name: "clusterroles", Singular: "clusterrole", Kind: "ClusterRole", Group: "rbac.authorization.k8s.io", Version: "v1", StorePrefix: "/registry/clusterroles", new: func() Object { return &rbacv1.ClusterRole{} }},
	{Name: "clusterrolebindings", Singular: "clusterrolebinding", Kind: "ClusterRoleBinding", Group: "rbac.authorization.k8s.io", Version: "v1", StorePrefix: "/registry/clusterrolebindings", new: func() Object { return &rbacv1.ClusterRoleBinding{} }},
	{Name: "runtimeclasses", Singular: "runtimeclass", Kind: "RuntimeClass", Group: "node.k8s.io", Version: "v1", StorePrefix: "/registry/runtimeclasses", new: func() Object { return &nodev1.RuntimeClass{} }},
	{Name: "mutatingwebhookconfigurations", Singular: "mutatingwebhookconfiguration", Kind: "MutatingWebhookConfiguration", Group: "admissionregistration.k8s.io", Version: "v1", StorePrefix: "/registry/mutatingwebhookconfigurations", new: func() Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }},
	{Name: "validatingwebhookconfigurations", Singular: "validatingwebhookconfiguration", Kind: "ValidatingWebhookConfiguration", Group: "admissionregistration.k8s.io", Version: "v1", StorePrefix: "/registry/validatingwebhookconfigurations", new: func() Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }},
}

// Resources lists every resource the API server serves, in a fixed order.
func Resources() []Resource {
	return append([]Resource(nil), resources...)
}

// LookupResource finds a resource by any name kubectl accepts: plural,
// singular, short name or kind, in any case ("pods", "pod", "po", "Pod"),
// optionally qualified by group ("deployments.apps").
func LookupResource(name string) (Resource, error) {
	for _, r := range resources { // the common case: podlab's own code, by plural
		if r.Name == name {
			return r, nil
		}
	}
	n := strings.ToLower(name)
	group := ""
	if i := strings.IndexByte(n, '.'); i > 0 {
		n, group = n[:i], n[i+1:]
	}
	for _, r := range resources {
		if group != "" && group != r.Group {
			continue
		}
		if n == r.Name || n == r.Singular || n == strings.ToLower(r.Kind) {
			return r, nil
		}
		for _, s := range r.ShortNames {
			if n == s {
				return r, nil
			}
		}
	}
	return Resource{}, fmt.Errorf("the server doesn't have a resource type %q (podlab serves: %s)", name, resourceNames())
}

// ResourceForKind finds the resource of an object's apiVersion and kind, as
// apply does for each document of a manifest.
func ResourceForKind(gvk schema.GroupVersionKind) (Resource, error) {
	for _, r := range resources {
		if r.Kind == gvk.Kind && r.Group == gvk.Group && r.Version == gvk.Version {
			return r, nil
		}
	}
	for _, r := range resources {
		if r.Kind == gvk.Kind {
			return Resource{}, fmt.Errorf("no kind %q is registered for version %q: use apiVersion %q", gvk.Kind, gvk.GroupVersion().String(), r.GroupVersion().String())
		}
	}
	return Resource{}, fmt.Errorf("no kind %q is served by podlab (it serves: %s)", gvk.Kind, resourceNames())
}

// NotServed is the API server's answer to a request for a resource it
// does not serve (yet), such as kubectl create configmap's POST to
// /api/v1/namespaces/default/configmaps: 404 NotFound, as kube-apiserver
// answers a path it does not serve, but saying that podlab does not serve
// it and what it serves, as podlab apply says of a kind, rather than
// kube's bare "the server could not find the requested resource".
// gr is the resource as the request's path names it: "configmaps", or
// "daemonsets.apps".
func NotServed(gr schema.GroupResource) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("no resource %q is served by podlab (it serves: %s)", gr.String(), resourceNames())}}
}

func resourceNames() string {
	names := make([]string, len(resources))
	for i, r := range resources {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}

// GroupResource is the resource's group and name, as status errors name it.
func (r Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Name}
}

// mustResource looks up a resource podlab's own code names; the names are
// constants, so a miss is a programming error.
func mustResource(name string) Resource {
	r, err := LookupResource(name)
	if err != nil {
		panic(err)
	}
	return r
}

// Subresources lists the subresources podlab's API server serves for a
// resource, as discovery names them after the slash ("pods/status" is
// "status"): the status subresource of every resource that has one, the
// pod's binding (the scheduler's write), log and exec (proxied to the
// kubelet), and the scale subresource of Deployments and ReplicaSets
// (`kubectl scale`). Kubernetes serves more (pods/attach, pods/eviction,
// nodes/proxy, namespaces/finalize...); podlab's discovery leaves out what
// podlab does not serve, so a client never finds a path that answers 404.
func Subresources(r Resource) []string {
	var subs []string
	if r.HasStatus {
		subs = append(subs, "status")
	}
	switch r.GroupResource().String() {
	case "pods":
		subs = append(subs, "binding", "log", "exec")
	case "deployments.apps", "replicasets.apps":
		subs = append(subs, "scale")
	}
	slices.Sort(subs)
	return subs
}
