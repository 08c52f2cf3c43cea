package kubelet_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/runc"
)

// buildKernelProbe builds testdata/kernelprobe, static, into a directory
// any uid may read, to be mounted into the pods by a hostPath volume.
func buildKernelProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(testenv.LookPath(t, "go"), "build", "-o", filepath.Join(dir, "kernelprobe"), "./testdata/kernelprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	return dir
}

// probePod runs the kernel probe (from a hostPath volume) in the hello
// image, waiting for SIGTERM, under the RuntimeClass rc ("" for none).
func probePod(t *testing.T, name, probeDir, rc string) *corev1.Pod {
	p := helloPod(t, name)
	if rc != "" {
		p.Spec.RuntimeClassName = &rc
	}
	dir := corev1.HostPathDirectory
	p.Spec.Volumes = []corev1.Volume{{Name: "probe", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: probeDir, Type: &dir}}}}
	ctr := &p.Spec.Containers[0]
	ctr.Command = []string{"/probe/kernelprobe", "--wait"}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "probe", MountPath: "/probe", ReadOnly: true}}
	return p
}

func (c *cluster) runtimeClass(t *testing.T, name, handler string) {
	t.Helper()
	if _, err := c.admin.Create(context.Background(), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}); err != nil {
		t.Fatalf("creating RuntimeClass %s: %v", name, err)
	}
}

// logs reads the pod's container log through the kubelet.
func (c *cluster) logs(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := c.kubelet.Logs(context.Background(), pod, &b, kubelet.LogsOptions{}); err != nil {
		t.Fatalf("logs of %s: %v", pod.Name, err)
	}
	return b.String()
}

