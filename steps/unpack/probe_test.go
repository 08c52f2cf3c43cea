package unpack

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
)

// probeRootEnv makes the test binary the killed probe of
// TestOverlayProbe_KilledLeavesNoMount: it probes in that root and stops
// while the overlay is mounted.
const probeRootEnv = "PODLAB_TEST_PROBE_ROOT"

// mountsUnder are the host's mounts (this process's mount namespace) at
// or below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out
}

// unmountUnder unmounts what a failing test left under dir, so that its
// temporary directory can be removed.
func unmountUnder(t *testing.T, dir string) {
	for _, m := range mountsUnder(t, dir) {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
}

// A probe killed while its overlay is mounted leaves no mount behind: the
// mount was in the probe thread's own mount namespace, which died with the
// process. (containerd's overlayutils probe, which podlab used, mounts
// where every process sees it: its kill left
// multiple-lowerdir-check*/merged mounted.)
func TestOverlayProbe_KilledLeavesNoMount(t *testing.T) {
	if root := os.Getenv(probeRootEnv); root != "" {
		err := overlaySupported(root, func(merged string) {
			fmt.Printf("mounted %s\n", merged)
			select {} // until killed
		})
		fmt.Printf("probe returned: %v\n", err)
		os.Exit(1)
	}
	testenv.RequireRoot(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, root) })
	if _, err := DefaultSnapshotter(root); err != nil {
		t.Skipf("no overlay here: %v", err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestOverlayProbe_KilledLeavesNoMount$")
	cmd.Env = append(os.Environ(), probeRootEnv+"="+root)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the probe process said nothing: %v", err)
	}
	merged, ok := strings.CutPrefix(strings.TrimSpace(line), "mounted ")
	if !ok {
		t.Fatalf("the probe process said %q, want \"mounted <dir>\"", line)
	}
	// The overlay is really mounted, as the probe's threads see it.
	if !mountedInAnyThread(t, cmd.Process.Pid, merged) {
		t.Fatalf("no thread of the probe process %d has %s mounted: the test would prove nothing", cmd.Process.Pid, merged)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	if ms := mountsUnder(t, root); len(ms) > 0 {
		t.Errorf("the killed probe left mounts behind: %v", ms)
	}
	// What is left is an empty directory, which the next start removes
	// once it is old enough not to be another process's probe.
	if err := removeStaleProbes(root, time.Now().Add(time.Second)); err != nil {
		t.Errorf("removing the killed probe's directory: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, probeDirPattern+"*")); len(left) > 0 {
		t.Errorf("probe directories left: %v", left)
	}
}

// mountedInAnyThread says whether dir is a mount point in the mount
// namespace of any thread of process pid.
func mountedInAnyThread(t *testing.T, pid int, dir string) bool {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
				return true
			}
		}
	}
	return false
}

// Each probe first removes what an earlier one left: a directory old
// enough (with its overlay still mounted, as containerd's probe leaves it
// when killed), never a fresh one (another process may be probing in the
// same root) nor anything else in the root.
func TestOverlayProbe_RemovesStaleProbes(t *testing.T) {
	testenv.RequireRoot(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, root) })
	if _, err := DefaultSnapshotter(root); err != nil {
		t.Skipf("no overlay here: %v", err)
	}
	old := time.Now().Add(-2 * staleProbeAge)
	probeDir := func(name string, mounted bool, mtime time.Time) string {
		d := filepath.Join(root, name)
		for _, sub := range []string{"lower1", "lower2", "upper", "work", "merged"} {
			if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if mounted {
			opts := fmt.Sprintf("lowerdir=%s:%s,upperdir=%s,workdir=%s", filepath.Join(d, "lower2"), filepath.Join(d, "lower1"), filepath.Join(d, "upper"), filepath.Join(d, "work"))
			if err := unix.Mount("overlay", filepath.Join(d, "merged"), "overlay", 0, opts); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(d, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		name    string
		dir     string
		removed bool
	}{
		{"left mounted by a killed probe", probeDir(probeDirPattern+"111", true, old), true},
		{"left empty by a killed probe", probeDir(probeDirPattern+"222", false, old), true},
		{"another process's probe, fresh", probeDir(probeDirPattern+"333", false, time.Now()), false},
		{"not a probe", probeDir("7", false, old), false},
	}
	if sn, err := DefaultSnapshotter(root); err != nil || sn != Overlayfs {
		t.Fatalf("DefaultSnapshotter = %s, %v, want overlayfs", sn, err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := os.Stat(tc.dir)
			if gone := os.IsNotExist(err); gone != tc.removed {
				t.Errorf("%s: removed %v, want %v (stat: %v)", tc.dir, gone, tc.removed, err)
			}
			if ms := mountsUnder(t, tc.dir); len(ms) > 0 {
				t.Errorf("still mounted: %v", ms)
			}
		})
	}
}
