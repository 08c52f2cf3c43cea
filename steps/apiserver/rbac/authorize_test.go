package rbac

import (
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// podlab's users as `podlab init` makes them; authentication adds
// system:authenticated to every one.
var (
	admin     = authn.User{Name: "admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}
	developer = authn.User{Name: "developer", Groups: []string{authn.GroupAuthenticated}}
	viewer    = authn.User{Name: "viewer", Groups: []string{authn.GroupAuthenticated}}
	scheduler = authn.User{Name: "system:kube-scheduler", Groups: []string{authn.GroupAuthenticated}}
	ctrlmgr   = authn.User{Name: "system:kube-controller-manager", Groups: []string{authn.GroupAuthenticated}}
	node1     = authn.User{Name: "system:node:node-1", Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
	stranger  = authn.User{Name: "stranger"} // no groups: not even system:authenticated
)

func TestAuthorize_Bootstrap(t *testing.T) {
	p := BootstrapPolicy()
	const apps = "apps"
	tests := []struct {
		name    string
		a       Attributes
		allowed bool
		reason  string // exact when set and allowed
	}{
		// admin, in system:masters, bound to cluster-admin.
		{"admin deletes a node", Attributes{User: admin, Verb: "delete", Resource: "nodes", Name: "node-1"}, true,
			`RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters"`},
		{"admin creates clusterroles", Attributes{User: admin, Verb: "create", APIGroup: rbacv1.GroupName, Resource: "clusterroles"}, true, ""},
		{"admin reads secrets in kube-system", Attributes{User: admin, Verb: "get", Resource: "secrets", Namespace: "kube-system", Name: "x"}, true, ""},
		{"admin invents a verb", Attributes{User: admin, Verb: "frobnicate", APIGroup: "example.com", Resource: "widgets"}, true, ""},
		{"admin gets /metrics", Attributes{User: admin, Verb: "get", Path: "/metrics"}, true, ""},

		// developer: edit in namespace default, through a RoleBinding.
		{"developer creates pods in default", Attributes{User: developer, Verb: "create", Resource: "pods", Namespace: "default"}, true,
			`RBAC: allowed by RoleBinding "developer-edit/default" of ClusterRole "edit" to User "developer"`},
		{"developer creates deployments in default", Attributes{User: developer, Verb: "create", APIGroup: apps, Resource: "deployments", Namespace: "default"}, true, ""},
		{"developer scales a deployment", Attributes{User: developer, Verb: "update", APIGroup: apps, Resource: "deployments", Subresource: "scale", Namespace: "default", Name: "web"}, true, ""},
		{"developer reads pod logs", Attributes{User: developer, Verb: "get", Resource: "pods", Subresource: "log", Namespace: "default", Name: "web"}, true, ""},
		{"developer reads secrets in default", Attributes{User: developer, Verb: "get", Resource: "secrets", Namespace: "default", Name: "s"}, true, ""},
		{"developer creates pods in kube-system", Attributes{User: developer, Verb: "create", Resource: "pods", Namespace: "kube-system"}, false, ""},
		{"developer lists pods in all namespaces", Attributes{User: developer, Verb: "list", Resource: "pods"}, false, ""},
		{"developer deletes a node", Attributes{User: developer, Verb: "delete", Resource: "nodes", Name: "node-1"}, false, ""},
		{"developer creates clusterroles", Attributes{User: developer, Verb: "create", APIGroup: rbacv1.GroupName, Resource: "clusterroles"}, false, ""},
		{"developer creates roles in default", Attributes{User: developer, Verb: "create", APIGroup: rbacv1.GroupName, Resource: "roles", Namespace: "default"}, false, ""},
		{"developer updates pods/status", Attributes{User: developer, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "web"}, false, ""},
		{"developer edits resourcequotas", Attributes{User: developer, Verb: "update", Resource: "resourcequotas", Namespace: "default", Name: "q"}, false, ""},
		{"developer gets /healthz", Attributes{User: developer, Verb: "get", Path: "/healthz"}, true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"developer gets /apis/apps/v1", Attributes{User: developer, Verb: "get", Path: "/apis/apps/v1"}, true, ""},
		{"developer posts /healthz", Attributes{User: developer, Verb: "post", Path: "/healthz"}, false, ""},
		{"developer asks can-i", Attributes{User: developer, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, true, ""},

		// viewer: view everywhere, through a ClusterRoleBinding.
		{"viewer gets pods", Attributes{User: viewer, Verb: "get", Resource: "pods", Namespace: "default", Name: "web"}, true,
			`RBAC: allowed by ClusterRoleBinding "viewer-view" of ClusterRole "view" to User "viewer"`},
		{"viewer lists pods in kube-system", Attributes{User: viewer, Verb: "list", Resource: "pods", Namespace: "kube-system"}, true, ""},
		{"viewer watches pods in all namespaces", Attributes{User: viewer, Verb: "watch", Resource: "pods"}, true, ""},
		{"viewer reads pod logs", Attributes{User: viewer, Verb: "get", Resource: "pods", Subresource: "log", Namespace: "default", Name: "web"}, true, ""},
		{"viewer reads pods/status", Attributes{User: viewer, Verb: "get", Resource: "pods", Subresource: "status", Namespace: "default", Name: "web"}, true, ""},
		{"viewer lists events", Attributes{User: viewer, Verb: "list", Resource: "events", Namespace: "default"}, true, ""},
		{"viewer lists limitranges", Attributes{User: viewer, Verb: "list", Resource: "limitranges", Namespace: "default"}, true, ""},
		{"viewer lists namespaces", Attributes{User: viewer, Verb: "list", Resource: "namespaces"}, true, ""},
		{"viewer gets replicasets", Attributes{User: viewer, Verb: "get", APIGroup: apps, Resource: "replicasets", Namespace: "default", Name: "web-1"}, true, ""},
		{"viewer creates pods", Attributes{User: viewer, Verb: "create", Resource: "pods", Namespace: "default"}, false, ""},
		{"viewer deletes pods", Attributes{User: viewer, Verb: "delete", Resource: "pods", Namespace: "default", Name: "web"}, false, ""},
		{"viewer execs into pods", Attributes{User: viewer, Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "default", Name: "web"}, false, ""},
		{"viewer reads secrets", Attributes{User: viewer, Verb: "get", Resource: "secrets", Namespace: "default", Name: "s"}, false, ""},
		{"viewer lists nodes", Attributes{User: viewer, Verb: "list", Resource: "nodes"}, false, ""},
		{"viewer lists deployments in the wrong group", Attributes{User: viewer, Verb: "list", Resource: "deployments", Namespace: "default"}, false, ""},

		// The scheduler binds pods; it does not make them.
		{"scheduler creates pods/binding", Attributes{User: scheduler, Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "web"}, true,
			`RBAC: allowed by ClusterRoleBinding "system:kube-scheduler" of ClusterRole "system:kube-scheduler" to User "system:kube-scheduler"`},
		{"scheduler watches pods", Attributes{User: scheduler, Verb: "watch", Resource: "pods"}, true, ""},
		{"scheduler lists nodes", Attributes{User: scheduler, Verb: "list", Resource: "nodes"}, true, ""},
		{"scheduler patches pods/status", Attributes{User: scheduler, Verb: "patch", Resource: "pods", Subresource: "status", Namespace: "default", Name: "web"}, true, ""},
		{"scheduler records an event", Attributes{User: scheduler, Verb: "create", Resource: "events", Namespace: "default"}, true, ""},
		{"scheduler creates pods", Attributes{User: scheduler, Verb: "create", Resource: "pods", Namespace: "default"}, false, ""},
		{"scheduler updates pods", Attributes{User: scheduler, Verb: "update", Resource: "pods", Namespace: "default", Name: "web"}, false, ""},
		{"scheduler updates its lease", Attributes{User: scheduler, Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "kube-scheduler"}, true, ""},
		{"scheduler updates another lease", Attributes{User: scheduler, Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "kube-controller-manager"}, false, ""},

		// The controller manager runs the deployment and replicaset controllers.
		{"controller-manager creates pods", Attributes{User: ctrlmgr, Verb: "create", Resource: "pods", Namespace: "default"}, true, ""},
		{"controller-manager deletes pods", Attributes{User: ctrlmgr, Verb: "delete", Resource: "pods", Namespace: "default", Name: "web-1"}, true, ""},
		{"controller-manager creates replicasets", Attributes{User: ctrlmgr, Verb: "create", APIGroup: apps, Resource: "replicasets", Namespace: "default"}, true, ""},
		{"controller-manager updates replicasets/status", Attributes{User: ctrlmgr, Verb: "update", APIGroup: apps, Resource: "replicasets", Subresource: "status", Namespace: "default", Name: "web-1"}, true, ""},
		{"controller-manager updates deployments/status", Attributes{User: ctrlmgr, Verb: "update", APIGroup: apps, Resource: "deployments", Subresource: "status", Namespace: "default", Name: "web"}, true, ""},
		{"controller-manager watches namespaces", Attributes{User: ctrlmgr, Verb: "watch", Resource: "namespaces"}, true, ""},
		{"controller-manager records an event", Attributes{User: ctrlmgr, Verb: "patch", Resource: "events", Namespace: "default", Name: "e"}, true, ""},
		{"controller-manager deletes nodes", Attributes{User: ctrlmgr, Verb: "delete", Resource: "nodes", Name: "node-1"}, false, ""},
		{"controller-manager binds pods", Attributes{User: ctrlmgr, Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "web"}, false, ""},

		// A kubelet: RBAC alone grants it nothing but what every
		// authenticated user may do. The binding of system:node has no
		// subjects; the Node authorizer, asked first, grants its rules to
		// each node for its own objects (package nodeauthorizer).
		{"node updates pods/status", Attributes{User: node1, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "web"}, false, ""},
		{"node registers itself", Attributes{User: node1, Verb: "create", Resource: "nodes"}, false, ""},
		{"node patches nodes/status", Attributes{User: node1, Verb: "patch", Resource: "nodes", Subresource: "status", Name: "node-1"}, false, ""},
		{"node watches pods", Attributes{User: node1, Verb: "watch", Resource: "pods"}, false, ""},
		{"node deletes a pod", Attributes{User: node1, Verb: "delete", Resource: "pods", Namespace: "default", Name: "web"}, false, ""},
		{"node updates a pod spec", Attributes{User: node1, Verb: "update", Resource: "pods", Namespace: "default", Name: "web"}, false, ""},
		{"node deletes a node", Attributes{User: node1, Verb: "delete", Resource: "nodes", Name: "node-1"}, false, ""},
		{"node binds pods", Attributes{User: node1, Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "web"}, false, ""},
		{"node gets /healthz", Attributes{User: node1, Verb: "get", Path: "/healthz"}, true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},

		// Deny by default.
		{"stranger gets /healthz", Attributes{User: stranger, Verb: "get", Path: "/healthz"}, false, ""},
		{"stranger lists pods", Attributes{User: stranger, Verb: "list", Resource: "pods", Namespace: "default"}, false, ""},
		{"empty request", Attributes{User: developer}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Authorize(p, tt.a)
			if d.Allowed != tt.allowed {
				t.Fatalf("Authorize = %v, want %v (reason: %s)", d.Allowed, tt.allowed, d.Reason)
			}
			if tt.allowed && tt.reason != "" && d.Reason != tt.reason {
				t.Errorf("reason\n got %s\nwant %s", d.Reason, tt.reason)
			}
			if !tt.allowed && !strings.HasPrefix(d.Reason, "no RBAC policy matched: ") {
				t.Errorf("denied reason %q does not start with %q", d.Reason, "no RBAC policy matched: ")
			}
		})
	}
}

func TestAuthorize_DeniedReason(t *testing.T) {
	p := BootstrapPolicy()
	tests := []struct {
		name string
		p    *Policy
		a    Attributes
		want string
	}{
		{
			name: "viewer creates a pod",
			p:    p,
			a:    Attributes{User: viewer, Verb: "create", Resource: "pods", Namespace: "default"},
			want: `no RBAC policy matched: no rule allows user "viewer" (groups=["system:authenticated"]) to "create" resource "pods" in namespace "default"; ` +
				`looked at ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated", ` +
				`ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated", ` +
				`ClusterRoleBinding "system:public-info-viewer" of ClusterRole "system:public-info-viewer" to Group "system:authenticated", ` +
				`ClusterRoleBinding "viewer-view" of ClusterRole "view" to User "viewer"`,
		},
		{
			name: "stranger deletes a node by name",
			p:    p,
			a:    Attributes{User: stranger, Verb: "delete", Resource: "nodes", Name: "node-1"},
			want: `no RBAC policy matched: no rule allows user "stranger" (groups=[]) to "delete" resource "nodes" named "node-1" cluster-wide; ` +
				`no ClusterRoleBinding names the user or one of its groups`,
		},
		{
			name: "stranger in a namespace, a subresource of a group",
			p:    p,
			a:    Attributes{User: stranger, Verb: "update", APIGroup: "apps", Resource: "deployments", Subresource: "scale", Namespace: "default", Name: "web"},
			want: `no RBAC policy matched: no rule allows user "stranger" (groups=[]) to "update" resource "deployments.apps/scale" named "web" in namespace "default"; ` +
				`no ClusterRoleBinding, and no RoleBinding in namespace "default", names the user or one of its groups`,
		},
		{
			name: "stranger posts a path",
			p:    p,
			a:    Attributes{User: stranger, Verb: "post", Path: "/logs"},
			want: `no RBAC policy matched: no rule allows user "stranger" (groups=[]) to "post" nonResourceURL "/logs"; ` +
				`no ClusterRoleBinding names the user or one of its groups`,
		},
		{
			name: "bindings to missing roles",
			p: &Policy{
				ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("ghost-binding", clusterRoleRef("ghost"), subjectUser("alice"))},
				RoleBindings:        []rbacv1.RoleBinding{rb("dev", "default", roleRef("missing"), subjectUser("alice"))},
			},
			a: Attributes{User: authn.User{Name: "alice"}, Verb: "get", Resource: "pods", Namespace: "default", Name: "web"},
			want: `no RBAC policy matched: no rule allows user "alice" (groups=[]) to "get" resource "pods" named "web" in namespace "default"; ` +
				`looked at ClusterRoleBinding "ghost-binding" of ClusterRole "ghost" to User "alice", RoleBinding "dev/default" of Role "missing" to User "alice"; ` +
				`RBAC: [clusterrole.rbac.authorization.k8s.io "ghost" not found, role.rbac.authorization.k8s.io "missing" not found]`,
		},
		{
			name: "no policy at all",
			p:    nil,
			a:    Attributes{User: admin, Verb: "get", Resource: "pods"},
			want: "no RBAC policy loaded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Authorize(tt.p, tt.a)
			if d.Allowed {
				t.Fatalf("allowed: %s", d.Reason)
			}
			if d.Reason != tt.want {
				t.Errorf("reason\n got %s\nwant %s", d.Reason, tt.want)
			}
		})
	}
}

func crb(name string, ref rbacv1.RoleRef, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}
}

