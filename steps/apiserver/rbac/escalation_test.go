package rbac

import (
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

// clusterRoleRules returns the rules of a bootstrap ClusterRole.
func clusterRoleRules(t *testing.T, p *Policy, name string) []rbacv1.PolicyRule {
	t.Helper()
	rules, err := RoleRules(p, "", clusterRoleRef(name))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestConfirmNoEscalation(t *testing.T) {
	p := BootstrapPolicy()
	tests := []struct {
		name      string
		u         authn.User
		namespace string
		rules     []rbacv1.PolicyRule
		want      string // "" for allowed, else the exact error text
	}{
		{"developer grants what edit grants, in default", developer, "default", clusterRoleRules(t, p, "edit"), ""},
		{"developer grants what view grants, in default", developer, "default", clusterRoleRules(t, p, "view"), ""},
		{"developer grants pods read from two of its rules", developer, "default",
			[]rbacv1.PolicyRule{rule("get", "list", "watch", "create", "delete").groups("").resources("pods").done()}, ""},
		{"developer grants nodes delete", developer, "default",
			[]rbacv1.PolicyRule{rule("delete").groups("").resources("nodes").done()},
			"user \"developer\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
				`{APIGroups:[""], Resources:["nodes"], Verbs:["delete"]}`},
		{"developer grants edit in kube-system", developer, "kube-system",
			[]rbacv1.PolicyRule{rule("get", "create").groups("").resources("pods", "secrets").done()},
			"user \"developer\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
				`{APIGroups:[""], Resources:["pods"], Verbs:["get" "create"]}` + "\n" +
				`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "create"]}`},
		{"developer grants a * verb it holds only one by one", developer, "default",
			[]rbacv1.PolicyRule{rule("*").groups("").resources("pods").done()},
			"user \"developer\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
				`{APIGroups:[""], Resources:["pods"], Verbs:["*"]}`},
		{"developer grants pods/status update", developer, "default",
			[]rbacv1.PolicyRule{rule("update").groups("").resources("pods/status").done()},
			"user \"developer\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
				`{APIGroups:[""], Resources:["pods/status"], Verbs:["update"]}`},
		{"developer grants cluster-admin", developer, "default", clusterRoleRules(t, p, "cluster-admin"),
			"user \"developer\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
				`{APIGroups:["*"], Resources:["*"], Verbs:["*"]}` + "\n" +
				`{NonResourceURLs:["*"], Verbs:["*"]}`},
		{"developer grants a url it holds", developer, "default",
			[]rbacv1.PolicyRule{rule("get").urls("/healthz", "/api/v1").done()}, ""},
		{"viewer grants view in default", viewer, "default", clusterRoleRules(t, p, "view"), ""},
		{"viewer grants view cluster-wide", viewer, "", clusterRoleRules(t, p, "view"), ""},
		{"viewer grants secrets read", viewer, "default",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").names("db").done()},
			"user \"viewer\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
				`{APIGroups:[""], Resources:["secrets"], ResourceNames:["db"], Verbs:["get"]}`},
		{"admin grants cluster-admin", admin, "", clusterRoleRules(t, p, "cluster-admin"), ""},
		{"admin grants anything", admin, "default",
			[]rbacv1.PolicyRule{rule("*").groups("*").resources("*").done(), rule("delete").groups("").resources("nodes").done()}, ""},
		{"stranger grants nothing: allowed", stranger, "default", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ConfirmNoEscalation(p, tt.u, tt.namespace, tt.rules)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("allowed, want refused")
			}
			if !errors.Is(err, ErrEscalation) {
				t.Errorf("error %v is not ErrEscalation", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestConfirmNoEscalation_ResolutionErrors(t *testing.T) {
	alice := authn.User{Name: "alice"}
	p := &Policy{ClusterRoleBindings: []rbacv1.ClusterRoleBinding{crb("b", clusterRoleRef("ghost"), subjectUser("alice"))}}
	err := ConfirmNoEscalation(p, alice, "", []rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()})
	var esc *EscalationError
	if !errors.As(err, &esc) {
		t.Fatalf("error %v is not an *EscalationError", err)
	}
	if len(esc.ResolutionErrors) != 1 || !errors.Is(esc.ResolutionErrors[0], ErrRoleNotFound) {
		t.Errorf("ResolutionErrors = %v, want the missing role", esc.ResolutionErrors)
	}
	want := "user \"alice\" (groups=[]) is attempting to grant RBAC permissions not currently held:\n" +
		`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}; resolution errors: [clusterrole.rbac.authorization.k8s.io "ghost" not found]`
	if err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
}

// TestConfirmRoleWrite is the check the API server runs when a Role or
// ClusterRole is created or updated. (Authorization runs first: developer
// may not create Roles at all, edit grants no roles; the escalation check
// is what stops an admin of a namespace from granting more than they hold.)
func TestConfirmRoleWrite(t *testing.T) {
	p := BootstrapPolicy()
	nodesDelete := []rbacv1.PolicyRule{rule("delete").groups("").resources("nodes").done()}
	podsGet := []rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()}
	// escalator may "escalate" Roles in team-a; binder may "bind" cluster-admin in team-a.
	withExtra := func() *Policy {
		q := BootstrapPolicy()
		q.ClusterRoles = append(q.ClusterRoles,
			cr("role-escalator", rule("escalate").groups(rbacv1.GroupName).resources("roles").done()),
			cr("admin-binder", rule("bind").groups(rbacv1.GroupName).resources("clusterroles").names("cluster-admin").done()),
		)
		q.RoleBindings = append(q.RoleBindings,
			rb("esc", "team-a", clusterRoleRef("role-escalator"), subjectUser("escalator")),
			rb("bind", "team-a", clusterRoleRef("admin-binder"), subjectUser("binder")),
		)
		return q
	}()
	escalator := authn.User{Name: "escalator", Groups: []string{authn.GroupAuthenticated}}

	tests := []struct {
		name      string
		p         *Policy
		u         authn.User
		namespace string
		roleName  string
		rules     []rbacv1.PolicyRule
		refused   bool
	}{
		{"developer: a Role with pods get in default", p, developer, "default", "", podsGet, false},
		{"developer: a Role with nodes delete in default", p, developer, "default", "", nodesDelete, true},
		{"developer: a ClusterRole with pods get", p, developer, "", "", podsGet, true},
		{"admin: a ClusterRole with everything", p, admin, "", "", clusterRoleRules(t, p, "cluster-admin"), false},
		{"escalator: any Role in team-a", withExtra, escalator, "team-a", "", nodesDelete, false},
		{"escalator: a Role in team-b", withExtra, escalator, "team-b", "", nodesDelete, true},
		{"escalator: a ClusterRole", withExtra, escalator, "", "", nodesDelete, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ConfirmRoleWrite(tt.p, tt.u, tt.namespace, tt.roleName, tt.rules)
			if (err != nil) != tt.refused {
				t.Fatalf("ConfirmRoleWrite = %v, refused want %v", err, tt.refused)
			}
			if err != nil && !errors.Is(err, ErrEscalation) {
				t.Errorf("error %v is not ErrEscalation", err)
			}
		})
	}
}

// TestConfirmBindingWrite is the check the API server runs when a
// RoleBinding or ClusterRoleBinding is created or updated.
func TestConfirmBindingWrite(t *testing.T) {
	p := BootstrapPolicy()
	q := BootstrapPolicy()
	q.ClusterRoles = append(q.ClusterRoles,
		cr("admin-binder", rule("bind").groups(rbacv1.GroupName).resources("clusterroles").names("cluster-admin").done()))
	q.RoleBindings = append(q.RoleBindings, rb("bind", "team-a", clusterRoleRef("admin-binder"), subjectUser("binder")))
	binder := authn.User{Name: "binder", Groups: []string{authn.GroupAuthenticated}}

	tests := []struct {
		name      string
		p         *Policy
		u         authn.User
		namespace string
		ref       rbacv1.RoleRef
		is        error // nil: allowed
		msg       string
	}{
		{"developer binds edit in default", p, developer, "default", clusterRoleRef("edit"), nil, ""},
		{"developer binds view in default", p, developer, "default", clusterRoleRef("view"), nil, ""},
		{"developer binds cluster-admin in default", p, developer, "default", clusterRoleRef("cluster-admin"), ErrEscalation,
			`{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`},
		{"developer binds admin in default", p, developer, "default", clusterRoleRef("admin"), ErrEscalation,
			`{APIGroups:["rbac.authorization.k8s.io"], Resources:["roles"], Verbs:["get" "list" "watch" "create" "update" "patch" "delete" "deletecollection"]}`},
		{"developer binds edit in kube-system", p, developer, "kube-system", clusterRoleRef("edit"), ErrEscalation, "not currently held"},
		{"developer binds edit cluster-wide", p, developer, "", clusterRoleRef("edit"), ErrEscalation, "not currently held"},
		{"developer binds a missing role", p, developer, "default", roleRef("ghost"), ErrRoleNotFound, `role.rbac.authorization.k8s.io "ghost" not found`},
		{"developer binds a bad kind", p, developer, "default", rbacv1.RoleRef{Kind: "User", Name: "x"}, ErrUnsupportedRoleRef, `kind "User"`},
		{"admin binds cluster-admin cluster-wide", p, admin, "", clusterRoleRef("cluster-admin"), nil, ""},
		{"admin binds a missing role: bind is granted", p, admin, "default", roleRef("ghost"), nil, ""},
		{"binder binds cluster-admin in team-a", q, binder, "team-a", clusterRoleRef("cluster-admin"), nil, ""},
		{"binder binds cluster-admin in team-b", q, binder, "team-b", clusterRoleRef("cluster-admin"), ErrEscalation, "not currently held"},
		{"binder binds admin in team-a", q, binder, "team-a", clusterRoleRef("admin"), ErrEscalation, "not currently held"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ConfirmBindingWrite(tt.p, tt.u, tt.namespace, tt.ref)
			if tt.is == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("error %v, want %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		name      string
		owner     []rbacv1.PolicyRule
		requested []rbacv1.PolicyRule
		uncovered []string // CompactString of each uncovered rule, in order
	}{
		{"same rule",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()},
			[]rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()}, nil},
		{"two owner rules together",
			[]rbacv1.PolicyRule{rule("get", "list").groups("").resources("pods").done(), rule("watch").groups("").resources("pods", "nodes").done()},
			[]rbacv1.PolicyRule{rule("get", "list", "watch").groups("").resources("pods").done()}, nil},
		{"breakdown lists each missing tuple",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()},
			[]rbacv1.PolicyRule{rule("get", "delete").groups("", "apps").resources("pods").done()},
			[]string{
				`{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`,
				`{APIGroups:["apps"], Resources:["pods"], Verbs:["get"]}`,
				`{APIGroups:["apps"], Resources:["pods"], Verbs:["delete"]}`,
			}},
		{"owner * covers a requested *",
			[]rbacv1.PolicyRule{rule("*").groups("*").resources("*").done()},
			[]rbacv1.PolicyRule{rule("*").groups("*").resources("*").done()}, nil},
		{"a requested * verb is not covered by every verb listed",
			[]rbacv1.PolicyRule{rule(verbsReadWrite...).groups("").resources("pods").done()},
			[]rbacv1.PolicyRule{rule("*").groups("").resources("pods").done()},
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["*"]}`}},
		{"a requested * resource is not covered by a list",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("pods", "nodes").done()},
			[]rbacv1.PolicyRule{rule("get").groups("").resources("*").done()},
			[]string{`{APIGroups:[""], Resources:["*"], Verbs:["get"]}`}},
		{"a requested * group is not covered by the core group",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()},
			[]rbacv1.PolicyRule{rule("get").groups("*").resources("pods").done()},
			[]string{`{APIGroups:["*"], Resources:["pods"], Verbs:["get"]}`}},
		{"*/status covers pods/status",
			[]rbacv1.PolicyRule{rule("update").groups("").resources("*/status").done()},
			[]rbacv1.PolicyRule{rule("update").groups("").resources("pods/status", "nodes/status").done()}, nil},
		{"pods does not cover pods/status",
			[]rbacv1.PolicyRule{rule("update").groups("").resources("pods").done()},
			[]rbacv1.PolicyRule{rule("update").groups("").resources("pods/status").done()},
			[]string{`{APIGroups:[""], Resources:["pods/status"], Verbs:["update"]}`}},
		{"an unnamed owner covers a named request",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").done()},
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").names("a", "b").done()}, nil},
		{"a named owner covers its names only",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").names("a").done()},
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").names("a", "b").done()},
			[]string{`{APIGroups:[""], Resources:["secrets"], ResourceNames:["b"], Verbs:["get"]}`}},
		{"a named owner does not cover an unnamed request",
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").names("a").done()},
			[]rbacv1.PolicyRule{rule("get").groups("").resources("secrets").done()},
			[]string{`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`}},
		{"url prefix covers urls under it",
			[]rbacv1.PolicyRule{rule("get").urls("/api/*").done()},
			[]rbacv1.PolicyRule{rule("get").urls("/api/v1", "/api/*").done()}, nil},
		{"url prefix does not cover *",
			[]rbacv1.PolicyRule{rule("get").urls("/api/*").done()},
			[]rbacv1.PolicyRule{rule("get").urls("*").done()},
			[]string{`{NonResourceURLs:["*"], Verbs:["get"]}`}},
		{"a resource rule does not cover a url",
			[]rbacv1.PolicyRule{rule("*").groups("*").resources("*").done()},
			[]rbacv1.PolicyRule{rule("get").urls("/healthz").done()},
			[]string{`{NonResourceURLs:["/healthz"], Verbs:["get"]}`}},
		{"nothing requested", nil, nil, nil},
		{"nothing owned",
			nil,
			[]rbacv1.PolicyRule{rule("get").groups("").resources("pods").done()},
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, uncovered := Covers(tt.owner, tt.requested)
			if ok != (len(tt.uncovered) == 0) {
				t.Errorf("Covers = %v, want %v", ok, len(tt.uncovered) == 0)
			}
			var got []string
			for _, r := range uncovered {
				got = append(got, CompactString(r))
			}
			if strings.Join(got, "\n") != strings.Join(tt.uncovered, "\n") {
				t.Errorf("uncovered\n got %v\nwant %v", got, tt.uncovered)
			}
		})
	}
}

func TestCompactRules(t *testing.T) {
	in := []rbacv1.PolicyRule{
		rule("get").groups("").resources("pods").done(),
		rule("get").groups("").resources("nodes").done(),
		rule("delete").groups("").resources("pods").done(),
		rule("get").groups("").resources("pods").done(),
		rule("get").groups("").resources("secrets").names("a").done(),
		rule("list").groups("").resources("secrets").names("a").done(),
		rule("get").groups("").resources("secrets").names("b").done(),
		rule("get").urls("/healthz").done(),
	}
	want := []string{
		`{APIGroups:[""], Resources:["pods"], Verbs:["get" "delete"]}`,
		`{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`,
		`{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get" "list"]}`,
		`{APIGroups:[""], Resources:["secrets"], ResourceNames:["b"], Verbs:["get"]}`,
		`{NonResourceURLs:["/healthz"], Verbs:["get"]}`,
	}
	var got []string
	for _, r := range CompactRules(in) {
		got = append(got, CompactString(r))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CompactRules\n got %v\nwant %v", got, want)
	}
	if len(in[0].Verbs) != 1 {
		t.Errorf("CompactRules changed its input: %v", in[0].Verbs)
	}
}
