package criremote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
)

// serveArg makes the test binary a node's runtime (steps/cri) on the
// node-1 socket of the state directory that follows it, until SIGTERM:
// a real runtime process for Start and Stop.
const serveArg = "serve-runtime-for-test"

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == serveArg {
		if err := serve(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serve(dir, runcBin string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := statedir.New(dir)
	if err != nil {
		return err
	}
	n := l.Node("node-1")
	ln, _, err := cri.Listen(ctx, n.CRISocket())
	if err != nil {
		return err
	}
	srv, _, err := cri.New(ctx, cri.Config{Node: n, Runtime: runcBin, Shim: []string{os.Args[0]}})
	if err != nil {
		return err
	}
	fmt.Println("serving on", n.CRISocket())
	return srv.Serve(ctx, ln)
}

// node is node-1 of a fresh state directory.
func node(t *testing.T) statedir.Node {
	t.Helper()
	l, err := statedir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l.Node("node-1")
}

// startRuntime starts the test binary as node-1's runtime, a process of its own.
func startRuntime(t *testing.T, n statedir.Node) *criremote.Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := criremote.Start(context.Background(), criremote.StartSpec{
		Argv:     []string{exe, serveArg, n.State().Dir, testenv.Runc(t)},
		Endpoint: "unix://" + n.CRISocket(), LogPath: n.RuntimeLog(), PidFile: n.RuntimePidFile(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { criremote.Stop(context.Background(), n.RuntimePidFile(), 5*time.Second) })
	return p
}

func TestEndpoint(t *testing.T) {
	got, err := criremote.Endpoint("unix:///run/x/../containerd/containerd.sock")
	if err != nil || got != "/run/containerd/containerd.sock" {
		t.Fatalf("Endpoint = %q, %v; want /run/containerd/containerd.sock", got, err)
	}
}

func TestEndpoint_BadInput(t *testing.T) {
	for _, tc := range []struct{ name, endpoint, hint string }{
		{"empty", "", "unix:///PATH"},
		{"bare path", "/run/containerd/containerd.sock", "give unix:///run/containerd/containerd.sock"},
		{"tcp", "tcp://127.0.0.1:10010", `scheme "tcp"`},
		{"windows pipe", "npipe:////./pipe/containerd", `scheme "npipe"`},
		{"relative", "unix://run/cri.sock", "three slashes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := criremote.Endpoint(tc.endpoint)
			if !errors.Is(err, criremote.ErrEndpoint) || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("Endpoint(%q) = %v; want ErrEndpoint saying %q", tc.endpoint, err, tc.hint)
			}
			if _, err := criremote.Dial(tc.endpoint, "", criremote.Options{}); !errors.Is(err, criremote.ErrEndpoint) {
				t.Errorf("Dial(%q) = %v; want ErrEndpoint", tc.endpoint, err)
			}
		})
	}
}

func TestProbe_Unreachable(t *testing.T) {
	n := node(t)
	_, err := criremote.Probe(context.Background(), "unix://"+n.CRISocket(), time.Second)
	if !errors.Is(err, criremote.ErrUnreachable) || !strings.Contains(err.Error(), n.CRISocket()) {
		t.Fatalf("Probe of a socket nobody serves = %v; want ErrUnreachable naming it", err)
	}
}

// syncWriter is a bytes.Buffer safe for the interceptor's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestStart_DialNarrateStop(t *testing.T) {
	n := node(t)
	p := startRuntime(t, n)
	if !strings.HasPrefix(p.Version, "podlab ") || !strings.Contains(p.Version, "CRI v1") {
		t.Errorf("Version = %q; want podlab's runtime, CRI v1", p.Version)
	}
	// Detached: its own session, so the kubelet's Ctrl-C does not reach it.
	if sid, err := unix.Getsid(p.Pid); err != nil || sid != p.Pid {
		t.Errorf("getsid(%d) = %d, %v; want its own session", p.Pid, sid, err)
	}
	if b, err := os.ReadFile(n.RuntimePidFile()); err != nil || !strings.HasPrefix(string(b), fmt.Sprint(p.Pid, " ")) {
		t.Errorf("pid file %s = %q, %v; want its pid and start time", n.RuntimePidFile(), b, err)
	}

	var log syncWriter
	c, err := criremote.Dial("unix://"+n.CRISocket(), "", criremote.Options{Log: &log, TextLimit: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Image.ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "nope"})
	if err == nil {
		t.Fatal("PodSandboxStatus of an unknown sandbox answered")
	}
	got := log.String()
	for _, want := range []string{
		`CRI Version request: {version:"v1"}`,
		`CRI Version response (`,
		`runtime_name:"podlab"`,
		"CRI ListImages request: {}",
		`CRI PodSandboxStatus request: {pod_sandbox_id:"nope"}`,
		"CRI PodSandboxStatus error (NotFound)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("narration lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "more bytes)") {
		t.Errorf("a response over TextLimit is not trimmed:\n%s", got)
	}

	pid, err := criremote.Stop(ctx, n.RuntimePidFile(), 5*time.Second)
	if err != nil || pid != p.Pid {
		t.Fatalf("Stop = %d, %v; want %d", pid, err, p.Pid)
	}
	if _, err := os.Stat(n.RuntimePidFile()); !os.IsNotExist(err) {
		t.Errorf("the pid file stays after Stop: %v", err)
	}
	if _, err := criremote.Probe(ctx, "unix://"+n.CRISocket(), time.Second); !errors.Is(err, criremote.ErrUnreachable) {
		t.Errorf("after Stop, Probe = %v; want ErrUnreachable", err)
	}
	if b, _ := os.ReadFile(n.RuntimeLog()); !strings.Contains(string(b), "serving on "+n.CRISocket()) {
		t.Errorf("the runtime's output is not in %s:\n%s", n.RuntimeLog(), b)
	}
	// Stopped twice: nothing recorded, nothing to do.
	if pid, err := criremote.Stop(ctx, n.RuntimePidFile(), time.Second); pid != 0 || err != nil {
		t.Errorf("second Stop = %d, %v; want 0, nil", pid, err)
	}
}

