package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/runc"
)

// ErrNoLogs means the container has no log to show yet (it was never
// started), or no previous run for --previous.
var ErrNoLogs = errors.New("no log for the container")

// LogsOptions say which log to read and how.
type LogsOptions struct {
	// Container is the container's name; "" means the pod's first.
	Container string
	// Previous reads the run before the latest (kubectl logs --previous).
	Previous bool
	// Follow keeps printing until the container exits or ctx ends.
	Follow bool
	// Timestamps prints the CRI lines as stored (time, stream, tag).
	Timestamps bool
}

// LogsSource is where Logs read from.
type LogsSource struct {
	Node        string
	Container   string
	ContainerID string
	// Path is the CRI log file: <state>/nodes/<node>/containers/<id>/container.log.
	Path string
	// Defaulted is set when no container was named and the pod has more
	// than one: kubectl says "Defaulted container ... out of: ...".
	Defaulted []string
}

// Logs writes a container's log to w as `kubectl logs` shows it: only the
// text each line of the CRI log file holds. The kubelet serves that file
// from its node; podlab reads it straight from the node directory the
// pod's spec.nodeName names.
func Logs(ctx context.Context, stateDir string, pod *corev1.Pod, w io.Writer, opts LogsOptions) (*LogsSource, error) {
	if pod.Spec.NodeName == "" {
		return nil, fmt.Errorf("%w: pod %s is not scheduled to a node yet: no kubelet runs it", ErrNoLogs, pod.Name)
	}
	src := &LogsSource{Node: pod.Spec.NodeName, Container: opts.Container}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	if src.Container == "" {
		if len(names) == 0 {
			return nil, fmt.Errorf("pod %s has no containers", pod.Name)
		}
		src.Container = names[0]
		if len(names) > 1 {
			src.Defaulted = names
		}
	}
	found := false
	for _, n := range names {
		found = found || n == src.Container
	}
	if !found {
		return nil, fmt.Errorf("%w: container %s is not valid for pod %s (choose one of: [%s])", ErrNoSuchContainer, src.Container, pod.Name, strings.Join(names, " "))
	}
	layout, err := NodeLayout(stateDir, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	all, err := layout.runs()
	if err != nil {
		return nil, err
	}
	var runs []runEntry
	for _, r := range all {
		if r.name.UID == pod.UID && r.name.Container == src.Container {
			runs = append(runs, r)
		}
	}
	want := len(runs) - 1
	if opts.Previous {
		want--
	}
	if want < 0 {
		if opts.Previous {
			return nil, fmt.Errorf("%w: previous terminated container %q in pod %q not found", ErrNoLogs, src.Container, pod.Name)
		}
		reason := ReasonContainerCreating
		if cs := containerStatus(pod, src.Container); cs != nil && cs.State.Waiting != nil {
			reason = cs.State.Waiting.Reason
		}
		return nil, fmt.Errorf("%w: container %q in pod %q is waiting to start: %s", ErrNoLogs, src.Container, pod.Name, reason)
	}
	src.ContainerID = runs[want].id
	rt := layout.runtime("")
	src.Path = rt.LogPath(src.ContainerID)
	err = rt.Logs(ctx, src.ContainerID, w, runc.LogsOptions{Follow: opts.Follow && !opts.Previous, Timestamps: opts.Timestamps})
	if errors.Is(err, context.Canceled) {
		err = nil // Ctrl-C ends -f
	}
	return src, err
}
