package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
)

// psOf lists the command lines of the processes container id sees (its
// /proc, as ps shows them), PID first.
func psOf(t *testing.T, n *node, id string) string {
	t.Helper()
	ex, err := n.rt.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ps", "-e", "-o", "pid=,args="}, Timeout: 10})
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("ps -e in %s: %v %v %s", id, ex, err, ex.GetStderr())
	}
	return string(ex.Stdout)
}

// A pod's containers share its PID namespace when the kubelet asks (POD,
// shareProcessNamespace: true), with the sandbox's pause process as PID 1,
// as containerd's pause; CONTAINER gives each its own (the default), NODE
// the node's (hostPID).
func TestServer_PidNamespace(t *testing.T) {
	hostInit, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	hostInit1 := strings.Split(string(hostInit), "\x00")[0]
	for _, tc := range []struct {
		name     string
		sandbox  runtimeapi.NamespaceMode // the pod's pid mode
		ctr      runtimeapi.NamespaceMode // the containers'
		pause    bool                     // the sandbox starts a pause process
		see      bool                     // each container sees the other's process
		pid1Self bool                     // a container's own process is PID 1
	}{
		{name: "POD: shared with the pause process as PID 1", sandbox: runtimeapi.NamespaceMode_POD, ctr: runtimeapi.NamespaceMode_POD, pause: true, see: true},
		{name: "CONTAINER: each its own", sandbox: runtimeapi.NamespaceMode_CONTAINER, ctr: runtimeapi.NamespaceMode_CONTAINER, pid1Self: true},
		{name: "POD sandbox with CONTAINER containers: each its own", sandbox: runtimeapi.NamespaceMode_POD, ctr: runtimeapi.NamespaceMode_CONTAINER, pause: true, pid1Self: true},
		{name: "NODE: the node's", sandbox: runtimeapi.NamespaceMode_NODE, ctr: runtimeapi.NamespaceMode_NODE, see: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newStdioPod(t, "pid", &runtimeapi.NamespaceOption{Pid: tc.sandbox})
			ctx := context.Background()
			pidFile := p.n.srv.pauseOptions(&sandboxRecord{ID: p.sb}).PidFile
			nsFile := p.n.node.NamespaceFile("pid", p.sb)
			pausePid := 0
			if b, err := os.ReadFile(pidFile); err == nil {
				pausePid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if tc.pause != (pausePid > 0 && isNamespaceMount(nsFile)) {
				t.Fatalf("pause process %d, pinned %v: want a pause process %v", pausePid, isNamespaceMount(nsFile), tc.pause)
			}
			ids := map[string]string{}
			for _, name := range []string{"one", "two"} {
				cfg := withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name},
					Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
						NamespaceOptions: &runtimeapi.NamespaceOption{Pid: tc.ctr}}}},
					"sleep", "100"+map[string]string{"one": "1", "two": "2"}[name])
				ids[name] = p.run(t, cfg)
			}
			ps := psOf(t, p.n, ids["one"])
			if got := strings.Contains(ps, "sleep 1002"); got != tc.see {
				t.Errorf("container one sees two's sleep 1002: %v, want %v:\n%s", got, tc.see, ps)
			}
			first := strings.Fields(strings.SplitN(strings.TrimSpace(ps), "\n", 2)[0])
			switch {
			case tc.pid1Self && (first[0] != "1" || !strings.Contains(strings.Join(first, " "), "sleep 1001")):
				t.Errorf("PID 1 in container one is %q, want its own sleep 1001:\n%s", first, ps)
			case tc.pause && tc.see:
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pausePid))
				if want := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")); first[0] != "1" || strings.Join(first[1:], " ") != want {
					t.Errorf("PID 1 in the shared namespace is %q, want the pause process %q:\n%s", first, want, ps)
				}
			case tc.sandbox == runtimeapi.NamespaceMode_NODE && !strings.Contains(ps, hostInit1):
				t.Errorf("container one does not see the node's init %q:\n%s", hostInit1, ps)
			}
			if tc.pause && tc.see {
				// PID 1 is the pause process: its files are not the
				// containers' to open (non-dumpable; chrooted).
				ex, err := p.n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ids["two"], Cmd: []string{"ls", "/proc/1/root/"}, Timeout: 10})
				if err != nil || ex.ExitCode == 0 {
					t.Errorf("ls /proc/1/root/ in container two: %v %v %q, want refused", ex, err, ex.GetStdout())
				}
			}
			if _, err := p.n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sb}); err != nil {
				t.Fatal(err)
			}
			if pausePid > 0 {
				if err := unix.Kill(pausePid, 0); err == nil {
					if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pausePid)); !strings.Contains(string(b), ") Z") {
						t.Errorf("the pause process %d is left after RemovePodSandbox", pausePid)
					}
				}
			}
			if _, err := os.Lstat(nsFile); err == nil {
				t.Errorf("%s is left after RemovePodSandbox", nsFile)
			}
		})
	}
}