func TestStart_Fails(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want string
	}{
		{"exits at once", []string{"/bin/sh", "-c", "echo the runtime cannot start; exit 3"}, "the runtime cannot start"},
		{"never answers", []string{"/bin/sleep", "30"}, "no answer on"},
		{"no such program", []string{"/nonexistent/podlab"}, "/nonexistent/podlab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(t)
			_, err := criremote.Start(context.Background(), criremote.StartSpec{
				Argv: tc.argv, Endpoint: "unix://" + n.CRISocket(), LogPath: n.RuntimeLog(), PidFile: n.RuntimePidFile(),
				Timeout: 2 * time.Second,
			})
			if !errors.Is(err, criremote.ErrStartFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v; want ErrStartFailed saying %q", err, tc.want)
			}
			if _, err := os.Stat(n.RuntimePidFile()); !os.IsNotExist(err) {
				t.Errorf("a failed start left its pid file: %v", err)
			}
		})
	}
}

func TestStop_BadPidFile(t *testing.T) {
	n := node(t)
	if err := os.MkdirAll(filepath.Dir(n.RuntimePidFile()), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(n.RuntimePidFile(), []byte("not a pid\n"), 0o644)
	if _, err := criremote.Stop(context.Background(), n.RuntimePidFile(), time.Second); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("Stop of a garbled pid file = %v; want an error saying to remove it", err)
	}
	// A pid that another process now has (another start time) is not signalled.
	os.WriteFile(n.RuntimePidFile(), fmt.Appendf(nil, "%d 1\n", os.Getpid()), 0o644)
	if pid, err := criremote.Stop(context.Background(), n.RuntimePidFile(), time.Second); pid != 0 || err != nil {
		t.Errorf("Stop of a reused pid = %d, %v; want 0, nil (and this test still alive)", pid, err)
	}
}
