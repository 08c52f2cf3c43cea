package rest

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
)

// kubectl auth can-i: a SelfSubjectAccessReview, answered by RBAC.
func TestSelfSubjectAccessReview(t *testing.T) {
	var log bytes.Buffer
	l := newLab(t, nil, LogPhases(&log))
	tests := []struct {
		name    string
		user    string
		attrs   authorizationv1.ResourceAttributes
		nonRes  *authorizationv1.NonResourceAttributes
		allowed bool
	}{
		{"a viewer may list pods", "viewer", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "default"}, nil, true},
		{"a viewer may not create pods", "viewer", authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "default"}, nil, false},
		{"a developer may create deployments in default", "developer", authorizationv1.ResourceAttributes{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "default"}, nil, true},
		{"but not in kube-system", "developer", authorizationv1.ResourceAttributes{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "kube-system"}, nil, false},
		{"admin may do anything to anything", "admin", authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}, nil, true},
		{"a developer may not list pods in every namespace", "developer", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, nil, false},
		{"a viewer may", "viewer", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, nil, true},
		{"a developer may not impersonate", "developer", authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: "admin"}, nil, false},
		{"everyone may read /version", "viewer", authorizationv1.ResourceAttributes{}, &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/version"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sar := &authorizationv1.SelfSubjectAccessReview{}
			if tt.nonRes != nil {
				sar.Spec.NonResourceAttributes = tt.nonRes
			} else {
				sar.Spec.ResourceAttributes = &tt.attrs
			}
			got, err := l.clientset(tt.user).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx(t), sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if got.Status.Allowed != tt.allowed {
				t.Errorf("allowed %v (%s), want %v", got.Status.Allowed, got.Status.Reason, tt.allowed)
			}
			// kube-apiserver's RBAC authorizer gives no reason for a plain
			// denial: kubectl auth can-i prints a bare "no"
			if !tt.allowed && got.Status.Reason != "" {
				t.Errorf("reason %q, want none, as kube-apiserver's RBAC gives for a denial", got.Status.Reason)
			}
		})
	}
	// podlab's explanation of the refusal is in the API server's -v log
	if want := `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews (viewer): authorization [RBAC]: access review: may create pods? no: no RBAC policy matched: no rule allows user "viewer"`; !strings.Contains(log.String(), want) {
		t.Errorf("the -v log has no %q:\n%s", want, log.String())
	}
	// a SubjectAccessReview of a denial has no reason either
	sar, err := l.clientset("admin").AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "viewer", Groups: []string{"system:authenticated"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "default"}}}, metav1.CreateOptions{})
	if err != nil || sar.Status.Allowed || sar.Status.Reason != "" {
		t.Errorf("SubjectAccessReview of viewer creating pods: %+v, %v; want denied with no reason", sar.Status, err)
	}
	// anonymous may not even ask
	code, body, _ := l.do("", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json",
		[]byte(`{"spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}}`))
	if st := status(t, body); code != 403 || !strings.Contains(st.Message, `User "system:anonymous" cannot create resource "selfsubjectaccessreviews"`) {
		t.Errorf("anonymous SSAR: %d %s", code, body)
	}
}

// kubectl auth can-i --list: a SelfSubjectRulesReview.
func TestSelfSubjectRulesReview(t *testing.T) {
	l := newLab(t, nil)
	got, err := l.clientset("viewer").AuthorizationV1().SelfSubjectRulesReviews().Create(ctx(t),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	podsReadable := slices.ContainsFunc(got.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
		return slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "list")
	})
	podsWritable := slices.ContainsFunc(got.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
		return (slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "*")) && (slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "*"))
	})
	versionReadable := slices.ContainsFunc(got.Status.NonResourceRules, func(r authorizationv1.NonResourceRule) bool {
		return slices.Contains(r.NonResourceURLs, "/version")
	})
	if !podsReadable || podsWritable || !versionReadable {
		t.Errorf("viewer's rules: pods readable %v, writable %v, /version %v; want true, false, true:\n%+v", podsReadable, podsWritable, versionReadable, got.Status)
	}
}

