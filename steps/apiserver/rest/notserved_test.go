package rest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver/discovery"
)

// What podlab does not serve says so: the real kubectl, against podlab's
// API server over HTTPS, prints a Status that names podlab and what it
// serves, as podlab apply does for a kind, not kube's bare 404 ("the
// server could not find the requested resource"). kubectl get of a
// resource discovery does not list is decided by kubectl itself, which
// never asks the server.
func TestKubectl_NotServed(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	l := newLab(t, nil)
	fb, err := discovery.Handler(discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr, caFile, stop, done := serveTLS(t, l, WithFallback(fb))
	t.Cleanup(func() { stop(); <-done })
	dir := t.TempDir()
	ds := filepath.Join(dir, "daemonset.yaml")
	if err := os.WriteFile(ds, []byte(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers: [{name: agent, image: nginx}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://%s", certificate-authority: %q}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: lab, context: {cluster: lab, user: admin}}]
current-context: lab
`, addr, caFile, l.token("admin")), 0o600); err != nil {
		t.Fatal(err)
	}
	const served = "(it serves: pods, nodes, namespaces, events, limitranges, resourcequotas, deployments, replicasets, leases, roles, rolebindings, " +
		"clusterroles, clusterrolebindings, runtimeclasses, mutatingwebhookconfigurations, validatingwebhookconfigurations)"
	tests := []struct {
		name string
		args []string
		want string // what kubectl prints, exactly
	}{
		{"kubectl create configmap", []string{"create", "configmap", "x"},
			`error: failed to create configmap: no resource "configmaps" is served by podlab ` + served},
		{"kubectl get configmaps: decided by kubectl from discovery", []string{"get", "configmaps"},
			`error: the server doesn't have a resource type "configmaps"`},
		{"kubectl apply of a DaemonSet: its check for a CRD of the kind", []string{"apply", "-f", ds},
			`error: error validating "` + ds + `": error validating data: failed to check CRD: failed to list CRDs: no resource "customresourcedefinitions.apiextensions.k8s.io" is served by podlab ` +
				served + `; if you choose to ignore these errors, turn validation off with --validate=false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache")}, tt.args...)...).CombinedOutput()
			if err == nil {
				t.Errorf("kubectl %s: no error", strings.Join(tt.args, " "))
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("kubectl %s prints\n%s\nwant\n%s", strings.Join(tt.args, " "), got, tt.want)
			}
		})
	}
}
