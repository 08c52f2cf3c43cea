package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsEnv marks the copy of a test binary that InNewNetns started: it
// holds the name of the test that runs in the new network namespace.
const netnsEnv = "PODLAB_TEST_IN_NETNS"

// runMainEnv, set, makes cmd/podlab's test binary run as podlab itself.
const runMainEnv = "PODLAB_TEST_RUN_MAIN"

// InNewNetns runs the calling top-level test in a network namespace of its
// own, so that the bridges, veths, routes and iptables rules it makes never
// touch the host's and vanish with it. The first call starts a copy of the
// test binary, running only this test, in a new network namespace (clone
// with CLONE_NEWNET, as `unshare --net` does) with its loopback up, waits
// for it and reports its output and result; it returns false, and the test
// returns. In that copy, InNewNetns returns true and the test goes on.
//
//	if !testenv.InNewNetns(t) {
//		return
//	}
func InNewNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == t.Name() {
		if err := LoopbackUp(); err != nil {
			t.Fatalf("bringing up lo in the test's network namespace: %v", err)
		}
		return true
	}
	RequireRoot(t)
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("InNewNetns runs whole tests; call it from %s's top level", t.Name())
	}
	args := []string{"-test.run=^" + t.Name() + "$", "-test.count=1", "-test.v"}
	cmd := exec.Command(os.Args[0], args...)
	// The copy runs the test: not as the program a test binary also is
	// when PODLAB_TEST_RUN_MAIN is set (cmd/podlab's TestMain sets it for
	// every child it starts, and sets it again in the copy).
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, runMainEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, netnsEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	t.Logf("%s in a network namespace of its own:\n%s", t.Name(), out)
	if err != nil {
		t.Fatalf("%s in its network namespace: %v", t.Name(), err)
	}
	if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skip("skipped in its network namespace")
	}
	return false
}

// LoopbackUp sets lo up in the calling thread's network namespace (a new
// namespace's loopback is down), over netlink as `ip link set lo up` does.
func LoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	return nil
}

// PinnedNetns makes a new network namespace, pinned by a bind mount on the
// file path (as podlab node join pins a node's), with its loopback up, and
// returns a netlink handle in it. The test's threads never stay in it; the
// mount and the handle go when the test ends.
func PinnedNetns(t testing.TB, path string) *netlink.Handle {
	t.Helper()
	RequireRoot(t)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			return err
		}
		defer ns.Close()
		if err := netns.Set(orig); err != nil {
			return err
		}
		return unix.Mount(fmt.Sprintf("/proc/self/fd/%d", int(ns)), path, "", unix.MS_BIND, "")
	}()
	if err != nil {
		t.Fatalf("making a network namespace at %s: %v", path, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if lo, err := h.LinkByName("lo"); err != nil || h.LinkSetUp(lo) != nil {
		t.Fatalf("lo in %s: %v", path, err)
	}
	return h
}
