package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// lockedBuffer is a bytes.Buffer a running process writes while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startComponent runs `podlab ARGS` for state as its own process (this
// test binary, run as podlab) until the test ends, then interrupts it.
func startComponent(t *testing.T, state string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--state-dir", state}, args...)...)
	cmd.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1", "PODLAB_RUNTIME="+testenv.Runc(t))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("podlab %s:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return cmd, out
}

// waitRunning waits until every pod of names is Running, as podlab get
// pods says.
func waitRunning(t *testing.T, state string, within time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, _, _ := podlab(t, state, "get", "pods")
		running := 0
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			for _, n := range names {
				if len(f) >= 3 && f[0] == n && f[2] == "Running" {
					running++
				}
			}
		}
		if running == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v not all Running within %s:\n%s", names, within, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// The scheduler and a kubelet, long-running, outlive their API server:
// stopped and started again on the same port, it finds them converging on
// what was created after the restart, as client-go's reflectors retry
// with back-off and resume. Each says once that it waits, not per retry.
func TestComponents_SurviveAnAPIServerRestart(t *testing.T) {
	testenv.RequireRoot(t)
	ref := helloRegistry(t)
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, _ := startAPIServer(t, state, port)
	stopAPI := func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	}
	t.Cleanup(func() { stopAPI() })

	_, kubeletOut := startComponent(t, state, "kubelet", "--node", "node-1")
	_, schedOut := startComponent(t, state, "scheduler")
	mustPodlab(t, state, "run", "before", "--image", ref)
	waitRunning(t, state, 60*time.Second, "before")

	stopAPI()
	time.Sleep(3 * time.Second) // the components fail a few times meanwhile
	srv, _ = startAPIServer(t, state, port)

	mustPodlab(t, state, "run", "after", "--image", ref)
	waitRunning(t, state, 60*time.Second, "before", "after")

	for name, out := range map[string]*lockedBuffer{"kubelet": kubeletOut, "scheduler": schedOut} {
		if n := strings.Count(out.String(), "waiting for the API server at https://127.0.0.1:"+strconv.Itoa(port)); n != 1 {
			t.Errorf("podlab %s said %d times that it waits for the API server, want once:\n%s", name, n, out.String())
		}
		if !strings.Contains(out.String(), "answers: resuming") {
			t.Errorf("podlab %s did not say the API server answers again:\n%s", name, out.String())
		}
	}
	mustPodlab(t, state, "delete", "pod", "before", "after")
	waitGone(t, state, 60*time.Second)
}

// waitGone waits until podlab get pods lists nothing.
func waitGone(t *testing.T, state string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, _, _ := podlab(t, state, "get", "pods")
		if strings.TrimSpace(out) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods left %s after their deletion:\n%s", within, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// The components never open the store: while the kubelet, the scheduler
// and the controller-manager run a Deployment's pods to Running, none of
// their processes ever has the bbolt file (or its write-ahead log) open,
// as /proc/PID/fd shows. Only the API server does.
func TestComponents_DoNotOpenTheStore(t *testing.T) {
	testenv.RequireRoot(t)
	ref := helloRegistry(t)
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	l := statedir.Layout{Dir: state}

	procs := map[string]*exec.Cmd{}
	for _, args := range [][]string{{"kubelet", "--node", "node-1"}, {"scheduler"}, {"controller-manager"}} {
		cmd, _ := startComponent(t, state, args...)
		procs[args[0]] = cmd
	}
	var (
		mu     sync.Mutex
		opened = map[string]string{} // component -> the store file it had open
	)
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		n := 0
		defer func() { sampled <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			n++
			for name, cmd := range procs {
				fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "fd"))
				for _, fd := range fds {
					target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "fd", fd.Name()))
					if err == nil && strings.HasPrefix(target, l.StoreFile()) {
						mu.Lock()
						opened[name] = target
						mu.Unlock()
					}
				}
			}
		}
	}()
	mustPodlab(t, state, "create", "deployment", "web", "--image", ref, "--replicas", "2")
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, _ := podlab(t, state, "get", "pods")
		if strings.Count(out, " Running ") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Deployment's pods did not reach Running in 60s:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	t.Logf("%d samples of /proc/PID/fd of each component", <-sampled)
	for name, file := range opened {
		t.Errorf("podlab %s opened the store file %s: only the API server may", name, file)
	}
	mustPodlab(t, state, "delete", "deployment", "web")
	waitGone(t, state, 60*time.Second)
}