func rb(name, namespace string, ref rbacv1.RoleRef, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, RoleRef: ref, Subjects: subjects}
}

func roleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
}

func cr(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(name, namespace string, rules ...rbacv1.PolicyRule) rbacv1.Role {
	return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Rules: rules}
}

// TestAuthorize_Matching exercises the matching rules on small policies.
func TestAuthorize_Matching(t *testing.T) {
	alice := authn.User{Name: "alice", Groups: []string{"team-a", authn.GroupAuthenticated}}
	ci := authn.User{Name: "system:serviceaccount:builds:ci"}
	grant := func(rules ...rbacv1.PolicyRule) *Policy {
		return &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", rules...)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), subjectUser("alice"))},
		}
	}
	podsGet := rule("get").groups("").resources("pods").done()

	tests := []struct {
		name    string
		p       *Policy
		a       Attributes
		allowed bool
		reason  string
	}{
		// resourceNames
		{"named rule, its name", grant(rule("get", "update").groups("").resources("configmaps").names("app-config").done()),
			Attributes{User: alice, Verb: "get", Resource: "configmaps", Namespace: "default", Name: "app-config"}, true, ""},
		{"named rule, another name", grant(rule("get", "update").groups("").resources("configmaps").names("app-config").done()),
			Attributes{User: alice, Verb: "get", Resource: "configmaps", Namespace: "default", Name: "other"}, false, ""},
		{"named rule, list names nothing", grant(rule("list").groups("").resources("configmaps").names("app-config").done()),
			Attributes{User: alice, Verb: "list", Resource: "configmaps", Namespace: "default"}, false, ""},
		{"named rule, create names nothing", grant(rule("create").groups("").resources("configmaps").names("app-config").done()),
			Attributes{User: alice, Verb: "create", Resource: "configmaps", Namespace: "default"}, false, ""},
		{"unnamed rule, any name", grant(podsGet),
			Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "x", Name: "anything"}, true, ""},

		// wildcards
		{"verb *", grant(rule("*").groups("").resources("pods").done()),
			Attributes{User: alice, Verb: "deletecollection", Resource: "pods", Namespace: "default"}, true, ""},
		{"group *", grant(rule("get").groups("*").resources("deployments").done()),
			Attributes{User: alice, Verb: "get", APIGroup: "apps", Resource: "deployments", Namespace: "default", Name: "d"}, true, ""},
		{"resource * covers subresources", grant(rule("get").groups("").resources("*").done()),
			Attributes{User: alice, Verb: "get", Resource: "pods", Subresource: "log", Namespace: "default", Name: "p"}, true, ""},
		{"*/status covers pods/status", grant(rule("update").groups("", "apps").resources("*/status").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p"}, true, ""},
		{"*/status covers deployments/status", grant(rule("update").groups("", "apps").resources("*/status").done()),
			Attributes{User: alice, Verb: "update", APIGroup: "apps", Resource: "deployments", Subresource: "status", Namespace: "default", Name: "d"}, true, ""},
		{"*/status does not cover pods", grant(rule("update").groups("").resources("*/status").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Namespace: "default", Name: "p"}, false, ""},
		{"*/status does not cover pods/log", grant(rule("get").groups("").resources("*/status").done()),
			Attributes{User: alice, Verb: "get", Resource: "pods", Subresource: "log", Namespace: "default", Name: "p"}, false, ""},
		{"no wildcard for the group: core is not apps", grant(podsGet),
			Attributes{User: alice, Verb: "get", APIGroup: "apps", Resource: "pods", Namespace: "default", Name: "p"}, false, ""},

		// subresource vs resource
		{"pods does not cover pods/status", grant(rule("update").groups("").resources("pods").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p"}, false, ""},
		{"pods/status does not cover pods", grant(rule("update").groups("").resources("pods/status").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Namespace: "default", Name: "p"}, false, ""},
		{"pods/status covers pods/status", grant(rule("update").groups("").resources("pods/status").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p"}, true, ""},
		{"pods/status does not cover pods/statuses", grant(rule("update").groups("").resources("pods/status").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Subresource: "statuses", Namespace: "default", Name: "p"}, false, ""},
		{"pod/status (singular) does not cover pods/status", grant(rule("update").groups("").resources("pod/status").done()),
			Attributes{User: alice, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p"}, false, ""},

		// non-resource URLs
		{"url prefix", grant(rule("get").urls("/api/*").done()),
			Attributes{User: alice, Verb: "get", Path: "/api/v1"}, true, ""},
		{"url prefix is not a substring", grant(rule("get").urls("/api/*").done()),
			Attributes{User: alice, Verb: "get", Path: "/apis/apps"}, false, ""},
		{"resource rule is not a url rule", grant(rule("get").groups("*").resources("*").done()),
			Attributes{User: alice, Verb: "get", Path: "/healthz"}, false, ""},

		// subjects
		{"group subject", &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), subjectGroup("team-a"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "default", Name: "p"}, true,
			`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to Group "team-a"`},
		{"first matching subject is named", &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), subjectUser("bob"), subjectGroup(authn.GroupAuthenticated), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "default", Name: "p"}, true,
			`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to Group "system:authenticated"`},
		{"service account with a namespace", &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "builds"})},
		}, Attributes{User: ci, Verb: "get", Resource: "pods", Namespace: "default", Name: "p"}, true,
			`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to ServiceAccount "ci/builds"`},
		{"service account defaults to the RoleBinding's namespace", &Policy{
			ClusterRoles: []rbacv1.ClusterRole{cr("r", podsGet)},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "builds", clusterRoleRef("r"), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"})},
		}, Attributes{User: ci, Verb: "get", Resource: "pods", Namespace: "builds", Name: "p"}, true,
			`RBAC: allowed by RoleBinding "b/builds" of ClusterRole "r" to ServiceAccount "ci/builds"`},
		{"service account of another namespace", &Policy{
			ClusterRoles: []rbacv1.ClusterRole{cr("r", podsGet)},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "builds", clusterRoleRef("r"), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "other"})},
		}, Attributes{User: ci, Verb: "get", Resource: "pods", Namespace: "builds", Name: "p"}, false, ""},
		{"service account without a namespace in a ClusterRoleBinding", &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"})},
		}, Attributes{User: ci, Verb: "get", Resource: "pods", Namespace: "builds", Name: "p"}, false, ""},
		{"a user named like a service account prefix", &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "c", Namespace: "builds"})},
		}, Attributes{User: ci, Verb: "get", Resource: "pods", Namespace: "builds", Name: "p"}, false, ""},
		{"unknown subject kind", &Policy{
			ClusterRoles:        []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("r"), rbacv1.Subject{Kind: "Robot", Name: "alice"})},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "default", Name: "p"}, false, ""},

		// RoleBindings and roleRefs
		{"RoleBinding to a ClusterRole grants in its namespace", &Policy{
			ClusterRoles: []rbacv1.ClusterRole{cr("r", podsGet)},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "team-a", clusterRoleRef("r"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "team-a", Name: "p"}, true, ""},
		{"RoleBinding to a ClusterRole grants nothing in another namespace", &Policy{
			ClusterRoles: []rbacv1.ClusterRole{cr("r", podsGet)},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "team-a", clusterRoleRef("r"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "team-b", Name: "p"}, false, ""},
		{"RoleBinding to a ClusterRole grants nothing cluster-wide", &Policy{
			ClusterRoles: []rbacv1.ClusterRole{cr("r", rule("get").groups("").resources("pods", "nodes").done())},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "team-a", clusterRoleRef("r"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "nodes", Name: "node-1"}, false, ""},
		{"RoleBinding to a Role in its namespace", &Policy{
			Roles:        []rbacv1.Role{role("r", "team-a", podsGet)},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "team-a", roleRef("r"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "team-a", Name: "p"}, true,
			`RBAC: allowed by RoleBinding "b/team-a" of Role "r" to User "alice"`},
		{"RoleBinding does not reach a Role of another namespace", &Policy{
			Roles:        []rbacv1.Role{role("r", "team-b", podsGet)},
			RoleBindings: []rbacv1.RoleBinding{rb("b", "team-a", roleRef("r"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "team-a", Name: "p"}, false, ""},
		{"binding to a missing ClusterRole grants nothing", &Policy{
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("ghost"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "default", Name: "p"}, false, ""},
		{"binding to a missing Role grants nothing", &Policy{
			RoleBindings: []rbacv1.RoleBinding{rb("b", "team-a", roleRef("ghost"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "team-a", Name: "p"}, false, ""},
		{"ClusterRoleBinding to a Role grants nothing", &Policy{
			Roles:               []rbacv1.Role{role("r", "", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", roleRef("r"), subjectUser("alice"))},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Name: "p"}, false, ""},
		{"a missing role does not hide the next binding", &Policy{
			ClusterRoles: []rbacv1.ClusterRole{cr("r", podsGet)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{
				crb("broken", clusterRoleRef("ghost"), subjectUser("alice")),
				crb("ok", clusterRoleRef("r"), subjectUser("alice")),
			},
		}, Attributes{User: alice, Verb: "get", Resource: "pods", Namespace: "default", Name: "p"}, true,
			`RBAC: allowed by ClusterRoleBinding "ok" of ClusterRole "r" to User "alice"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Authorize(tt.p, tt.a)
			if d.Allowed != tt.allowed {
				t.Fatalf("Authorize = %v, want %v (reason: %s)", d.Allowed, tt.allowed, d.Reason)
			}
			if tt.reason != "" && d.Reason != tt.reason {
				t.Errorf("reason\n got %s\nwant %s", d.Reason, tt.reason)
			}
		})
	}
}

func TestForbiddenMessage(t *testing.T) {
	tests := []struct {
		name string
		a    Attributes
		want string
	}{
		{"namespaced", Attributes{User: viewer, Verb: "create", Resource: "pods", Namespace: "default"},
			`User "viewer" cannot create resource "pods" in API group "" in the namespace "default"`},
		{"cluster scope", Attributes{User: developer, Verb: "delete", Resource: "nodes", Name: "node-1"},
			`User "developer" cannot delete resource "nodes" in API group "" at the cluster scope`},
		{"subresource", Attributes{User: developer, Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "web"},
			`User "developer" cannot create resource "pods/binding" in API group "" in the namespace "default"`},
		{"named group", Attributes{User: developer, Verb: "create", APIGroup: rbacv1.GroupName, Resource: "clusterroles"},
			`User "developer" cannot create resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`},
		{"non-resource path", Attributes{User: stranger, Verb: "get", Path: "/metrics"},
			`User "stranger" cannot get path "/metrics"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ForbiddenMessage(tt.a); got != tt.want {
				t.Errorf("ForbiddenMessage\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestRulesFor(t *testing.T) {
	p := BootstrapPolicy()
	tests := []struct {
		name      string
		u         authn.User
		namespace string
		allows    []Attributes // each must be allowed by some returned rule
		denies    []Attributes // none may be
	}{
		{
			name: "developer in default: edit plus what every user has", u: developer, namespace: "default",
			allows: []Attributes{
				{Verb: "create", Resource: "pods"},
				{Verb: "get", Path: "/healthz"},
				{Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
			},
			denies: []Attributes{{Verb: "create", APIGroup: rbacv1.GroupName, Resource: "roles"}},
		},
		{
			name: "developer in kube-system: no edit", u: developer, namespace: "kube-system",
			allows: []Attributes{{Verb: "get", Path: "/version"}},
			denies: []Attributes{{Verb: "create", Resource: "pods"}, {Verb: "get", Resource: "pods"}},
		},
		{
			name: "developer cluster-wide: RoleBindings are not looked at", u: developer, namespace: "",
			denies: []Attributes{{Verb: "create", Resource: "pods"}},
		},
		{
			name: "stranger: nothing", u: stranger, namespace: "default",
			denies: []Attributes{{Verb: "get", Path: "/healthz"}, {Verb: "get", Resource: "pods"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := RulesFor(p, tt.u, tt.namespace)
			anyAllows := func(a Attributes) bool {
				for _, r := range rules {
					if RuleAllows(r, a) {
						return true
					}
				}
				return false
			}
			for _, a := range tt.allows {
				if !anyAllows(a) {
					t.Errorf("no rule allows %+v", a)
				}
			}
			for _, a := range tt.denies {
				if anyAllows(a) {
					t.Errorf("a rule allows %+v", a)
				}
			}
		})
	}
}

func TestRulesFor_ReturnsCopies(t *testing.T) {
	p := BootstrapPolicy()
	rules := RulesFor(p, viewer, "default")
	if len(rules) == 0 {
		t.Fatal("viewer has no rules")
	}
	for i := range rules {
		for j := range rules[i].Verbs {
			rules[i].Verbs[j] = "delete"
		}
	}
	if Authorize(p, Attributes{User: viewer, Verb: "delete", Resource: "pods", Namespace: "default", Name: "p"}).Allowed {
		t.Fatal("changing RulesFor's result changed the policy")
	}
}

func TestRoleRules(t *testing.T) {
	p := &Policy{
		Roles:        []rbacv1.Role{role("r", "team-a", rule("get").groups("").resources("pods").done())},
		ClusterRoles: []rbacv1.ClusterRole{cr("c", rule("list").groups("").resources("nodes").done())},
	}
	tests := []struct {
		name      string
		namespace string
		ref       rbacv1.RoleRef
		wantVerb  string
	}{
		{"Role in the binding's namespace", "team-a", roleRef("r"), "get"},
		{"ClusterRole from a RoleBinding", "team-a", clusterRoleRef("c"), "list"},
		{"ClusterRole from a ClusterRoleBinding", "", clusterRoleRef("c"), "list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := RoleRules(p, tt.namespace, tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			if len(rules) != 1 || rules[0].Verbs[0] != tt.wantVerb {
				t.Errorf("rules = %v, want one %q rule", rules, tt.wantVerb)
			}
		})
	}
}

// TestRoleRules_Bad is the table of role references that must fail, and how.
func TestRoleRules_Bad(t *testing.T) {
	p := &Policy{
		Roles:        []rbacv1.Role{role("r", "team-a", rule("get").groups("").resources("pods").done())},
		ClusterRoles: []rbacv1.ClusterRole{cr("c", rule("list").groups("").resources("nodes").done())},
	}
	tests := []struct {
		name      string
		namespace string
		ref       rbacv1.RoleRef
		is        error
		msg       string
	}{
		{"missing ClusterRole", "", clusterRoleRef("ghost"), ErrRoleNotFound, `clusterrole.rbac.authorization.k8s.io "ghost" not found`},
		{"missing Role", "team-a", roleRef("ghost"), ErrRoleNotFound, `role.rbac.authorization.k8s.io "ghost" not found`},
		{"Role of another namespace", "team-b", roleRef("r"), ErrRoleNotFound, `role.rbac.authorization.k8s.io "r" not found`},
		{"ClusterRoleBinding to a Role", "", roleRef("r"), ErrUnsupportedRoleRef, `a ClusterRoleBinding may only reference a ClusterRole, not Role "r"`},
		{"unknown kind", "team-a", rbacv1.RoleRef{Kind: "Group", Name: "r"}, ErrUnsupportedRoleRef, `kind "Group" (want Role or ClusterRole)`},
		{"empty kind", "team-a", rbacv1.RoleRef{Name: "r"}, ErrUnsupportedRoleRef, `kind "" (want Role or ClusterRole)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := RoleRules(p, tt.namespace, tt.ref)
			if err == nil {
				t.Fatalf("RoleRules = %v, want an error", rules)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

// BenchmarkAuthorize runs Authorize on the bootstrap policy: it runs on
// every API request.
func BenchmarkAuthorize(b *testing.B) {
	p := BootstrapPolicy()
	cases := []struct {
		name string
		a    Attributes
	}{
		{"admin/first-binding", Attributes{User: admin, Verb: "delete", Resource: "nodes", Name: "node-1"}},
		{"developer/rolebinding", Attributes{User: developer, Verb: "create", Resource: "pods", Namespace: "default"}},
		{"viewer/last-rule", Attributes{User: viewer, Verb: "get", APIGroup: "networking.k8s.io", Resource: "ingresses", Subresource: "status", Namespace: "default", Name: "i"}},
		{"node/status", Attributes{User: node1, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "web"}},
		{"viewer/denied", Attributes{User: viewer, Verb: "create", Resource: "pods", Namespace: "default"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Authorize(p, c.a)
			}
		})
	}
}
