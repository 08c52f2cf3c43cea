package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// Labels and annotations of the default policy. kube-apiserver marks what it
// creates at start with BootstrapLabel; the AutoUpdateAnnotation tells it
// to reconcile the object at every start (put back missing rules and
// subjects) unless an administrator set it to "false".
const (
	BootstrapLabel      = "kubernetes.io/bootstrapping"
	BootstrapLabelValue = "rbac-defaults"
	// ManagedByLabel marks podlab's own bindings (for its developer and
	// viewer users), which are not part of Kubernetes' default policy.
	ManagedByLabel      = "app.kubernetes.io/managed-by"
	ManagedByLabelValue = "podlab"
)

// Aggregation labels: a ClusterRole carrying one is folded into admin,
// edit or view by the cluster role aggregation controller.
const (
	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// podlab's users, made by `podlab init` (see authn): admin (in
// system:masters), developer, viewer, the two control plane components, and
// system:node:<node> (in system:nodes) for each kubelet.
const (
	userDeveloper = "developer"
	userViewer    = "viewer"
	// userAPIServerKubeletClient is the API server's client certificate
	// for kubelets (pki.KubeletClientCommonName).
	userAPIServerKubeletClient = "kube-apiserver-kubelet-client"
	userKubeScheduler          = "system:kube-scheduler"
	userKubeControllerManager  = "system:kube-controller-manager"
	// UserNetworkAgent is podlab's network agent (podlab network-agent),
	// flannel's part: its client certificate's CN (pki), the subject of
	// the ClusterRoleBinding network-agent.
	UserNetworkAgent = "network-agent"
)

// API groups and verb sets, as Kubernetes' bootstrap policy names them.
const (
	legacyGroup         = ""
	appsGroup           = "apps"
	authenticationGroup = "authentication.k8s.io"
	authorizationGroup  = "authorization.k8s.io"
	autoscalingGroup    = "autoscaling"
	batchGroup          = "batch"
	certificatesGroup   = "certificates.k8s.io"
	coordinationGroup   = "coordination.k8s.io"
	discoveryGroup      = "discovery.k8s.io"
	eventsGroup         = "events.k8s.io"
	extensionsGroup     = "extensions"
	networkingGroup     = "networking.k8s.io"
	nodeGroup           = "node.k8s.io"
	policyGroup         = "policy"
	storageGroup        = "storage.k8s.io"
)

var (
	verbsRead      = []string{"get", "list", "watch"}
	verbsWrite     = []string{"create", "update", "patch", "delete", "deletecollection"}
	verbsReadWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

// ruleBuilder builds a PolicyRule the way Kubernetes' bootstrap policy
// reads: rule(verbs...).groups(...).resources(...).done().
type ruleBuilder struct{ r rbacv1.PolicyRule }

func rule(verbs ...string) *ruleBuilder {
	return &ruleBuilder{r: rbacv1.PolicyRule{Verbs: slices.Clone(verbs)}}
}

func (b *ruleBuilder) groups(g ...string) *ruleBuilder    { b.r.APIGroups = g; return b }
func (b *ruleBuilder) resources(r ...string) *ruleBuilder { b.r.Resources = r; return b }
func (b *ruleBuilder) names(n ...string) *ruleBuilder     { b.r.ResourceNames = n; return b }
func (b *ruleBuilder) urls(u ...string) *ruleBuilder      { b.r.NonResourceURLs = u; return b }
func (b *ruleBuilder) done() rbacv1.PolicyRule            { return b.r }

// eventsRule lets a component record Events, in both event APIs.
func eventsRule() rbacv1.PolicyRule {
	return rule("create", "update", "patch").groups(legacyGroup, eventsGroup).resources("events").done()
}

// Bootstrap returns the RBAC objects kube-apiserver creates at start, as
// podlab needs them, plus podlab's bindings for its developer and viewer
// users:
//
//   - ClusterRoles: cluster-admin (everything); system:discovery,
//     system:basic-user and system:public-info-viewer (what every user may
//     do: discovery, /healthz, /version, self reviews); admin, edit and view,
//     aggregated from system:aggregate-to-admin, -edit and -view as the
//     aggregation controller would, so their rules are filled in; and
//     system:node, system:kube-scheduler, system:kube-controller-manager.
//   - ClusterRoleBindings: cluster-admin to Group system:masters,
//     system:discovery, system:basic-user and system:public-info-viewer to
//     Group system:authenticated, each component's role to its user,
//     system:node to nobody (the Node authorizer grants its rules, per
//     node, see NodeRules), and "viewer-view": ClusterRole view to User
//     viewer.
//   - RoleBindings: "developer-edit" in namespace default: ClusterRole edit
//     to User developer.
func Bootstrap() (clusterRoles []rbacv1.ClusterRole, clusterRoleBindings []rbacv1.ClusterRoleBinding, roleBindings []rbacv1.RoleBinding) {
	roles, err := Aggregate(bootstrapClusterRoles())
	if err != nil {
		// Only a typo in the static selectors above gets here.
		panic(fmt.Sprintf("rbac: aggregating the bootstrap cluster roles: %v", err))
	}
	return roles, bootstrapClusterRoleBindings(), bootstrapRoleBindings()
}

// BootstrapPolicy is Bootstrap as a Policy, ready for Authorize.
func BootstrapPolicy() *Policy {
	crs, crbs, rbs := Bootstrap()
	return &Policy{ClusterRoles: crs, ClusterRoleBindings: crbs, RoleBindings: rbs}
}

func bootstrapMeta(name string, extraLabels map[string]string) metav1.ObjectMeta {
	l := map[string]string{BootstrapLabel: BootstrapLabelValue}
	for k, v := range extraLabels {
		l[k] = v
	}
	return metav1.ObjectMeta{
		Name:        name,
		Labels:      l,
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"},
	}
}

func podlabMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   namespace,
		Labels:      map[string]string{ManagedByLabel: ManagedByLabelValue},
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"},
	}
}

