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
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/runc"
)

// ExecOptions are the exec's streams, as the kubelet API's /exec opens
// them (stdin, stdout, stderr; tty).
type ExecOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Tty gives the command a terminal (runc exec --tty): its output comes
	// on Stdout only, with the terminal's line endings.
	Tty bool
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
	return k.rt.Exec(ctx, id, cmd, runc.ExecOptions{
		IO:  runc.IO{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr},
		Tty: opts.Tty,
	})
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
