package runc

// The shim's socket: how the runtime reaches a running container's stdio.
//
// containerd keeps a container's stdin fifo and fans its output out to the
// log and to attached clients; CRI-O's conmon listens on an attach socket
// and reads a control fifo ("reopen the log", "resize the terminal").
// podlab's shim does the same on one unix socket, containers/<id>/shim.sock:
//
//	client → shim   one JSON line: {"op":"reopen-log"} or
//	                {"op":"attach","stdin":true,"stdout":true,"stderr":true}
//	shim → client   one JSON line: {} or {"error":"..."}; an attach answer
//	                also says whether the container has a stdin, stdin_once
//	                and a terminal
//
// After an attach answer both sides send frames, a kind byte, a 4-byte
// big-endian length and the bytes: stdout and stderr from the shim; stdin,
// "stdin ended" and a terminal size from the client. The shim closes the
// connection when the container's output ends.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shimSocketName is the shim's socket in the container's directory.
const shimSocketName = "shim.sock"

// The kinds of frame on an attach connection.
const (
	frameStdin    byte = 0 // client → shim: bytes for the container's stdin
	frameStdout   byte = 1 // shim → client
	frameStderr   byte = 2 // shim → client
	frameStdinEnd byte = 3 // client → shim: the client's stdin ended
	frameResize   byte = 4 // client → shim: width, height (uint16 each)
)

// maxFrame bounds a frame's length: a client cannot make the shim
// allocate more.
const maxFrame = 1 << 20

type shimRequest struct {
	Op     string `json:"op"` // "reopen-log" or "attach"
	Stdin  bool   `json:"stdin,omitempty"`
	Stdout bool   `json:"stdout,omitempty"`
	Stderr bool   `json:"stderr,omitempty"`
}

type shimAnswer struct {
	Error     string `json:"error,omitempty"`
	Stdin     bool   `json:"stdin,omitempty"` // the container has a stdin to write to
	StdinOnce bool   `json:"stdinOnce,omitempty"`
	Tty       bool   `json:"tty,omitempty"`
}

func writeFrame(w io.Writer, kind byte, p []byte) error {
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("a frame of %d bytes (at most %d)", n, maxFrame)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return h[0], p, err
}

// dirPath names file in dir by a path short enough for a unix socket
// (108 bytes): /proc/self/fd/N/file, N an O_PATH descriptor of dir that
// the returned function closes.
func dirPath(dir, file string) (string, func(), error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, file), func() { unix.Close(fd) }, nil
}

// shimIO is what the shim holds of a container's stdio: the log writer,
// the stdin's write end (or the terminal), the attached clients.
type shimIO struct {
	cw        *criWriter
	logPath   string
	tty       bool
	stdinOnce bool

	mu      sync.Mutex
	log     *os.File
	stdin   *os.File // the pipe's write end, or the terminal; nil: none, or closed
	console *os.File // the terminal's leader end, with tty
	clients map[*attachClient]bool
	writers sync.WaitGroup
}

type attachClient struct {
	conn           net.Conn
	stdout, stderr bool
	out            chan frame
}

type frame struct {
	kind byte
	p    []byte
}

// reopenLog opens the log path again (a rotation renamed the file) and
// makes it the log writer's; the old file is closed. On failure the old
// file stays in use.
func (s *shimIO) reopenLog() error {
	if err := os.MkdirAll(filepath.Dir(s.logPath), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.log
	s.log = f
	s.mu.Unlock()
	s.cw.swap(f)
	return old.Close()
}

// tee is an io.Writer that hands what the container wrote on a stream to
// the attached clients.
type tee struct {
	s    *shimIO
	kind byte
}

func (t tee) Write(p []byte) (int, error) {
	t.s.broadcast(t.kind, p)
	return len(p), nil
}

// broadcast sends p to every client attached to the stream. A client that
// falls 256 frames behind is detached: the container never waits for one.
func (s *shimIO) broadcast(kind byte, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		if (kind == frameStdout && !c.stdout) || (kind == frameStderr && !c.stderr) {
			continue
		}
		select {
		case c.out <- frame{kind, append([]byte(nil), p...)}:
		default:
			s.detachLocked(c)
		}
	}
}