// kubectl --as: impersonation, for a user granted the verb impersonate.
func TestImpersonation(t *testing.T) {
	var log bytes.Buffer
	l := newLab(t, nil, LogPhases(&log))
	as := func(user string, imp restclient.ImpersonationConfig) *kubernetes.Clientset {
		cfg := l.config(user)
		cfg.Impersonate = imp
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	tests := []struct {
		name      string
		user      string
		imp       restclient.ImpersonationConfig
		namespace string
		err       string // "" when allowed
	}{
		{"admin as developer, where developer may", "admin", restclient.ImpersonationConfig{UserName: "developer"}, "default", ""},
		{"admin as developer, where developer may not", "admin", restclient.ImpersonationConfig{UserName: "developer"}, "kube-system",
			`User "developer" cannot create resource "pods" in API group "" in the namespace "kube-system"`},
		{"admin as a member of system:masters", "admin", restclient.ImpersonationConfig{UserName: "someone", Groups: []string{"system:masters"}}, "kube-system", ""},
		{"viewer may not impersonate", "viewer", restclient.ImpersonationConfig{UserName: "admin"}, "default",
			`users "admin" is forbidden: User "viewer" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{"developer may not impersonate a group", "developer", restclient.ImpersonationConfig{UserName: "developer", Groups: []string{"system:masters"}}, "default",
			`users "developer" is forbidden: User "developer" cannot impersonate resource "users" in API group "" at the cluster scope`},
	}
	// headers that need Impersonate-User, without it: kube-apiserver's 400
	// (k8s.io/apiserver/pkg/endpoints/filters/impersonation), never ignored
	bad := []struct {
		name    string
		headers []string
		message string
	}{
		{"Impersonate-Group alone", []string{"Impersonate-Group", "system:masters"}, "requested [{Group  system:masters    }] without impersonating a user"},
		{"Impersonate-Uid alone", []string{"Impersonate-Uid", "1234"}, "requested [{UID  1234  authentication.k8s.io/v1  }] without impersonating a user"},
		{"Impersonate-Extra-* alone", []string{"Impersonate-Extra-Scopes", "view"}, "requested [{UserExtra  view  authentication.k8s.io/v1  scopes}] without impersonating a user"},
		{"groups and a uid", []string{"Impersonate-Group", "a", "Impersonate-Group", "b", "Impersonate-Uid", "1"},
			"requested [{Group  a    } {Group  b    } {UID  1  authentication.k8s.io/v1  }] without impersonating a user"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := l.do("admin", "GET", "/api/v1/namespaces/default/pods", "", nil, tt.headers...)
			st := status(t, body)
			if code != 400 || st.Code != 400 || st.Reason != metav1.StatusReasonBadRequest || st.Message != tt.message {
				t.Errorf("HTTP %d, Status %d %q %q; want 400 BadRequest %q", code, st.Code, st.Reason, st.Message, tt.message)
			}
		})
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod("p" + string(rune('a'+i)))
			p.Namespace = tt.namespace
			_, err := as(tt.user, tt.imp).CoreV1().Pods(tt.namespace).Create(ctx(t), p, metav1.CreateOptions{})
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Create: %v", err)
			case tt.err != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Create: %v, want 403 saying %q", err, tt.err)
			}
		})
	}
	if !strings.Contains(log.String(), "POST /api/v1/namespaces/default/pods (admin as developer): authentication [token file]: admin impersonating developer (groups system:authenticated)") {
		t.Errorf("the narration does not say who impersonates whom:\n%s", log.String())
	}
}

// -v: each phase of each request, one line, prefixed by the request.
func TestLogPhases(t *testing.T) {
	var log bytes.Buffer
	l := newLab(t, nil, LogPhases(&log))
	if code, body, _ := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(podJSON)); code != 201 {
		t.Fatalf("%d %s", code, body)
	}
	for _, want := range []string{
		"POST /api/v1/namespaces/default/pods (admin): authentication [token file]: token file -> user \"admin\"",
		"POST /api/v1/namespaces/default/pods (admin): authorization [RBAC]: allowed by ClusterRoleBinding",
		"POST /api/v1/namespaces/default/pods (admin): storage",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("no line with %q in:\n%s", want, log.String())
		}
	}
}
