package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestComponents_KubeAPIRate: the scheduler and the controller-manager
// send their requests at their Kubernetes counterparts' client-side rate
// limits (--kube-api-qps/--kube-api-burst: 50/100 and 20/30), not at
// client-go's default of 5 a second after 10. Binding 40 pods (a binding
// and an event each) at 5 a second takes at least 14 s; creating a
// Deployment's 40 pods (a create and an event each) as long.
func TestComponents_KubeAPIRate(t *testing.T) {
	const pods = 40
	const bound = 8 * time.Second
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, state string)
		run   func(t *testing.T, state string, args ...string) (string, error)
		args  []string
		want  string
	}{
		{
			name: "the scheduler binds 40 pods",
			setup: func(t *testing.T, state string) {
				mustPodlab(t, state, "node", "add", "node-1", "--cpu", "2", "--memory", "4Gi")
				markNodeReady(t, state, "node-1")
				var b strings.Builder
				for i := range pods {
					fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-%d}\nspec: {containers: [{name: web, image: nginx}]}\n", i)
				}
				f := filepath.Join(t.TempDir(), "pods.yaml")
				if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
					t.Fatal(err)
				}
				if out, err := kubectlWith(testenv.Kubectl(t), statedir.Layout{Dir: state}.Kubeconfig("admin"), "create", "-f", f); err != nil {
					t.Fatalf("kubectl create: %v\n%s", err, out)
				}
			},
			run:  schedulerApp,
			args: []string{"scheduler", "--once"},
			want: fmt.Sprintf("scheduled once: %d bound, 0 unschedulable", pods),
		},
		{
			name: "the controller-manager creates a Deployment's 40 pods",
			setup: func(t *testing.T, state string) {
				mustPodlab(t, state, "create", "deployment", "web", "--image", "nginx", "--replicas", fmt.Sprint(pods))
			},
			run:  controllerManagerApp,
			args: []string{"controller-manager", "--once", "--verbosity", "2"},
			want: "settled",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := testenv.StateDir(t)
			serveAPI(t, state)
			tc.setup(t, state)
			start := time.Now()
			out, err := tc.run(t, state, tc.args...)
			took := time.Since(start)
			if err != nil || !strings.Contains(out, tc.want) {
				t.Fatalf("podlab %s: %v, want it to say %q\n%s", strings.Join(tc.args, " "), err, tc.want, out)
			}
			if took > bound {
				t.Errorf("podlab %s took %v, want under %v (client-go's default rate limit, 5 requests a second, would take 14 s or more)", strings.Join(tc.args, " "), took.Round(time.Millisecond), bound)
			}
			t.Logf("podlab %s: %v", strings.Join(tc.args, " "), took.Round(time.Millisecond))
		})
	}
}

// TestComponents_KubeAPIRate_BadInput: refused before any request, with
// what to do.
func TestComponents_KubeAPIRate_BadInput(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, state string, args ...string) (string, error)
		args []string
		want string
	}{
		{"a negative burst", schedulerApp, []string{"scheduler", "--once", "--kube-api-burst", "-1"}, "--kube-api-burst -1: a burst is a number of requests, 0 or more"},
		{"a rate with no burst", controllerManagerApp, []string{"controller-manager", "--once", "--kube-api-qps", "10", "--kube-api-burst", "0"}, "give a burst of at least 1 (or --kube-api-qps -1 for no limit)"},
		{"a rate that is not a number", schedulerApp, []string{"scheduler", "--once", "--kube-api-qps", "fast"}, `invalid argument "fast" for "--kube-api-qps" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.run(t, state, tc.args...)
			if err == nil || !strings.Contains(err.Error()+out, tc.want) {
				t.Errorf("podlab %s: %v, want an error saying %q\n%s", strings.Join(tc.args, " "), err, tc.want, out)
			}
		})
	}
}
