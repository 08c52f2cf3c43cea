package nodeauthorizer

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
)

// Pods is what the Node authorizer reads from the store: the pods, which
// bind objects to nodes. The API server implements it over the request's
// own transaction.
type Pods interface {
	// Get returns the pod namespace/name, or nil when there is none.
	Get(namespace, name string) (*corev1.Pod, error)
	// List returns the pods of namespace.
	List(namespace string) ([]*corev1.Pod, error)
}

// Authorizer is the Node authorizer. Its zero value has no static rules;
// make one with New.
type Authorizer struct {
	rules []rbacv1.PolicyRule
}

// New returns a Node authorizer granting rules (rbac.NodeRules(), the
// rules of the ClusterRole system:node) to every node, once narrowed.
func New(rules []rbacv1.PolicyRule) *Authorizer {
	return &Authorizer{rules: rules}
}

// Authorize decides one request. A request that is not a node's gets no
// opinion and no reason: the next authorizer decides alone. A node's
// request is allowed, or gets no opinion with the reason (which may be
// empty) that kube-apiserver's Node authorizer gives. The error is from
// reading pods.
func (z *Authorizer) Authorize(pods Pods, a rbac.Attributes) (rbac.Decision, error) {
	node, isNode := authn.NodeIdentity(a.User)
	if !isNode {
		return noOpinion(""), nil
	}
	if node == "" {
		return noOpinion(fmt.Sprintf("unknown node for user %q", a.User.Name)), nil
	}
	if a.IsResourceRequest() {
		r := &request{node: node, pods: pods, a: a}
		switch {
		case a.APIGroup == "" && a.Resource == "secrets":
			return r.readNamespacedObject(secretOfPod)
		case a.APIGroup == "" && a.Resource == "configmaps":
			return r.readNamespacedObject(configMapOfPod)
		case a.APIGroup == "" && a.Resource == "persistentvolumeclaims":
			if a.Subresource == "status" {
				return r.statusUpdate(claimOfPod)
			}
			return r.get(claimOfPod)
		case a.APIGroup == "" && a.Resource == "persistentvolumes",
			a.APIGroup == "storage.k8s.io" && a.Resource == "volumeattachments",
			a.APIGroup == "resource.k8s.io" && a.Resource == "resourceclaims":
			// A path to these leads through objects podlab does not
			// store: there is none.
			return r.get(noPath)
		case a.APIGroup == "" && a.Resource == "serviceaccounts":
			return r.createToken()
		case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
			return r.lease()
		case a.APIGroup == "" && a.Resource == "nodes":
			return r.nodeObject()
		case a.APIGroup == "" && a.Resource == "pods":
			return r.pod()
		}
	}
	// Resources not subdivided per node: the static rules, alike for all.
	for i := range z.rules {
		if rbac.RuleAllows(z.rules[i], a) {
			return allow(), nil
		}
	}
	return noOpinion(""), nil
}

// request is one node's request being decided.
type request struct {
	node string
	pods Pods
	a    rbac.Attributes
}

func allow() rbac.Decision { return rbac.Decision{Allowed: true, Reason: "Node: allowed"} }

func noOpinion(reason string) rbac.Decision { return rbac.Decision{Reason: reason} }

// noRelationship is the reason when no pod of the node leads to the object.
func (r *request) noRelationship() rbac.Decision {
	return noOpinion(fmt.Sprintf("no relationship found between node '%s' and this object", r.node))
}

