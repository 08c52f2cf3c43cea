// Package runc is the last stage of the runtime half of Pod creation
// (the chain's steps 11-13): the container runtime hands a bundle (rootfs plus
// config.json) to the OCI runtime, runc, which sets up namespaces, cgroups,
// the root file system and capabilities, then runs the app.
//
// In Kubernetes the kubelet asks the runtime over CRI (RunPodSandbox,
// CreateContainer, StartContainer); containerd or CRI-O then start a shim
// (containerd-shim-runc-v2, conmon) that calls `runc create` and `runc start`,
// keeps the container's stdout and stderr in a log file, and collects the exit
// code. Runtime does the same, with runc as a real subprocess and a small shim
// of its own (see ShimMain).
//
// Files, under the Runtime's StateDir:
//
//	runc/<id>/state.json         runc's own record of the container (runc --root)
//	runc/<id>/exec.fifo          the fifo `runc start` opens to let the app run
//	containers/<id>/container.json   podlab's record: bundle, cgroups path, how it ran
//	containers/<id>/container.log    stdout and stderr in the CRI log format (or
//	                                 a link to the log the kubelet named)
//	containers/<id>/exit.json        the exit code, once the container exited
//	containers/<id>/shim.pid, shim.log, runc.log
//	containers/<id>/shim.sock        the shim's socket: attach, reopen the log
//
// The package never prints: Runtime.OnCommand receives each runc command line.
//
// It imports nothing of the control plane, so that it can live in a small
// binary of its own: cmd/podlab-runc (bin/podlab-runc) is this package and a
// command line, as containerd-shim-runc-v2 is beside containerd. It is the
// shim podlab starts for each container (ShimCommand) and runs containers in
// the foreground, starting in about 2 ms where bin/podlab, which holds the
// whole chain and initialises all of it before main, takes 10-15 ms: a third
// of a bare `runc run`. Keep it so: an import of the control plane here puts
// that start-up back into every container start.
package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/podlab/podlab/steps/statedir"
)

// Runtime runs containers with an OCI runtime binary.
type Runtime struct {
	// Binary is the OCI runtime: a path, or a name looked up on PATH
	// (runc, crun). See FindRuntime.
	Binary string
	// Root is runc's --root, where it keeps each container's state.json.
	// Empty means <StateDir>/runc: a private root, never runc's shared /run/runc.
	Root string
	// StateDir is podlab's state directory (or a node's directory);
	// containers/<id>/ is under it (see steps/statedir).
	StateDir string
	// CgroupParent is the cgroup this runtime's containers are under (the
	// state directory's cgroup root, or a node's kubepods). Delete removes a
	// container's cgroup and the parents it emptied below CgroupParent,
	// never CgroupParent or anything above it: those may be another
	// runtime's, or hold a pod's settings. Empty: only the container's own
	// cgroup.
	CgroupParent string
	// Shim is the command line that starts podlab's shim: a program whose
	// main calls ShimMain when ShimConfigEnv is set, for instance
	// {"/usr/local/bin/podlab", "runc", "shim"}. Create needs it.
	Shim []string
	// OnCommand, when set, receives every runtime command line before it runs.
	OnCommand func(argv []string)
	// Handler is the name of the handler this runtime plays (see
	// NewRuntime); empty is runc's. Args are global flags put after --root
	// on every command line (runsc's --network).
	Handler string
	Args    []string
	// StateLayout and FifoLayout are where the runtime keeps a container's
	// state and its exec fifo under Root, "<id>" standing for the ID (see
	// Handler.State); empty StateLayout is runc's, <id>/state.json, and
	// with it empty FifoLayout is runc's <id>/exec.fifo.
	StateLayout, FifoLayout string
}

// IO is the standard input and outputs of a process run in the foreground.
// Pass *os.File values (the terminal) to hand them to runc as they are.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exit is how a container's main process ended, as kept in exit.json.
type Exit struct {
	// Code is the exit status, or 128+N when signal N killed the process
	// (what Kubernetes shows as the container's exitCode).
	Code int `json:"exitCode"`
	// Signal is the signal that killed the process, if one did.
	Signal string `json:"signal,omitempty"`
	// Pid is the container's process ID on the host.
	Pid      int       `json:"pid,omitempty"`
	ExitedAt time.Time `json:"exitedAt"`
}

// record is podlab's own file about a container, containers/<id>/container.json.
type record struct {
	ID          string    `json:"id"`
	Bundle      string    `json:"bundle"`
	CgroupsPath string    `json:"cgroupsPath,omitempty"`
	Detached    bool      `json:"detached"`
	Created     time.Time `json:"created"`
}

