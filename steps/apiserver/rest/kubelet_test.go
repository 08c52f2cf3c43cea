package rest

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSubjectAccessReview is what a kubelet asks before it serves logs or
// exec: may this user get or create nodes/proxy? kubeadm's binding lets the
// API server's kubelet client; nobody else but cluster admins.
func TestSubjectAccessReview(t *testing.T) {
	l := newLab(t, nil)
	tests := []struct {
		name    string
		asker   string
		subject authorizationv1.SubjectAccessReviewSpec
		allowed bool
	}{
		{"the API server's kubelet client may get nodes/proxy", "system:node:node-1",
			authorizationv1.SubjectAccessReviewSpec{User: "kube-apiserver-kubelet-client", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "node-1", Version: "v1"}}, true},
		{"and create it (exec)", "system:node:node-1",
			authorizationv1.SubjectAccessReviewSpec{User: "kube-apiserver-kubelet-client", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes", Subresource: "proxy", Name: "node-1"}}, true},
		{"the developer may not", "system:node:node-1",
			authorizationv1.SubjectAccessReviewSpec{User: "developer", Groups: []string{"developers", "system:authenticated"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "node-1"}}, false},
		{"system:masters may", "system:kube-scheduler",
			authorizationv1.SubjectAccessReviewSpec{User: "someone", Groups: []string{"system:masters"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes", Subresource: "proxy", Name: "node-1"}}, true},
		{"the viewer may read pod logs", "system:kube-controller-manager",
			authorizationv1.SubjectAccessReviewSpec{User: "viewer", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "default", Name: "web"}}, true},
		{"not exec in them", "system:kube-controller-manager",
			authorizationv1.SubjectAccessReviewSpec{User: "viewer", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "default", Name: "web"}}, false},
		{"a path", "system:node:node-1",
			authorizationv1.SubjectAccessReviewSpec{User: "nobody", Groups: []string{"system:authenticated"}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/version"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := l.clientset(tt.asker).AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{Spec: tt.subject}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status.Allowed != tt.allowed {
				t.Errorf("allowed = %v (%q), want %v", out.Status.Allowed, out.Status.Reason, tt.allowed)
			}
		})
	}

	bad := []struct {
		name  string
		asker string
		spec  authorizationv1.SubjectAccessReviewSpec
		check func(error) bool
		text  string
	}{
		{"the viewer may not ask about others", "viewer",
			authorizationv1.SubjectAccessReviewSpec{User: "admin", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}},
			apierrors.IsForbidden, `subjectaccessreviews.authorization.k8s.io is forbidden: User "viewer" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`},
		{"no attributes", "admin", authorizationv1.SubjectAccessReviewSpec{User: "viewer"},
			apierrors.IsInvalid, "exactly one of nonResourceAttributes or resourceAttributes must be specified"},
		{"both attributes", "admin", authorizationv1.SubjectAccessReviewSpec{User: "viewer",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/"}},
			apierrors.IsInvalid, "cannot be specified in combination with resourceAttributes"},
		{"no user nor group", "admin", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}},
			apierrors.IsInvalid, "at least one of user or group must be specified"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.clientset(tt.asker).AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{Spec: tt.spec}, metav1.CreateOptions{})
			if !tt.check(err) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %v, want one with %q", err, tt.text)
			}
		})
	}
}

// TestPodSubresources_Refused is pods/log and pods/exec refused before any
// kubelet is reached, each as kube-apiserver answers it.
func TestPodSubresources_Refused(t *testing.T) {
	noKubelets := newLab(t, nil)
	if code, body, _ := noKubelets.do("admin", "GET", "/api/v1/namespaces/default/pods/web/log", "", nil); code != http.StatusServiceUnavailable || !strings.Contains(status(t, body).Message, "--kubelet-client-certificate") {
		t.Errorf("pods/log without a kubelet client: %d %s", code, body)
	}

	l := newLab(t, nil, WithKubeletTransport(&http.Transport{}))
	cs := l.clientset("admin")
	// a port nobody listens on: node-1's kubelet is down
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	node, err = cs.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(down)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx(t), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{testPod("unscheduled"), testPod("web"), testPod("two")} {
		if p.Name != "unscheduled" {
			p.Spec.NodeName = "node-1"
		}
		if p.Name == "two" {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "nginx"})
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first := testPod("x").Spec.Containers[0].Name
	tests := []struct {
		name, user, method, path string
		code                     int
		message                  string
	}{
		{"logs of a missing pod", "admin", "GET", "/api/v1/namespaces/default/pods/nope/log", 404, `pods "nope" not found`},
		{"exec in a missing pod", "admin", "POST", "/api/v1/namespaces/default/pods/nope/exec?command=ls&stdout=1", 404, `pods "nope" not found`},
		{"exec in a pod without a node", "admin", "POST", "/api/v1/namespaces/default/pods/unscheduled/exec?command=ls&stdout=1", 400, "pod unscheduled does not have a host assigned"},
		{"an unknown container", "admin", "GET", "/api/v1/namespaces/default/pods/web/log?container=nope", 400, "container nope is not valid for pod web"},
		{"no container named, two in the pod", "admin", "GET", "/api/v1/namespaces/default/pods/two/log", 400, "a container name must be specified for pod two, choose one of: [" + first + " sidecar]"},
		{"a negative tailLines", "admin", "GET", "/api/v1/namespaces/default/pods/web/log?tailLines=-1", 422, `PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`},
		{"sinceSeconds and sinceTime", "admin", "GET", "/api/v1/namespaces/default/pods/web/log?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", 422, "at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{"the viewer may not exec", "viewer", "POST", "/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=1", 403,
			`pods "web" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"`},
		{"a node's kubelet that does not answer", "admin", "GET", "/api/v1/namespaces/default/pods/web/log", 500,
			`Get "https://127.0.0.1:` + strconv.Itoa(down) + `/containerLogs/default/web/` + first + `": dial tcp 127.0.0.1:` + strconv.Itoa(down) + `: connect: connection refused`},
		{"pods/log is GET only", "admin", "DELETE", "/api/v1/namespaces/default/pods/web/log", 405, ""},
		{"log of a deployment", "admin", "GET", "/apis/apps/v1/namespaces/default/deployments/web/log", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := l.do(tt.user, tt.method, tt.path, "", nil)
			if code != tt.code {
				t.Fatalf("%d %s, want %d", code, body, tt.code)
			}
			if st := status(t, body); !strings.Contains(st.Message, tt.message) {
				t.Errorf("message %q, want %q", st.Message, tt.message)
			}
		})
	}
	// no node yet: nothing to stream, as kube-apiserver's nil location
	if code, body, _ := l.do("admin", "GET", "/api/v1/namespaces/default/pods/unscheduled/log", "", nil); code != http.StatusNoContent || len(body) != 0 {
		t.Errorf("logs of an unscheduled pod: %d %q, want 204 and nothing", code, body)
	}
}
