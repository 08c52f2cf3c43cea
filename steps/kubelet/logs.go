package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/podlab/podlab/internal/crilog"
	corev1 "k8s.io/api/core/v1"
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
	// Exited, when set, tells Follow whether the run with that restart
	// count has exited (then the rest is printed and Logs returns). Unset,
	// the pod's status as given (not running) or a later run's log file
	// says so.
	Exited func(restart int) bool
	// The kubelet API's options (PodLogOptions, as `kubectl logs` sends
	// them through the API server). When any is set the log is read the
	// way the kubelet's ReadLogs does:
	//
	// TimestampPrefix starts each line with its time and a space (kubectl
	// logs --timestamps), in the kubelet's fixed width, timeFormatOut.
	TimestampPrefix bool
	// TailLines, when set, prints only the last N lines (--tail=N).
	TailLines *int64
	// SinceTime, when set, skips lines written before it (--since,
	// --since-time).
	SinceTime *time.Time
	// LimitBytes, when set, stops after N bytes (--limit-bytes).
	LimitBytes *int64
}

// kubeStyle reports whether opts asks for the kubelet API's reading.
func (o LogsOptions) kubeStyle() bool {
	return o.TimestampPrefix || o.TailLines != nil || o.SinceTime != nil || o.LimitBytes != nil
}

// LogsSource is where Logs read from.
type LogsSource struct {
	Node        string
	Container   string
	ContainerID string
	// RestartCount is the run's restart count: its log file's N.
	RestartCount int
	// Path is the CRI log file the runtime writes, under the node's pod
	// log root: <node>/logs/pods/<namespace>_<pod>_<uid>/<container>/<N>.log
	// (/var/log/pods/... on a real node).
	Path string
	// Defaulted is set when no container was named and the pod has more
	// than one: kubectl says "Defaulted container ... out of: ...".
	Defaulted []string
}

// Logs is Logs of the kubelet's own node: what its API's /containerLogs
// serves. Follow ends when the runtime reports the container exited
// (ContainerStatus), or ctx ends.
func (k *Kubelet) Logs(ctx context.Context, pod *corev1.Pod, w io.Writer, opts LogsOptions) (*LogsSource, error) {
	if pod.Spec.NodeName != k.node {
		return nil, fmt.Errorf("%w: pod %s is bound to %q, this is the kubelet of %s", ErrNotOnThisNode, pod.Name, pod.Spec.NodeName, k.node)
	}
	if opts.Exited == nil {
		opts.Exited = func(restart int) bool {
			st, err := k.Observe(ctx, pod)
			if err != nil {
				return false
			}
			cs := st.Container(opts.Container)
			if cs == nil && len(st.Containers) > 0 {
				cs = &st.Containers[0]
			}
			if cs == nil {
				return true
			}
			for _, r := range cs.Runs {
				if r.RestartCount == restart {
					return r.State == RunExited
				}
			}
			return true // removed
		}
	}
	return Logs(ctx, k.cfg.StateDir, pod, w, opts)
}

