package up

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/statedir"
)

// pinTestNetns pins a new network namespace at path, as the kubelet's
// sandbox does.
func pinTestNetns(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in the new namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatalf("pinning a network namespace: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
}

func linkNames(t *testing.T, typ string) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show", "type", typ).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show type %s: %v: %s", typ, err, out)
	}
	return string(out)
}

// TestReset_PodNetwork: reset detaches every pod a node's runtime attached
// (CNI DEL: veths gone, addresses released) and deletes the node's bridge,
// in the test's own network namespace.
func TestReset_PodNetwork(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	node := statedir.Layout{Dir: dir}.Node("node-1")
	if _, _, err := cni.WriteConfList(node.CNIConfDir(), cni.Template{PodCIDR: "10.244.6.0/24", Bridge: node.BridgeName(), DataDir: node.CNIIPAMDir()}); err != nil {
		t.Fatal(err)
	}
	n, err := cni.New(cni.Config{ConfDir: node.CNIConfDir(), CacheDir: node.CNICacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"uid-1", "uid-2"} {
		ns := node.NamespaceFile("net", uid)
		pinTestNetns(t, ns)
		if _, err := n.Setup(ctx, cni.Attachment{ID: uid, NetNS: ns, PodNamespace: "default", PodName: uid, PodUID: uid}); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(linkNames(t, "bridge"), node.BridgeName()) {
		t.Fatalf("no bridge %s before the reset", node.BridgeName())
	}

	res, err := Reset(ctx, ResetOptions{StateDir: dir, Runtime: "/bin/true"})
	if err != nil {
		t.Errorf("Reset: %v", err)
	}
	got := strings.Join(res.Network, "\n")
	for _, want := range []string{"node node-1: CNI DEL " + node.CNICacheDir() + "/results/podlab-uid-1-eth0 (released 10.244.6.",
		"podlab-uid-2-eth0", "node node-1: deleted bridge " + node.BridgeName()} {
		if !strings.Contains(got, want) {
			t.Errorf("Network = %q, want %q", res.Network, want)
		}
	}
	if l := linkNames(t, "bridge"); strings.Contains(l, node.BridgeName()) {
		t.Errorf("the bridge outlived the reset:\n%s", l)
	}
	if l := strings.TrimSpace(linkNames(t, "veth")); l != "" {
		t.Errorf("veths outlived the reset:\n%s", l)
	}
}