var validID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[\w+\-.]+$`) })

func checkID(id string) error {
	if id == "" || id == "." || id == ".." || !validID().MatchString(id) {
		return fmt.Errorf("%w %q: use letters, digits, '_', '+', '-' and '.'", ErrInvalidID, id)
	}
	return nil
}

// RootDir is runc's --root.
func (r *Runtime) RootDir() string {
	if r.Root != "" {
		return r.Root
	}
	return statedir.Runtime{Dir: r.StateDir}.RuncRoot()
}

// ContainerDir is podlab's directory for the container: log, exit code, shim pid.
func (r *Runtime) ContainerDir(id string) string {
	return statedir.Runtime{Dir: r.StateDir}.ContainerDir(id)
}

// LogPath is the container's CRI log file.
func (r *Runtime) LogPath(id string) string {
	return filepath.Join(r.ContainerDir(id), "container.log")
}

// ExitPath is the file that receives the container's exit code.
func (r *Runtime) ExitPath(id string) string {
	return filepath.Join(r.ContainerDir(id), "exit.json")
}

// StateFile is runc's record of the container (or another runtime's).
func (r *Runtime) StateFile(id string) string {
	layout := r.StateLayout
	if layout == "" {
		layout = runcStateFile
	}
	return filepath.Join(r.RootDir(), strings.ReplaceAll(layout, "<id>", id))
}

// ExecFifo is the fifo a created container's init process blocks on until
// `runc start` opens it; "" for a runtime that has none (runsc).
func (r *Runtime) ExecFifo(id string) string {
	layout := r.FifoLayout
	if layout == "" && r.StateLayout == "" {
		layout = runcFifoFile
	}
	if layout == "" {
		return ""
	}
	return filepath.Join(r.RootDir(), strings.ReplaceAll(layout, "<id>", id))
}

// startedPath marks a container Start started, for the runtimes without an
// exec fifo to tell created from running.
func (r *Runtime) startedPath(id string) string {
	return filepath.Join(r.ContainerDir(id), "started")
}

// Created reports whether the container is created and not started: its
// exec fifo exists (runc, crun), or, for a runtime without one, the runtime
// knows it and Start has not run.
func (r *Runtime) Created(id string) bool {
	if _, err := os.Stat(r.ExitPath(id)); err == nil {
		return false
	}
	if fifo := r.ExecFifo(id); fifo != "" {
		_, err := os.Stat(fifo)
		return err == nil
	}
	if _, err := os.Stat(r.StateFile(id)); err != nil {
		return false
	}
	_, err := os.Stat(r.startedPath(id))
	return errors.Is(err, fs.ErrNotExist)
}

func (r *Runtime) argv(args ...string) []string {
	argv := append([]string{r.Binary, "--root", r.RootDir()}, r.Args...)
	return append(argv, args...)
}

func (r *Runtime) report(argv []string) {
	if r.OnCommand != nil {
		r.OnCommand(argv)
	}
}

// checkBinary fails with ErrRuntimeNotFound, naming the binary, when it
// cannot be run.
func (r *Runtime) checkBinary() error {
	if r.Binary == "" {
		return fmt.Errorf("%w: no runtime binary given; run `make deps` (it installs runc into bin/) or pass --runtime PATH", ErrRuntimeNotFound)
	}
	if _, err := exec.LookPath(r.Binary); err != nil {
		return fmt.Errorf("%w: %s: %v; run `make deps` (it installs runc 1.5.3 into bin/) or pass --runtime PATH", ErrRuntimeNotFound, r.Binary, unwrapExecErr(err))
	}
	return nil
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// output runs a runc command that takes no input and returns its stdout; a
// failure carries runc's own error message.
func (r *Runtime) output(ctx context.Context, args ...string) ([]byte, error) {
	if err := r.checkBinary(); err != nil {
		return nil, err
	}
	argv := r.argv(args...)
	r.report(argv)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := runcMessage(stderr.Bytes()); msg != "" {
			return stdout.Bytes(), fmt.Errorf("%s %s: %s", filepath.Base(r.Binary), args[0], msg)
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w", filepath.Base(r.Binary), args[0], err)
	}
	return stdout.Bytes(), nil
}

var logfmtMsg = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`msg="((?:[^"\\]|\\.)*)"`) })

// runcMessage extracts the error messages from runc's stderr (logfmt:
// time="..." level=error msg="...") or --log file (JSON lines); other
// runtimes' plain text is returned as it is.
func runcMessage(b []byte) string {
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var j struct{ Level, Msg string }
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &j) == nil {
			if j.Level == "error" || j.Level == "fatal" {
				msgs = append(msgs, j.Msg)
			}
			continue
		}
		if m := logfmtMsg().FindStringSubmatch(line); m != nil {
			if !strings.Contains(line, "level=error") && !strings.Contains(line, "level=fatal") {
				continue
			}
			if s, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
				msgs = append(msgs, s)
				continue
			}
			msgs = append(msgs, m[1])
			continue
		}
		msgs = append(msgs, line)
	}
	return strings.Join(msgs, "; ")
}

