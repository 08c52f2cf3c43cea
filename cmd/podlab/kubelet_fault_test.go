package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubelet_RuntimeKilledMidCreate: the node's runtime dies while the
// kubelet waits for its CreateContainer. The kubelet's sync fails with the
// runtime's error; the runtime, started again, cleans what the killed create
// half made; the kubelet's next sync resumes the pod to Running with one
// container, and nothing half-made stays (no mount, cgroup or snapshot
// without a record).
func TestKubelet_RuntimeKilledMidCreate(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1")
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	ref := helloRegistry(t)
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	n := statedir.Layout{Dir: state}.Node("node-1")

	// The runtime by hand, with -v, so that its CRI calls can be watched.
	start := func() (*exec.Cmd, *lockedBuffer) { return startRuntimeByHand(t, state) }
	rt, out := start()
	t.Cleanup(func() {
		podlab(t, state, "delete", "pod", "web", "--force")
		kubeletApp(t, state, "kubelet", "--once")
		rt.Process.Signal(syscall.SIGINT)
		rt.Wait()
	})

	createBoundPod(t, state, "web", "node-1", ref)

	// Kill the runtime while it creates the kubelet's container: as soon
	// as its record of the container says "creating" (written before
	// anything is made; -v narrates a call only once it has returned).
	killed := make(chan bool, 1)
	stop := make(chan struct{})
	go func() {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			select {
			case <-stop:
				killed <- false
				return
			default:
			}
			if creating(n.CRIContainersDir()) {
				rt.Process.Kill()
				rt.Wait()
				killed <- true
				return
			}
		}
		killed <- false
	}()
	first, err := kubeletApp(t, state, "kubelet", "--once")
	close(stop)
	if !<-killed {
		t.Fatalf("the runtime was never seen creating a container (kubelet: %v):\n%s\nruntime:\n%s", err, first, out.String())
	}
	t.Logf("the kubelet's sync while its runtime was killed (err %v):\n%s", err, first)

	rt, out = start()
	if !strings.Contains(out.String(), "cleaned the half-made container") {
		t.Errorf("the runtime, started again, does not say it cleaned the half-made container:\n%s", out.String())
	}
	checkNoOrphans(t, n)
	mustKubeletApp(t, state, "kubelet", "--once")
	got := mustPodlab(t, state, "get", "pod", "web")
	if !strings.Contains(got, "Running") {
		t.Fatalf("after the runtime came back and the kubelet synced again, web is not Running:\n%s", got)
	}
	c := crictlRunner{t: t, bin: testenv.LookPath(t, "crictl"), sock: n.CRISocket(), home: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.home, "crictl.yaml"), []byte("timeout: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ids := strings.Fields(c.must("ps", "-a", "-q", "--name", "app")); len(ids) != 1 {
		t.Errorf("want exactly one container app after the resumed create, the runtime has %d: %v", len(ids), ids)
	}
	checkNoOrphans(t, n)
}

// createBoundPod creates the pod NAME (one container, app, of image) in
// default and binds it to node, as the scheduler would.
func createBoundPod(t *testing.T, state, name, node, image string) {
	t.Helper()
	ctx := context.Background()
	api, err := apiserver.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	admin, err := api.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	if _, err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := admin.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}); err != nil {
		t.Fatal(err)
	}
}

// creating: a container record in dir says "creating" (a CreateContainer
// under way).
func creating(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var r struct{ State string }
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && json.Unmarshal(b, &r) == nil && r.State == "creating" {
			return true
		}
	}
	return false
}
