package cri

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
)

// withHostTools lets a container of the hello image (one static program)
// run the node's own sh, cat, ps and stty: the host's /usr, /lib and
// /lib64, mounted read-only (Debian's /bin is /usr/bin).
func withHostTools(cfg *runtimeapi.ContainerConfig, cmd ...string) *runtimeapi.ContainerConfig {
	for _, d := range []struct{ host, ctr string }{{"/usr", "/usr"}, {"/usr/lib", "/lib"}, {"/usr/lib64", "/lib64"}} {
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{HostPath: d.host, ContainerPath: d.ctr, Readonly: true})
	}
	cfg.Command = cmd
	cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: "PATH", Value: []byte("/usr/bin:/usr/sbin")})
	return cfg
}

// stdioPod is a sandbox with a log directory, on a node with the hello
// image pulled.
type stdioPod struct {
	n      *node
	ref    string
	sb     string
	pc     *runtimeapi.PodSandboxConfig
	logDir string
}

func newStdioPod(t *testing.T, name string, ns *runtimeapi.NamespaceOption) *stdioPod {
	t.Helper()
	testenv.RequireRoot(t)
	ctx := context.Background()
	host := labRegistry(t)
	n := startNode(t, testenv.StateDir(t))
	t.Cleanup(func() { n.cleanupSandboxes(t) })
	ref := host + "/podlab/hello:1.0"
	if _, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	pc := podConfig(name)
	pc.LogDirectory = t.TempDir()
	if ns != nil {
		pc.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}}
	}
	sb, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pc})
	if err != nil {
		t.Fatal(err)
	}
	return &stdioPod{n: n, ref: ref, sb: sb.PodSandboxId, pc: pc, logDir: pc.LogDirectory}
}

// run creates and starts a container of cfg (its image set to the pod's).
func (p *stdioPod) run(t *testing.T, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	ctx := context.Background()
	cfg.Image = &runtimeapi.ImageSpec{Image: p.ref}
	cr, err := p.n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.sb, Config: cfg, SandboxConfig: p.pc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	return cr.ContainerId
}

// logLines are the numbers of the "line N" messages of a CRI log file.
func logLines(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		f := strings.SplitN(l, " ", 4)
		if len(f) != 4 || f[1] != "stdout" || f[2] != "F" || !strings.HasPrefix(f[3], "line ") {
			t.Fatalf("%s: line %q is not the counter's CRI line", path, l)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(f[3], "line "))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// The kubelet's rotation: rename N.log to N.log.<time>, then
// ReopenContainerLog; the container's next lines go to a new N.log. A
// counter shows that no line is lost or written twice across the files.
func TestServer_ReopenContainerLog(t *testing.T) {
	p := newStdioPod(t, "rotate", nil)
	ctx := context.Background()
	for i, tc := range []struct {
		name      string
		rotations int // renames, each followed by a reopen
		reopens   int // reopens without a rename first
	}{
		{name: "rotated once", rotations: 1},
		{name: "rotated three times", rotations: 3},
		{name: "reopened without a rotation", reopens: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("counter%d", i)},
				LogPath: fmt.Sprintf("counter%d/0.log", i)},
				"sh", "-c", `i=0; while :; do i=$((i+1)); echo "line $i"; sleep 0.02; done`)
			id := p.run(t, cfg)
			logPath := filepath.Join(p.logDir, cfg.LogPath)
			grown := func(path string, by int) {
				t.Helper()
				waitFor(t, 10*time.Second, fmt.Sprintf("%d lines in %s", by, path), func() bool {
					b, _ := os.ReadFile(path)
					return bytes.Count(b, []byte("\n")) >= by
				})
			}
			var files []string
			for r := 0; r < tc.rotations; r++ {
				grown(logPath, 5)
				rotated := fmt.Sprintf("%s.2026120%d-120000", logPath, r)
				if err := os.Rename(logPath, rotated); err != nil {
					t.Fatal(err)
				}
				files = append(files, rotated)
				if _, err := p.n.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
					t.Fatalf("ReopenContainerLog after rotation %d: %v", r+1, err)
				}
			}
			for r := 0; r < tc.reopens; r++ {
				grown(logPath, 5*(r+1))
				if _, err := p.n.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
					t.Fatalf("ReopenContainerLog %d: %v", r+1, err)
				}
			}
			grown(logPath, 5*(tc.reopens+1))
			if _, err := p.n.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
				t.Fatal(err)
			}
			files = append(files, logPath)
			next := 1
			for _, f := range files {
				lines := logLines(t, f)
				if len(lines) == 0 {
					t.Fatalf("%s is empty: the lines went elsewhere", f)
				}
				for _, n := range lines {
					if n != next {
						t.Fatalf("%s: line %d where %d was next (files %q): a line was lost or written twice", f, n, next, files)
					}
					next++
				}
			}
			// The runtime's own name for the log follows the newest file.
			if b, err := os.ReadFile(p.n.srv.rt.LogPath(id)); err != nil || !bytes.Contains(b, []byte(fmt.Sprintf("line %d\n", next-1))) {
				t.Errorf("%s does not end as %s: %v", p.n.srv.rt.LogPath(id), logPath, err)
			}
		})
	}
}

