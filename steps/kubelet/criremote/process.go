package criremote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// StartSpec is a runtime process to start.
type StartSpec struct {
	// Argv is its command line, e.g. podlab runtime --node NAME.
	Argv []string
	// Endpoint is where it will answer CRI.
	Endpoint string
	// LogPath receives its output (appended); PidFile its pid and start time.
	LogPath, PidFile string
	// Timeout bounds the wait for its first answer (default 30s).
	Timeout time.Duration
}

// Process is a runtime process Start started.
type Process struct {
	Pid     int
	Version string // what it answered: "podlab 0.15.0 (CRI v1)"
}

// Start starts the runtime process detached from the caller (its own
// session: a Ctrl-C of the kubelet does not reach it, and it outlives the
// kubelet, as containerd outlives a kubelet restart) and waits until it
// answers on its endpoint. A process that exits first, or does not answer
// in time, is ErrStartFailed with the end of its log; nothing of it stays.
func Start(ctx context.Context, spec StartSpec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.LogPath == "" || spec.PidFile == "" {
		return nil, errors.New("criremote.Start: the command line, the log file and the pid file are needed")
	}
	if _, err := Endpoint(spec.Endpoint); err != nil {
		return nil, err
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o711); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the runtime's log: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- %s started: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(spec.Argv, " "))
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStartFailed, spec.Argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it, whenever it ends
	pid := cmd.Process.Pid
	fail := func(why string) (*Process, error) {
		cmd.Process.Kill()
		<-exited
		os.Remove(spec.PidFile)
		return nil, fmt.Errorf("%w: %s (%s); its log %s ends:\n%s", ErrStartFailed, strings.Join(spec.Argv, " "), why, spec.LogPath, tail(spec.LogPath, 10))
	}
	if err := WritePidFile(spec.PidFile, pid); err != nil {
		return fail(err.Error())
	}
	var answer string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, spec.Timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("it exited: %v", err)
		default:
		}
		v, err := Probe(ctx, spec.Endpoint, time.Second)
		if err != nil {
			return false, nil
		}
		answer = fmt.Sprintf("%s %s (CRI %s)", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
		return true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			fail("cancelled")
			return nil, ctx.Err()
		}
		if wait.Interrupted(err) {
			return fail(fmt.Sprintf("no answer on %s in %s", spec.Endpoint, spec.Timeout))
		}
		return fail(err.Error())
	}
	return &Process{Pid: pid, Version: answer}, nil
}

// WritePidFile records pid and its start time (field 22 of /proc/PID/stat),
// so that a later Stop does not signal another process that reused the pid.
func WritePidFile(path string, pid int) error {
	st, err := startTime(pid)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %s\n", pid, st), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// startTime is the process's start time in clock ticks since boot; a
// zombie (state Z) has none: it has stopped.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	if f[0] == "Z" || f[0] == "X" {
		return "", fs.ErrNotExist
	}
	return f[19], nil
}

// Stop stops the runtime process recorded in pidFile: SIGTERM, grace,
// then SIGKILL; it removes the pid file. It returns the pid it stopped, or
// 0 when none was recorded or the recorded one had already ended.
func Stop(ctx context.Context, pidFile string, grace time.Duration) (int, error) {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var pid int
	var st string
	if f := strings.Fields(string(b)); len(f) == 2 {
		pid, _ = strconv.Atoi(f[0])
		st = f[1]
	}
	if pid <= 0 {
		return 0, fmt.Errorf("the runtime's pid file %s holds %q, not \"PID STARTTIME\": remove it", pidFile, b)
	}
	alive := func() bool { s, err := startTime(pid); return err == nil && s == st }
	if !alive() {
		return 0, removePidFile(pidFile)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, grace, true, func(context.Context) (bool, error) { return !alive(), nil })
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if alive() {
		syscall.Kill(pid, syscall.SIGKILL)
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return !alive(), nil }); err != nil {
			return pid, fmt.Errorf("the runtime process %d did not stop after SIGKILL", pid)
		}
	}
	return pid, removePidFile(pidFile)
}

// removePidFile removes the pid file, which the runtime may have removed
// itself as it stopped (podlab runtime does).
func removePidFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