// A pod whose pause process is gone takes no new container in its PID
// namespace: CreateContainer says why; the sandbox is still removed whole.
func TestServer_PidNamespace_PauseGone(t *testing.T) {
	p := newStdioPod(t, "pid-gone", nil)
	ctx := context.Background()
	pidFile := p.n.srv.pauseOptions(&sandboxRecord{ID: p.sb}).PidFile
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the pause process's end", func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(st), ") Z")
	})
	_, err = p.n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.sb, SandboxConfig: p.pc,
		Config: withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "late"}, Image: &runtimeapi.ImageSpec{Image: p.ref}}, "sleep", "10")})
	if err == nil || !strings.Contains(err.Error(), "pause process") || !strings.Contains(err.Error(), "remove the sandbox") {
		t.Fatalf("CreateContainer with the pause process gone: %v, want an error naming it", err)
	}
	if _, err := p.n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sb}); err != nil {
		t.Fatal(err)
	}
}

// A pause process whose pinned namespace goes (unmounted, as `podlab
// reset` unmounts everything under the state directory) leaves by itself.
func TestServer_PidNamespace_PinRemoved(t *testing.T) {
	p := newStdioPod(t, "pid-unpinned", nil)
	b, err := os.ReadFile(p.n.srv.pauseOptions(&sandboxRecord{ID: p.sb}).PidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := unix.Unmount(p.n.node.NamespaceFile("pid", p.sb), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the pause process's end", func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(st), ") Z")
	})
}

// A pod with a user namespace of its own (hostUsers: false) shares its
// PID namespace too: the pause process makes the user namespace and the
// others inside it, so that the PID namespace belongs to the pod's user
// namespace, as the containers that join both need.
func TestServer_PidNamespace_UserNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	host := labRegistry(t)
	dir := testenv.StateDir(t)
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil { // the pod's root searches them
			t.Fatal(err)
		}
	}
	n := startNode(t, dir)
	defer n.cleanupSandboxes(t)
	ref := host + "/podlab/hello:1.0"
	if _, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	base := uint32(65536 * (20000 + os.Getpid()%20000))
	pc := usernsPodConfig("uns-pid", base)
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(n.srv.pauseOptions(&sandboxRecord{ID: sb.PodSandboxId}).PidFile)
	if err != nil {
		t.Fatal(err)
	}
	pausePid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for _, k := range []string{"user", "net", "ipc", "uts", "pid"} {
		var a, p unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pausePid, k), &a); err != nil {
			t.Fatal(err)
		}
		if err := unix.Stat(n.node.NamespaceFile(k, sb.PodSandboxId), &p); err != nil || a.Ino != p.Ino {
			t.Errorf("the pinned %s namespace is not the pause process's (%v)", k, err)
		}
	}
	if m, _ := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pausePid)); !strings.Contains(string(m), strconv.Itoa(int(base))) {
		t.Errorf("the pause process's uid_map %q, want the pod's range from %d", m, base)
	}
	ids := map[string]string{}
	for _, name := range []string{"one", "two"} {
		cfg := withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: ref}},
			"sleep", "200"+map[string]string{"one": "1", "two": "2"}[name])
		cr, err := n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cfg, SandboxConfig: pc})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
			t.Fatal(err)
		}
		ids[name] = cr.ContainerId
	}
	ps := psOf(t, n, ids["one"])
	if !strings.Contains(ps, "sleep 2002") || !strings.HasPrefix(strings.TrimSpace(ps), "1 ") {
		t.Fatalf("container one's processes, want two's sleep 2002 and a PID 1:\n%s", ps)
	}
	ex, err := n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ids["two"], Cmd: []string{"ls", "/proc/1/root/"}, Timeout: 10})
	if err != nil || ex.ExitCode == 0 {
		t.Errorf("ls /proc/1/root/ in container two: %v %v %q, want refused", ex, err, ex.GetStdout())
	}
	if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the pause process's end", func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pausePid))
		return err != nil || strings.Contains(string(st), ") Z")
	})
}
