package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
)

// TestReset_TwoStateDirs runs two state directories side by side, each with
// a running container of the same name (as two learners doing lesson 09
// would), an empty cgroup next to its container's and a mount, then resets
// one: the other's container, cgroups and mount survive.
func TestReset_TwoStateDirs(t *testing.T) {
	testenv.RequireRoot(t)
	runcBin := testenv.Runc(t)
	ref := helloRegistry(t)
	tmp := t.TempDir()
	podlab := filepath.Join(tmp, "podlab")
	if out, err := exec.Command("go", "build", "-o", podlab, ".").CombinedOutput(); err != nil {
		t.Fatalf("building podlab: %v\n%s", err, out)
	}
	run := func(state string, args ...string) (string, error) {
		cmd := exec.Command(podlab, args...)
		cmd.Env = append(os.Environ(), "PODLAB_STATE_DIR="+state, "PODLAB_RUNTIME="+runcBin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	must := func(state string, args ...string) string {
		t.Helper()
		out, err := run(state, args...)
		if err != nil {
			t.Fatalf("podlab %s (state %s): %v\n%s", strings.Join(args, " "), state, err, out)
		}
		return out
	}

	type side struct {
		state, cgroup, mount, spare string
		pid                         int
	}
	var sides []*side
	for range 2 {
		s := &side{state: testenv.StateDir(t)}
		sides = append(sides, s)
		t.Cleanup(func() { run(s.state, "reset", "--yes") })
		bundle := filepath.Join(s.state, "bundles", "hello")
		must(s.state, "pull", ref)
		must(s.state, "unpack", ref, "--bundle", bundle)
		must(s.state, "spec", "--bundle", bundle, "--image", ref, "--id", "hello", "--memory", "32Mi")
		must(s.state, "runc", "run", "--detach", "hello", "--bundle", bundle)
		s.pid = waitPid(t, filepath.Join(s.state, "runc", "hello", "state.json"))
		s.cgroup = memoryCgroup(t, s.pid)
		// An empty cgroup beside the container's, as a pod cgroup waiting
		// for its first container is.
		s.spare = filepath.Join(filepath.Dir(s.cgroup), "spare")
		if err := os.Mkdir(s.spare, 0o755); err != nil {
			t.Fatalf("making cgroup %s: %v", s.spare, err)
		}
		t.Cleanup(func() { unix.Rmdir(s.spare) })
		// A mount under the state directory, as a pod's pinned namespace is.
		s.mount = filepath.Join(s.state, "nodes", "node-1", "netns", "pod")
		os.MkdirAll(filepath.Dir(s.mount), 0o755)
		os.WriteFile(s.mount, nil, 0o444)
		if err := unix.Mount("/proc/self/ns/net", s.mount, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind-mounting a netns: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(s.mount, unix.MNT_DETACH) })
	}
	a, b := sides[0], sides[1]
	if a.cgroup == b.cgroup {
		t.Fatalf("both containers are in the cgroup %s", a.cgroup)
	}

	out := must(a.state, "reset", "--yes")
	if err := unix.Kill(a.pid, 0); err == nil {
		t.Errorf("a's container (pid %d) still runs after a's reset", a.pid)
	}
	if _, err := os.Stat(a.cgroup); err == nil {
		t.Errorf("a's cgroup %s is still there after a's reset", a.cgroup)
	}
	if err := unix.Kill(b.pid, 0); err != nil {
		t.Errorf("b's container (pid %d) was killed by a's reset: %v\n%s", b.pid, err, out)
	}
	if got := memoryCgroup(t, b.pid); got != b.cgroup {
		t.Errorf("b's container moved from %s to %s", b.cgroup, got)
	}
	for _, d := range []string{b.cgroup, b.spare} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("b's cgroup %s was removed by a's reset: %v", d, err)
		}
	}
	if m := mountsUnder(t, b.state); len(m) != 1 || m[0] != b.mount {
		t.Errorf("b's mounts after a's reset = %v, want [%s]", m, b.mount)
	}
	if st := must(b.state, "runc", "state", "hello"); !strings.Contains(st, "running") {
		t.Errorf("b's container is not running after a's reset:\n%s", st)
	}
}

// memoryCgroup is the directory of pid's cgroup in the memory controller's
// hierarchy (v1), or in the unified one (v2).
func memoryCgroup(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var unified string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2])
			}
		}
		if parts[0] == "0" {
			unified = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	if unified == "" {
		t.Fatalf("pid %d has no memory or unified cgroup", pid)
	}
	return unified
}