var (
	clusterRoleType        = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"}
	clusterRoleBindingType = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"}
	roleBindingType        = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"}
)

func clusterRole(name string, extraLabels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{TypeMeta: clusterRoleType, ObjectMeta: bootstrapMeta(name, extraLabels), Rules: rules}
}

// aggregatedClusterRole is a ClusterRole whose rules the aggregation
// controller collects from the ClusterRoles carrying label=true.
func aggregatedClusterRole(name string, extraLabels map[string]string, label string) rbacv1.ClusterRole {
	cr := clusterRole(name, extraLabels)
	cr.AggregationRule = &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}},
	}
	return cr
}

// bootstrapClusterRoles are Kubernetes' default ClusterRoles that podlab's
// components and users need, with the rules Kubernetes gives them
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
func bootstrapClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		// A "root" role which can do absolutely anything.
		clusterRole("cluster-admin", nil,
			rule("*").groups("*").resources("*").done(),
			rule("*").urls("*").done(),
		),
		// Just enough to tell whether the server is ready and discover the
		// API versions.
		clusterRole("system:discovery", nil,
			rule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/",
				"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*").done(),
		),
		// What a "normal" user needs to learn about themselves (kubectl auth
		// can-i, kubectl auth whoami).
		clusterRole("system:basic-user", nil,
			rule("create").groups(authorizationGroup).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews").done(),
			rule("create").groups(authenticationGroup).resources("selfsubjectreviews").done(),
		),
		// Insensitive cluster information.
		clusterRole("system:public-info-viewer", nil,
			rule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/").done(),
		),

		// The user-facing roles, meant to be bound in a namespace with a
		// RoleBinding. Their rules come from the aggregate-to roles below:
		// admin = edit + aggregate-to-admin, edit = view + aggregate-to-edit.
		//
		// A namespace level admin: edit, plus granting permissions to others.
		aggregatedClusterRole("admin", nil, aggregateToAdmin),
		// A namespace level editor: every user level action in a namespace,
		// but not the "privileged" resources that are the system's domain:
		// /status subresources, resource quotas and limit ranges.
		aggregatedClusterRole("edit", map[string]string{aggregateToAdmin: "true"}, aggregateToEdit),
		// Read-only access to non-escalating resources in a namespace: no
		// secrets (a secret may hold a service account token: reading it
		// would be an escalation).
		aggregatedClusterRole("view", map[string]string{aggregateToEdit: "true"}, aggregateToView),

		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"},
			rule("create").groups(authorizationGroup).resources("localsubjectaccessreviews").done(),
			rule(verbsReadWrite...).groups(rbacv1.GroupName).resources("roles", "rolebindings").done(),
		),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"},
			// Read on escalating resources.
			rule(verbsRead...).groups(legacyGroup).resources("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy").done(),
			rule("impersonate").groups(legacyGroup).resources("serviceaccounts").done(),
			rule(verbsWrite...).groups(legacyGroup).resources("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward").done(),
			rule("create").groups(legacyGroup).resources("pods/eviction").done(),
			rule(verbsWrite...).groups(legacyGroup).resources("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets").done(),
			rule("create").groups(legacyGroup).resources("serviceaccounts/token").done(),
			rule(verbsWrite...).groups(appsGroup).resources(
				"statefulsets", "statefulsets/scale",
				"daemonsets",
				"deployments", "deployments/scale", "deployments/rollback",
				"replicasets", "replicasets/scale").done(),
			rule(verbsWrite...).groups(autoscalingGroup).resources("horizontalpodautoscalers").done(),
			rule(verbsWrite...).groups(batchGroup).resources("jobs", "cronjobs").done(),
			rule(verbsWrite...).groups(extensionsGroup).resources("daemonsets",
				"deployments", "deployments/scale", "deployments/rollback", "ingresses",
				"replicasets", "replicasets/scale", "replicationcontrollers/scale",
				"networkpolicies").done(),
			rule(verbsWrite...).groups(policyGroup).resources("poddisruptionbudgets").done(),
			rule(verbsWrite...).groups(networkingGroup).resources("networkpolicies", "ingresses").done(),
		),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToView: "true"},
			rule(verbsRead...).groups(legacyGroup).resources("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps").done(),
			rule(verbsRead...).groups(legacyGroup).resources("limitranges", "resourcequotas", "bindings", "events",
				"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log").done(),
			// Reading namespaces at the namespace scope means reading *this*
			// namespace: a hint of which namespaces one has access to.
			rule(verbsRead...).groups(legacyGroup).resources("namespaces").done(),
			rule(verbsRead...).groups(discoveryGroup).resources("endpointslices").done(),
			rule(verbsRead...).groups(appsGroup).resources(
				"controllerrevisions",
				"statefulsets", "statefulsets/status", "statefulsets/scale",
				"daemonsets", "daemonsets/status",
				"deployments", "deployments/status", "deployments/scale",
				"replicasets", "replicasets/status", "replicasets/scale").done(),
			rule(verbsRead...).groups(autoscalingGroup).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status").done(),
			rule(verbsRead...).groups(batchGroup).resources("jobs", "jobs/status", "cronjobs", "cronjobs/status").done(),
			rule(verbsRead...).groups(extensionsGroup).resources("daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
				"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
				"networkpolicies").done(),
			rule(verbsRead...).groups(policyGroup).resources("poddisruptionbudgets", "poddisruptionbudgets/status").done(),
			rule(verbsRead...).groups(networkingGroup).resources("networkpolicies", "ingresses", "ingresses/status").done(),
		),

		// What a kubelet needs to register its Node, report its status and
		// run the pods bound to it. No binding hands it out (see
		// bootstrapClusterRoleBindings): the Node authorizer grants these
		// rules to every node, narrowed per node (NodeRules).
		clusterRole("system:node", nil, NodeRules()...),

		// Full access to the kubelets' API (logs, exec, stats...): what the
		// API server's own client certificate needs when it proxies
		// kubectl logs and exec to a kubelet, which asks the API server
		// (a SubjectAccessReview) whether the caller may "get" or "create"
		// nodes/proxy. kubeadm binds kube-apiserver-kubelet-client to it.
		clusterRole("system:kubelet-api-admin", nil,
			rule("get", "list", "watch").groups(legacyGroup).resources("nodes").done(),
			rule("proxy").groups(legacyGroup).resources("nodes").done(),
			rule("*").groups(legacyGroup).resources("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log").done(),
			// KubeletFineGrainedAuthz, on by default since v1.33
			rule("*").groups(legacyGroup).resources("nodes/pods", "nodes/healthz", "nodes/configz").done(),
		),

		// The scheduler: watch unscheduled pods and the nodes, bind each pod
		// to a node (create pods/binding), record why not (pods/status,
		// events). It may not create pods.
		clusterRole("system:kube-scheduler", nil,
			eventsRule(),
			// Leader election.
			rule("create").groups(coordinationGroup).resources("leases").done(),
			rule("get", "update").groups(coordinationGroup).resources("leases").names("kube-scheduler").done(),
			// Fundamental resources.
			rule(verbsRead...).groups(legacyGroup).resources("nodes").done(),
			rule("get", "list", "watch", "delete").groups(legacyGroup).resources("pods").done(),
			rule("create").groups(legacyGroup).resources("pods/binding", "bindings").done(),
			rule("patch", "update").groups(legacyGroup).resources("pods/status").done(),
			// Things that select pods.
			rule(verbsRead...).groups(legacyGroup).resources("services", "replicationcontrollers").done(),
			rule(verbsRead...).groups(appsGroup, extensionsGroup).resources("replicasets").done(),
			rule(verbsRead...).groups(appsGroup).resources("statefulsets").done(),
			// Things pods use or that apply to them.
			rule(verbsRead...).groups(policyGroup).resources("poddisruptionbudgets").done(),
			rule(verbsRead...).groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes").done(),
			rule("create").groups(authenticationGroup).resources("tokenreviews").done(),
			rule("create").groups(authorizationGroup).resources("subjectaccessreviews").done(),
			rule(verbsRead...).groups(storageGroup).resources("csinodes").done(),
			rule(verbsRead...).groups(legacyGroup).resources("namespaces").done(),
			rule(verbsRead...).groups(storageGroup).resources("csidrivers").done(),
			rule(verbsRead...).groups(storageGroup).resources("csistoragecapacities").done(),
		),

		// The controller manager. In Kubernetes this role is small: each
		// controller runs as its own service account
		// (system:serviceaccount:kube-system:deployment-controller, ...)
		// with its own system:controller:* role. podlab's controller manager
		// runs every controller as one user, so the rules of the
		// deployment and replicaset controllers' roles are here too (the
		// last block).
		clusterRole("system:kube-controller-manager", nil,
			eventsRule(),
			// Leader election.
			rule("create").groups(coordinationGroup).resources("leases").done(),
			rule("get", "update").groups(coordinationGroup).resources("leases").names("kube-controller-manager").done(),
			// Fundamental resources.
			rule("create").groups(legacyGroup).resources("secrets", "serviceaccounts").done(),
			rule("delete").groups(legacyGroup).resources("secrets").done(),
			rule("get").groups(legacyGroup).resources("configmaps", "namespaces", "secrets", "serviceaccounts").done(),
			rule("update").groups(legacyGroup).resources("secrets", "serviceaccounts").done(),
			rule("create").groups(authenticationGroup).resources("tokenreviews").done(),
			rule("create").groups(authorizationGroup).resources("subjectaccessreviews").done(),
			// Every shared informer lists and watches.
			rule("list", "watch").groups("*").resources("*").done(),
			rule("create").groups(legacyGroup).resources("serviceaccounts/token").done(),
			// podlab: the deployment and replicaset controllers' rights.
			rule(verbsReadWrite...).groups(appsGroup).resources(
				"deployments", "deployments/status", "deployments/scale",
				"replicasets", "replicasets/status", "replicasets/scale").done(),
			rule("get", "list", "watch", "create", "update", "patch", "delete").groups(legacyGroup).resources("pods").done(),
			rule(verbsRead...).groups(legacyGroup).resources("namespaces").done(),
			// podlab: the rights of the node lifecycle controller and the
			// node IPAM controller (kube's system:controller:node-controller):
			// mark a silent node's conditions Unknown, taint it, mark its
			// pods not ready, write a node's spec.podCIDR. Not
			// "delete" on nodes: kube's controller deletes the Node of a
			// machine its cloud provider says is gone; podlab has no cloud.
			rule("get", "list", "update", "patch").groups(legacyGroup).resources("nodes").done(),
			rule("patch", "update").groups(legacyGroup).resources("nodes/status").done(),
			rule("patch", "update").groups(legacyGroup).resources("pods/status").done(),
		),

		// podlab's network agent (flannel's host-gw backend): it routes to
		// every other node's podCIDR through its InternalIP, so it reads
		// every Node, which a node's own credentials may not (the Node
		// authorizer lets system:node:NAME read its own Node only).
		// flannel's ClusterRole "flannel" has these rules, plus get pods
		// and patch nodes/status, which podlab's agent does not need.
		{
			TypeMeta:   clusterRoleType,
			ObjectMeta: podlabMeta("network-agent", ""),
			Rules:      []rbacv1.PolicyRule{rule(verbsRead...).groups(legacyGroup).resources("nodes").done()},
		},
	}
}