func (s *shimIO) detachLocked(c *attachClient) {
	if s.clients[c] {
		delete(s.clients, c)
		close(c.out)
	}
}

func (s *shimIO) detach(c *attachClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachLocked(c)
}

// closeStdin closes the container's stdin: it reads EOF.
func (s *shimIO) closeStdin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stdin != nil && !s.tty {
		s.stdin.Close()
		s.stdin = nil
	}
}

func (s *shimIO) writeStdin(p []byte) {
	s.mu.Lock()
	in := s.stdin
	s.mu.Unlock()
	if in != nil {
		_, _ = in.Write(p)
	}
}

// serve answers the connections of the shim's socket until ln closes.
func (s *shimIO) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go s.handle(conn)
	}
}

func (s *shimIO) handle(conn net.Conn) {
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	var req shimRequest
	answer := func(a shimAnswer) error { return json.NewEncoder(conn).Encode(a) }
	if err := json.Unmarshal(line, &req); err != nil {
		_ = answer(shimAnswer{Error: fmt.Sprintf("reading the request %q: %v", line, err)})
		conn.Close()
		return
	}
	switch req.Op {
	case "reopen-log":
		a := shimAnswer{}
		if err := s.reopenLog(); err != nil {
			a.Error = fmt.Sprintf("reopening the log %s: %v", s.logPath, err)
		}
		_ = answer(a)
		conn.Close()
	case "attach":
		s.attach(conn, br, req, answer)
	default:
		_ = answer(shimAnswer{Error: fmt.Sprintf("unknown request %q: the shim answers reopen-log and attach", req.Op)})
		conn.Close()
	}
}

func (s *shimIO) attach(conn net.Conn, br *bufio.Reader, req shimRequest, answer func(shimAnswer) error) {
	c := &attachClient{conn: conn, stdout: req.Stdout, stderr: req.Stderr && !s.tty, out: make(chan frame, 256)}
	s.mu.Lock()
	hasStdin := s.stdin != nil
	if s.clients == nil { // the output ended: nothing to attach to
		s.mu.Unlock()
		_ = answer(shimAnswer{Error: "the container's output has ended (it exited)"})
		conn.Close()
		return
	}
	if err := answer(shimAnswer{Stdin: hasStdin, StdinOnce: s.stdinOnce, Tty: s.tty}); err != nil {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.clients[c] = true
	s.writers.Add(1)
	s.mu.Unlock()
	go func() { // the container's output to the client, until detached
		defer s.writers.Done()
		defer conn.Close()
		for f := range c.out {
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := writeFrame(conn, f.kind, f.p); err != nil {
				s.detach(c)
				for range c.out {
				}
				return
			}
		}
	}()
	for { // the client's stdin and terminal sizes to the container
		kind, p, err := readFrame(br)
		if err != nil {
			s.detach(c)
			return
		}
		switch kind {
		case frameStdin:
			if req.Stdin {
				s.writeStdin(p)
			}
		case frameStdinEnd:
			if req.Stdin && s.stdinOnce {
				s.closeStdin()
			}
		case frameResize:
			if len(p) == 4 && s.console != nil {
				ws := &unix.Winsize{Col: binary.BigEndian.Uint16(p), Row: binary.BigEndian.Uint16(p[2:])}
				_ = unix.IoctlSetWinsize(int(s.console.Fd()), unix.TIOCSWINSZ, ws)
			}
		}
	}
}

// end detaches every client (their connections close once what was sent
// is written, up to 2 s) and refuses new ones.
func (s *shimIO) end() {
	s.mu.Lock()
	for c := range s.clients {
		s.detachLocked(c)
	}
	s.clients = nil
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.writers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// receiveConsole accepts runc's connection on the console socket and
// receives the terminal's leader end it sends (SCM_RIGHTS), as
// containerd's shim does for a container with process.terminal.
func receiveConsole(ln *net.UnixListener) (*os.File, error) {
	conn, err := ln.AcceptUnix()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("receiving the terminal from runc: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receiving the terminal from runc: %d control messages (%v)", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("receiving the terminal from runc: %d descriptors (%v)", len(fds), err)
	}
	unix.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "console"), nil
}

// consoleReader reads the terminal's leader end; the EIO it answers once
// the container's side is closed is the end of its output.
type consoleReader struct{ f *os.File }

func (c consoleReader) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	if errors.Is(err, syscall.EIO) {
		return n, io.EOF
	}
	return n, err
}