// ReopenContainerLog of a container that is not running is refused as
// containerd refuses it, and of one that does not exist, NotFound.
func TestServer_ReopenContainerLog_BadInput(t *testing.T) {
	p := newStdioPod(t, "rotate-bad", nil)
	ctx := context.Background()
	created, err := p.n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.sb, SandboxConfig: p.pc,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "created"}, Image: &runtimeapi.ImageSpec{Image: p.ref}, LogPath: "created/0.log"}})
	if err != nil {
		t.Fatal(err)
	}
	exited := p.run(t, withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "exited"}, LogPath: "exited/0.log"}, "true"))
	waitFor(t, 10*time.Second, "the container's exit", func() bool {
		return containerStatus(t, p.n, exited).State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	for _, tc := range []struct {
		name string
		id   string
		code codes.Code
		want string
	}{
		{"created, not started", created.ContainerId, codes.FailedPrecondition, "container is not running"},
		{"exited", exited, codes.FailedPrecondition, "container is not running"},
		{"unknown id", "0123456789abcdef", codes.NotFound, "0123456789abcdef"},
		{"no id", "", codes.InvalidArgument, "container ID is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.n.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: tc.id})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("ReopenContainerLog(%q) = %v, want %s with %q", tc.id, err, tc.code, tc.want)
			}
		})
	}
}

// sizeQueue hands the attach one terminal size.
type sizeQueue struct {
	sizes chan remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &s
}

// attachSession is one client attached over the streaming server (SPDY),
// as the kubelet's and crictl's client-go attaches.
type attachSession struct {
	stdin  *io.PipeWriter
	out    *testenv.SyncBuffer
	done   chan error
	cancel context.CancelFunc
}

