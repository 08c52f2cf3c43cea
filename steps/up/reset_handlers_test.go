package up

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestReset_RunscContainers: a node's container of another runtime
// handler (a pod of RuntimeClass gvisor) is deleted by its own runtime:
// runc cannot stop a runsc sandbox, and reset would leave its processes
// running.
func TestReset_RunscContainers(t *testing.T) {
	testenv.RequireRoot(t)
	runsc := testenv.LookPath(t, "runsc")
	dir := t.TempDir()
	node := statedir.Layout{Dir: dir}.Node("node-1")
	root := node.Runtime().HandlerRoot("runsc")
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(runsc, "spec", "--bundle", bundle, "--", "/app").CombinedOutput(); err != nil {
		t.Fatalf("runsc spec: %v\n%s", err, out)
	}
	id := "k8s_web_gvisor_default_uid1_0"
	if err := os.MkdirAll(node.Runtime().ContainerDir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	// runsc create boots the sandbox (runsc-sandbox, runsc-gofer); the app
	// would run at start.
	// (stdio to a file: the sandbox keeps it open, a pipe would never end)
	log, err := os.Create(filepath.Join(dir, "create.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	create := exec.Command(runsc, "--root", root, "--network=none", "create", "--bundle", bundle, id)
	create.Stdout, create.Stderr = log, log
	if err := create.Run(); err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("runsc create: %v\n%s", err, b)
	}
	t.Cleanup(func() {
		_ = exec.Command(runsc, "--root", root, "delete", "--force", id).Run()
		// without its state (a reset that failed removed it), by pid
		for _, pid := range pidsWith("--root=" + root) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
	if len(processesWith("--root="+root)) == 0 {
		t.Fatalf("no runsc process with --root=%s after create", root)
	}

	res, err := Reset(context.Background(), ResetOptions{StateDir: dir, Runtime: "/bin/true"})
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if p := processesWith("--root=" + root); len(p) > 0 {
		t.Errorf("runsc processes left after reset: %q", p)
	}
	found := false
	for _, c := range res.Containers {
		found = found || c == root+" "+id
	}
	if !found {
		t.Errorf("Containers = %q, want %s deleted with runsc's root", res.Containers, id)
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes")); err == nil {
		t.Errorf("nodes/ is still there")
	}
}

// pidsWith lists the host's processes whose command line holds s.
func pidsWith(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// processesWith lists the command lines of the host's processes that hold s.
func processesWith(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}
