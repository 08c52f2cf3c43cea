package runc

// The shim: podlab's small containerd-shim / conmon.
//
// runc does not stay around after `runc create`, and `runc state` has no exit
// code: a detached container is reparented to PID 1, which reaps it and throws
// its status away. So, as containerd and CRI-O do, podlab starts a shim per
// container that outlives the podlab command:
//
//	podlab runc create web
//	  └─ shim (setsid; PR_SET_CHILD_SUBREAPER)   re-executed podlab binary
//	       ├─ runc create --pid-file ... web      exits once the container is set up
//	       └─ container process (reparented to the shim, the subreaper)
//
// The shim holds the read ends of the container's stdout and stderr pipes and
// copies them line by line into container.log (CRI format; or the kubelet's
// log path, CreateOptions.LogPath, with container.log a link to it), tells
// podlab over fd 3 that the container is created (or why not), then wait4()s
// the container's process and writes its exit code to exit.json. Meanwhile it
// answers on containers/<id>/shim.sock (shimio.go): attach (the output from
// then on; the stdin pipe's write end, which it keeps for a container created
// with Stdin) and reopen-log (after the kubelet renamed the log). A container
// with Tty runs on a terminal whose leader end runc hands the shim over
// --console-socket, as containerd-shim-runc-v2 gets it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ShimConfigEnv is the environment variable that carries a shim's
// configuration. A program that finds it set is a shim and must call ShimMain.
const ShimConfigEnv = "PODLAB_SHIM_CONFIG"

// shimConfig is what podlab tells the shim.
type shimConfig struct {
	Argv     []string `json:"argv"` // the runc create command line
	ID       string   `json:"id"`
	Dir      string   `json:"dir"`
	PidFile  string   `json:"pidFile"`
	LogPath  string   `json:"logPath"`
	ExitPath string   `json:"exitPath"`
	RuncLog  string   `json:"runcLog"`
	// Stdin gives the container a stdin pipe whose write end the shim
	// keeps for attach; StdinOnce closes it when the first attached
	// client's stdin ends; Tty runs the container on a terminal (runc's
	// --console-socket), whose output is all stdout.
	Stdin     bool `json:"stdin,omitempty"`
	StdinOnce bool `json:"stdinOnce,omitempty"`
	Tty       bool `json:"tty,omitempty"`
	// Pause, when set, makes this program a pod's pause process instead
	// of a shim (pause.go); the other fields are unused then.
	Pause *PauseOptions `json:"pause,omitempty"`
}

// shimReady is the shim's one message to podlab, on fd 3.
type shimReady struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// startShim starts the shim and waits until it reports the container created.
func (r *Runtime) startShim(ctx context.Context, cfg shimConfig) (pid, shimPid int, err error) {
	conf, err := json.Marshal(cfg)
	if err != nil {
		return 0, 0, err
	}
	shimLog, err := os.OpenFile(filepath.Join(cfg.Dir, "shim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer shimLog.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return 0, 0, err
	}
	defer rd.Close()
	cmd := exec.Command(r.Shim[0], r.Shim[1:]...)
	cmd.Env = append(os.Environ(), ShimConfigEnv+"="+string(conf))
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = shimLog, shimLog
	cmd.ExtraFiles = []*os.File{wr}                   // fd 3
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true} // its own session: no terminal, no Ctrl-C
	if err := cmd.Start(); err != nil {
		wr.Close()
		return 0, 0, fmt.Errorf("starting the shim %s: %w", r.Shim[0], err)
	}
	wr.Close()

	b, err := awaitReady(ctx, cmd, rd)
	if err != nil {
		return 0, 0, err
	}
	var ready shimReady
	if err := json.Unmarshal(b, &ready); err != nil || (ready.Pid == 0 && ready.Error == "") {
		_ = cmd.Wait()
		log, _ := os.ReadFile(filepath.Join(cfg.Dir, "shim.log"))
		return 0, 0, fmt.Errorf("the shim exited without reporting (shim.log: %q)", string(log))
	}
	if ready.Error != "" {
		_ = cmd.Wait()
		return 0, 0, errors.New(ready.Error)
	}
	go func() { _ = cmd.Wait() }() // reap the shim when it ends, if we are still here
	return ready.Pid, cmd.Process.Pid, nil
}

