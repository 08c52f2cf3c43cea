package kubelet

// kubectl exec reaches the kubelet of the pod's node (its API's /exec,
// through the API server); the kubelet asks its runtime over CRI: ExecSync
// for a command with no stream to keep open (no stdin, no terminal), which
// answers the output and exit code in its reply; else Exec, which answers
// a URL on the runtime's streaming server, and the kubelet connects to it
// (SPDY, client-go's remotecommand) and copies the streams. The runtime
// runs `runc exec` in the container: a new process that joins the
// container's namespaces and cgroup, with its rootfs, user and
// capabilities.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecOptions are the exec's streams, as the kubelet API's /exec opens
// them (stdin, stdout, stderr; tty).
type ExecOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Tty gives the command a terminal (the runtime holds a
	// pseudo-terminal for it): its output comes on Stdout only, with the
	// terminal's line endings.
	Tty bool
	// Resize, with Tty, brings the client's terminal size: the first
	// before the command starts, then one per resize (kubectl sends them on
	// SIGWINCH). The runtime's streaming exec waits for the first one.
	Resize <-chan TerminalSize
}

// TerminalSize is a terminal's width and height in characters.
type TerminalSize struct {
	Width, Height uint16
}

// Exec runs cmd in the running container of pod named container, through
// the runtime (CRI ExecSync, or Exec and its streaming URL), and returns
// the command's exit code. It fails with ErrNoSuchContainer when the pod
// has no such container, or it is not running.
func (k *Kubelet) Exec(ctx context.Context, pod *corev1.Pod, container string, cmd []string, opts ExecOptions) (int, error) {
	if len(cmd) == 0 {
		return 0, fmt.Errorf("exec in %s/%s: no command given", pod.Name, container)
	}
	id, err := runningContainerID(pod, container)
	if err != nil {
		return 0, err
	}
	if !opts.Tty && opts.Stdin == nil {
		resp, err := k.cri.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd})
		if err != nil {
			return 0, fmt.Errorf("exec in %s/%s (CRI ExecSync): %w", pod.Name, container, err)
		}
		if opts.Stdout != nil {
			_, _ = opts.Stdout.Write(resp.Stdout)
		}
		if opts.Stderr != nil {
			_, _ = opts.Stderr.Write(resp.Stderr)
		}
		return int(resp.ExitCode), nil
	}
	req := &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: opts.Tty, Stdin: opts.Stdin != nil,
		Stdout: true, Stderr: !opts.Tty}
	resp, err := k.cri.rt.Exec(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s (CRI Exec): %w", pod.Name, container, err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: the runtime's streaming URL %q: %w", pod.Name, container, resp.Url, err)
	}
	ex, err := remotecommand.NewSPDYExecutor(&restclient.Config{}, "POST", u)
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: connecting to %s: %w", pod.Name, container, resp.Url, err)
	}
	so := remotecommand.StreamOptions{Stdin: opts.Stdin, Stdout: opts.Stdout, Tty: opts.Tty}
	if so.Stdout == nil {
		so.Stdout = io.Discard
	}
	if !opts.Tty {
		so.Stderr = opts.Stderr
		if so.Stderr == nil {
			so.Stderr = io.Discard
		}
	}
	if opts.Tty && opts.Resize != nil {
		so.TerminalSizeQueue = sizeQueue{ctx: ctx, sizes: opts.Resize}
	}
	err = ex.StreamWithContext(ctx, so)
	if ee, ok := errors.AsType[utilexec.ExitError](err); ok && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("exec in %s/%s: %w", pod.Name, container, err)
	}
	return 0, nil
}

// sizeQueue hands the client's terminal sizes to the streaming client.
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case sz, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: sz.Width, Height: sz.Height}
	case <-q.ctx.Done():
		return nil
	}
}

// runningContainerID is the runtime's ID of the container's current run,
// from the pod's status (containerID <runtime name>://ID), when it is running.
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
	id, err := ParseContainerID(cs.ContainerID)
	if err != nil {
		return "", fmt.Errorf("%w: container %q of pod %q: its status's %v", ErrNoSuchContainer, container, pod.Name, err)
	}
	return id.ID, nil
}
