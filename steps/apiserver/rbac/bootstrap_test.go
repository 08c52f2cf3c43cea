package rbac

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver/authn"
)

func TestBootstrap_Metadata(t *testing.T) {
	crs, crbs, rbs := Bootstrap()
	type object struct {
		kind string
		meta metav1.ObjectMeta
		tm   metav1.TypeMeta
	}
	var objs []object
	for _, o := range crs {
		objs = append(objs, object{"ClusterRole", o.ObjectMeta, o.TypeMeta})
	}
	for _, o := range crbs {
		objs = append(objs, object{"ClusterRoleBinding", o.ObjectMeta, o.TypeMeta})
	}
	for _, o := range rbs {
		objs = append(objs, object{"RoleBinding", o.ObjectMeta, o.TypeMeta})
	}
	podlabOwn := map[string]bool{"viewer-view": true, "developer-edit": true, "network-agent": true}
	for _, o := range objs {
		t.Run(o.kind+"/"+o.meta.Name, func(t *testing.T) {
			if o.tm.Kind != o.kind || o.tm.APIVersion != "rbac.authorization.k8s.io/v1" {
				t.Errorf("TypeMeta = %+v", o.tm)
			}
			if strings.HasPrefix(o.meta.Name, "kubeadm:") {
				// kubeadm makes these at `kubeadm init`, plainly: no
				// bootstrapping label, no autoupdate annotation.
				if len(o.meta.Labels) != 0 || len(o.meta.Annotations) != 0 {
					t.Errorf("kubeadm's object has labels %v, annotations %v", o.meta.Labels, o.meta.Annotations)
				}
				return
			}
			if got := o.meta.Annotations[rbacv1.AutoUpdateAnnotationKey]; got != "true" {
				t.Errorf("annotation %s = %q, want \"true\"", rbacv1.AutoUpdateAnnotationKey, got)
			}
			if podlabOwn[o.meta.Name] {
				if o.meta.Labels[ManagedByLabel] != ManagedByLabelValue || o.meta.Labels[BootstrapLabel] != "" {
					t.Errorf("podlab's binding labels = %v", o.meta.Labels)
				}
				return
			}
			if got := o.meta.Labels["kubernetes.io/bootstrapping"]; got != "rbac-defaults" {
				t.Errorf("label kubernetes.io/bootstrapping = %q, want rbac-defaults", got)
			}
		})
	}
	// Each object has its own maps: changing one changes no other.
	crs[0].Labels["x"] = "y"
	if _, ok := crs[1].Labels["x"]; ok {
		t.Error("bootstrap objects share their labels map")
	}
	crs2, _, _ := Bootstrap()
	if _, ok := crs2[0].Labels["x"]; ok {
		t.Error("Bootstrap returns shared labels across calls")
	}
}

func TestBootstrap_Objects(t *testing.T) {
	crs, crbs, rbs := Bootstrap()
	var roleNames []string
	for _, r := range crs {
		roleNames = append(roleNames, r.Name)
	}
	for _, want := range []string{"cluster-admin", "admin", "edit", "view", "system:kube-scheduler", "system:kube-controller-manager", "system:node"} {
		if !slices.Contains(roleNames, want) {
			t.Errorf("no ClusterRole %q in %v", want, roleNames)
		}
	}
	find := func(name string) *rbacv1.ClusterRoleBinding {
		for i := range crbs {
			if crbs[i].Name == name {
				return &crbs[i]
			}
		}
		t.Fatalf("no ClusterRoleBinding %q", name)
		return nil
	}
	tests := []struct {
		binding, role string
		subjects      []rbacv1.Subject
	}{
		{"cluster-admin", "cluster-admin", []rbacv1.Subject{subjectGroup("system:masters")}},
		{"system:kube-scheduler", "system:kube-scheduler", []rbacv1.Subject{subjectUser("system:kube-scheduler")}},
		{"system:kube-controller-manager", "system:kube-controller-manager", []rbacv1.Subject{subjectUser("system:kube-controller-manager")}},
		// kept without subjects, as Kubernetes does since 1.7: the Node
		// authorizer grants system:node's rules, per node
		{"system:node", "system:node", nil},
		{"viewer-view", "view", []rbacv1.Subject{subjectUser("viewer")}},
		{"network-agent", "network-agent", []rbacv1.Subject{subjectUser("network-agent")}},
	}
	for _, tt := range tests {
		t.Run(tt.binding, func(t *testing.T) {
			b := find(tt.binding)
			if b.RoleRef != clusterRoleRef(tt.role) {
				t.Errorf("roleRef = %+v, want ClusterRole %q", b.RoleRef, tt.role)
			}
			if !slices.Equal(b.Subjects, tt.subjects) {
				t.Errorf("subjects = %+v, want %+v", b.Subjects, tt.subjects)
			}
		})
	}
	if len(rbs) != 1 || rbs[0].Name != "developer-edit" || rbs[0].Namespace != "default" ||
		rbs[0].RoleRef != clusterRoleRef("edit") || !slices.Equal(rbs[0].Subjects, []rbacv1.Subject{subjectUser("developer")}) {
		t.Errorf("RoleBindings = %+v, want developer-edit in default: ClusterRole edit to User developer", rbs)
	}
}

