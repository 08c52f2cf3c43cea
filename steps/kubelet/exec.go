package kubelet

// kubectl exec reaches the kubelet of the pod's node (its API's /exec,
// through the API server); the kubelet asks its runtime (CRI Exec), which
// runs `runc exec` in the container: a new process that joins the
// container's namespaces and cgroup, with its rootfs, user and
// capabilities.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/runc"
)

// ExecOptions are the exec's streams, as the kubelet API's /exec opens
// them (stdin, stdout, stderr; tty).
type ExecOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Tty gives the command a terminal (runc exec --tty): its output comes
	// on Stdout only, with the terminal's line endings. The kubelet holds
	// a pseudo-terminal for it, as a CRI runtime does.
	Tty bool
	// Resize, with Tty, brings the client's terminal size: the first
	// before the command starts, then one per resize (kubectl sends them on
	// SIGWINCH).
	Resize <-chan TerminalSize
}

// TerminalSize is a terminal's width and height in characters.
type TerminalSize struct {
	Width, Height uint16
}

// Exec runs cmd in the running container of pod named container and
// returns the command's exit code. It fails with ErrNoSuchContainer when
// the pod has no such container, or it is not running.
func (k *Kubelet) Exec(ctx context.Context, pod *corev1.Pod, container string, cmd []string, opts ExecOptions) (int, error) {
	if len(cmd) == 0 {
		return 0, fmt.Errorf("exec in %s/%s: no command given", pod.Name, container)
	}
	id, err := runningContainerID(pod, container)
	if err != nil {
		return 0, err
	}
	ro := runc.ExecOptions{IO: runc.IO{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr}, Tty: opts.Tty}
	if !opts.Tty {
		return k.runtimeOrDefault(pod.UID).Exec(ctx, id, cmd, ro)
	}
	pty, err := openPty()
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: a terminal for the command: %w", pod.Name, container, err)
	}
	defer pty.close()
	ro.Console = pty.follower
	// the first size, before the command starts: kubectl sends it right
	// after the streams connect, but on a loaded machine that can take a
	// while (100 ms was not enough: stty size said "0 0"); a client that
	// sends none costs three seconds. runc's init sizes the console with
	// it (the process's consoleSize) before the command runs: a resize
	// that only reaches runc as SIGWINCH raced a quick `stty size`.
	if opts.Resize != nil {
		select {
		case sz, ok := <-opts.Resize:
			if ok {
				pty.resize(sz)
				ro.ConsoleSize = &specs.Box{Height: uint(sz.Height), Width: uint(sz.Width)}
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
			case sz, ok := <-opts.Resize:
				if !ok {
					return
				}
				pty.resize(sz)
			case <-done:
				return
			}
		}
	}()
	if opts.Stdin != nil {
		go func() { _, _ = io.Copy(pty.leader, opts.Stdin) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if opts.Stdout != nil {
			_, _ = io.Copy(opts.Stdout, pty.leader)
		} else {
			_, _ = io.Copy(io.Discard, pty.leader)
		}
	}()
	code, err := k.runtimeOrDefault(pod.UID).Exec(ctx, id, cmd, ro)
	// The command's output is in the terminal: read it to the end (EIO
	// once no process holds the follower end) before saying it ended.
	pty.follower.Close()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	return code, err
}

// pty is a pseudo-terminal: the leader end the kubelet reads and writes,
// the follower end the command runs on.
type pty struct {
	leader, follower *os.File
}

// openPty opens a new pseudo-terminal (/dev/ptmx, unlocked; its
// /dev/pts/N).
func openPty() (*pty, error) {
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fd := int(leader.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		leader.Close()
		return nil, fmt.Errorf("unlocking the pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		leader.Close()
		return nil, fmt.Errorf("naming the pseudo-terminal: %w", err)
	}
	follower, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		leader.Close()
		return nil, err
	}
	return &pty{leader: leader, follower: follower}, nil
}

// resize sets the terminal's size: the kernel sends SIGWINCH to the
// session it controls (runc's), and runc resizes the container's console.
func (p *pty) resize(sz TerminalSize) {
	_ = unix.IoctlSetWinsize(int(p.leader.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Height, Col: sz.Width})
}

func (p *pty) close() {
	p.follower.Close()
	p.leader.Close()
}

// runningContainerID is the runtime's ID of the container's current run,
// from the pod's status (containerID runc://ID), when it is running.
func runningContainerID(pod *corev1.Pod, container string) (string, error) {
	cs := containerStatus(pod, container)
	switch {
	case cs == nil:
		var names []string
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		return "", fmt.Errorf("%w: container %q of pod %q has no status (the pod has %s)", ErrNoSuchContainer, container, pod.Name, strings.Join(names, ", "))
	case cs.State.Running == nil:
		return "", fmt.Errorf("%w: container %q of pod %q is not running: exec needs it running", ErrNoSuchContainer, container, pod.Name)
	}
	id, ok := strings.CutPrefix(cs.ContainerID, "runc://")
	if !ok {
		return "", fmt.Errorf("%w: container %q of pod %q has containerID %q, not one of podlab's runtime", ErrNoSuchContainer, container, pod.Name, cs.ContainerID)
	}
	return id, nil
}
