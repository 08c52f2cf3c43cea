package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/podlab/podlab/internal/testenv"
	podregistry "github.com/podlab/podlab/steps/registry"
	"github.com/podlab/podlab/steps/statedir"
)

// demoRegistry is an in-process registry holding the demo images of
// /var/lib/podlab/demo-images (make images), as HOST/podlab/hello:1.0 and
// HOST/library/nginx:latest.
func demoRegistry(t *testing.T) string {
	t.Helper()
	dir := "/var/lib/podlab/demo-images"
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		testenv.Missing(t, "no demo images in %s: run `make images`", dir)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	if _, err := podregistry.Load(context.Background(), host, dir); err != nil {
		t.Fatal(err)
	}
	return host
}

// crictl drives node-1's podlab runtime with the real crictl.
type crictlRunner struct {
	t    *testing.T
	bin  string
	sock string
	home string
}

func (c crictlRunner) run(args ...string) (string, error) {
	c.t.Helper()
	full := append([]string{"--config", filepath.Join(c.home, "crictl.yaml"), "--runtime-endpoint", "unix://" + c.sock,
		"--image-endpoint", "unix://" + c.sock, "--timeout", "60s"}, args...)
	cmd := exec.Command(c.bin, full...)
	cmd.Env = append(os.Environ(), "HOME="+c.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c crictlRunner) must(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestRuntime_Crictl walks a pod by hand with crictl against `podlab
// runtime`, as lesson 17 does: pull, images, runp, create, start, pods,
// ps -a, logs, exec, inspect, inspectp, stop, rm, stopp, rmp.
func TestRuntime_Crictl(t *testing.T) {
	testenv.RequireRoot(t)
	crictlBin := testenv.LookPath(t, "crictl")
	host := demoRegistry(t)
	state := testenv.StateDir(t)
	_, out := startComponent(t, state, "runtime", "--node", "node-1", "-v", "--insecure")
	l, err := statedir.New(state)
	if err != nil {
		t.Fatal(err)
	}
	sock := l.Node("node-1").CRISocket()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "crictl --runtime-endpoint unix://"+sock+" pods") {
		if time.Now().After(deadline) {
			t.Fatalf("podlab runtime did not say it serves %s:\n%s", sock, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := crictlRunner{t: t, bin: crictlBin, sock: sock, home: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.home, "crictl.yaml"), []byte("runtime-endpoint: unix://"+sock+"\nimage-endpoint: unix://"+sock+"\ntimeout: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := host + "/podlab/hello:1.0"

	if got := c.must("pull", ref); !strings.Contains(got, "Image is up to date for sha256:") {
		t.Fatalf("crictl pull: %s", got)
	}
	if got := c.must("images"); !strings.Contains(got, host+"/podlab/hello") || !strings.Contains(got, "1.0") {
		t.Fatalf("crictl images:\n%s", got)
	}
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod-config.json")
	ctr := filepath.Join(dir, "container-config.json")
	writeJSON(t, pod, map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "web-uid-1"},
		"hostname": "web", "log_directory": filepath.Join(dir, "logs")})
	writeJSON(t, ctr, map[string]any{"metadata": map[string]any{"name": "hello"}, "image": map[string]any{"image": ref},
		"log_path": "hello/0.log", "envs": []map[string]any{{"key": "GREETING", "value": "Hello from crictl"}}})
	podID := strings.TrimSpace(c.must("runp", pod))
	if len(podID) != 64 {
		t.Fatalf("crictl runp answered %q, want a 64-hex sandbox id", podID)
	}
	cid := strings.TrimSpace(c.must("create", podID, ctr, pod))
	if len(cid) != 64 {
		t.Fatalf("crictl create answered %q, want a 64-hex container id", cid)
	}
	c.must("start", cid)
	if got := c.must("pods"); !strings.Contains(got, podID[:13]) || !strings.Contains(got, "Ready") || !strings.Contains(got, "web") {
		t.Fatalf("crictl pods:\n%s", got)
	}
	if got := c.must("ps", "-a"); !strings.Contains(got, cid[:13]) || !strings.Contains(got, "Running") || !strings.Contains(got, "hello") {
		t.Fatalf("crictl ps -a:\n%s", got)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		got := c.must("logs", cid[:13])
		if strings.Contains(got, "Hello from crictl") {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("crictl logs has no greeting:\n%s", got)
		}
	}
	if got := c.must("exec", cid[:13], "/hello", "--once"); !strings.Contains(got, "web") || !strings.Contains(got, "Hello from crictl") {
		t.Fatalf("crictl exec /hello --once:\n%s", got)
	}
	if got := c.must("exec", "-s", cid[:13], "/hello", "--once"); !strings.Contains(got, "Hello from crictl") {
		t.Fatalf("crictl exec -s /hello --once:\n%s", got)
	}
	var inspect struct {
		Status struct{ State, LogPath string }
		Info   struct {
			Bundle string
			Pid    int
		}
	}
	if err := json.Unmarshal([]byte(c.must("inspect", cid)), &inspect); err != nil {
		t.Fatal(err)
	}
	if inspect.Status.State != "CONTAINER_RUNNING" || inspect.Info.Pid == 0 || !strings.HasPrefix(inspect.Info.Bundle, l.Node("node-1").BundlesDir()) {
		t.Fatalf("crictl inspect: %+v", inspect)
	}
	var inspectp struct{ Status struct{ State string } }
	if err := json.Unmarshal([]byte(c.must("inspectp", podID)), &inspectp); err != nil || inspectp.Status.State != "SANDBOX_READY" {
		t.Fatalf("crictl inspectp: %+v %v", inspectp, err)
	}
	c.must("stop", cid)
	if got := c.must("ps", "-a"); !strings.Contains(got, "Exited") {
		t.Fatalf("crictl ps -a after stop:\n%s", got)
	}
	c.must("rm", cid)
	c.must("stopp", podID)
	c.must("rmp", podID)
	if got := c.must("pods", "-q"); strings.TrimSpace(got) != "" {
		t.Fatalf("crictl pods after rmp: %q", got)
	}
	// The -v narration showed each call with its request and response.
	for _, want := range []string{"RunPodSandbox request: {config:{metadata:{name:\"web\"", "CreateContainer response", "RemovePodSandbox response"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("podlab runtime -v did not print %q", want)
		}
	}
	// Unknown IDs: NotFound, naming the ID.
	if got, err := c.run("inspect", "0123456789abc"); err == nil || !strings.Contains(got, "0123456789abc") || !strings.Contains(got, "NotFound") {
		t.Fatalf("crictl inspect of an unknown id: %v\n%s", err, got)
	}
}

// A second runtime on the same node is refused, naming the first; a path
// that is not a socket is refused and left as it was.
func TestRuntime_BadSockets(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	l, err := statedir.New(state)
	if err != nil {
		t.Fatal(err)
	}
	sock := l.Node("node-2").CRISocket()
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = podlab(t, state, "runtime", "--node", "node-2")
	if err == nil || !strings.Contains(err.Error(), "is a regular file of 12 bytes") {
		t.Fatalf("podlab runtime on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "not a socket" {
		t.Fatalf("the file changed: %q", b)
	}

	_, out := startComponent(t, state, "runtime", "--node", "node-1")
	first := l.Node("node-1").CRISocket()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "Ctrl-C stops"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first runtime did not start:\n%s", out.String())
		}
	}
	_, _, err = podlab(t, state, "runtime", "--node", "node-1")
	if err == nil || !strings.Contains(err.Error(), "another runtime is serving the CRI socket "+first) || !strings.Contains(err.Error(), "podlab ") {
		t.Fatalf("a second podlab runtime: %v", err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
