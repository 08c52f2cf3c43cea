package kubelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/internal/testenv/demoregistry"
	"github.com/podlab/podlab/internal/testenv/noderuntime"
	"github.com/podlab/podlab/steps/statedir"
)

// serveNodeRuntime serves node-1's runtime (steps/cri, in-process) on the
// node's own socket, and returns the kubelet's CRI clients of it, as
// ConnectRuntime would make them.
func serveNodeRuntime(t *testing.T) (statedir.Node, *criRuntime) {
	t.Helper()
	l, err := statedir.New(testenv.StateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	n := l.Node("node-1")
	c := noderuntime.Serve(t, n, testenv.Runc(t), []string{os.Args[0]})
	return n, &criRuntime{rt: c.Runtime, img: c.Image}
}

// demoHello is podlab/hello:1.0 in an in-process registry.
func demoHello(t *testing.T) string { return demoregistry.Serve(t) + "/podlab/hello:1.0" }

// A pod's life through the kubelet's CRI side against a real runtime on
// the node's socket: the sandbox from generatePodSandboxConfig, the image
// by its pull policy, the container from generateContainerConfig, the
// status found by the pod's labels, kill, remove.
func TestCRIRuntime_PodLifecycle(t *testing.T) {
	ctx := context.Background()
	ref := demoHello(t)
	n, r := serveNodeRuntime(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hello", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
			Env: []corev1.EnvVar{{Name: "GREETING", Value: "Hello from the kubelet over CRI"}}}}}}
	c := &pod.Spec.Containers[0]
	logRoot := n.PodLogsDir()

	// Never, before any pull: refused, as the kubelet's ErrImageNeverPull.
	never := *c
	never.ImagePullPolicy = corev1.PullNever
	if _, err := r.ensureImageExists(ctx, &never, nil, nil); !errors.Is(err, ErrImageNeverPull) {
		t.Fatalf("Never with no image: %v, want ErrImageNeverPull", err)
	}
	sbID, sbCfg, err := r.createPodSandbox(ctx, pod, sandboxInputs{LogRoot: logRoot}, "")
	if err != nil {
		t.Fatal(err)
	}
	pulling := 0
	ensured, err := r.ensureImageExists(ctx, c, sbCfg, func() { pulling++ })
	imageRef, img := ensured.Ref, ensured.Image
	if err != nil || !ensured.Pulled || pulling != 1 || !strings.HasPrefix(imageRef, "sha256:") {
		t.Fatalf("ensureImageExists (IfNotPresent, not present): %q pulled=%v (pulling called %d times) %v, want a pull and the image id", imageRef, ensured.Pulled, pulling, err)
	}
	if again, err := r.ensureImageExists(ctx, c, sbCfg, func() { pulling++ }); err != nil || again.Pulled || pulling != 1 || again.Ref != imageRef {
		t.Fatalf("ensureImageExists again: %q pulled=%v %v, want the same id, no pull", again.Ref, again.Pulled, err)
	}
	id, err := r.startContainer(ctx, sbID, sbCfg, pod, c, containerInputs{ImageRef: imageRef, ImageUser: imageUser(img),
		Env: []string{"GREETING=Hello from the kubelet over CRI"}, OOMScoreAdj: 1000})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.podStatus(ctx, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready() == nil || st.Ready().Id != sbID {
		t.Fatalf("podStatus: sandboxes %v, want %s ready", st.Sandboxes, sbID)
	}
	cs := st.Container("hello")
	if cs == nil || cs.Id != id || cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING || cs.Labels[LabelPodUID] != "uid-web" {
		t.Fatalf("podStatus: container %v, want %s running with the pod's labels", cs, id)
	}
	logPath := filepath.Join(logRoot, "default_web_uid-web", "hello", "0.log")
	if cs.LogPath != logPath {
		t.Fatalf("the container's log is at %s, want %s (the kubelet reads it there)", cs.LogPath, logPath)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "Hello from the kubelet over CRI"); b, _ = os.ReadFile(logPath) {
		if time.Now().After(deadline) {
			t.Fatalf("no greeting in %s: %q", logPath, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.killPod(ctx, st, 2); err != nil {
		t.Fatal(err)
	}
	if st, err = r.podStatus(ctx, pod.UID); err != nil || st.Ready() != nil || st.Container("hello").State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("after killPod: %v %v, want the sandbox not ready and the container exited", st, err)
	}
	if err := r.removePod(ctx, st); err != nil {
		t.Fatal(err)
	}
	if st, err = r.podStatus(ctx, pod.UID); err != nil || len(st.Sandboxes)+len(st.Containers) != 0 {
		t.Fatalf("after removePod: %v %v, want nothing", st, err)
	}
	// A pod the runtime never saw has an empty status.
	if st, err := r.podStatus(ctx, "uid-other"); err != nil || len(st.Sandboxes)+len(st.Containers) != 0 {
		t.Fatalf("podStatus of another pod: %v %v", st, err)
	}
}