// TestBootstrap_Roles checks each role against what its holder needs in
// podlab (must) and must not have (mustNot), through Covers.
func TestBootstrap_Roles(t *testing.T) {
	p := BootstrapPolicy()
	r := func(verbs ...string) *ruleBuilder { return rule(verbs...) }
	tests := []struct {
		role    string
		must    []rbacv1.PolicyRule
		mustNot []rbacv1.PolicyRule
	}{
		{"view",
			[]rbacv1.PolicyRule{
				r(verbsRead...).groups("").resources("pods", "pods/log", "pods/status", "events", "limitranges", "resourcequotas", "namespaces", "configmaps", "services").done(),
				r(verbsRead...).groups("apps").resources("deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status").done(),
			},
			[]rbacv1.PolicyRule{
				r("get").groups("").resources("secrets").done(),
				r("create").groups("").resources("pods").done(),
				r("delete").groups("").resources("pods").done(),
				r("get").groups("").resources("pods/exec").done(),
				r("get").groups("").resources("nodes").done(),
			}},
		{"edit",
			[]rbacv1.PolicyRule{
				r(verbsReadWrite...).groups("").resources("pods", "configmaps", "secrets", "services").done(),
				r(verbsReadWrite...).groups("apps").resources("deployments", "deployments/scale", "replicasets", "replicasets/scale").done(),
				r(verbsRead...).groups("").resources("pods/log", "pods/status", "events", "limitranges", "resourcequotas").done(),
			},
			[]rbacv1.PolicyRule{
				r("update").groups("").resources("pods/status").done(),
				r("update").groups("").resources("resourcequotas").done(),
				r("create").groups(rbacv1.GroupName).resources("roles").done(),
				r("create").groups(rbacv1.GroupName).resources("rolebindings").done(),
			}},
		{"admin",
			[]rbacv1.PolicyRule{
				r(verbsReadWrite...).groups(rbacv1.GroupName).resources("roles", "rolebindings").done(),
				r(verbsReadWrite...).groups("").resources("pods").done(),
			},
			[]rbacv1.PolicyRule{
				r("create").groups(rbacv1.GroupName).resources("clusterroles").done(),
				r("update").groups("").resources("resourcequotas").done(),
			}},
		// reads every Node (the Node authorizer would let a node read only
		// its own); writes nothing
		{"network-agent",
			[]rbacv1.PolicyRule{
				r(verbsRead...).groups("").resources("nodes").done(),
			},
			[]rbacv1.PolicyRule{
				r("update", "patch").groups("").resources("nodes").done(),
				r("patch").groups("").resources("nodes/status").done(),
				r("get").groups("").resources("pods").done(),
				r("get").groups("").resources("secrets").done(),
			}},
		{"system:kube-scheduler",
			[]rbacv1.PolicyRule{
				r(verbsRead...).groups("").resources("pods", "nodes").done(),
				r("create").groups("").resources("pods/binding").done(),
				r("update", "patch").groups("").resources("pods/status").done(),
				r("create", "patch", "update").groups("").resources("events").done(),
			},
			[]rbacv1.PolicyRule{
				r("create").groups("").resources("pods").done(),
				r("update").groups("").resources("pods").done(),
			}},
		{"system:kube-controller-manager",
			[]rbacv1.PolicyRule{
				r(verbsReadWrite...).groups("apps").resources("deployments", "deployments/status", "replicasets", "replicasets/status").done(),
				r("create", "delete", "list", "watch", "get", "update", "patch").groups("").resources("pods").done(),
				r("create", "patch", "update").groups("").resources("events").done(),
				r(verbsRead...).groups("").resources("namespaces").done(),
				// the node lifecycle controller
				r("get", "list", "watch", "update", "patch").groups("").resources("nodes").done(),
				r("update", "patch").groups("").resources("nodes/status", "pods/status").done(),
				r("list", "watch").groups("coordination.k8s.io").resources("leases").done(),
			},
			[]rbacv1.PolicyRule{
				r("create").groups("").resources("pods/binding").done(),
				r("delete").groups("").resources("nodes").done(),
			}},
		{"system:node",
			[]rbacv1.PolicyRule{
				r("get", "list", "watch", "create", "update", "patch").groups("").resources("nodes").done(),
				r("update", "patch").groups("").resources("nodes/status", "pods/status").done(),
				r("get", "list", "watch", "delete").groups("").resources("pods").done(),
				r("create", "patch", "update").groups("").resources("events").done(),
			},
			[]rbacv1.PolicyRule{
				r("delete").groups("").resources("nodes").done(),
				r("update").groups("").resources("pods").done(),
				r("create").groups("").resources("pods/binding").done(),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			rules, err := RoleRules(p, "", clusterRoleRef(tt.role))
			if err != nil {
				t.Fatal(err)
			}
			if ok, missing := Covers(rules, tt.must); !ok {
				for _, m := range CompactRules(missing) {
					t.Errorf("missing %s", CompactString(m))
				}
			}
			for _, m := range tt.mustNot {
				if ok, _ := Covers(rules, []rbacv1.PolicyRule{m}); ok {
					t.Errorf("grants %s", CompactString(m))
				}
			}
		})
	}
}