// awaitReady reads what a started shim or pause process writes on its
// ready pipe (its fd 3) until it closes it; if ctx ends first, it kills and
// reaps the process.
func awaitReady(ctx context.Context, cmd *exec.Cmd, rd io.Reader) ([]byte, error) {
	msg := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(rd)
		msg <- b
	}()
	select {
	case b := <-msg:
		return b, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, ctx.Err()
	}
}

// ShimMain is the shim's main function: the program named by Runtime.Shim
// calls it when ShimConfigEnv is set (podlab as `podlab runc shim`, podlab's
// tests from TestMain), and exits with the code it returns.
func ShimMain() int {
	var cfg shimConfig
	if err := json.Unmarshal([]byte(os.Getenv(ShimConfigEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "podlab shim: reading %s: %v\n", ShimConfigEnv, err)
		return 2
	}
	os.Unsetenv(ShimConfigEnv)
	unix.CloseOnExec(3) // neither runc nor the container may hold podlab's ready pipe
	ready := os.NewFile(3, "ready")
	tell := func(m shimReady) {
		if ready != nil {
			_ = json.NewEncoder(ready).Encode(m)
			ready.Close()
			ready = nil
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "podlab shim: %v\n", err)
		tell(shimReady{Error: err.Error()})
		return 1
	}
	if cfg.Pause != nil {
		return pauseMain(cfg.Pause, tell)
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, "shim.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fail(err)
	}
	// Orphans of runc create (the container's process) become our children.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err))
	}

	if err := os.MkdirAll(filepath.Dir(cfg.LogPath), 0o755); err != nil {
		return fail(err)
	}
	logFile, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fail(err)
	}
	sio := &shimIO{cw: &criWriter{w: logFile, now: time.Now}, logPath: cfg.LogPath, log: logFile,
		tty: cfg.Tty, stdinOnce: cfg.StdinOnce, clients: map[*attachClient]bool{}}
	defer func() {
		sio.mu.Lock()
		defer sio.mu.Unlock()
		sio.log.Close()
		if sio.stdin != nil {
			sio.stdin.Close()
		}
		if sio.console != nil {
			sio.console.Close()
		}
	}()

	// The socket the runtime reaches the container's stdio through
	// (shimio.go): attach, reopen the log.
	sock := filepath.Join(cfg.Dir, shimSocketName)
	_ = os.Remove(sock)
	sockPath, closeDir, err := dirPath(cfg.Dir, shimSocketName)
	if err != nil {
		return fail(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
	closeDir()
	if err != nil {
		return fail(fmt.Errorf("listening on %s: %w", sock, err))
	}
	ln.SetUnlinkOnClose(false) // its name was the descriptor's: removed by path below
	defer os.Remove(sock)
	defer ln.Close()

	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	defer devNull.Close()
	stdin := devNull
	if cfg.Stdin && !cfg.Tty {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		defer r.Close()
		stdin, sio.stdin = r, w
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	var copying sync.WaitGroup
	copyStream := func(stream string, kind byte, rd io.Reader, c io.Closer) {
		copying.Go(func() {
			if err := sio.cw.copy(stream, io.TeeReader(rd, tee{sio, kind})); err != nil {
				fmt.Fprintf(os.Stderr, "podlab shim: copying %s: %v\n", stream, err)
			}
			c.Close()
		})
	}
	if !cfg.Tty {
		copyStream("stdout", frameStdout, outR, outR)
		copyStream("stderr", frameStderr, errR, errR)
	} else {
		// runc's own output (it has no container output then) is the log's
		copying.Go(func() { _, _ = io.Copy(os.Stderr, outR); outR.Close() })
		copying.Go(func() { _, _ = io.Copy(os.Stderr, errR); errR.Close() })
	}

	// runc create: the container's process inherits the pipes' write ends,
	// or, with a terminal, runc sends its leader end to the console socket.
	argv := cfg.Argv
	var console chan consoleResult
	if cfg.Tty {
		cpath, closeCDir, err := dirPath(cfg.Dir, "console.sock")
		if err != nil {
			return fail(err)
		}
		defer closeCDir()
		_ = os.Remove(filepath.Join(cfg.Dir, "console.sock"))
		cln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cpath, Net: "unix"})
		if err != nil {
			return fail(fmt.Errorf("listening for runc's terminal: %w", err))
		}
		cln.SetUnlinkOnClose(false)
		defer os.Remove(filepath.Join(cfg.Dir, "console.sock"))
		defer cln.Close()
		console = make(chan consoleResult, 1)
		go func() {
			f, err := receiveConsole(cln)
			console <- consoleResult{f, err}
		}()
		// runc is another process: its /proc/self is not ours
		cpath = strings.Replace(cpath, "/proc/self/", fmt.Sprintf("/proc/%d/", os.Getpid()), 1)
		argv = append(slices.Clone(argv[:len(argv)-1]), "--console-socket", cpath, argv[len(argv)-1])
	}
	create := exec.Command(argv[0], argv[1:]...)
	create.Stdin, create.Stdout, create.Stderr = stdin, outW, errW
	create.Dir = "/"
	runErr := create.Run()
	outW.Close()
	errW.Close()
	if stdin != devNull {
		stdin.Close()
	}
	if runErr == nil && cfg.Tty {
		select {
		case c := <-console:
			if c.err != nil {
				runErr = c.err
			} else {
				sio.mu.Lock()
				sio.console = c.f
				if cfg.Stdin {
					sio.stdin = c.f
				}
				sio.mu.Unlock()
				copyStream("stdout", frameStdout, consoleReader{c.f}, io.NopCloser(nil))
			}
		case <-time.After(10 * time.Second):
			runErr = errors.New("runc sent no terminal to the console socket in 10s")
		}
	}
	if runErr != nil {
		msg := ""
		if b, err := os.ReadFile(cfg.RuncLog); err == nil {
			msg = runcMessage(b)
		}
		if msg == "" {
			msg = runErr.Error()
		}
		waitTimeout(&copying, 2*time.Second)
		return fail(fmt.Errorf("%s: %s", filepath.Base(cfg.Argv[0]), msg))
	}
	pid := readPid(cfg.PidFile)
	if pid <= 0 {
		return fail(fmt.Errorf("no container pid in %s", cfg.PidFile))
	}
	go sio.serve(ln)
	tell(shimReady{Pid: pid})

	ex := reap(pid)
	// The container is gone; its pipes close when the last process in its
	// pid namespace is. Take the last lines, then record the exit.
	waitTimeout(&copying, 5*time.Second)
	sio.end()
	if err := writeJSON(cfg.ExitPath, ex); err != nil {
		// deleted meanwhile (runc delete --force, then podlab removed the directory)
		fmt.Fprintf(os.Stderr, "podlab shim: writing exit code %d: %v\n", ex.Code, err)
	}
	return 0
}

