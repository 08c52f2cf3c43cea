package cri

// Exec, Attach and PortForward answer a URL on the streaming server
// (k8s.io/cri-streaming), which the client (the kubelet, or crictl)
// connects to with SPDY or WebSocket; ExecSync runs a command and answers
// its output in the reply. containerd's streaming server listens on
// 127.0.0.1, port 0 (a free one), as this one does by default.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/podlab/podlab/steps/runc"
)

type streamServer struct {
	s    *Server
	srv  streaming.Server
	ln   net.Listener
	http *http.Server
	base string
}

func newStreamServer(s *Server, addr string) (*streamServer, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting the streaming server on %s: %w", addr, err)
	}
	st := &streamServer{s: s, ln: ln, base: "http://" + ln.Addr().String()}
	cfg := streaming.DefaultConfig
	cfg.Addr = ln.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	srv, err := streaming.NewServer(cfg, st)
	if err != nil {
		ln.Close()
		return nil, err
	}
	st.srv = srv
	st.http = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	return st, nil
}

func (st *streamServer) serve() { _ = st.http.Serve(st.ln) }
func (st *streamServer) close() { _ = st.http.Close() }

// runningContainer is the container id names, which must be running.
func (s *Server) runningContainer(ctx context.Context, id string) (*containerRecord, error) {
	c, err := s.findContainer(id)
	if err != nil {
		return nil, err
	}
	if st := s.containerState(ctx, c); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is in %s state, not running", c.ID, st.State)
	}
	return c, nil
}

// ExecSync runs a command in the container (`runc exec`) and answers its
// output and exit code; timeout seconds end it (0: none).
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	c, err := s.runningContainer(ctx, req.ContainerId)
	if err != nil {
		return nil, err
	}
	if len(req.Cmd) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ExecSync: no command given")
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	code, err := s.rtOf(c).Exec(ctx, c.ID, req.Cmd, runc.ExecOptions{IO: runc.IO{Stdout: &stdout, Stderr: &stderr}})
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.Errorf(codes.DeadlineExceeded, "command %q timed out after %ds", req.Cmd, req.Timeout)
		}
		return nil, status.Errorf(codes.Unknown, "failed to exec in container %q: %v", c.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil
}

// Exec answers the URL where the client streams the command.
func (s *Server) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	c, err := s.runningContainer(ctx, req.ContainerId)
	if err != nil {
		return nil, err
	}
	r := proto.Clone(req).(*runtimeapi.ExecRequest)
	r.ContainerId = c.ID
	return s.stream.srv.GetExec(r)
}

// Attach answers the URL where the client attaches to the container's
// stdio, as containerd's: its output from now on, and its stdin when it
// was created with one (a stdin asked of a container without one is not
// read, as containerd ignores it).
func (s *Server) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	c, err := s.runningContainer(ctx, req.ContainerId)
	if err != nil {
		return nil, err
	}
	if req.Stdin && !c.config.GetStdin() {
		s.note("Attach: container %s was created without stdin (ContainerConfig.stdin false): the client's stdin is not read", c.ID)
	}
	r := proto.Clone(req).(*runtimeapi.AttachRequest)
	r.ContainerId = c.ID
	return s.stream.srv.GetAttach(r)
}

// PortForward answers the URL where the client forwards ports into the
// sandbox's network namespace.
func (s *Server) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	sb, err := s.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	if sb.State != stateReady {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready", sb.ID)
	}
	r := proto.Clone(req).(*runtimeapi.PortForwardRequest)
	r.PodSandboxId = sb.ID
	return s.stream.srv.GetPortForward(r)
}

