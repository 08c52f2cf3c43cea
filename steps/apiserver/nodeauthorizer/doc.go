// Package nodeauthorizer is the API server's Node authorizer: the first
// authorizer of kube-apiserver's --authorization-mode=Node,RBAC, which
// decides what a kubelet may do (Kubernetes'
// plugin/pkg/auth/authorizer/node).
//
// A kubelet authenticates as the user system:node:<name> in the group
// system:nodes (authn.NodeIdentity). It needs to read and write a few
// things: its own Node and Lease, the pods bound to it and their status,
// and the secrets and config maps those pods use. RBAC cannot say "its own":
// a rule names resources, not relationships. So kube-apiserver does not
// bind the ClusterRole system:node to the group system:nodes (the binding
// is left without subjects); the Node authorizer grants that role's rules
// (rbac.NodeRules) itself, and narrows the ones about a node's own objects:
//
//   - nodes: get, list and watch only its own Node, by name; create,
//     update and patch (also of nodes/status) are allowed here and
//     narrowed to its own Node by the NodeRestriction admission plugin;
//   - pods: get a pod bound to the node; list and watch only with the
//     field selector spec.nodeName=<node>; create and delete, and
//     update/patch of pods/status, are allowed here and narrowed by
//     NodeRestriction to mirror pods and to pods bound to the node;
//   - secrets, config maps: get, list or watch one by name, when a pod
//     bound to the node uses it; persistent volume claims, persistent
//     volumes, volume attachments and resource claims: get one the node's
//     pods use (podlab stores none of the last three, so there is never a
//     path to one);
//   - leases: only its own, in the namespace kube-node-lease;
//   - service account tokens: only for an account a pod of the node runs
//     as;
//   - everything else: the static rules of system:node, alike for every
//     node.
//
// kube-apiserver answers these questions from a graph of pods, nodes and
// what pods reference, kept up to date by informers. podlab's API server
// reads the store itself, in the request's own transaction (the Pods
// interface), so the answer is always current.
//
// The authorizer never says "deny": it allows, or it has no opinion and
// the next authorizer (RBAC) decides. Since nothing binds system:node, RBAC
// refuses what the Node authorizer did not allow, and the 403 carries the
// Node authorizer's reason, in kube-apiserver's words:
//
//	pods "web" is forbidden: User "system:node:node-1" cannot get resource "pods" in API group "" in the namespace "default": no relationship found between node 'node-1' and this object
package nodeauthorizer