// NodeRules are the rules of the ClusterRole system:node: what a kubelet
// needs to register its Node, report its status and run the pods bound to
// it (Kubernetes' bootstrappolicy.NodeRules). kube-apiserver gives them to
// the Node authorizer, which allows them to every node after narrowing the
// ones about nodes, pods, secrets, config maps, claims and leases to the
// node's own objects; the NodeRestriction admission plugin narrows the
// writes further. They are a new copy on each call.
func NodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule("create").groups(authenticationGroup).resources("tokenreviews").done(),
		rule("create").groups(authorizationGroup).resources("subjectaccessreviews", "localsubjectaccessreviews").done(),
		// Services, for the pods' environment variables.
		rule(verbsRead...).groups(legacyGroup).resources("services").done(),
		// Register the Node object and report its status.
		rule("create", "get", "list", "watch").groups(legacyGroup).resources("nodes").done(),
		rule("update", "patch").groups(legacyGroup).resources("nodes/status").done(),
		rule("update", "patch").groups(legacyGroup).resources("nodes").done(),
		rule("create", "update", "patch").groups(legacyGroup, eventsGroup).resources("events").done(),
		// Watch the pods bound to the node; create and delete mirror
		// pods; report pod status; evict.
		rule(verbsRead...).groups(legacyGroup).resources("pods").done(),
		rule("create", "delete").groups(legacyGroup).resources("pods").done(),
		rule("update", "patch").groups(legacyGroup).resources("pods/status").done(),
		rule("create").groups(legacyGroup).resources("pods/eviction").done(),
		// Secrets and config maps for volumes and environment variables.
		rule(verbsRead...).groups(legacyGroup).resources("secrets", "configmaps").done(),
		rule("get").groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes").done(),
		rule("get").groups(legacyGroup).resources("endpoints").done(),
		// Rotate its own client certificate.
		rule("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests").done(),
		// The node's heartbeat Lease.
		rule("get", "create", "update", "patch", "delete").groups(coordinationGroup).resources("leases").done(),
		rule("get").groups(storageGroup).resources("volumeattachments").done(),
		rule("create").groups(legacyGroup).resources("serviceaccounts/token").done(),
		rule("get", "update", "patch").groups(legacyGroup).resources("persistentvolumeclaims/status").done(),
		rule("get", "watch", "list").groups(storageGroup).resources("csidrivers").done(),
		rule("get", "create", "update", "patch", "delete").groups(storageGroup).resources("csinodes").done(),
		rule(verbsRead...).groups(nodeGroup).resources("runtimeclasses").done(),
	}
}

