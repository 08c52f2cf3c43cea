package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/statedir"
)

// Without containerd on PATH the command says which Debian package to
// install, and writes nothing.
func TestContainerdCommand_NotInstalled(t *testing.T) {
	state := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	_, _, err := podlab(t, state, "containerd")
	if err == nil || !strings.Contains(err.Error(), "Debian's package containerd") {
		t.Fatalf("podlab containerd without containerd: %v, want an error naming the package containerd", err)
	}
	if _, err := os.Stat(filepath.Join(state, "containerd")); !os.IsNotExist(err) {
		t.Errorf("it wrote %s/containerd anyway (%v)", state, err)
	}
}

// podlab containerd runs in the foreground until SIGTERM; while it runs, a
// second one on the same state directory is refused, and crictl reaches
// the first through the crictl.yaml it wrote.
func TestContainerdCommand_ForegroundAndSecondStart(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := containerd.Find(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	state := t.TempDir()
	runc := testenv.Runc(t)
	cmd, out, stderr, done := startLabContainerd(t, state, runc)

	_, _, err := podlab(t, state, "containerd", "--runtime", runc)
	if err == nil || !strings.Contains(err.Error(), "a lab containerd runs already") {
		t.Errorf("a second podlab containerd: %v, want it refused", err)
	}
	l := statedir.Layout{Dir: state}.Containerd()
	v, err := exec.Command(testenv.LookPath(t, "crictl"), "--config", l.CrictlConfig(), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "RuntimeName:  containerd") {
		t.Errorf("crictl version: %v\n%s", err, v)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	if err := cmd.Wait(); err != nil {
		t.Errorf("podlab containerd after SIGTERM: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"config    " + l.Config(), "answers CRI v1 on unix://" + l.Socket(), "/run/containerd/s/", "containerd stopped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if daemons, shims, _ := containerd.Processes(l); len(daemons)+len(shims) > 0 {
		t.Errorf("left running: %v %v", daemons, shims)
	}
}

// startLabContainerd runs `podlab containerd` on state, with args added to
// its flags, in the background until it answers CRI (stopped when the
// test ends): the command, its output so far (complete once done is
// closed) and its stderr.
func startLabContainerd(t *testing.T, state, runc string, args ...string) (*exec.Cmd, *strings.Builder, *bytes.Buffer, chan struct{}) {
	t.Helper()
	if _, err := containerd.Find(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	cmd := exec.Command(os.Args[0], append([]string{"--state-dir", state, "containerd", "--runtime", runc}, args...)...)
	cmd.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ready := make(chan bool, 1)
	done := make(chan struct{})
	t.Cleanup(func() {
		// SIGTERM first: podlab containerd stops its daemon and shims.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
		cmd.Wait()
	})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "answers CRI v1") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("podlab containerd ended before it was ready:\n%s%s", out.String(), stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("podlab containerd not ready in a minute:\n%s%s", out.String(), stderr.String())
	}
	return cmd, &out, &stderr, done
}

// The kubelet is a CRI client of whatever answers on
// --container-runtime-endpoint: pointed at the lab containerd (Debian's
// 1.6, whose CRI plugin speaks v1), it registers its Node with
// containerd's version and starts no runtime of podlab's.
func TestKubelet_ContainerdEndpoint(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	state := testenv.StateDir(t)
	serveAPI(t, state)
	startLabContainerd(t, state, testenv.Runc(t))
	sock := statedir.Layout{Dir: state}.Containerd().Socket()
	out := mustKubeletApp(t, state, "kubelet", "--container-runtime-endpoint", "unix://"+sock, "--once")
	for _, want := range []string{"runtime: containerd ", " on unix://" + sock} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --container-runtime-endpoint (containerd) does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(statedir.Layout{Dir: state}.Node("node-1").RuntimePidFile()); err == nil {
		t.Errorf("a podlab runtime was started although containerd answers on the endpoint")
	}
	desc := mustPodlab(t, state, "describe", "node", "node-1")
	if !strings.Contains(desc, "Container Runtime Version:") || !strings.Contains(desc, "containerd://1.") {
		t.Errorf("describe node: want containerRuntimeVersion containerd://1.x from containerd's Version:\n%s", desc)
	}
}

// TestKubelet_PodUnderContainerd: the same kubelet, pointed at the lab
// containerd (Debian's 1.6, CRI v1), runs a pod there: containerd pulls
// the image through the lab registry (its certs.d mirror), its CRI plugin
// makes the sandbox and the container with the same runc, the pod reaches
// Running, and its logs (containerd's CRI log file, read by the kubelet)
// show hello's greeting. In a network namespace of its own: containerd's
// CNI bridge and iptables rules stay there.
func TestKubelet_PodUnderContainerd(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1")
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))
	mirror := demoRegistry(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	startLabContainerd(t, state, testenv.Runc(t), "--registry-mirror", "http://"+mirror)
	sock := statedir.Layout{Dir: state}.Containerd().Socket()

	createBoundPod(t, state, "web", "node-1", "docker.io/podlab/hello:1.0")
	t.Cleanup(func() {
		podlab(t, state, "delete", "pod", "web", "--force")
		kubeletApp(t, state, "kubelet", "--container-runtime-endpoint", "unix://"+sock, "--once")
	})
	out := mustKubeletApp(t, state, "kubelet", "--container-runtime-endpoint", "unix://"+sock, "--once")
	if _, err := os.Stat(statedir.Layout{Dir: state}.Node("node-1").RuntimePidFile()); err == nil {
		t.Errorf("a podlab runtime was started although containerd answers on the endpoint")
	}
	got := mustPodlab(t, state, "get", "pod", "web")
	if !strings.Contains(got, "Running") {
		t.Fatalf("web under containerd is not Running:\n%s\nkubelet:\n%s", got, out)
	}
	desc := mustPodlab(t, state, "describe", "pod", "web")
	if !strings.Contains(desc, "containerd://") {
		t.Errorf("describe pod: want the container's ID as containerd://...:\n%s", desc)
	}
	var logs string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		logs, _, _ = podlab(t, state, "logs", "web")
		if strings.Contains(logs, "hello") {
			break
		}
	}
	if !strings.Contains(logs, "hello") {
		t.Errorf("podlab logs web under containerd: want hello's greeting, got:\n%s", logs)
	}
}
