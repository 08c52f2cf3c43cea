package containerd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/vishvananda/netlink"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/up"
)

// podlab reset while the lab containerd runs a pod: containerd and the
// pod's shim are stopped, the shim's socket outside the state directory
// (/run/containerd/s/<hash>) removed, its bridge deleted, and nothing is
// left mounted, in a cgroup, or on disk.
func TestReset_StopsTheLabContainerdAndItsPods(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	runc := testenv.Runc(t)
	bin, err := containerd.Find()
	if err != nil {
		testenv.Missing(t, "%v", err)
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
	t.Cleanup(func() {
		d.Stop(time.Second)
		if t.Failed() {
			t.Logf("containerd's log:\n%s", log.String())
		}
	})
	if _, err := containerd.Ready(ctx, l.Socket(), time.Minute, d.Exited()); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	uid := "6c9d2a6e-0000-4000-8000-000000000002"
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
	crictl(t, l, "start", crictl(t, l, "create", podID, ctr, pod))
	addr, err := os.ReadFile(filepath.Join(l.State(), "io.containerd.runtime.v2.task", containerd.Namespace, podID, "address"))
	if err != nil {
		t.Fatal(err)
	}
	shimSock := strings.TrimPrefix(strings.TrimSpace(string(addr)), "unix://")
	if filepath.Dir(shimSock) != containerd.ShimSocketDir {
		t.Fatalf("the shim's socket is %s, not under %s", shimSock, containerd.ShimSocketDir)
	}

	res, err := up.Reset(ctx, up.ResetOptions{StateDir: state.Dir, Runtime: runc})
	if err != nil {
		t.Fatalf("reset: %v (%+v)", err, res)
	}
	t.Logf("reset: containerd %q", res.Containerd)
	if daemons, shims, _ := containerd.Processes(l); len(daemons)+len(shims) > 0 {
		t.Errorf("left running after reset: containerd %v, shims %v", daemons, shims)
	}
	if _, err := os.Stat(shimSock); !os.IsNotExist(err) {
		t.Errorf("the shim's socket %s is left (%v)", shimSock, err)
	}
	if _, err := netlink.LinkByName(l.BridgeName()); err == nil {
		t.Errorf("the bridge %s is left", l.BridgeName())
	}
	if m, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(state.Dir)); len(m) > 0 {
		t.Errorf("left mounted: %s and %d more", m[0].Mountpoint, len(m)-1)
	}
	for _, p := range []string{l.Dir, state.CertsDir()} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left (%v)", p, err)
		}
	}
	if len(res.BusyCgroups) > 0 {
		t.Errorf("cgroups with processes left: %v", res.BusyCgroups)
	}
}
