package testenv

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// netnsEnv marks the copy of a test binary that InNewNetns started: it
// holds the name of the test that runs in the new network namespace.
const netnsEnv = "PODLAB_TEST_IN_NETNS"

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
		if err := loopbackUp(); err != nil {
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
	cmd.Env = append(os.Environ(), netnsEnv+"="+t.Name())
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

// loopbackUp sets IFF_UP on lo in the process's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
