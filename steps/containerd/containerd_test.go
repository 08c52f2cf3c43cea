package containerd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/registry"
	"github.com/podlab/podlab/steps/statedir"
)

// labImages is an OCI layout with the images a pod under the lab
// containerd needs: podlab/hello:1.0 and the sandbox image pause:3.10.2,
// both built here.
func labImages(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	hello := filepath.Join(tmp, "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), hello); err != nil {
		t.Fatal(err)
	}
	helloImg, err := images.Hello(ctx, images.HelloOptions{Binary: hello})
	if err != nil {
		t.Fatal(err)
	}
	testenv.LookPath(t, "gcc")
	pause := filepath.Join(tmp, "pause")
	if err := images.BuildPause(ctx, pause); err != nil {
		t.Fatal(err)
	}
	pauseImg, err := images.Pause(ctx, images.PauseOptions{Binary: pause})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "layout")
	if err := images.WriteLayout(ctx, dir, []images.Named{{Ref: images.HelloRef, Image: helloImg}, {Ref: images.PauseRef, Image: pauseImg}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serveImages runs the lab registry on the layout until the test ends and
// returns its URL.
func serveImages(t *testing.T, layout string) string {
	t.Helper()
	ln, err := registry.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- registry.Run(ctx, ln, layout, registry.Options{BlobDir: filepath.Join(t.TempDir(), "blobs")}, func([]registry.Loaded) { close(ready) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the registry stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the registry never loaded its images")
	}
	return "http://" + ln.Addr().String()
}

// crictl runs bin/crictl with the lab containerd's crictl.yaml.
func crictl(t *testing.T, l statedir.Containerd, args ...string) string {
	t.Helper()
	bin := testenv.LookPath(t, "crictl")
	cmd := exec.Command(bin, append([]string{"--config", l.CrictlConfig()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The lab containerd, started on a fresh state directory, runs a pod
// that crictl makes by hand: the sandbox (pause, pulled from the lab
// registry as registry.k8s.io's mirror), a container of podlab/hello
// (pulled as docker.io's), its logs; crictl cleans it up, containerd
// stops, and nothing of it is left running or mounted.
func TestContainerd_RunsAPodWithCrictl(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	runc := testenv.Runc(t)
	bin, err := containerd.Find()
	if errors.Is(err, containerd.ErrNotInstalled) {
		testenv.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	mirror := serveImages(t, labImages(t))

	state, err := statedir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := state.Containerd()
	cfg := containerd.FromLayout(state, runc, "/usr/lib/cni")
	ctx := context.Background()
	var log bytes.Buffer
	d, _, err := containerd.Start(ctx, cfg, bin, mirror, &log)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			d.Stop(10 * time.Second)
		}
		if t.Failed() {
			t.Logf("containerd's log:\n%s", log.String())
		}
		containerd.Cleanup(context.Background(), l, runc)
		mounts, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(state.Dir))
		for i := len(mounts) - 1; i >= 0; i-- {
			exec.Command("umount", "-l", mounts[i].Mountpoint).Run()
		}
	})
	r, err := containerd.Ready(ctx, l.Socket(), time.Minute, d.Exited())
	if err != nil {
		t.Fatal(err)
	}
	if r.Version.RuntimeName != "containerd" || r.Version.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %+v, want containerd speaking CRI v1", r.Version)
	}

	// A second start while this one runs is refused, and says so.
	if d2, _, err := containerd.Start(ctx, cfg, bin, mirror, &log); !errors.Is(err, containerd.ErrRunning) {
		if d2 != nil {
			d2.Stop(time.Second)
		}
		t.Errorf("a second Start: %v, want ErrRunning", err)
	}

	work := t.TempDir()
	uid := "6c9d2a6e-0000-4000-8000-000000000001"
	pod := writeJSON(t, filepath.Join(work, "pod.json"), map[string]any{
		"metadata":      map[string]any{"name": "hello", "namespace": "default", "uid": uid},
		"log_directory": filepath.Join(l.PodLogsDir(), "default_hello_"+uid),
		"linux":         map[string]any{"cgroup_parent": l.CgroupParent + "/pod" + uid},
	})
	ctr := writeJSON(t, filepath.Join(work, "ctr.json"), map[string]any{
		"metadata": map[string]any{"name": "hello"},
		"image":    map[string]any{"image": "docker.io/podlab/hello:1.0"},
		"log_path": "hello/0.log",
	})
	podID := crictl(t, l, "runp", pod)
	ctrID := crictl(t, l, "create", podID, ctr, pod)
	crictl(t, l, "start", ctrID)

	var inspP struct {
		Status struct{ State string } `json:"status"`
	}
	if err := json.Unmarshal([]byte(crictl(t, l, "inspectp", podID)), &inspP); err != nil || inspP.Status.State != "SANDBOX_READY" {
		t.Errorf("crictl inspectp: state %q (%v), want SANDBOX_READY", inspP.Status.State, err)
	}
	var logs string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		logs = crictl(t, l, "logs", ctrID)
		return strings.Contains(logs, "Hello from podlab/hello!"), nil
	})
	if err != nil {
		t.Errorf("crictl logs %s: %q, want the hello greeting", ctrID, logs)
	}
	if got := crictl(t, l, "ps", "-q", "--state", "Running"); got != ctrID {
		t.Errorf("crictl ps --state Running: %q, want %s", got, ctrID)
	}
	// Where the pod really runs: its bundle under containerd's state, its
	// runc under the state directory, its cgroup under the lab's root.
	if _, err := os.Stat(filepath.Join(l.State(), "io.containerd.runtime.v2.task", containerd.Namespace, ctrID, "config.json")); err != nil {
		t.Errorf("the container's bundle: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.RuncRoot(), containerd.Namespace, ctrID, "state.json")); err != nil {
		t.Errorf("runc's state of the container: %v", err)
	}
	if _, shims, _ := containerd.Processes(l); len(shims) != 1 {
		t.Errorf("shims: %v, want one (the pod's)", shims)
	}

	crictl(t, l, "stop", ctrID)
	crictl(t, l, "rm", ctrID)
	crictl(t, l, "stopp", podID)
	crictl(t, l, "rmp", podID)
	if got := crictl(t, l, "pods", "-q"); got != "" {
		t.Errorf("crictl pods after rmp: %q", got)
	}
	if err := d.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	stopped = true

	// Nothing left running, nothing mounted under the state directory.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		daemons, shims, err := containerd.Processes(l)
		return err == nil && len(daemons)+len(shims) == 0, err
	})
	if err != nil {
		daemons, shims, _ := containerd.Processes(l)
		t.Errorf("left running after stop: containerd %v, shims %v", daemons, shims)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state.Dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		t.Errorf("left mounted: %s (%s)", m.Mountpoint, m.FSType)
	}
}