// exists reports whether runc or podlab knows the container.
func (r *Runtime) exists(id string) (runcKnows, podlabKnows bool) {
	_, err := os.Stat(r.StateFile(id))
	runcKnows = err == nil
	_, err = os.Stat(r.ContainerDir(id))
	return runcKnows, err == nil
}

func (r *Runtime) mustExist(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if a, b := r.exists(id); !a && !b {
		return fmt.Errorf("%w: %q (no %s): create it with `podlab runc create %s --bundle DIR`",
			ErrContainerNotFound, id, r.StateFile(id), id)
	}
	return nil
}

// claim validates a new container and creates its podlab directory, which
// fails if the ID is taken. It returns the record written there.
func (r *Runtime) claim(id, bundle string, detached bool) (*record, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := r.checkBinary(); err != nil {
		return nil, err
	}
	if bundle == "" {
		return nil, fmt.Errorf("%w: no --bundle given: make one with `podlab unpack IMAGE --bundle DIR` and `podlab spec IMAGE --bundle DIR`", ErrNoBundle)
	}
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(bundle); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s: make one with `podlab unpack IMAGE --bundle %s`", ErrNoBundle, bundle, bundle)
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: write it with `podlab spec IMAGE --bundle %s`", ErrNoConfig, filepath.Join(bundle, "config.json"), bundle)
	}
	if err != nil {
		return nil, err
	}
	// Only the cgroups path matters here (to clean up after runc); runc
	// itself validates the whole spec.
	var s struct {
		Linux *struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(bundle, "config.json"), err)
	}
	rec := &record{ID: id, Bundle: bundle, Detached: detached, Created: time.Now().UTC()}
	if s.Linux != nil {
		rec.CgroupsPath = s.Linux.CgroupsPath
	}
	if a, _ := r.exists(id); a {
		return nil, fmt.Errorf("%w: %q (%s): pick another ID or `podlab runc delete %s`", ErrContainerExists, id, r.StateFile(id), id)
	}
	if err := os.MkdirAll(filepath.Dir(r.ContainerDir(id)), 0o711); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.RootDir(), 0o711); err != nil {
		return nil, err
	}
	if r.ranAndRemoved(id) {
		// a finished foreground run: runc removed it, the ID is free
		if err := os.RemoveAll(r.ContainerDir(id)); err != nil {
			return nil, fmt.Errorf("replacing the records of the last run of %s: %w", id, err)
		}
	}
	if err := os.Mkdir(r.ContainerDir(id), 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %q (%s): pick another ID or `podlab runc delete %s`", ErrContainerExists, id, r.ContainerDir(id), id)
		}
		return nil, err
	}
	if err := writeJSON(filepath.Join(r.ContainerDir(id), "container.json"), rec); err != nil {
		os.RemoveAll(r.ContainerDir(id))
		return nil, err
	}
	return rec, nil
}

// ranAndRemoved reports whether id is a foreground run that ended without
// --keep: podlab's record says foreground, its exit.json is written, and
// runc no longer knows it. Only its log and exit code are left.
func (r *Runtime) ranAndRemoved(id string) bool {
	rec, err := r.readRecord(id)
	if err != nil || rec.Detached {
		return false
	}
	if _, err := os.Stat(r.ExitPath(id)); err != nil {
		return false
	}
	runcKnows, _ := r.exists(id)
	return !runcKnows
}

func (r *Runtime) readRecord(id string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(r.ContainerDir(id), "container.json"))
	if err != nil {
		return nil, err
	}
	var rec record
	return &rec, json.Unmarshal(b, &rec)
}

// writeJSON writes v to path atomically (a temporary file, then rename).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Created is a container that `runc create` set up: its process exists
// inside its namespaces and cgroups, and waits on the exec fifo.
type Created struct {
	ID        string
	Bundle    string
	Pid       int    // the container's init process on the host (runc init until started)
	ShimPid   int    // the shim that holds the container's stdio and waits for its exit
	StateFile string // runc's <root>/<id>/state.json
	ExecFifo  string // <root>/<id>/exec.fifo
	Dir       string // podlab's containers/<id>
	LogPath   string // containers/<id>/container.log
	ExitPath  string // containers/<id>/exit.json (written when it exits)
	Cgroup    *Cgroup
}

