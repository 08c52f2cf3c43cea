package discovery

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
)

// kubectlAgainst runs the lab's real kubectl against srv with a kubeconfig
// of its own (plain HTTP, no credentials: the handler asks for none) and an
// empty cache, so each test discovers afresh.
func kubectlAgainst(t *testing.T, srv *httptest.Server) func(args ...string) (string, error) {
	t.Helper()
	kubectl := testenv.Kubectl(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: podlab
  cluster:
    server: %s
contexts:
- name: podlab
  context:
    cluster: podlab
    user: nobody
    namespace: default
current-context: podlab
users:
- name: nobody
  user: {}
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "KUBERC=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestKubectl_APIResources: `kubectl api-resources` lists podlab's
// resources with kube's short names, groups, scope and kinds.
func TestKubectl_APIResources(t *testing.T) {
	kubectl := kubectlAgainst(t, newServer(t, Options{}))
	out, err := kubectl("api-resources")
	if err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, out)
	}
	for _, want := range []string{
		`^NAME\s+SHORTNAMES\s+APIVERSION\s+NAMESPACED\s+KIND$`,
		`^pods\s+po\s+v1\s+true\s+Pod$`,
		`^nodes\s+no\s+v1\s+false\s+Node$`,
		`^namespaces\s+ns\s+v1\s+false\s+Namespace$`,
		`^deployments\s+deploy\s+apps/v1\s+true\s+Deployment$`,
		`^replicasets\s+rs\s+apps/v1\s+true\s+ReplicaSet$`,
		`^leases\s+coordination.k8s.io/v1\s+true\s+Lease$`,
		`^runtimeclasses\s+node.k8s.io/v1\s+false\s+RuntimeClass$`,
		`^mutatingwebhookconfigurations\s+admissionregistration.k8s.io/v1\s+false\s+MutatingWebhookConfiguration$`,
		`^validatingwebhookconfigurations\s+admissionregistration.k8s.io/v1\s+false\s+ValidatingWebhookConfiguration$`,
		`^clusterroles\s+rbac.authorization.k8s.io/v1\s+false\s+ClusterRole$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("kubectl api-resources: no line %s in\n%s", want, out)
		}
	}
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 16 {
		t.Errorf("kubectl api-resources: %d resources, want podlab's 16:\n%s", n, out)
	}
	out, err = kubectl("api-resources", "--categories", "all", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl api-resources --categories all: %v\n%s", err, out)
	}
	if got, want := strings.Fields(out), []string{"pods", "deployments.apps", "replicasets.apps"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("category all: %v, want %v", got, want)
	}
}

// TestKubectl_Explain: `kubectl explain` reads the OpenAPI v3 documents.
func TestKubectl_Explain(t *testing.T) {
	kubectl := kubectlAgainst(t, newServer(t, Options{}))
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"explain", "pod.spec.containers"}, []string{"KIND:       Pod", "VERSION:    v1", "FIELD: containers <[]Container>", "image\t<string>"}},
		{[]string{"explain", "deploy.spec.replicas"}, []string{"GROUP:      apps", "KIND:       Deployment", "FIELD: replicas <integer>"}},
		{[]string{"explain", "rolebindings.subjects"}, []string{"KIND:       RoleBinding", "FIELD: subjects <[]Subject>"}},
		// OpenAPI v2, which kubectl asks for as protobuf.
		{[]string{"explain", "pod.spec.nodeName", "--output", "plaintext-openapiv2"}, []string{"KIND:     Pod", "FIELD:    nodeName <string>"}},
	}
	for _, tt := range tests {
		out, err := kubectl(tt.args...)
		if err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl %s: no %q in\n%.800s", strings.Join(tt.args, " "), w, out)
			}
		}
	}
}

// TestKubectl_BadInput: what kubectl says for what this handler does not
// serve: the resources themselves (the REST handlers' part) and kinds
// podlab lacks.
func TestKubectl_BadInput(t *testing.T) {
	kubectl := kubectlAgainst(t, newServer(t, Options{}))
	tests := []struct {
		args []string
		want string
	}{
		// No resource handler answers here (that is the REST handlers' part):
		// discovery found pods, the list itself gets kube's 404.
		{[]string{"get", "pods"}, `Error from server (NotFound): Unable to list "/v1, Resource=pods": the server could not find the requested resource`},
		{[]string{"get", "cronjobs"}, `error: the server doesn't have a resource type "cronjobs"`},
		{[]string{"explain", "pod.spec.nosuchfield"}, `field "nosuchfield" does not exist`},
		{[]string{"explain", "jobs"}, `the server doesn't have a resource type "jobs"`},
	}
	for _, tt := range tests {
		out, err := kubectl(tt.args...)
		if err == nil {
			t.Errorf("kubectl %s succeeded:\n%s", strings.Join(tt.args, " "), out)
			continue
		}
		if !strings.Contains(out, tt.want) {
			t.Errorf("kubectl %s: no %q in\n%s", strings.Join(tt.args, " "), tt.want, out)
		}
	}
}

// TestKubectl_Version: kubectl parses the server's version.
func TestKubectl_Version(t *testing.T) {
	kubectl := kubectlAgainst(t, newServer(t, Options{}))
	out, err := kubectl("version")
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	for _, want := range []string{"Client Version: v1.37.2\n", "Server Version: v1.37.2+podlab\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl version: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "WARNING") {
		t.Errorf("kubectl version warns:\n%s", out)
	}
}

// TestKubectl_LeavesValidationToServer: kubectl's default --validate=strict
// looks in OpenAPI v3 for the fieldValidation parameter of the create path;
// finding it, kubectl sends fieldValidation=Strict and validates nothing
// itself. (Without it, kubectl would validate client-side from OpenAPI v2.)
// No resource handler answers the POST here: the create fails with a 404,
// after the request shows what kubectl asked.
func TestKubectl_LeavesValidationToServer(t *testing.T) {
	h, err := Handler(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes = append(writes, r.Method+" "+r.URL.RequestURI())
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kubectl := kubectlAgainst(t, srv)
	manifest := filepath.Join(t.TempDir(), "pod.yaml")
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n"
	if err := os.WriteFile(manifest, []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl("create", "-f", manifest)
	if err == nil || !strings.Contains(out, "Error from server (NotFound)") {
		t.Errorf("kubectl create: %v\n%s", err, out)
	}
	want := "POST /api/v1/namespaces/default/pods?fieldManager=kubectl-create&fieldValidation=Strict"
	if !slices.Contains(writes, want) {
		t.Errorf("kubectl create sent %q, want %q", writes, want)
	}
}