func subjectUser(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func subjectGroup(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func clusterRoleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
}

func clusterRoleBinding(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		TypeMeta:   clusterRoleBindingType,
		ObjectMeta: bootstrapMeta(role, nil),
		RoleRef:    clusterRoleRef(role),
		Subjects:   subjects,
	}
}

func bootstrapClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	viewer := rbacv1.ClusterRoleBinding{
		TypeMeta:   clusterRoleBindingType,
		ObjectMeta: podlabMeta("viewer-view", ""),
		RoleRef:    clusterRoleRef("view"),
		Subjects:   []rbacv1.Subject{subjectUser(userViewer)},
	}
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", subjectGroup(authn.GroupMasters)),
		clusterRoleBinding("system:discovery", subjectGroup(authn.GroupAuthenticated)),
		clusterRoleBinding("system:basic-user", subjectGroup(authn.GroupAuthenticated)),
		clusterRoleBinding("system:public-info-viewer", subjectGroup(authn.GroupAuthenticated), subjectGroup("system:unauthenticated")),
		clusterRoleBinding("system:kube-controller-manager", subjectUser(userKubeControllerManager)),
		clusterRoleBinding("system:kube-scheduler", subjectUser(userKubeScheduler)),
		// system:node was bound to the group system:nodes until
		// Kubernetes 1.7; since then the binding stays, without subjects,
		// and the Node authorizer grants the role's rules, each node only
		// for its own objects. Were the group bound, RBAC would allow node-1
		// what the Node authorizer refuses it (every pod, every Node).
		clusterRoleBinding("system:node"),
		// What kubeadm makes at `kubeadm init`: the API server's client
		// certificate for kubelets (CN kube-apiserver-kubelet-client, no
		// group) may use every kubelet's API.
		{
			TypeMeta:   clusterRoleBindingType,
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:apiserver-kubelet-client"},
			RoleRef:    clusterRoleRef("system:kubelet-api-admin"),
			Subjects:   []rbacv1.Subject{subjectUser(userAPIServerKubeletClient)},
		},
		// podlab's read-only user may read (not write, not secrets) in every
		// namespace: a ClusterRoleBinding grants a ClusterRole everywhere.
		viewer,
		// The network agent reads the Nodes (flannel's ClusterRoleBinding
		// "flannel", to its ServiceAccount).
		{
			TypeMeta:   clusterRoleBindingType,
			ObjectMeta: podlabMeta("network-agent", ""),
			RoleRef:    clusterRoleRef("network-agent"),
			Subjects:   []rbacv1.Subject{subjectUser(UserNetworkAgent)},
		},
	}
}