// Create does what CRI's CreateContainer makes the runtime do: it starts a
// shim, which runs `runc create --bundle DIR --pid-file ... ID` with the
// container's stdout and stderr on pipes it copies into the CRI log. runc
// creates the namespaces and cgroups, mounts the root file system, sets the
// capabilities, and leaves the container's process blocked on the exec fifo
// until Start.
func (r *Runtime) Create(ctx context.Context, id, bundle string) (*Created, error) {
	return r.CreateWithOptions(ctx, id, bundle, CreateOptions{})
}

// CreateOptions are what a CRI ContainerConfig asks of the shim besides
// the bundle.
type CreateOptions struct {
	// LogPath is where the shim writes the CRI log: the kubelet's
	// log_directory/log_path (/var/log/pods/.../NAME/N.log), which the
	// kubelet rotates and ReopenLog reopens. containers/<id>/container.log
	// is then a symlink to it. Empty: container.log itself.
	LogPath string
	// Stdin gives the container a stdin that Attach writes to (the shim
	// keeps the pipe's write end); StdinOnce closes it when the first
	// attached client's stdin ends. Tty runs the container on a terminal
	// (the spec must say process.terminal): its output is all stdout.
	Stdin, StdinOnce, Tty bool
}

// CreateWithOptions is Create with the log path, stdin and terminal a CRI
// ContainerConfig asks for.
func (r *Runtime) CreateWithOptions(ctx context.Context, id, bundle string, opts CreateOptions) (*Created, error) {
	if len(r.Shim) == 0 {
		return nil, errors.New("creating a detached container needs Runtime.Shim, the command that runs ShimMain")
	}
	rec, err := r.claim(id, bundle, true)
	if err != nil {
		return nil, err
	}
	dir := r.ContainerDir(id)
	cfg := shimConfig{
		ID:       id,
		Dir:      dir,
		PidFile:  filepath.Join(dir, "container.pid"),
		LogPath:  r.LogPath(id),
		ExitPath: r.ExitPath(id),
		RuncLog:  filepath.Join(dir, "runc.log"),
		Stdin:    opts.Stdin, StdinOnce: opts.StdinOnce, Tty: opts.Tty,
	}
	if opts.LogPath != "" && opts.LogPath != cfg.LogPath {
		lp, err := filepath.Abs(opts.LogPath)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Symlink(lp, cfg.LogPath); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("creating container %s: linking its log: %w", id, err)
		}
		cfg.LogPath = lp
	}
	cfg.Argv = r.argv("--log", cfg.RuncLog, "--log-format", "json",
		"create", "--bundle", rec.Bundle, "--pid-file", cfg.PidFile, id)
	r.report(cfg.Argv)
	pid, shimPid, err := r.startShim(ctx, cfg)
	if err != nil {
		if a, _ := r.exists(id); a {
			_, _ = r.output(context.WithoutCancel(ctx), "delete", "--force", id)
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("creating container %s: %w", id, err)
	}
	c := &Created{
		ID: id, Bundle: rec.Bundle, Pid: pid, ShimPid: shimPid,
		StateFile: r.StateFile(id), ExecFifo: r.ExecFifo(id),
		Dir: dir, LogPath: cfg.LogPath, ExitPath: cfg.ExitPath,
	}
	if mounts, err := HostCgroupMounts(); err == nil {
		c.Cgroup, _ = ReadProcessCgroup(mounts, pid)
	}
	return c, nil
}

// Start does what CRI's StartContainer makes the runtime do: `runc start ID`
// opens the exec fifo, and the waiting process execs the app.
func (r *Runtime) Start(ctx context.Context, id string) (*State, error) {
	if err := r.mustExist(id); err != nil {
		return nil, err
	}
	if _, err := r.output(ctx, "start", id); err != nil {
		return nil, fmt.Errorf("starting container %s: %w", id, err)
	}
	if err := os.WriteFile(r.startedPath(id), nil, 0o644); err != nil {
		return nil, fmt.Errorf("starting container %s: %w", id, err)
	}
	return r.State(ctx, id)
}

// Run runs a container in the foreground, as `runc run` does without
// --keep: see RunWithOptions.
func (r *Runtime) Run(ctx context.Context, id, bundle string, stdio IO) (*Exit, error) {
	return r.RunWithOptions(ctx, id, bundle, stdio, RunOptions{})
}

// RunOptions tune a foreground run.
type RunOptions struct {
	// Keep keeps the container after it exits, as `runc run --keep`: runc's
	// state (status stopped) and its cgroups stay until Delete, and the ID
	// stays taken. Without it the container is removed when it exits, as
	// `runc run` does, and the ID is free for the next run.
	Keep bool
}

