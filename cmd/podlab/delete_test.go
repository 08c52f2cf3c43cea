package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestDelete_KubectlsText: podlab delete prints the line real kubectl
// v1.37 prints for the same delete, against the same podlab apiserver:
// `pod "web" deleted from default namespace`, a group-qualified kind, no
// namespace for cluster-scoped objects, "force deleted" with --force.
func TestDelete_KubectlsText(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, _ := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	kubeconfig := statedir.Layout{Dir: state}.Kubeconfig("admin")
	for _, tc := range []struct {
		name   string
		create []string // NAME stands for the object's name
		delete []string // after "delete"
	}{
		{"pod", []string{"run", "NAME", "--image", "nginx"}, []string{"pod", "NAME"}},
		{"pod, force", []string{"run", "NAME", "--image", "nginx"}, []string{"pod", "NAME", "--force", "--grace-period=0"}},
		{"deployment", []string{"create", "deployment", "NAME", "--image", "nginx"}, []string{"deployment", "NAME"}},
		{"namespace", []string{"create", "namespace", "NAME"}, []string{"namespace", "NAME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := func(args []string, name string) []string {
				out := make([]string, len(args))
				for i, a := range args {
					out[i] = strings.ReplaceAll(a, "NAME", name)
				}
				return out
			}
			mustPodlab(t, state, sub(tc.create, "by-kubectl")...)
			mustPodlab(t, state, sub(tc.create, "by-podlab")...)
			out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "delete", "--wait=false"}, sub(tc.delete, "by-kubectl")...)...).Output()
			if err != nil {
				t.Fatalf("kubectl delete: %v\n%s", err, out)
			}
			want := strings.ReplaceAll(strings.TrimSpace(string(out)), "by-kubectl", "by-podlab")
			got := mustPodlab(t, state, append([]string{"delete"}, sub(tc.delete, "by-podlab")...)...)
			if !strings.Contains(got, "\n"+want+"\n") {
				t.Errorf("podlab delete printed\n%s\nwithout kubectl's line\n%s", got, want)
			}
		})
	}
}
