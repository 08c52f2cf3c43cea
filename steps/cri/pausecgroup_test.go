package cri

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

// The pause process of a sandbox of pid mode POD lives in the pod's cgroup,
// in a leaf of its own named by the sandbox's id (containerd's sandbox
// container: <cgroup_parent>/<sandbox id>), in every hierarchy runc puts a
// container in; the leaf goes with the sandbox, however it ends: stopped
// then removed, removed at once, or a create killed after the pause process
// started (cleaned when the runtime starts again).
func TestServer_PauseCgroup(t *testing.T) {
	testenv.RequireRoot(t)
	mounts, err := runc.HostCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, n *node, id string) *node // ends the sandbox; returns the node that serves now
	}{
		{"stopp then rmp", func(t *testing.T, n *node, id string) *node {
			ctx := context.Background()
			if _, err := n.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
				t.Fatal(err)
			}
			if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
				t.Fatal(err)
			}
			return n
		}},
		{"rmp at once", func(t *testing.T, n *node, id string) *node {
			if _, err := n.rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
				t.Fatal(err)
			}
			return n
		}},
		{"a create killed once the pause process ran", func(t *testing.T, n *node, id string) *node {
			markCreating(t, n, id)
			n.stop()
			n2 := startNode(t, n.dir) // New cleans the half-made sandbox
			if _, err := n2.srv.rec.sandbox(id); err == nil {
				t.Fatalf("the half-made sandbox %s is still recorded after the restart", id)
			}
			return n2
		}},
		{"a create killed before the pause process's PID was recorded", func(t *testing.T, n *node, id string) *node {
			sb := markCreating(t, n, id)
			// Killed between the pause process pinning its PID namespace
			// and its PID being written: no PID file.
			if err := os.Remove(n.srv.pauseOptions(sb).PidFile); err != nil {
				t.Fatal(err)
			}
			n.stop()
			n2 := startNode(t, n.dir) // New kills what is left in the leaf, then cleans
			if _, err := n2.srv.rec.sandbox(id); err == nil {
				t.Fatalf("the half-made sandbox %s is still recorded after the restart", id)
			}
			return n2
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, testenv.StateDir(t))
			parent := n.node.KubepodsCgroup() + "/besteffort/poduid-pause"
			pc := podConfig("pause")
			pc.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent} // pid mode POD: the zero value
			sb, err := n.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: pc})
			if err != nil {
				t.Fatal(err)
			}
			id := sb.PodSandboxId
			pid := readPidFile(n.srv.pauseOptions(&sandboxRecord{ID: id}).PidFile)
			if pid <= 0 {
				t.Fatalf("no pause process for sandbox %s", id)
			}
			f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
			if err != nil {
				t.Fatal(err)
			}
			pcg, err := runc.ParseProcCgroup(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			leaf := parent + "/" + id
			var dirs []string
			for _, m := range mounts {
				key := ""
				if m.Version == 1 {
					if len(m.Controllers) == 0 || strings.HasPrefix(m.Controllers[0], "name=") {
						continue
					}
					key = m.Controllers[0]
				}
				if got := pcg[key]; got != leaf {
					t.Errorf("/proc/%d/cgroup names %q for %s (%s), want the pod's %s", pid, got, m.Mountpoint, key, leaf)
				}
				dirs = append(dirs, m.Dir(leaf))
			}
			if len(dirs) == 0 {
				t.Fatal("no cgroup hierarchy mounted")
			}
			n = tc.end(t, n, id)
			defer n.cleanupSandboxes(t)
			if !pauseGone(pid) {
				t.Errorf("the pause process %d is left", pid)
			}
			for _, d := range dirs {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("the pause process's cgroup %s is left", d)
				}
			}
		})
	}
}

// markCreating records the sandbox as a create still under way, as a
// runtime killed in RunPodSandbox leaves it.
func markCreating(t *testing.T, n *node, id string) *sandboxRecord {
	t.Helper()
	sb, err := n.srv.rec.sandbox(id)
	if err != nil {
		t.Fatal(err)
	}
	sb.State = stateCreating
	if err := n.srv.rec.putSandbox(sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

// pauseGone: pid has exited (or is a zombie, not yet reaped).
func pauseGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(b), ") Z")
}

// StopPauses (podlab reset's) stops the pause processes of a runtime that is
// no longer running, from its records, and removes their cgroups; a second
// call finds nothing to stop.
func TestStopPauses(t *testing.T) {
	testenv.RequireRoot(t)
	n := startNode(t, testenv.StateDir(t))
	sb, err := n.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("reset")})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := n.srv.rec.sandbox(sb.PodSandboxId)
	if err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(n.srv.pauseOptions(rec).PidFile)
	n.stop()
	stopped, err := StopPauses(context.Background(), n.node)
	if err != nil || len(stopped) != 1 || stopped[0] != (StoppedPause{SandboxID: sb.PodSandboxId, Pid: pid}) {
		t.Fatalf("StopPauses: %+v %v, want sandbox %s's pause process %d", stopped, err, sb.PodSandboxId, pid)
	}
	if !pauseGone(pid) {
		t.Errorf("the pause process %d is left", pid)
	}
	mounts, _ := runc.HostCgroupMounts()
	for _, m := range mounts {
		if d := m.Dir(pauseCgroup(rec)); m.Version == 2 || len(m.Controllers) > 0 {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("the pause process's cgroup %s is left", d)
			}
		}
	}
	if again, err := StopPauses(context.Background(), n.node); err != nil || len(again) != 0 {
		t.Errorf("StopPauses again: %+v %v, want nothing", again, err)
	}
	if _, err := unpinNamespaces(rec.Namespaces); err != nil {
		t.Error(err)
	}
}