// Exec is streaming.Runtime's: runc exec with the streams, on a terminal
// when tty.
func (st *streamServer) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	opts := runc.ExecOptions{IO: runc.IO{Stdin: in}, Tty: tty}
	if out != nil {
		opts.Stdout = out
	}
	if errw != nil {
		opts.Stderr = errw
	}
	var code int
	var err error
	if tty {
		code, err = st.execTTY(ctx, id, cmd, opts, resize)
	} else {
		code, err = st.s.rtByID(id).Exec(ctx, id, cmd, opts)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// exitError is a command's non-zero exit, as the streaming server hands
// it to the client (k8s.io/utils/exec's ExitError).
type exitError struct{ code int }

func (e *exitError) Error() string {
	return "command terminated with exit code " + strconv.Itoa(e.code)
}
func (e *exitError) String() string  { return e.Error() }
func (e *exitError) Exited() bool    { return true }
func (e *exitError) ExitStatus() int { return e.code }

func (st *streamServer) execTTY(ctx context.Context, id string, cmd []string, opts runc.ExecOptions, resize <-chan remotecommand.TerminalSize) (int, error) {
	leader, follower, err := openPty()
	if err != nil {
		return 0, fmt.Errorf("a terminal for exec in %s: %w", id, err)
	}
	defer leader.Close()
	defer follower.Close()
	opts.Console = follower
	setSize := func(sz remotecommand.TerminalSize) {
		_ = unix.IoctlSetWinsize(int(leader.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Height, Col: sz.Width})
	}
	// the first size, before the command starts (a client sends it right
	// after the streams connect): runc's init sizes the container's
	// console with it (consoleSize) before the command runs, where a
	// later SIGWINCH would race a quick `stty size`
	if resize != nil {
		select {
		case sz, ok := <-resize:
			if ok {
				setSize(sz)
				opts.ConsoleSize = &specs.Box{Height: uint(sz.Height), Width: uint(sz.Width)}
			}
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
		}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sz, ok := <-resize:
				if !ok {
					return
				}
				setSize(sz)
			case <-done:
				return
			}
		}
	}()
	if opts.Stdin != nil {
		go func() { _, _ = io.Copy(leader, opts.Stdin) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		w := opts.Stdout
		if w == nil {
			w = io.Discard
		}
		_, _ = io.Copy(w, leader)
	}()
	code, err := st.s.rtByID(id).Exec(ctx, id, cmd, opts)
	follower.Close()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	return code, err
}

func openPty() (leader, follower *os.File, err error) {
	leader, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(leader.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		leader.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		leader.Close()
		return nil, nil, err
	}
	follower, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		leader.Close()
		return nil, nil, err
	}
	return leader, follower, nil
}

// Attach is streaming.Runtime's: the container's stdio through its shim
// (runc.Runtime.Attach), until its output ends or the client detaches.
func (st *streamServer) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	var opts runc.AttachOptions
	if in != nil {
		opts.Stdin = in
	}
	if out != nil {
		opts.Stdout = out
	}
	if errw != nil {
		opts.Stderr = errw
	}
	if resize != nil {
		sizes, done := make(chan runc.WindowSize), make(chan struct{})
		defer close(done)
		opts.Resize = sizes
		go func() {
			defer close(sizes)
			for sz := range resize {
				select {
				case sizes <- runc.WindowSize{Width: sz.Width, Height: sz.Height}:
				case <-done:
					return
				}
			}
		}()
	}
	return st.s.rtByID(id).Attach(ctx, id, opts)
}

// PortForward is streaming.Runtime's: a connection to 127.0.0.1:port made
// inside the sandbox's network namespace, copied both ways.
func (st *streamServer) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	sb, err := st.s.rec.sandbox(sandboxID)
	if err != nil {
		return err
	}
	conn, err := dialInNetns(ctx, sb.netnsPath(), fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port-forward to port %d of sandbox %s: %w", port, sandboxID, err)
	}
	defer conn.Close()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(conn, stream); errc <- err }()
	go func() { _, err := io.Copy(stream, conn); errc <- err }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dialInNetns connects to addr from inside the network namespace at
// netns ("" is the node's): a locked thread enters it, makes the socket
// (a socket belongs to the namespace it was made in), and goes back.
func dialInNetns(ctx context.Context, netns, addr string) (net.Conn, error) {
	if netns == "" {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- result{err: err}
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		target, err := os.Open(netns)
		if err != nil {
			done <- result{err: err}
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("entering %s: %w", netns, err)}
			runtime.UnlockOSThread()
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the thread dies locked, in the pod's namespace
		}
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}