// removePod deletes the pod and syncs until the kubelet removed it.
func (c *cluster) removePod(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.admin.Delete(ctx, "pods", "default", name, apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		obj, err := c.admin.Get(ctx, "pods", "default", name)
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := c.kubelet.SyncPod(ctx, obj.(*corev1.Pod)); err != nil {
			t.Logf("SyncPod %s: %v", name, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not removed after 30s", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mountsUnder lists the mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			out = append(out, fs[4])
		}
	}
	return out
}

// processesWith lists the host's processes whose command line holds s.
func processesWith(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name()+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// TestKubelet_RuntimeClass_Runsc: a pod of RuntimeClass gvisor (handler
// runsc) runs under gVisor: Running, its kernel is gVisor's 4.4.0, its log
// is readable, its process on the host is runsc's sandbox, every container
// and the kill and removal use runsc (the sandbox recorded its handler),
// and the deletion leaves no runsc state, process or mount behind. The same
// probe under runc sees the host's kernel.
func TestKubelet_RuntimeClass_Runsc(t *testing.T) {
	testenv.LookPath(t, "runsc")
	c := newCluster(t)
	probe := buildKernelProbe(t)
	c.runtimeClass(t, "gvisor", "runsc")

	c.create(t, probePod(t, "gvisor", probe, "gvisor"))
	c.create(t, probePod(t, "plain", probe, ""))
	g := c.syncUntil(t, "gvisor", 60*time.Second, "Running", running)
	p := c.syncUntil(t, "plain", 30*time.Second, "Running", running)

	waitFor(t, 10*time.Second, "the probe's output", func() bool { return strings.Contains(c.logs(t, g), "kernel=") })
	if out := c.logs(t, g); !strings.Contains(out, "kernel=4.4.0\n") {
		t.Errorf("under runsc the probe says %q, want gVisor's kernel 4.4.0", out)
	}
	waitFor(t, 10*time.Second, "the probe's output", func() bool { return strings.Contains(c.logs(t, p), "kernel=") })
	if out := c.logs(t, p); strings.Contains(out, "kernel=4.4.0\n") || !strings.Contains(out, "kernel=") {
		t.Errorf("under runc the probe says %q, want the host's kernel", out)
	}

	layout := c.kubelet.Layout()
	root := layout.Node.Runtime().HandlerRoot("runsc")
	st, err := c.kubelet.Observe(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sandbox.Handler != "runsc" {
		t.Errorf("sandbox handler %q, want runsc", st.Sandbox.Handler)
	}
	id := st.Containers[0].Latest().ID
	if _, err := os.Stat(filepath.Join(root, id+"_sandbox:"+id+".state")); err != nil {
		t.Errorf("runsc's state of %s: %v", id, err)
	}
	if _, err := os.Stat(filepath.Join(layout.RuncRoot(), id)); err == nil {
		t.Errorf("runc knows the gVisor pod's container %s too", id)
	}
	if procs := processesWith("runsc-sandbox\x00--root=" + root); len(procs) == 0 {
		t.Errorf("no runsc-sandbox process with --root=%s", root)
	}
	// kubectl exec reaches the container through the sandbox's runtime
	var out bytes.Buffer
	code, err := c.kubelet.Exec(context.Background(), g, "web", []string{"/probe/kernelprobe"}, kubelet.ExecOptions{Stdout: &out, Stderr: &out})
	if err != nil || code != 0 || !strings.Contains(out.String(), "kernel=4.4.0\n") {
		t.Errorf("exec in the gVisor pod: code %d, %v, output %q", code, err, out.String())
	}
	if pst, _ := c.kubelet.Observe(context.Background(), p); pst.Sandbox.Handler != "" {
		t.Errorf("the plain pod's sandbox handler %q, want \"\" (the runtime's default)", pst.Sandbox.Handler)
	}

	c.removePod(t, "gvisor")
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		t.Errorf("left in runsc's root: %s", e.Name())
	}
	if procs := processesWith("--root=" + root); len(procs) > 0 {
		t.Errorf("runsc processes left: %q", procs)
	}
	if m := mountsUnder(t, layout.Dir); len(m) > 0 {
		// the plain pod's namespaces are still pinned: only gVisor's count
		for _, mp := range m {
			if strings.Contains(mp, string(g.UID)) {
				t.Errorf("mount left: %s", mp)
			}
		}
	}
	if sbs := c.sandboxesOf(t, g.UID); len(sbs) != 0 {
		t.Errorf("the runtime kept the gVisor pod's sandbox: %v", sbs)
	}
}

// TestKubelet_RuntimeClass_UnknownHandler: a RuntimeClass whose handler the
// node does not know fails RunPodSandbox with containerd's text; the pod
// stays ContainerCreating and nothing of it is on the node.
func TestKubelet_RuntimeClass_UnknownHandler(t *testing.T) {
	c := newCluster(t)
	c.runtimeClass(t, "nowhere", "nope")
	lost := helloPod(t, "lost2")
	rc := "nowhere"
	lost.Spec.RuntimeClassName = &rc
	pod := c.create(t, lost)

	_, err := c.kubelet.SandboxStage(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), `no runtime for "nope" is configured`) {
		t.Fatalf("SandboxStage: %v, want the runtime's refusal of handler nope", err)
	}
	const want = `Warning FailedCreatePodSandBox: Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nope" is configured`
	if ev := c.events(t, pod); !hasEvent(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
	if err := c.kubelet.SyncPod(context.Background(), c.get(t, "lost2")); err == nil {
		t.Errorf("SyncPod of a pod with an unknown handler: no error")
	}
	p := c.get(t, "lost2")
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil ||
		p.Status.ContainerStatuses[0].State.Waiting.Reason != kubelet.ReasonContainerCreating || p.Status.Phase != corev1.PodPending {
		t.Errorf("status, want Pending and ContainerCreating:\n%s", statusText(p))
	}
	st, err := c.kubelet.Observe(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leftovers || st.Sandbox.ID != "" {
		t.Errorf("left on the node: leftovers %v, sandbox %q", st.Leftovers, st.Sandbox.ID)
	}
}

// TestKubelet_RuntimeClass_Deleted: a RuntimeClass deleted after the pod
// was admitted is the API server's NotFound when the kubelet looks, as the
// kubelet's runtimeclass manager reports it.
func TestKubelet_RuntimeClass_Deleted(t *testing.T) {
	c := newCluster(t)
	c.runtimeClass(t, "brief", "runc")
	p := helloPod(t, "orphaned")
	rc := "brief"
	p.Spec.RuntimeClassName = &rc
	pod := c.create(t, p)
	if _, err := c.admin.Delete(context.Background(), "runtimeclasses", "", "brief", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.kubelet.SandboxStage(context.Background(), pod)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("SandboxStage: %v, want NotFound", err)
	}
	const want = `Warning FailedCreatePodSandBox: Failed to create pod sandbox: runtimeclass.node.k8s.io "brief" not found`
	if ev := c.events(t, pod); !hasEvent(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
}

// TestKubelet_RuntimeClass_Crun: crun, the runtime the chain names. On a
// host with hybrid cgroups whose v2 mount has controllers (these machines)
// crun refuses every container: the kubelet says why in one event, before
// running it, and makes nothing. It then runs for real: on such a host in
// a mount namespace of its own without the cgroup v2 mount (pure v1, as
// crun sees it), on any other host as it is. Its config.json says the
// spec version crun 1.8.1 accepts.
func TestKubelet_RuntimeClass_Crun(t *testing.T) {
	crun := testenv.LookPath(t, "crun")
	mode, err := runc.CgroupModeAt(runc.CgroupMountRoot)
	if err != nil {
		t.Fatal(err)
	}
	handler := "crun"
	var wrapped runc.Handler
	if mode == runc.CgroupHybridWithControllers {
		// crun in a mount namespace where /sys/fs/cgroup/unified is gone.
		wrapper := filepath.Join(t.TempDir(), "crun-v1")
		script := "#!/bin/sh\nexec " + testenv.LookPath(t, "unshare") + " -m -- /bin/sh -c 'umount /sys/fs/cgroup/unified && exec \"$0\" \"$@\"' " + crun + " \"$@\"\n"
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		h, _ := runc.LookupHandler(runc.DefaultHandlers(""), "crun")
		h.Name, h.Binary, h.RefusesHybridCgroups = "crun-v1", wrapper, false
		wrapped, handler = h, "crun-v1"
	}
	c := newClusterWithRuntime(t, func(rc *cri.Config) {
		rc.Handlers = runc.DefaultHandlers(rc.Runtime)
		if wrapped.Name != "" {
			rc.Handlers = append(rc.Handlers, wrapped)
		}
	})
	probe := buildKernelProbe(t)
	c.runtimeClass(t, "crun", "crun")
	c.runtimeClass(t, "crun-runs", handler)

	if mode == runc.CgroupHybridWithControllers {
		pod := c.create(t, probePod(t, "refused", probe, "crun"))
		_, err := c.kubelet.SandboxStage(context.Background(), pod)
		if err == nil || !strings.Contains(err.Error(), "refuses hosts with hybrid cgroups") {
			t.Fatalf("SandboxStage: %v, want the runtime's refusal of hybrid cgroups", err)
		}
		const want = "Warning FailedCreatePodSandBox: Failed to create pod sandbox: rpc error: code = Unknown desc = crun 1.8.1 refuses hosts with hybrid cgroups (v1 controllers + a v2 mount with controllers, /sys/fs/cgroup/unified): use runc or a pure cgroup v2 host"
		ev := c.events(t, pod)
		if !hasEvent(ev, want) {
			t.Errorf("events %q, want %q", ev, want)
		}
		if st, _ := c.kubelet.Observe(context.Background(), c.get(t, "refused")); st.Leftovers {
			t.Errorf("the refused pod left something on the node")
		}
	}

	pod := c.create(t, probePod(t, "crun", probe, "crun-runs"))
	pod = c.syncUntil(t, "crun", 60*time.Second, "Running", running)
	waitFor(t, 10*time.Second, "the probe's output", func() bool { return strings.Contains(c.logs(t, pod), "kernel=") })
	if out := c.logs(t, pod); strings.Contains(out, "kernel=4.4.0\n") {
		t.Errorf("under crun the probe says %q, want the host's kernel", out)
	}
	st, err := c.kubelet.Observe(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	id := st.Containers[0].Latest().ID
	root := c.kubelet.Layout().Node.Runtime().HandlerRoot(handler)
	if _, err := os.Stat(filepath.Join(root, id, "status")); err != nil {
		t.Errorf("crun's state of %s: %v", id, err)
	}
	b, err := os.ReadFile(c.inspect(t, id).Info.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"ociVersion": "1.0.0"`)) {
		t.Errorf("config.json for crun does not say ociVersion 1.0.0:\n%.200s", b)
	}
	c.removePod(t, "crun")
	if ents, _ := os.ReadDir(root); len(ents) > 0 {
		t.Errorf("left in crun's root: %v", ents)
	}
}

// TestKubelet_RuntimeClass_CrunMissing: a handler whose binary is not
// installed fails the sandbox with an error naming the Debian package.
func TestKubelet_RuntimeClass_CrunMissing(t *testing.T) {
	c := newClusterWithRuntime(t, func(rc *cri.Config) {
		rc.Handlers = runc.DefaultHandlers(rc.Runtime)
		for i := range rc.Handlers {
			if rc.Handlers[i].Name == "crun" {
				rc.Handlers[i].Binary = filepath.Join(t.TempDir(), "crun")
			}
		}
	})
	c.runtimeClass(t, "crun", "crun")
	p := helloPod(t, "nocrun")
	rc := "crun"
	p.Spec.RuntimeClassName = &rc
	pod := c.create(t, p)
	_, err := c.kubelet.SandboxStage(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "apt-get install crun") {
		t.Errorf("error %q does not name the crun package", err)
	}
	if st, _ := c.kubelet.Observe(context.Background(), c.get(t, "nocrun")); st.Leftovers {
		t.Errorf("left something on the node")
	}
}