// The user-facing roles nest: admin ⊇ edit ⊇ view, as aggregation makes them.
func TestBootstrap_RolesNest(t *testing.T) {
	p := BootstrapPolicy()
	rules := func(name string) []rbacv1.PolicyRule {
		rs, err := RoleRules(p, "", clusterRoleRef(name))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("ClusterRole %q has no rules: not aggregated", name)
		}
		return rs
	}
	for _, pair := range [][2]string{{"admin", "edit"}, {"edit", "view"}, {"cluster-admin", "admin"}} {
		if ok, missing := Covers(rules(pair[0]), rules(pair[1])); !ok {
			t.Errorf("%s does not cover %s: %d rules missing, first %s", pair[0], pair[1], len(missing), CompactString(missing[0]))
		}
		if ok, _ := Covers(rules(pair[1]), rules(pair[0])); ok {
			t.Errorf("%s covers %s: they should differ", pair[1], pair[0])
		}
	}
}

func TestAggregate(t *testing.T) {
	agg := func(name, label string, own map[string]string) rbacv1.ClusterRole {
		c := cr(name)
		c.Labels = own
		c.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
		return c
	}
	labelled := func(c rbacv1.ClusterRole, labels map[string]string) rbacv1.ClusterRole {
		c.Labels = labels
		return c
	}
	pods := rule("get").groups("").resources("pods").done()
	nodes := rule("get").groups("").resources("nodes").done()
	secrets := rule("get").groups("").resources("secrets").done()
	in := []rbacv1.ClusterRole{
		agg("top", "to-top", nil),
		agg("middle", "to-middle", map[string]string{"to-top": "true"}),
		labelled(cr("z-leaf", pods, nodes), map[string]string{"to-middle": "true"}),
		labelled(cr("a-leaf", nodes, secrets), map[string]string{"to-middle": "true"}),
		labelled(cr("extra", pods), map[string]string{"to-top": "true"}),
		cr("unrelated", rule("*").groups("*").resources("*").done()),
	}
	out, err := Aggregate(in)
	if err != nil {
		t.Fatal(err)
	}
	str := func(rules []rbacv1.PolicyRule) string {
		var s []string
		for _, r := range rules {
			s = append(s, CompactString(r))
		}
		return strings.Join(s, " ")
	}
	// middle: a-leaf then z-leaf (name order), nodes once.
	if got, want := str(out[1].Rules), str([]rbacv1.PolicyRule{nodes, secrets, pods}); got != want {
		t.Errorf("middle\n got %s\nwant %s", got, want)
	}
	// top: extra then middle (name order), through two levels, pods once.
	if got, want := str(out[0].Rules), str([]rbacv1.PolicyRule{pods, nodes, secrets}); got != want {
		t.Errorf("top\n got %s\nwant %s", got, want)
	}
	if len(in[0].Rules) != 0 || len(in[1].Rules) != 0 {
		t.Error("Aggregate changed its input")
	}
	if got := str(out[5].Rules); got != `{APIGroups:["*"], Resources:["*"], Verbs:["*"]}` {
		t.Errorf("unrelated role changed: %s", got)
	}
}

// TestAggregate_Bad is the table of inputs Aggregate must refuse.
func TestAggregate_Bad(t *testing.T) {
	tests := []struct {
		name     string
		selector metav1.LabelSelector
		msg      string
	}{
		{"invalid label key", metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "true"}}, `aggregating ClusterRole "r"`},
		{"invalid operator", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}, `aggregating ClusterRole "r"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cr("r")
			c.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{tt.selector}}
			_, err := Aggregate([]rbacv1.ClusterRole{c})
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Aggregate error = %v, want one saying %q", err, tt.msg)
			}
		})
	}
}

// No binding gives a node the rules of system:node: RBAC alone refuses a
// kubelet what the Node authorizer grants it for its own objects only. In
// podlab before the Node authorizer, the group system:nodes was bound, and
// node-1 could update the status of any pod.
func TestBootstrap_NodesUnbound(t *testing.T) {
	p := BootstrapPolicy()
	for _, u := range []authn.User{
		{Name: "system:node:node-1", Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}},
		{Name: "system:node:node-2", Groups: []string{authn.GroupAuthenticated}},
	} {
		a := Attributes{User: u, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "web"}
		if d := Authorize(p, a); d.Allowed {
			t.Errorf("%s (groups %v) allowed by RBAC: %s", u.Name, u.Groups, d.Reason)
		}
	}
	rules, err := RoleRules(p, "", clusterRoleRef("system:node"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(rules, NodeRules(), rulesEqual) {
		t.Error("the ClusterRole system:node does not hold NodeRules()")
	}
}
