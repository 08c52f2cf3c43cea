package main

import (
	"bytes"
	"errors"
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
	"github.com/podlab/podlab/steps/apiserver/rest"
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

// A component run once, with no API server answering, fails at once with
// an error that names the URL, the kubeconfig and the fix; none waits.
func TestComponents_OnceWithoutAnAPIServer(t *testing.T) {
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t)) // found, so that only the API server is missing
	state := testenv.StateDir(t)
	port := freePort(t) // nothing listens there
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	l := statedir.Layout{Dir: state}
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	tests := []struct {
		name       string
		args       []string
		kubeconfig string
	}{
		{"scheduler --once", []string{"scheduler", "--once"}, l.Kubeconfig("kube-scheduler")},
		{"controller-manager --once", []string{"controller-manager", "--once"}, l.Kubeconfig("kube-controller-manager")},
		{"kubelet --once", []string{"kubelet", "--once"}, l.Kubeconfig("node-1")},
		{"kubelet --next", []string{"kubelet", "--next"}, l.Kubeconfig("node-1")},
		{"a stage by --pod reads the pod as admin", []string{"pull", "--pod", "web"}, l.Kubeconfig("admin")},
		{"a kubeconfig given", []string{"scheduler", "--once", "--kubeconfig", l.Kubeconfig("viewer")}, l.Kubeconfig("viewer")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			out, errOut, err := podlab(t, state, tt.args...)
			if err == nil {
				t.Fatalf("podlab %s with no API server: no error\n%s%s", strings.Join(tt.args, " "), out, errOut)
			}
			for _, want := range []string{url, tt.kubeconfig, "connection refused", "podlab apiserver &", "lessons/02-apiserver.md"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("podlab %s: the error does not say %q: %v", strings.Join(tt.args, " "), want, err)
				}
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("podlab %s took %s to fail: it must not wait", strings.Join(tt.args, " "), took)
			}
		})
	}
	if _, err := os.Stat(l.StoreFile()); err != nil {
		t.Errorf("the store: %v", err)
	}
}

// A kubelet of a node nobody made a kubeconfig for gets its client
// certificate from the lab's CA, once, as TLS bootstrapping gives one,
// and acts as system:node:NAME with it.
func TestKubelet_BootstrapsItsCertificate(t *testing.T) {
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	l := statedir.Layout{Dir: state}
	if _, err := os.Stat(l.Kubeconfig("node-9")); err == nil {
		t.Fatal("node-9 has a kubeconfig before its kubelet ran: this test needs a node without one")
	}
	out := mustKubeletApp(t, state, "kubelet", "--node", "node-9", "--next")
	want := "bootstrap: the lab CA signed node-9's client certificate (CN=system:node:node-9, O=system:nodes) into " + l.Kubeconfig("node-9")
	if !strings.Contains(out, want) {
		t.Errorf("kubelet --node node-9 --next does not say %q:\n%s", want, out)
	}
	if !strings.Contains(out, "no pod is bound to node node-9") {
		t.Errorf("kubelet --node node-9 --next:\n%s", out)
	}
	out = mustKubeletApp(t, state, "kubelet", "--node", "node-9", "--next")
	if strings.Contains(out, "bootstrap:") {
		t.Errorf("a second run issued the certificate again:\n%s", out)
	}
	// the certificate says system:node:node-9, whom the API server
	// refuses every pod but its own
	kc := l.Kubeconfig("node-9")
	if out, err := kubectlWith(testenv.Kubectl(t), kc, "get", "pods", "-A"); err == nil || !strings.Contains(out, `User "system:node:node-9" cannot list resource "pods"`) {
		t.Errorf("kubectl get pods -A with %s: %v\n%s", kc, err, out)
	}
}

// A new node's kubelet started as a daemon with its API on --port 0 (a
// second kubelet on the machine, as lesson 15 starts node-2) bootstraps
// both its certificates before it opens its API: the serving one too.
func TestKubelet_BootstrapsItsServingCertificate(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	l := statedir.Layout{Dir: state}
	// (startComponent's clean-up waits for the process: it is not waited
	// for here as well, which would leave that clean-up blocked.)
	_, out := startComponent(t, state, "kubelet", "--node", "node-7", "--port", "0")
	waitFor(t, 20*time.Second, func() bool {
		got, err := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "node", "node-7", "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}")
		return err == nil && got != "" && got != "0"
	}, "node-7 registered with its kubelet's API port", out)
	if !strings.Contains(out.String(), "kubelet API: serving https://127.0.0.1:") {
		t.Errorf("the kubelet does not serve its API:\n%s", out.String())
	}
}

// podlab reset refuses while a podlab apiserver serves the store, and
// loses nothing; once the API server is stopped it resets.
func TestReset_RefusedWhileTheAPIServerServes(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, _ := startAPIServer(t, state, port)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Process.Kill()
			srv.Wait()
		}
	})
	l := statedir.Layout{Dir: state}
	_, _, err := podlab(t, state, "reset", "--yes")
	if !errors.Is(err, rest.ErrStoreServed) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(srv.Process.Pid)) {
		t.Errorf("reset while podlab apiserver (pid %d) serves the store: %v, want ErrStoreServed naming its pid", srv.Process.Pid, err)
	}
	for _, f := range []string{l.StoreFile(), l.CACert(), l.Kubeconfig("admin")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("after the refused reset: %v", err)
		}
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	stopped = true
	mustPodlab(t, state, "reset", "--yes")
	if _, err := os.Stat(l.StoreFile()); err == nil {
		t.Errorf("the store is still there after reset")
	}
}
