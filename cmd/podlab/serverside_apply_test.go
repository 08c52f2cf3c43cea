package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubectl_ServerSideApply: real kubectl against `podlab apiserver`.
// `kubectl apply --server-side` creates, applies again, meets another
// manager's conflict in kube's words and takes the field with
// --force-conflicts; client-side apply and the managedFields it leaves;
// client-go's DeleteCollection and its deletecollection 403.
func TestKubectl_ServerSideApply(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	l := statedir.Layout{Dir: state}
	run := func(user string, args ...string) (string, error) {
		return kubectlWith(kubectl, l.Kubeconfig(user), args...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run("admin", args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	dir := t.TempDir()
	manifest := func(name, label string) string {
		p := filepath.Join(dir, name+"-"+label+".yaml")
		y := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels:\n    app: " + label + "\nspec:\n  containers:\n  - name: web\n    image: nginx:1.25\n"
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	if out := must("apply", "--server-side", "-f", manifest("web", "web")); !strings.Contains(out, "pod/web serverside-applied") {
		t.Errorf("first server-side apply: %q, want pod/web serverside-applied", out)
	}
	must("apply", "--server-side", "-f", manifest("web", "web2"))
	if out := must("get", "pod", "web", "-o", "jsonpath={.metadata.labels.app}"); out != "web2" {
		t.Errorf("label after the second apply: %q, want web2", out)
	}
	out, err := run("admin", "apply", "--server-side", "--field-manager=bob", "-f", manifest("web", "bob"))
	if err == nil || !strings.Contains(out, `Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.app`) {
		t.Errorf("another manager's apply: %v\n%s\nwant kube's conflict with \"kubectl\" on .metadata.labels.app", err, out)
	}
	must("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", manifest("web", "bob"))
	yaml := must("get", "pod", "web", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: bob", "operation: Apply", "fieldsType: FieldsV1", "f:app: {}"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("get -o yaml --show-managed-fields lacks %q:\n%s", want, yaml)
		}
	}

	// client-side apply: a create, then a patch, under kubectl's own names
	must("apply", "-f", manifest("csa", "one"))
	must("apply", "-f", manifest("csa", "two"))
	yaml = must("get", "pod", "csa", "-o", "yaml", "--show-managed-fields")
	if !strings.Contains(yaml, "manager: kubectl-client-side-apply") || !strings.Contains(yaml, "operation: Update") {
		t.Errorf("after kubectl apply, managedFields do not name kubectl-client-side-apply:\n%s", yaml)
	}

	// DeleteCollection with client-go: a viewer is refused in kube's words,
	// the admin deletes what the selector matches and gets the list back
	cfg := func(user string) *kubernetes.Clientset {
		rc, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig(user))
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	ctx := context.Background()
	err = cfg("viewer").CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=two"})
	if err == nil || !strings.Contains(err.Error(), `User "viewer" cannot deletecollection resource "pods" in API group "" in the namespace "default"`) {
		t.Errorf("viewer's deletecollection: %v, want kube's 403", err)
	}
	if err := cfg("admin").CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=two"}); err != nil {
		t.Fatalf("admin's deletecollection: %v", err)
	}
	if out := must("get", "pods", "-o", "name"); strings.TrimSpace(out) != "pod/web" {
		t.Errorf("pods after deleting app=two: %q, want only pod/web", out)
	}
	if out := must("delete", "pods", "--all"); !strings.Contains(out, `pod "web" deleted`) {
		t.Errorf("kubectl delete pods --all: %q", out)
	}
}
