package webhook

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHook_Matches(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}}}
	podCreate := Attributes{Operation: admissionv1.Create, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "default", Namespaced: true, NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "default"}, Object: pod}
	rule := func(ops []admissionregistrationv1.OperationType, groups, versions, resources []string, scope admissionregistrationv1.ScopeType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources, Scope: &scope}}}
	}
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	core, v1 := []string{""}, []string{"v1"}
	for _, tc := range []struct {
		name string
		hook Hook
		a    Attributes
		want bool
	}{
		{"pods CREATE", Hook{Rules: rule(create, core, v1, []string{"pods"}, "*")}, podCreate, true},
		{"UPDATE only", Hook{Rules: rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Update}, core, v1, []string{"pods"}, "*")}, podCreate, false},
		{"every operation", Hook{Rules: rule([]admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}, core, v1, []string{"pods"}, "*")}, podCreate, true},
		{"apps group", Hook{Rules: rule(create, []string{"apps"}, v1, []string{"pods"}, "*")}, podCreate, false},
		{"v2 only", Hook{Rules: rule(create, core, []string{"v2"}, []string{"pods"}, "*")}, podCreate, false},
		{"star", Hook{Rules: rule(create, []string{"*"}, []string{"*"}, []string{"*"}, "*")}, podCreate, true},
		{"pods/status is not pods", Hook{Rules: rule(create, core, v1, []string{"pods/status"}, "*")}, podCreate, false},
		{"Cluster scope", Hook{Rules: rule(create, core, v1, []string{"pods"}, admissionregistrationv1.ClusterScope)}, podCreate, false},
		{"Namespaced scope", Hook{Rules: rule(create, core, v1, []string{"pods"}, admissionregistrationv1.NamespacedScope)}, podCreate, true},
		{"objectSelector matches", Hook{Rules: rule(create, core, v1, []string{"pods"}, "*"), ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}, podCreate, true},
		{"objectSelector does not", Hook{Rules: rule(create, core, v1, []string{"pods"}, "*"), ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}, podCreate, false},
		{"namespaceSelector does not", Hook{Rules: rule(create, core, v1, []string{"pods"}, "*"), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "prod"}}}, podCreate, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.hook.Matches(tc.a)
			if err != nil || got != tc.want {
				t.Errorf("Matches = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestResourceMatches(t *testing.T) {
	for _, tc := range []struct {
		rule, resource, sub string
		want                bool
	}{
		{"pods", "pods", "", true},
		{"pods", "pods", "status", false},
		{"pods/status", "pods", "status", true},
		{"pods/*", "pods", "status", true},
		{"pods/*", "pods", "", true},
		{"*/status", "deployments", "status", true},
		{"*", "pods", "status", false},
		{"*/*", "pods", "status", true},
	} {
		if got := resourceMatches(tc.rule, tc.resource, tc.sub); got != tc.want {
			t.Errorf("resourceMatches(%q, %q, %q) = %v, want %v", tc.rule, tc.resource, tc.sub, got, tc.want)
		}
	}
}

func TestDenied(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result *metav1.Status
		want   string
		code   int32
	}{
		{"message", &metav1.Status{Message: "no"}, `admission webhook "a.b.c" denied the request: no`, 400},
		{"reason", &metav1.Status{Reason: "Nope", Code: 403}, `admission webhook "a.b.c" denied the request: Nope`, 403},
		{"nothing", nil, `admission webhook "a.b.c" denied the request without explanation`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Denied("a.b.c", tc.result)
			if err.Error() != tc.want || err.ErrStatus.Code != tc.code || err.ErrStatus.Status != metav1.StatusFailure {
				t.Errorf("Denied = %q (code %d, status %q), want %q (code %d)", err.Error(), err.ErrStatus.Code, err.ErrStatus.Status, tc.want, tc.code)
			}
		})
	}
}
