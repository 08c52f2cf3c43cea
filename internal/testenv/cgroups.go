package testenv

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// StateDir is a new, empty state directory for one test. Cgroups are
// machine-wide and outlive t.TempDir, so when the test ends (after the
// clean-ups it registers later, which stop its containers) the state
// directory's cgroup root, /podlab-<hash>, is removed from every hierarchy.
// A process still in one of its cgroups is a container the test leaked:
// it is killed, and the test fails saying where it was.
func StateDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	l, err := statedir.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveCgroupRoot(t, l.CgroupRoot()) })
	t.Cleanup(func() { StopRuntimes(t, l) }) // first: they hold cgroups
	return l.Dir
}

// StopRuntimes stops the node runtimes a kubelet of the state directory l
// started (podlab runtime --node NAME, found by nodes/NAME/runtime.pid),
// as podlab reset does: they outlive the kubelet on purpose.
func StopRuntimes(t testing.TB, l statedir.Layout) {
	t.Helper()
	pids, _ := filepath.Glob(filepath.Join(l.NodesDir(), "*", filepath.Base(l.Node("x").RuntimePidFile())))
	for _, p := range pids {
		if _, err := criremote.Stop(context.Background(), p, 5*time.Second); err != nil {
			t.Errorf("stopping the runtime of %s: %v", filepath.Dir(p), err)
		}
	}
}

// RemoveCgroupRoot removes the cgroup root (a path such as /podlab-1a2b3c4d)
// and every cgroup under it in every mounted hierarchy, deepest first. It
// kills what still runs there and fails t, naming the cgroup.
func RemoveCgroupRoot(t testing.TB, root string) {
	t.Helper()
	mounts, err := runc.HostCgroupMounts()
	if err != nil {
		return // no cgroups here: nothing was made
	}
	for _, m := range mounts {
		if m.Version == 1 && len(m.Controllers) == 0 {
			continue // a named hierarchy (name=systemd) runc does not join
		}
		top := filepath.Join(m.Mountpoint, filepath.FromSlash(root))
		var dirs []string
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs) // children before their parents
		for _, d := range dirs {
			if pids := cgroupPids(d); len(pids) > 0 {
				t.Errorf("the test left processes %v in cgroup %s (a container it did not stop): killing them", pids, d)
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				for i := 0; i < 50 && len(cgroupPids(d)) > 0; i++ {
					time.Sleep(20 * time.Millisecond)
				}
			}
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removing the test's cgroup %s: %v", d, err)
			}
		}
	}
}

// cgroupPids are the processes in the cgroup directory d.
func cgroupPids(d string) []int {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