func bootstrapRoleBindings() []rbacv1.RoleBinding {
	return []rbacv1.RoleBinding{{
		// podlab's developer may edit in namespace default only: a
		// RoleBinding grants a ClusterRole within its own namespace.
		TypeMeta:   roleBindingType,
		ObjectMeta: podlabMeta("developer-edit", "default"),
		RoleRef:    clusterRoleRef("edit"),
		Subjects:   []rbacv1.Subject{subjectUser(userDeveloper)},
	}}
}

// Aggregate does the cluster role aggregation controller's work: for each
// ClusterRole with an aggregationRule, its rules become the rules of every
// other ClusterRole matching one of its selectors (in name order, without
// duplicates), repeated until nothing changes (admin aggregates edit, which
// aggregates view). It returns copies; roles is not modified.
func Aggregate(roles []rbacv1.ClusterRole) ([]rbacv1.ClusterRole, error) {
	out := make([]rbacv1.ClusterRole, len(roles))
	for i := range roles {
		roles[i].DeepCopyInto(&out[i])
	}
	byName := make([]int, len(out))
	for i := range byName {
		byName[i] = i
	}
	slices.SortStableFunc(byName, func(a, b int) int { return strings.Compare(out[a].Name, out[b].Name) })

	selectors := make([][]labels.Selector, len(out))
	for i := range out {
		if out[i].AggregationRule == nil {
			continue
		}
		for _, ls := range out[i].AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&ls)
			if err != nil {
				return nil, fmt.Errorf("aggregating ClusterRole %q: %w", out[i].Name, err)
			}
			selectors[i] = append(selectors[i], s)
		}
	}

	for range len(out) + 1 {
		changed := false
		for i := range out {
			if out[i].AggregationRule == nil {
				continue
			}
			rules := []rbacv1.PolicyRule{}
			for _, s := range selectors[i] {
				for _, j := range byName {
					if j == i || !s.Matches(labels.Set(out[j].Labels)) {
						continue
					}
					for _, r := range out[j].Rules {
						if !slices.ContainsFunc(rules, func(x rbacv1.PolicyRule) bool { return rulesEqual(x, r) }) {
							rules = append(rules, *r.DeepCopy())
						}
					}
				}
			}
			if !slices.EqualFunc(rules, out[i].Rules, rulesEqual) {
				out[i].Rules = rules
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	return out, nil
}

// rulesEqual compares two rules field by field, nil and empty lists alike.
func rulesEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) &&
		slices.Equal(a.Resources, b.Resources) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}