// RunWithOptions runs a container in the foreground, as `runc run`: create
// and start in one, with the caller's stdin, until it exits. Its stdout and
// stderr reach the caller's writers and, line by line, the CRI log
// (LogPath), as a shim would write them: the container sees pipes, as a
// Kubernetes container without tty does. Its exit code is returned and
// kept in exit.json.
//
// Without opts.Keep, runc deletes the container when it exits; podlab then
// removes the empty cgroups runc leaves behind (below CgroupParent) and
// keeps only containers/<id> with the log and exit.json: Logs and State
// still read them, and the next Run of the same ID replaces them.
func (r *Runtime) RunWithOptions(ctx context.Context, id, bundle string, stdio IO, opts RunOptions) (*Exit, error) {
	rec, err := r.claim(id, bundle, false)
	if err != nil {
		return nil, err
	}
	runcLog := filepath.Join(r.ContainerDir(id), "runc.log")
	args := []string{"--log", runcLog, "--log-format", "json", "run", "--bundle", rec.Bundle}
	if opts.Keep {
		args = append(args, "--keep")
	}
	argv := r.argv(append(args, id)...)
	r.report(argv)
	code, err := r.foregroundLogged(ctx, argv, stdio, runcLog, r.LogPath(id))
	if err != nil {
		if a, _ := r.exists(id); a {
			_, _ = r.output(context.WithoutCancel(ctx), "delete", "--force", id)
		}
		os.RemoveAll(r.ContainerDir(id))
		return nil, fmt.Errorf("running container %s: %w", id, err)
	}
	ex := &Exit{Code: code, ExitedAt: time.Now().UTC()}
	if code > 128 {
		ex.Signal = unix.SignalName(syscall.Signal(code - 128))
	}
	if err := writeJSON(r.ExitPath(id), ex); err != nil {
		return ex, err
	}
	if opts.Keep {
		return ex, nil
	}
	// runc removed its state and the container's own cgroup; the parents it
	// made stay, empty, as after runc delete. Removing them is tidying, not
	// part of the run: a path outside CgroupParent is left alone, as Delete
	// leaves it, and the run still succeeded.
	path := rec.CgroupsPath
	if path == "" {
		path = "/" + id // runc's default
	}
	if !strings.Contains(path, ":") { // not systemd's slice:prefix:name
		if mounts, err := HostCgroupMounts(); err == nil {
			_, _ = RemoveCgroupDirsBelow(mounts, path, r.CgroupParent)
		}
	}
	return ex, nil
}

// foregroundLogged is foreground with the container's stdout and stderr
// also copied, line by line, into the CRI log at logPath.
func (r *Runtime) foregroundLogged(ctx context.Context, argv []string, stdio IO, runcLog, logPath string) (int, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cw := &criWriter{w: logFile, now: time.Now}
	var copying sync.WaitGroup
	piped := IO{Stdin: stdio.Stdin}
	var writeEnds []*os.File
	for _, s := range []struct {
		name string
		to   io.Writer
		set  *io.Writer
	}{{"stdout", stdio.Stdout, &piped.Stdout}, {"stderr", stdio.Stderr, &piped.Stderr}} {
		pr, pw, err := os.Pipe()
		if err != nil {
			for _, w := range writeEnds {
				w.Close()
			}
			return 0, err
		}
		to := s.to
		if to == nil {
			to = io.Discard
		}
		*s.set = pw
		writeEnds = append(writeEnds, pw)
		copying.Go(func() {
			defer pr.Close()
			_ = cw.copy(s.name, io.TeeReader(pr, to))
			_, _ = io.Copy(to, pr) // whatever is left after a failed log write
		})
	}
	code, err := r.foreground(ctx, argv, piped, runcLog, false)
	for _, w := range writeEnds {
		w.Close()
	}
	waitTimeout(&copying, 5*time.Second)
	return code, err
}