// Logs writes a container's log to w as `kubectl logs` shows it: only the
// text each line of the CRI log file holds. The runtime writes that file
// where the kubelet's ContainerConfig said (the sandbox's log_directory,
// NAMESPACE_NAME_UID under the node's pod log root, and the container's
// log_path, NAME/N.log, N its restart count), and the kubelet reads it
// from there; podlab reads it straight from the node directory the pod's
// spec.nodeName names. The latest run is the highest N, the previous one
// the N before it.
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
	if !slices.Contains(names, src.Container) {
		return nil, fmt.Errorf("%w: container %s is not valid for pod %s (choose one of: [%s])", ErrNoSuchContainer, src.Container, pod.Name, strings.Join(names, " "))
	}
	layout, err := NodeLayout(stateDir, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(podLogsDirectory(layout.PodLogsDir(), pod), src.Container)
	runs, err := logRuns(dir)
	if err != nil {
		return nil, err
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
	src.RestartCount = runs[want]
	src.Path = filepath.Join(dir, fmt.Sprintf("%d.log", src.RestartCount))
	if cs := containerStatus(pod, src.Container); cs != nil {
		id := ""
		switch {
		case int(cs.RestartCount) == src.RestartCount:
			id = cs.ContainerID
		case cs.LastTerminationState.Terminated != nil:
			id = cs.LastTerminationState.Terminated.ContainerID
		}
		if c, err := ParseContainerID(id); err == nil {
			src.ContainerID = c.ID
		}
	}
	exited := func() bool {
		if opts.Exited != nil {
			return opts.Exited(src.RestartCount)
		}
		// the pod's status says the container runs no more, or a later
		// run's log says this one ended
		if cs := containerStatus(pod, src.Container); cs != nil && cs.State.Running == nil && int(cs.RestartCount) == src.RestartCount {
			return true
		}
		later, err := logRuns(dir)
		return err != nil || len(later) == 0 || later[len(later)-1] > src.RestartCount
	}
	err = readLog(ctx, src.Path, w, opts, exited)
	if errors.Is(err, context.Canceled) {
		err = nil // Ctrl-C ends -f
	}
	return src, err
}

// logRuns are the restart counts of the container's log files in dir
// (N.log), lowest first.
func logRuns(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing the logs in %s: %w", dir, err)
	}
	var out []int
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(n); err == nil && i >= 0 {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out, nil
}

// timeFormatOut is how the kubelet prints a line's time for kubectl logs
// --timestamps: Kubernetes' RFC3339NanoFixed, always nine digits of
// nanoseconds (k8s.io/cri-client/pkg/logs, the kubelet's ReadLogs), where
// the runtime's file drops trailing zeros (time.RFC3339Nano): a line stored
// at 10:00:03.12345678Z prints as 10:00:03.123456780Z, one at 10:00:03Z as
// 10:00:03.000000000Z. The zone is the one the file has.
const timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00"

// errLimitReached ends a read at LimitBytes.
var errLimitReached = errors.New("limitBytes reached")

// readLog writes the CRI log at path to w: the text of each line (the
// stored line with Timestamps); for the kubelet API's options as the
// kubelet's ReadLogs does: the last TailLines full lines, those written at or
// after SinceTime, each prefixed with its time when TimestampPrefix, at
// most LimitBytes bytes; with Follow it keeps reading until exited reports
// the container ended (then prints the rest) or ctx ends.
func readLog(ctx context.Context, path string, w io.Writer, opts LogsOptions, exited func() bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the log %s: %w", path, err)
	}
	defer f.Close()
	lw := &limitWriter{w: w, left: -1}
	if opts.LimitBytes != nil {
		lw.left = *opts.LimitBytes
	}
	write := func(l logLine) error {
		if opts.SinceTime != nil && l.Time.Before(*opts.SinceTime) {
			return nil
		}
		out := l.Message
		if opts.Timestamps && !opts.kubeStyle() {
			out = l.raw + "\n"
		} else if !l.Partial {
			out += "\n"
		}
		if opts.TimestampPrefix {
			out = l.Time.Format(timeFormatOut) + " " + out
		}
		_, err := io.WriteString(lw, out)
		return err
	}
	var pending []byte
	buf := make([]byte, 64*1024)
	first := true
	for {
		finished := !opts.Follow || opts.Previous || exited()
		for {
			n, err := f.Read(buf)
			pending = append(pending, buf[:n]...)
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("reading the log %s: %w", path, err)
			}
		}
		var lines []logLine
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			l, err := parseLogLine(string(pending[:i]))
			pending = pending[i+1:]
			if err != nil {
				return fmt.Errorf("reading the log %s: %w", path, err)
			}
			lines = append(lines, l)
		}
		if first && opts.TailLines != nil {
			lines = tail(lines, *opts.TailLines)
		}
		first = false
		for _, l := range lines {
			if err := write(l); err != nil {
				if errors.Is(err, errLimitReached) {
					return nil
				}
				return err
			}
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail keeps the CRI lines of the last n full lines: a line the runtime
// split (tag P) counts once, with the F line that ends it.
func tail(lines []logLine, n int64) []logLine {
	if n <= 0 {
		return nil
	}
	i := len(lines)
	for full := int64(0); i > 0; i-- {
		if !lines[i-1].Partial {
			if full == n {
				break
			}
			full++
		}
	}
	return lines[i:]
}

// limitWriter writes at most left bytes (left < 0: no limit), then fails
// with errLimitReached.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left < 0 {
		return l.w.Write(p)
	}
	if l.left == 0 {
		return 0, errLimitReached
	}
	short := int64(len(p)) > l.left
	if short {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && short {
		err = errLimitReached
	}
	return n, err
}

// logLine is one line of a CRI log file, with the text it was read from.
type logLine struct {
	crilog.Line
	raw string
}

// parseLogLine parses one line of a CRI log file (without its newline).
func parseLogLine(s string) (logLine, error) {
	l, err := crilog.Parse(s)
	return logLine{Line: l, raw: s}, err
}