// nodeObject: a node may read its own Node by name (even before it exists,
// so that a kubelet can look for it before registering); create, update
// and patch are left to NodeRestriction.
func (r *request) nodeObject() (rbac.Decision, error) {
	switch r.a.Subresource {
	case "":
		switch r.a.Verb {
		case "create", "update", "patch":
			return allow(), nil
		case "get", "list", "watch":
			switch r.a.Name {
			case r.node:
				return allow(), nil
			case "":
				return noOpinion(fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", r.node)), nil
			default:
				return noOpinion(fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", r.node, r.a.Name)), nil
			}
		}
	case "status":
		switch r.a.Verb {
		case "update", "patch":
			return allow(), nil
		}
	}
	return noOpinion(""), nil
}

// pod: get a pod bound to the node; list and watch with its field
// selector; create and delete (mirror pods), status updates and evictions
// are left to NodeRestriction.
func (r *request) pod() (rbac.Decision, error) {
	switch r.a.Subresource {
	case "":
		switch r.a.Verb {
		case "get":
			return r.get(podOnNode)
		case "list", "watch":
			for _, req := range r.a.FieldSelector {
				if req.Field == "spec.nodeName" && req.Operator == selection.Equals && req.Value == r.node {
					return allow(), nil
				}
			}
			if r.a.Name != "" {
				return r.related(podOnNode)
			}
			return noOpinion("can only list/watch pods with spec.nodeName field selector"), nil
		case "create", "delete":
			return allow(), nil
		}
	case "status":
		switch r.a.Verb {
		case "update", "patch":
			return allow(), nil
		}
	case "eviction":
		if r.a.Verb == "create" {
			return allow(), nil
		}
	}
	return noOpinion(""), nil
}

// get allows a get of one object the node's pods lead to.
func (r *request) get(p path) (rbac.Decision, error) {
	if r.a.Verb != "get" {
		return noOpinion("can only get individual resources of this type"), nil
	}
	if r.a.Subresource != "" {
		return noOpinion("cannot get subresource"), nil
	}
	return r.related(p)
}

// readNamespacedObject allows get, list and watch of one named object
// (kubelets watch a single secret with a metadata.name field selector and
// the name) the node's pods lead to.
func (r *request) readNamespacedObject(p path) (rbac.Decision, error) {
	switch r.a.Verb {
	case "get", "list", "watch":
	default:
		return noOpinion("can only read resources of this type"), nil
	}
	if r.a.Subresource != "" {
		return noOpinion("cannot read subresource"), nil
	}
	if r.a.Namespace == "" {
		return noOpinion("can only read namespaced object of this type"), nil
	}
	return r.related(p)
}

// statusUpdate allows update and patch of the status of an object the
// node's pods lead to.
func (r *request) statusUpdate(p path) (rbac.Decision, error) {
	switch r.a.Verb {
	case "update", "patch":
	default:
		return noOpinion("can only get/update/patch this type"), nil
	}
	if r.a.Subresource != "status" {
		return noOpinion("can only update status subresource"), nil
	}
	return r.related(p)
}

// createToken allows a token for a service account a pod of the node runs
// as.
func (r *request) createToken() (rbac.Decision, error) {
	if r.a.Verb != "create" || r.a.Name == "" {
		return noOpinion("can only create tokens for individual service accounts"), nil
	}
	if r.a.Subresource != "token" {
		return noOpinion("can only create token subresource of serviceaccount"), nil
	}
	return r.related(serviceAccountOfPod)
}

// NodeLeaseNamespace is where each node's heartbeat Lease lives, named
// after the node.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// lease allows a node its own Lease in kube-node-lease. A create names no
// object here; NodeRestriction checks the name.
func (r *request) lease() (rbac.Decision, error) {
	switch r.a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return noOpinion("can only get, create, update, patch, or delete a node lease"), nil
	}
	if r.a.Namespace != NodeLeaseNamespace {
		return noOpinion(fmt.Sprintf("can only access leases in the %q system namespace", NodeLeaseNamespace)), nil
	}
	if r.a.Verb != "create" && r.a.Name != r.node {
		return noOpinion("can only access node lease with the same name as the requesting node"), nil
	}
	return allow(), nil
}

// related allows the request when a pod bound to the node leads to the
// named object: the pod itself (isPodOf) or what it uses.
func (r *request) related(p path) (rbac.Decision, error) {
	if r.a.Name == "" {
		return noOpinion("No Object name found"), nil
	}
	switch p {
	case noPath:
		return r.noRelationship(), nil
	case podOnNode:
		pod, err := r.pods.Get(r.a.Namespace, r.a.Name)
		if err != nil {
			return rbac.Decision{}, fmt.Errorf("node authorizer: reading pod %s/%s: %w", r.a.Namespace, r.a.Name, err)
		}
		if pod == nil || pod.Spec.NodeName != r.node {
			return r.noRelationship(), nil
		}
		return allow(), nil
	}
	pods, err := r.pods.List(r.a.Namespace)
	if err != nil {
		return rbac.Decision{}, fmt.Errorf("node authorizer: listing the pods of namespace %q: %w", r.a.Namespace, err)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == r.node && p.leadsTo(pod, r.a.Name) {
			return allow(), nil
		}
	}
	return r.noRelationship(), nil
}
