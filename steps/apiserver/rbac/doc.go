// Package rbac is the API server's second gate: authorization, the way
// kube-apiserver's RBAC authorizer (--authorization-mode=RBAC) does it.
//
// Authentication (package authn) answered "who is this?": a user name and
// groups. Authorization answers "may this user do this?", for one request
// described as Attributes: a verb (get, list, watch, create, update, patch,
// delete, deletecollection, and the special bind and escalate), an API group
// ("" is the core group of pods and nodes, "apps" holds deployments), a
// resource ("pods"), maybe a subresource ("pods/status", "pods/binding",
// "pods/log"), a namespace ("" for cluster-scoped resources such as nodes)
// and an object name. A "no" is a 403 Forbidden; a 401 Unauthorized means
// authentication failed and this package was never asked.
//
// # Deny by default, grant by rules
//
// There are no "deny" rules in RBAC. Nothing is allowed until some rule
// allows it, and one allowing rule is enough. A rule (rbacv1.PolicyRule)
// lists verbs, apiGroups and resources, all of which must match the
// request, "*" matching anything:
//
//	verbs: [get, list, watch]   apiGroups: [""]   resources: [pods, pods/log]
//
// A resource "pods/status" names the status subresource only: "pods" does
// not cover it, "*/status" covers every status subresource, "*" covers
// everything. resourceNames, when present, narrow a rule to named objects.
// A create or a list names no object, so a rule with resourceNames never
// allows one.
//
// # Roles hold rules, bindings hand them out
//
// A Role is a set of rules valid in its own namespace. A ClusterRole is a
// set of rules valid in every namespace and for cluster-scoped resources
// (nodes, namespaces, clusterroles). Neither grants anything on its own: a
// RoleBinding gives a Role to subjects within its namespace, a
// ClusterRoleBinding gives a ClusterRole to subjects everywhere. Subjects
// are Users and Groups (names authentication produced; Kubernetes stores
// no User objects) and ServiceAccounts, which authenticate as
// "system:serviceaccount:<namespace>:<name>".
//
// A RoleBinding may also reference a ClusterRole: it then grants that
// ClusterRole's rules within the binding's namespace only. That is how one
// "edit" ClusterRole serves every team: podlab's developer gets edit in
// namespace default only, through the RoleBinding "developer-edit", and is
// refused in kube-system. A binding to a role that does not exist (yet)
// grants nothing.
//
// Authorize walks the ClusterRoleBindings, then the RoleBindings of the
// request's namespace; for each binding naming the user (or one of its
// groups), it looks at the referenced role's rules and stops at the first
// rule that allows the request. The reason names that binding, in
// kube-apiserver's words:
//
//	RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters"
//
// # The escalation check
//
// Whoever may create Roles and RoleBindings could write themselves a Role
// granting "*" and bind it. RBAC prevents this in the API server's storage
// for Roles, ClusterRoles and their bindings, not in Authorize: a user may
// only create or update a role whose rules they already hold
// (ConfirmNoEscalation, via Covers), and may only bind a role whose rules
// they already hold. Two verbs lift the check on purpose: "escalate" on
// roles/clusterroles lets a user write any rules into them, and "bind" lets
// a user create bindings to the named role without holding its rules
// (ConfirmRoleWrite and ConfirmBindingWrite run the whole check).
//
// # The default policy
//
// kube-apiserver creates a default policy at start (labelled
// kubernetes.io/bootstrapping=rbac-defaults): cluster-admin for the group
// system:masters, the user-facing admin, edit and view roles, and a role
// for each control plane component. Bootstrap returns it, with podlab's
// own two bindings for its developer and viewer users.
//
// # Kubelets: the Node authorizer first
//
// kube-apiserver runs --authorization-mode=Node,RBAC. A kubelet's request
// (system:node:<name> in system:nodes) is decided first by the Node
// authorizer (package nodeauthorizer), which grants the rules of the
// ClusterRole system:node (NodeRules) for the node's own objects only.
// The binding of system:node is kept without subjects, as Kubernetes has
// kept it since 1.7: RBAC alone allows a node nothing but what every
// authenticated user may do. Attributes carry the request's parsed field
// selector for the Node authorizer; Authorize ignores it.
package rbac
