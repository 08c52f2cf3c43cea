package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestDeploymentAcrossTwoNodes is issue 4's "done when": the kubelets of two
// nodes, the scheduler and the controller-manager each run in their own
// process, watching; `podlab create deployment` then ends with two real
// containers Running, one on each node, reported by get pods -o wide; and
// deleting the Deployment removes every container, bundle and namespace.
func TestDeploymentAcrossTwoNodes(t *testing.T) {
	testenv.RequireRoot(t)
	runc := testenv.Runc(t)
	ref := helloRegistry(t)

	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "node", "add", "node-2", "--cpu", "2", "--memory", "4Gi")

	// Each component is this test binary run as podlab (see TestMain).
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], append([]string{"--state-dir", state}, args...)...)
		cmd.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1", "PODLAB_RUNTIME="+runc)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGINT)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("podlab %s:\n%s", strings.Join(args, " "), out.String())
			}
		})
		return cmd
	}
	// registered first, cleaned up last: the kubelets stop after the others
	start("kubelet", "--node", "node-1")
	start("kubelet", "--node", "node-2")
	start("scheduler")
	start("controller-manager")

	// Both nodes Ready first, as one checks kubectl get nodes: a kubelet
	// starts its node's runtime before it registers, and the scheduler
	// counts a node not yet Ready as unreachable (both pods would go to
	// the other node).
	ready := time.Now().Add(60 * time.Second)
	for {
		nodes := mustPodlab(t, state, "get", "nodes")
		if regexp.MustCompile(`(?m)^node-1\s+Ready\b`).MatchString(nodes) && regexp.MustCompile(`(?m)^node-2\s+Ready\b`).MatchString(nodes) {
			break
		}
		if time.Now().After(ready) {
			t.Fatalf("the two nodes were not Ready in 60s:\n%s", nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mustPodlab(t, state, "create", "deployment", "web", "--image", ref, "--replicas", "2")
	var wide string
	deadline := time.Now().Add(60 * time.Second)
	for {
		wide = mustPodlab(t, state, "get", "pods", "-o", "wide")
		if strings.Count(wide, " Running ") == 2 && strings.Contains(wide, "node-1") && strings.Contains(wide, "node-2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Deployment's pods did not both reach Running on two nodes in 60s:\n%s", wide)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("podlab get pods -o wide:\n%s", wide)
	for _, line := range strings.Split(strings.TrimSpace(wide), "\n")[1:] {
		if !strings.HasPrefix(line, "web-") || !strings.Contains(line, "1/1") {
			t.Errorf("not a Running pod of the Deployment: %q", line)
		}
	}
	if rs := mustPodlab(t, state, "get", "replicasets"); !strings.Contains(rs, "web-") || !strings.Contains(rs, "   2   ") {
		t.Errorf("get replicasets:\n%s", rs)
	}

	mustPodlab(t, state, "delete", "deployment", "web")
	deadline = time.Now().Add(60 * time.Second)
	for {
		out, _, _ := podlab(t, state, "get", "pods")
		if strings.TrimSpace(out) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pods were not gone 60s after deleting the Deployment:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, node := range []string{"node-1", "node-2"} {
		dir := statedir.Layout{Dir: state}.Node(node).Dir
		for _, d := range []string{"bundles", "netns", "ipcns", "utsns", "containers", "runc"} {
			if ents, _ := os.ReadDir(filepath.Join(dir, d)); len(ents) > 0 {
				t.Errorf("%s/%s still holds %d entries after the delete", dir, d, len(ents))
			}
		}
	}
}