type consoleResult struct {
	f   *os.File
	err error
}

// reap waits for the container's process, reaping every orphan that comes to
// the shim meanwhile, and returns how the container's process ended.
func reap(pid int) *Exit {
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: not ours after all; wait for it to disappear
			for unix.Kill(pid, 0) == nil {
				time.Sleep(100 * time.Millisecond)
			}
			return &Exit{Code: -1, Pid: pid, ExitedAt: time.Now().UTC()}
		}
		if wpid != pid {
			continue
		}
		ex := &Exit{Pid: pid, ExitedAt: time.Now().UTC()}
		switch {
		case ws.Exited():
			ex.Code = ws.ExitStatus()
		case ws.Signaled():
			ex.Code = 128 + int(ws.Signal())
			ex.Signal = unix.SignalName(ws.Signal())
		}
		return ex
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// SmallBinary is the name of podlab's small runtime binary (cmd/podlab-runc),
// which `make build` puts beside bin/podlab: the shim and a foreground
// `run`, with nothing of the control plane in it.
const SmallBinary = "podlab-runc"

// ShimCommand is the command line that starts a shim for a program at exe:
// podlab-runc's `shim` when the small binary sits beside exe (it starts in
// about 2 ms, where podlab, which holds the whole chain, initialises
// for about ten), else exe's own `runc shim`.
func ShimCommand(exe string) []string {
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		small := filepath.Join(filepath.Dir(real), SmallBinary)
		if fi, err := os.Stat(small); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 && small != real {
			return []string{small, "shim"}
		}
	}
	return []string{exe, "runc", "shim"}
}
