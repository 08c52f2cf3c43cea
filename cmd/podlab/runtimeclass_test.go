package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubectl_RuntimeClass: a real kubectl v1.37 applies a RuntimeClass,
// lists it with kube's columns, and sees the RuntimeClass admission plugin
// refuse a pod naming a missing class and fill in a pod naming one.
func TestKubectl_RuntimeClass(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	kubeconfig := statedir.Layout{Dir: state}.Kubeconfig("admin")
	dir := t.TempDir()
	manifest := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	class := manifest("gvisor.yaml", `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gvisor
handler: runsc
overhead:
  podFixed:
    cpu: 250m
    memory: 64Mi
scheduling:
  nodeSelector:
    sandbox: gvisor
  tolerations:
  - key: sandbox
    operator: Equal
    value: gvisor
    effect: NoSchedule
`)
	pod := func(name, class string) string {
		return manifest(name+".yaml", `apiVersion: v1
kind: Pod
metadata:
  name: `+name+`
spec:
  runtimeClassName: `+class+`
  containers:
  - name: app
    image: nginx
`)
	}
	badHandler := manifest("bad.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: bad\nhandler: Run_SC\n")
	noHandler := manifest("none.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: none\n")
	changed := manifest("changed.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runc\n")

	tests := []struct {
		name  string
		args  []string
		want  []string // fragments the output holds, in order
		fails bool
	}{
		{"apply a RuntimeClass", []string{"apply", "-f", class}, []string{"runtimeclass.node.k8s.io/gvisor created"}, false},
		{"get runtimeclass", []string{"get", "runtimeclass"}, []string{"NAME", "HANDLER", "AGE", "gvisor", "runsc"}, false},
		{"a pod naming a missing RuntimeClass", []string{"apply", "-f", pod("web", "kata")},
			[]string{`Error from server (Forbidden)`, `pods "web" is forbidden: pod rejected: RuntimeClass "kata" not found`}, true},
		{"a pod naming gvisor", []string{"apply", "-f", pod("sandboxed", "gvisor")}, []string{"pod/sandboxed created"}, false},
		{"its overhead, nodeSelector and toleration", []string{"get", "pod", "sandboxed", "-o",
			`jsonpath={.spec.overhead.cpu} {.spec.overhead.memory} {.spec.nodeSelector.sandbox} {.spec.tolerations[?(@.key=="sandbox")].effect}`},
			[]string{"250m 64Mi gvisor NoSchedule"}, false},
		{"a handler that is not a DNS label", []string{"apply", "-f", badHandler},
			[]string{`The RuntimeClass "bad" is invalid: handler: Invalid value: "Run_SC": a lowercase RFC 1123 label must consist of`}, true},
		{"no handler", []string{"apply", "-f", noHandler},
			[]string{`The RuntimeClass "none" is invalid: handler: Invalid value: "": a lowercase RFC 1123 label must consist of`}, true},
		{"a changed handler", []string{"apply", "-f", changed},
			[]string{`The RuntimeClass "gvisor" is invalid`, `handler: Invalid value: "runc": field is immutable`}, true},
		{"the handler kept", []string{"get", "runtimeclass", "gvisor", "-o", "jsonpath={.handler}"}, []string{"runsc"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kubectlWith(kubectl, kubeconfig, tt.args...)
			if tt.fails != (err != nil) {
				t.Fatalf("kubectl %s: error %v (want one: %v)\n%s", strings.Join(tt.args, " "), err, tt.fails, out)
			}
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("kubectl %s: no %q (in order) in\n%s", strings.Join(tt.args, " "), w, out)
				}
				rest = rest[i+len(w):]
			}
		})
	}

	// kube's system:node ClusterRole lets a kubelet read RuntimeClasses
	// (it looks up the handler of each pod it runs), and only read them.
	node := statedir.Layout{Dir: state}.Kubeconfig("node-1")
	if out, err := kubectlWith(kubectl, node, "get", "runtimeclass", "gvisor", "-o", "name"); err != nil || strings.TrimSpace(out) != "runtimeclass.node.k8s.io/gvisor" {
		t.Errorf("node-1 getting RuntimeClass gvisor: %v\n%s", err, out)
	}
	if out, err := kubectlWith(kubectl, node, "delete", "runtimeclass", "gvisor"); err == nil || !strings.Contains(out, `User "system:node:node-1" cannot delete resource "runtimeclasses" in API group "node.k8s.io"`) {
		t.Errorf("node-1 deleting RuntimeClass gvisor: %v, want Forbidden\n%s", err, out)
	}
}