// dialShim connects to the shim of container id and sends req; it returns
// the connection (nil for a request that has no stream) and the answer.
func (r *Runtime) dialShim(ctx context.Context, id string, req shimRequest) (net.Conn, *bufio.Reader, *shimAnswer, error) {
	path, done, err := dirPath(r.ContainerDir(id), shimSocketName)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: container %s: %v", ErrNoShim, id, err)
	}
	defer done()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: container %s (%s): %v", ErrNoShim, id,
			filepath.Join(r.ContainerDir(id), shimSocketName), unwrapSyscall(err))
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadBytes('\n')
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		return nil, nil, nil, fmt.Errorf("%w: container %s: the shim closed the connection (%v)", ErrNoShim, id, err)
	}
	var a shimAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("reading the shim's answer %q: %w", line, err)
	}
	if a.Error != "" {
		conn.Close()
		return nil, nil, &a, errors.New(a.Error)
	}
	return conn, br, &a, nil
}

func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// ReopenLog has the container's shim close its CRI log file and open the
// log path again, as CRI's ReopenContainerLog asks after the kubelet
// rotated the log (renamed N.log to N.log.<time>): what the container
// writes from then on goes to a new N.log.
func (r *Runtime) ReopenLog(ctx context.Context, id string) error {
	if err := r.mustExist(id); err != nil {
		return err
	}
	conn, _, _, err := r.dialShim(ctx, id, shimRequest{Op: "reopen-log"})
	if err != nil {
		return fmt.Errorf("reopening the log of container %s: %w", id, err)
	}
	conn.Close()
	return nil
}

// WindowSize is a terminal's size in characters.
type WindowSize struct{ Width, Height uint16 }

// AttachOptions are the streams of an attach: nil ones are not attached.
type AttachOptions struct {
	IO
	// Resize carries the client's terminal size (for a container with a
	// terminal); nil: none.
	Resize <-chan WindowSize
}

// Attach connects the streams to the running container's, through its
// shim, as `kubectl attach` (CRI's Attach): what the container writes from
// now on reaches Stdout and Stderr (a terminal's output is all Stdout),
// and Stdin reaches the container's stdin if it was created with one
// (CreateOptions.Stdin; else Stdin is not read). When Stdin ends, a
// container created with StdinOnce (and no terminal) has its stdin closed
// and Attach goes on until its output ends; otherwise Attach returns
// (detaches), as containerd does. It returns when the container's output
// ends, or ctx does.
func (r *Runtime) Attach(ctx context.Context, id string, opts AttachOptions) error {
	if err := r.mustExist(id); err != nil {
		return err
	}
	req := shimRequest{Op: "attach", Stdin: opts.Stdin != nil, Stdout: opts.Stdout != nil, Stderr: opts.Stderr != nil}
	conn, br, a, err := r.dialShim(ctx, id, req)
	if err != nil {
		return fmt.Errorf("attaching to container %s: %w", id, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var wmu sync.Mutex
	send := func(kind byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return writeFrame(conn, kind, p)
	}
	if opts.Stdin != nil && a.Stdin {
		go func() {
			buf := make([]byte, 32*1024)
			for {
				n, err := opts.Stdin.Read(buf)
				if n > 0 && send(frameStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					break
				}
			}
			_ = send(frameStdinEnd, nil)
			if !a.StdinOnce || a.Tty {
				conn.Close() // detach: the container's stdin stays open
			}
		}()
	}
	if opts.Resize != nil && a.Tty {
		go func() {
			for sz := range opts.Resize {
				var p [4]byte
				binary.BigEndian.PutUint16(p[:], sz.Width)
				binary.BigEndian.PutUint16(p[2:], sz.Height)
				if send(frameResize, p[:]) != nil {
					return
				}
			}
		}()
	}
	for {
		kind, p, err := readFrame(br)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // the output ended, or we detached
		}
		w := opts.Stdout
		if kind == frameStderr {
			w = opts.Stderr
		}
		if w != nil {
			if _, err := w.Write(p); err != nil {
				return fmt.Errorf("attaching to container %s: writing its output: %w", id, err)
			}
		}
	}
}
