package up

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// TestReset_StopsNodeRuntimes: the runtime process a kubelet started for
// its node (recorded in nodes/NAME/runtime.pid) is stopped by reset, as
// its containers are; a process that ignores SIGTERM gets SIGKILL.
func TestReset_StopsNodeRuntimes(t *testing.T) {
	dir := t.TempDir()
	n := statedir.Layout{Dir: dir}.Node("node-1")
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in that ignores SIGTERM: reset must not wait on it forever.
	cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; echo ready; exec >&-; while :; do sleep 0.1; done")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the trap is set
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill() })
	if err := criremote.WritePidFile(n.RuntimePidFile(), cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}

	res, err := Reset(context.Background(), ResetOptions{StateDir: dir, Runtime: "/bin/true"})
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		t.Fatalf("the node's runtime (pid %d) still runs after reset", cmd.Process.Pid)
	}
	if want := fmt.Sprintf("node node-1: pid %d", cmd.Process.Pid); len(res.Runtimes) != 1 || res.Runtimes[0] != want {
		t.Errorf("Runtimes = %q; want [%q]", res.Runtimes, want)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("it ended with %v; want SIGKILL after the grace period", cmd.ProcessState)
	}
}