func attach(t *testing.T, n *node, id string, req *runtimeapi.AttachRequest) *attachSession {
	t.Helper()
	req.ContainerId = id
	resp, err := n.rt.Attach(context.Background(), req)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := remotecommand.NewSPDYExecutor(&restclient.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	s := &attachSession{out: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	opts := remotecommand.StreamOptions{Stdout: s.out, Tty: req.Tty}
	if req.Stderr {
		opts.Stderr = s.out
	}
	if req.Stdin {
		r, w := io.Pipe()
		s.stdin, opts.Stdin = w, r
	}
	if req.Tty {
		q := sizeQueue{make(chan remotecommand.TerminalSize, 1)}
		q.sizes <- remotecommand.TerminalSize{Width: 100, Height: 40}
		opts.TerminalSizeQueue = q
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- exec.StreamWithContext(ctx, opts) }()
	t.Cleanup(cancel)
	return s
}

func (s *attachSession) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("%s: the attach ended with %v", what, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: the attach did not end in 15s (output %q)", what, s.out.String())
	}
}

// Attach with stdin, through the streaming server: containers made with
// stdin get a stdin the shim keeps; stdin_once closes it when the first
// client's stdin ends, without it the client detaches and the container
// reads on; a container on a terminal echoes and takes the client's size.
func TestServer_Attach(t *testing.T) {
	p := newStdioPod(t, "attach", nil)
	ctx := context.Background()
	for i, tc := range []struct {
		name string
		cfg  *runtimeapi.ContainerConfig
		req  *runtimeapi.AttachRequest
		test func(t *testing.T, id string, s *attachSession, logPath string)
	}{
		{
			name: "stdin_once: cat echoes, the end of stdin ends it",
			cfg:  &runtimeapi.ContainerConfig{Stdin: true, StdinOnce: true},
			req:  &runtimeapi.AttachRequest{Stdin: true, Stdout: true, Stderr: true},
			test: func(t *testing.T, id string, s *attachSession, logPath string) {
				fmt.Fprintln(s.stdin, "hello through attach")
				waitFor(t, 10*time.Second, "cat's echo", func() bool { return s.out.String() == "hello through attach\n" })
				s.stdin.Close()
				s.wait(t, "stdin closed")
				waitFor(t, 10*time.Second, "cat's exit", func() bool {
					st := containerStatus(t, p.n, id)
					return st.State == runtimeapi.ContainerState_CONTAINER_EXITED && st.ExitCode == 0
				})
				b, _ := os.ReadFile(logPath)
				if !bytes.Contains(b, []byte(" stdout F hello through attach\n")) {
					t.Errorf("the log has no echo: %q", b)
				}
			},
		},
		{
			name: "stdin without stdin_once: the client detaches, cat reads on",
			cfg:  &runtimeapi.ContainerConfig{Stdin: true},
			req:  &runtimeapi.AttachRequest{Stdin: true, Stdout: true},
			test: func(t *testing.T, id string, s *attachSession, logPath string) {
				fmt.Fprintln(s.stdin, "first")
				waitFor(t, 10*time.Second, "the first echo", func() bool { return s.out.String() == "first\n" })
				s.stdin.Close()
				s.wait(t, "stdin closed")
				if st := containerStatus(t, p.n, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Fatalf("after the client detached: %s, want cat still running", st.State)
				}
				again := attach(t, p.n, id, &runtimeapi.AttachRequest{Stdin: true, Stdout: true})
				fmt.Fprintln(again.stdin, "second")
				waitFor(t, 10*time.Second, "the second echo", func() bool { return again.out.String() == "second\n" })
				again.stdin.Close()
				again.wait(t, "the second stdin closed")
			},
		},
		{
			name: "tty: the terminal echoes, takes the client's size",
			cfg:  &runtimeapi.ContainerConfig{Stdin: true, StdinOnce: true, Tty: true},
			req:  &runtimeapi.AttachRequest{Stdin: true, Stdout: true, Tty: true},
			test: func(t *testing.T, id string, s *attachSession, logPath string) {
				fmt.Fprint(s.stdin, "on a terminal\n")
				// the terminal echoes the line, then cat writes it: \r\n each
				waitFor(t, 10*time.Second, "the terminal's echo and cat's", func() bool {
					return strings.Count(s.out.String(), "on a terminal\r\n") == 2
				})
				waitFor(t, 10*time.Second, "the client's size", func() bool {
					ex, err := p.n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"stty", "-F", "/dev/pts/0", "size"}, Timeout: 10})
					return err == nil && strings.TrimSpace(string(ex.Stdout)) == "40 100"
				})
				s.stdin.Close()
				s.wait(t, "stdin closed") // a terminal's client detaches
				if st := containerStatus(t, p.n, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Fatalf("after the client detached: %s, want cat still running", st.State)
				}
			},
		},
		{
			name: "no stdin: the client's stdin is not read, the output is",
			cfg:  &runtimeapi.ContainerConfig{},
			req:  &runtimeapi.AttachRequest{Stdin: true, Stdout: true, Stderr: true},
			test: func(t *testing.T, id string, s *attachSession, logPath string) {
				// cat of /dev/null ends at once: its output is a shell's
				go func() { fmt.Fprintln(s.stdin, "never read") }()
				s.wait(t, "the container's exit")
				if got := s.out.String(); strings.Contains(got, "never read") || !strings.Contains(got, "tick") {
					t.Fatalf("attach output %q, want the ticks and not the client's stdin", got)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Metadata = &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", i)}
			tc.cfg.LogPath = fmt.Sprintf("c%d/0.log", i)
			cmd := []string{"cat"}
			if !tc.cfg.Stdin {
				cmd = []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; echo tick; done; cat"}
			}
			id := p.run(t, withHostTools(tc.cfg, cmd...))
			tc.test(t, id, attach(t, p.n, id, tc.req), filepath.Join(p.logDir, tc.cfg.LogPath))
		})
	}
}

// Attach requests the runtime or the streaming server refuse.
func TestServer_Attach_BadInput(t *testing.T) {
	p := newStdioPod(t, "attach-bad", nil)
	ctx := context.Background()
	running := p.run(t, withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "running"}, Stdin: true}, "cat"))
	exited := p.run(t, withHostTools(&runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "exited"}}, "true"))
	waitFor(t, 10*time.Second, "the container's exit", func() bool {
		return containerStatus(t, p.n, exited).State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	for _, tc := range []struct {
		name string
		req  *runtimeapi.AttachRequest
		code codes.Code
		want string
	}{
		{"exited", &runtimeapi.AttachRequest{ContainerId: exited, Stdout: true}, codes.FailedPrecondition, "not running"},
		{"unknown id", &runtimeapi.AttachRequest{ContainerId: "fedcba9876543210", Stdout: true}, codes.NotFound, "fedcba9876543210"},
		{"tty and stderr", &runtimeapi.AttachRequest{ContainerId: running, Stdout: true, Stderr: true, Tty: true}, codes.InvalidArgument, "tty and stderr"},
		{"no stream", &runtimeapi.AttachRequest{ContainerId: running}, codes.InvalidArgument, "one of stdin, stdout, and stderr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.n.rt.Attach(ctx, tc.req)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("Attach(%v) = %v, want %s with %q", tc.req, err, tc.code, tc.want)
			}
		})
	}
}