// foreground runs argv with stdio attached and returns its exit code. Signals
// sent to podlab go on to runc, which passes them to the container (Ctrl-C
// reaches runc from the terminal directly). An error that runc logged to
// runcLog (it could not start the container) is returned as an error.
func (r *Runtime) foreground(ctx context.Context, argv []string, stdio IO, runcLog string, ctty bool) (int, error) {
	var logStart int64
	if fi, err := os.Stat(runcLog); err == nil {
		logStart = fi.Size()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	if ctty {
		// stdin (fd 0) becomes the controlling terminal of a new session
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	ttyIn := false
	if f, ok := stdio.Stdin.(*os.File); ok {
		ttyIn = term.IsTerminal(int(f.Fd()))
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == unix.SIGINT && ttyIn {
					continue // the terminal sent it to runc too
				}
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 0, err
	}
	if msg := logErrorsSince(runcLog, logStart); msg != "" {
		return 0, errors.New(msg)
	}
	if ee != nil {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, nil
}

// logErrorsSince returns the errors runc wrote to its JSON log after offset.
func logErrorsSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	var msgs []string
	for _, line := range strings.Split(string(b), "\n") {
		var j struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &j) == nil && (j.Level == "error" || j.Level == "fatal") {
			msgs = append(msgs, j.Msg)
		}
	}
	return strings.Join(msgs, "; ")
}

// State is what runc and podlab know about a container.
type State struct {
	ID      string
	Status  string // creating, created, running, paused, stopped
	Pid     int
	Bundle  string
	Created time.Time
	// StateFile is runc's <root>/<id>/state.json; empty once runc forgot the
	// container (a foreground run deletes it when the container exits).
	StateFile string
	ExecFifo  string // set while the container is created and not started
	Dir       string // podlab's containers/<id>
	LogPath   string // the CRI log; empty for a container that ran in the foreground
	ExitPath  string
	ShimPid   int
	Cgroup    *Cgroup // the cgroup and its limits as read back from the kernel
	Exit      *Exit   // once the container exited
}

// runcState is the JSON of `runc state`.
type runcState struct {
	ID      string    `json:"id"`
	Pid     int       `json:"pid"`
	Status  string    `json:"status"`
	Bundle  string    `json:"bundle"`
	Created time.Time `json:"created"`
}

// State runs `runc state ID` and adds what podlab knows: the cgroup and its
// limits read back from the kernel, the log, and the exit code once stopped.
func (r *Runtime) State(ctx context.Context, id string) (*State, error) {
	if err := r.mustExist(id); err != nil {
		return nil, err
	}
	st := &State{ID: id, Dir: r.ContainerDir(id)}
	rec, _ := r.readRecord(id)
	if rec != nil {
		st.Bundle, st.Created = rec.Bundle, rec.Created
		if _, err := os.Stat(r.LogPath(id)); rec.Detached || err == nil {
			st.LogPath = r.LogPath(id)
		}
	}
	if a, _ := r.exists(id); a {
		out, err := r.output(ctx, "state", id)
		if err != nil {
			return nil, fmt.Errorf("reading the state of container %s: %w", id, err)
		}
		var rs runcState
		if err := json.Unmarshal(out, &rs); err != nil {
			return nil, fmt.Errorf("reading the state of container %s: %w", id, err)
		}
		st.Status, st.Pid, st.Bundle, st.Created = rs.Status, rs.Pid, rs.Bundle, rs.Created
		st.StateFile = r.StateFile(id)
		if rs.Status == "created" && r.ExecFifo(id) != "" {
			st.ExecFifo = r.ExecFifo(id)
		}
	}
	if ex, err := readExit(r.ExitPath(id)); err == nil {
		st.Exit, st.ExitPath = ex, r.ExitPath(id)
		if st.Status == "" {
			st.Status = "stopped"
		}
	}
	if st.Status == "" {
		st.Status = "unknown"
	}
	st.ShimPid = readPid(filepath.Join(st.Dir, "shim.pid"))
	if mounts, err := HostCgroupMounts(); err == nil {
		if st.Pid > 0 && st.Status != "stopped" {
			st.Cgroup, _ = ReadProcessCgroup(mounts, st.Pid)
		}
		if st.Cgroup == nil && rec != nil && rec.CgroupsPath != "" && !strings.Contains(rec.CgroupsPath, ":") {
			// the process is gone; its cgroups stay until runc delete
			if cg := ReadCgroup(mounts, UniformProcCgroup(mounts, rec.CgroupsPath)); len(cg.Dirs) > 0 {
				st.Cgroup = cg
			}
		}
	}
	return st, nil
}

func readExit(path string) (*Exit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ex Exit
	return &ex, json.Unmarshal(b, &ex)
}

func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// Wait waits until the container exited and its shim wrote exit.json, or ctx ends.
func (r *Runtime) Wait(ctx context.Context, id string) (*Exit, error) {
	if err := r.mustExist(id); err != nil {
		return nil, err
	}
	for {
		if ex, err := readExit(r.ExitPath(id)); err == nil {
			return ex, nil
		}
		if _, b := r.exists(id); !b {
			return nil, fmt.Errorf("waiting for container %s: %w (deleted)", id, ErrContainerNotFound)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Process is a process inside a container.
type Process struct {
	Pid     int
	PPid    int
	Command string // its command line
}

// Ps lists the container's processes: `runc ps --format json ID` gives the
// host PIDs in the container's cgroup; /proc/<pid> tells the rest.
func (r *Runtime) Ps(ctx context.Context, id string) ([]Process, error) {
	if err := r.mustExist(id); err != nil {
		return nil, err
	}
	out, err := r.output(ctx, "ps", "--format", "json", id)
	if err != nil {
		return nil, fmt.Errorf("listing the processes of container %s: %w", id, err)
	}
	var pids []int
	if err := json.Unmarshal(out, &pids); err != nil {
		return nil, fmt.Errorf("listing the processes of container %s: %w", id, err)
	}
	procs := make([]Process, 0, len(pids))
	for _, pid := range pids {
		p := Process{Pid: pid}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			p.Command = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// pid (comm) state ppid ...: comm may hold spaces and parentheses
			if i := bytes.LastIndexByte(b, ')'); i > 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) >= 2 {
					p.PPid, _ = strconv.Atoi(f[1])
				}
			}
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// ExecOptions is how to run an extra process in a container.
type ExecOptions struct {
	IO
	// Tty gives the process a terminal (`runc exec -t`). runc needs its
	// own stdio to be a terminal then: the caller's, or Console.
	Tty bool
	// Console, with Tty, is the terminal runc runs on (the follower end
	// of a pseudo-terminal the caller holds, as a CRI runtime's streaming
	// server does for kubectl exec -t): it is runc's stdin, stdout and
	// stderr and its controlling terminal, in a session of its own, so a
	// resize of the terminal (TIOCSWINSZ on the leader end) reaches runc
	// as SIGWINCH, and runc resizes the container's console.
	Console *os.File
	// ConsoleSize, with Tty, is the terminal's size when the process
	// starts (the process spec's consoleSize). runc's init sizes the
	// container's console before it runs the command; a resize that only
	// arrives as SIGWINCH races the command (`stty size` could say "0 0").
	// Given, the process is passed whole (`runc exec --process FILE`): the
	// container's own process from its config.json, with these args; and
	// Console is sized to it too, as runc copies Console's size to the
	// container's console after the command starts.
	ConsoleSize *specs.Box
}

// Exec runs args inside the running container (`runc exec`), as `kubectl
// exec` makes the kubelet's runtime do: a new process joins the container's
// namespaces and cgroups. It returns the process's exit code.
func (r *Runtime) Exec(ctx context.Context, id string, args []string, opts ExecOptions) (int, error) {
	if err := r.mustExist(id); err != nil {
		return 0, err
	}
	if len(args) == 0 {
		return 0, errors.New("exec: no command given: podlab runc exec ID -- CMD [ARG...]")
	}
	if err := r.checkBinary(); err != nil {
		return 0, err
	}
	runcLog := filepath.Join(r.ContainerDir(id), "runc.log")
	a := []string{"--log", runcLog, "--log-format", "json", "exec"}
	if opts.Tty {
		a = append(a, "--tty")
	}
	var argv []string
	if opts.Tty && opts.ConsoleSize != nil {
		process, err := r.execProcess(id, args, *opts.ConsoleSize)
		if err != nil {
			return 0, fmt.Errorf("exec in container %s: %w", id, err)
		}
		defer os.Remove(process)
		argv = r.argv(append(a, "--process", process, id)...)
	} else {
		argv = r.argv(append(append(a, id), args...)...)
	}
	r.report(argv)
	stdio, ctty := opts.IO, false
	if opts.Tty && opts.Console != nil {
		stdio, ctty = IO{Stdin: opts.Console, Stdout: opts.Console, Stderr: opts.Console}, true
		if s := opts.ConsoleSize; s != nil {
			// runc copies its own terminal's size to the container's
			// console once the command runs: the same size, or it would
			// undo consoleSize
			ws := &unix.Winsize{Row: uint16(s.Height), Col: uint16(s.Width)}
			if err := unix.IoctlSetWinsize(int(opts.Console.Fd()), unix.TIOCSWINSZ, ws); err != nil {
				return 0, fmt.Errorf("exec in container %s: sizing the terminal: %w", id, err)
			}
		}
	}
	code, err := r.foreground(ctx, argv, stdio, runcLog, ctty)
	if err != nil {
		return 0, fmt.Errorf("exec in container %s: %w", id, err)
	}
	return code, nil
}

// execProcess writes the process `runc exec --process` runs: the
// container's own (environment, working directory, user, capabilities, as
// runc takes them from config.json when given a command line) with args, a
// terminal of the given size. It returns the file's path.
func (r *Runtime) execProcess(id string, args []string, size specs.Box) (string, error) {
	rec, err := r.readRecord(id)
	if err != nil {
		return "", fmt.Errorf("reading podlab's record of the container: %w", err)
	}
	config := filepath.Join(rec.Bundle, "config.json")
	b, err := os.ReadFile(config)
	if err != nil {
		return "", err
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return "", fmt.Errorf("reading %s: %w", config, err)
	}
	if spec.Process == nil {
		return "", fmt.Errorf("%s has no process", config)
	}
	p := *spec.Process
	p.Args, p.Terminal, p.ConsoleSize = args, true, &size
	f, err := os.CreateTemp(r.ContainerDir(id), "exec-*.json")
	if err != nil {
		return "", err
	}
	if err := json.NewEncoder(f).Encode(&p); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}

// Kill sends signal (a name like SIGTERM or TERM, or a number; empty means
// SIGTERM) to the container's main process, as the kubelet's StopContainer
// does before it escalates to SIGKILL.
func (r *Runtime) Kill(ctx context.Context, id, signal string) error {
	if err := r.mustExist(id); err != nil {
		return err
	}
	if signal == "" {
		signal = "SIGTERM"
	}
	if _, err := r.output(ctx, "kill", id, signal); err != nil {
		return fmt.Errorf("killing container %s: %w", id, err)
	}
	return nil
}

// Deleted is what Delete removed.
type Deleted struct {
	ID        string
	StateDir  string   // runc's <root>/<id>, if runc still knew the container
	Dir       string   // podlab's containers/<id>
	Cgroups   []string // the empty cgroup directories removed
	CgroupErr error    // set when a cgroup could not be removed
}

// Delete does what CRI's RemoveContainer makes the runtime do: `runc delete`
// (with force, it kills a running container first) removes runc's state and
// the container's cgroups; then podlab removes containers/<id> and the empty
// parent cgroups runc leaves behind below r.CgroupParent.
func (r *Runtime) Delete(ctx context.Context, id string, force bool) (*Deleted, error) {
	if err := r.mustExist(id); err != nil {
		return nil, err
	}
	d := &Deleted{ID: id}
	rec, _ := r.readRecord(id)
	if a, _ := r.exists(id); a {
		args := []string{"delete"}
		if force {
			args = append(args, "--force")
		}
		if _, err := r.output(ctx, append(args, id)...); err != nil {
			hint := ""
			if !force {
				hint = fmt.Sprintf(" (stop it with `podlab runc kill %s` or pass --force)", id)
			}
			return nil, fmt.Errorf("deleting container %s: %w%s", id, err, hint)
		}
		d.StateDir = r.StateFile(id)
		if rel, _ := filepath.Rel(r.RootDir(), d.StateDir); strings.Contains(rel, "/") {
			d.StateDir = filepath.Join(r.RootDir(), strings.SplitN(rel, "/", 2)[0])
		}
	}
	waitGone(ctx, readPid(filepath.Join(r.ContainerDir(id), "shim.pid")), 10*time.Second)
	if _, b := r.exists(id); b {
		if err := os.RemoveAll(r.ContainerDir(id)); err != nil {
			return nil, fmt.Errorf("deleting container %s: %w", id, err)
		}
		d.Dir = r.ContainerDir(id)
	}
	if rec != nil {
		path := rec.CgroupsPath
		if path == "" {
			path = "/" + id // runc's default
		}
		if !strings.Contains(path, ":") { // not systemd's slice:prefix:name
			if mounts, err := HostCgroupMounts(); err == nil {
				d.Cgroups, d.CgroupErr = RemoveCgroupDirsBelow(mounts, path, r.CgroupParent)
			}
		}
	}
	return d, nil
}

// waitGone waits until pid has exited (or is a zombie), up to max.
func waitGone(ctx context.Context, pid int, max time.Duration) {
	if pid <= 0 {
		return
	}
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if unix.Kill(pid, 0) != nil {
			return
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(b, ')'); err != nil || (i > 0 && i+2 < len(b) && b[i+2] == 'Z') {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Logs prints the container's log to w: the messages, or with
// opts.Timestamps the CRI lines as stored; with opts.Follow it keeps printing
// until the container exits.
func (r *Runtime) Logs(ctx context.Context, id string, w io.Writer, opts LogsOptions) error {
	if err := r.mustExist(id); err != nil {
		return err
	}
	path := r.LogPath(id)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%w: %s: container %s has none (removed, or run in the foreground by an older podlab); run it again to get one", ErrNoLog, path, id)
	}
	done := func() bool {
		_, err := os.Stat(r.ExitPath(id))
		_, b := r.exists(id)
		return err == nil || !b
	}
	if err := followLog(ctx, path, w, opts, done); err != nil {
		return fmt.Errorf("reading the log of container %s: %w", id, err)
	}
	return nil
}

// FindRuntime picks the OCI runtime binary: explicit if given, else
// $PODLAB_RUNTIME, else the runc next to the running executable (bin/podlab
// and bin/runc side by side) or in its parent's bin/, else runc on PATH.
func FindRuntime(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if p := os.Getenv("PODLAB_RUNTIME"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		for _, p := range []string{filepath.Join(dir, "runc"), filepath.Join(filepath.Dir(dir), "bin", "runc")} {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath("runc"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no runc next to podlab, in bin/, or on PATH: run `make deps` (it installs runc 1.5.3 into bin/) or pass --runtime PATH", ErrRuntimeNotFound)
}
