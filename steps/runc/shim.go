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
// copies them line by line into container.log (CRI format), tells podlab over
// fd 3 that the container is created (or why not), then wait4()s the
// container's process and writes its exit code to exit.json.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

	msg := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(rd)
		msg <- b
	}()
	var b []byte
	select {
	case b = <-msg:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, 0, ctx.Err()
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
	if err := os.WriteFile(filepath.Join(cfg.Dir, "shim.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fail(err)
	}
	// Orphans of runc create (the container's process) become our children.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err))
	}

	logFile, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fail(err)
	}
	defer logFile.Close()
	cw := &criWriter{w: logFile, now: time.Now}
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
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
	for stream, rd := range map[string]*os.File{"stdout": outR, "stderr": errR} {
		copying.Go(func() {
			if err := cw.copy(stream, rd); err != nil {
				fmt.Fprintf(os.Stderr, "podlab shim: copying %s: %v\n", stream, err)
			}
			rd.Close()
		})
	}

	// runc create: the container's process inherits the pipes' write ends.
	create := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	create.Stdin, create.Stdout, create.Stderr = stdin, outW, errW
	create.Dir = "/"
	runErr := create.Run()
	outW.Close()
	errW.Close()
	stdin.Close()
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
	tell(shimReady{Pid: pid})

	ex := reap(pid)
	// The container is gone; its pipes close when the last process in its
	// pid namespace is. Take the last lines, then record the exit.
	waitTimeout(&copying, 5*time.Second)
	if err := writeJSON(cfg.ExitPath, ex); err != nil {
		// deleted meanwhile (runc delete --force, then podlab removed the directory)
		fmt.Fprintf(os.Stderr, "podlab shim: writing exit code %d: %v\n", ex.Code, err)
	}
	return 0
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
