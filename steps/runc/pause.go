package runc

// The pause process: PID 1 of a pod's shared PID namespace.
//
// A PID namespace lives only while its first process (its init, PID 1)
// does: when init exits, the kernel kills every other process in it and no
// new one can join. A pod whose containers share one PID namespace
// (shareProcessNamespace: true; CRI's NamespaceMode POD) needs a process
// to be that init. containerd's is the pause container (Kubernetes'
// pause.c); CRI-O drops its infra container except for exactly this case.
// podlab's sandbox pins its other namespaces with no process at all; for
// the PID namespace it starts this one:
//
//	the shim's program, started with CLONE_NEWPID (PID 1 inside; for a
//	  pod with a user namespace of its own, CLONE_NEWUSER and the others
//	  too, pinned by StartPause, see PauseOptions.Namespaces), which
//	  bind-mounts its /proc/<pid>/ns/pid onto the sandbox's namespace file,
//	  writes its host PID to a file, chroots into an empty directory,
//	  makes itself non-dumpable (a container cannot open /proc/1/root,
//	  /proc/1/environ or /proc/1/fd without CAP_SYS_PTRACE), then, like
//	  pause.c, reaps the orphans the containers leave it (SIGCHLD) and
//	  exits on SIGINT or SIGTERM.
//
// StartPause puts it in the pod's cgroup (PauseOptions.Cgroup) at once,
// before it is reported ready: its memory and CPU count as the pod's, as
// the pause container's do under containerd.
//
// The containers join the namespace by the pinned file, as they join the
// sandbox's network namespace. Stopping the sandbox kills the pause
// process (StopPause), which ends whatever is left in the namespace, and so
// does `podlab reset` (from the sandbox records); a pause process whose pin
// is gone all the same (unmounted by hand, say) leaves within 2 s on its
// own.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PauseOptions say where a pause process pins its PID namespace.
type PauseOptions struct {
	// NamespaceFile is where the PID namespace is bind-mounted (as the
	// sandbox's other namespaces are pinned); it is created if missing.
	NamespaceFile string `json:"namespaceFile"`
	// PidFile receives the pause process's PID on the host.
	PidFile string `json:"pidFile"`
	// Root is the empty directory the pause process chroots into
	// (created, mode 0555).
	Root string `json:"root"`
	// Log receives what the pause process says if it fails.
	Log string `json:"log"`
	// Cgroup is the cgroup StartPause puts the pause process in as soon as
	// it is started (EnterCgroup), as containerd's sandbox container is
	// placed at <cgroup_parent>/<sandbox id>: the pod's cgroup, a leaf of
	// its own. Empty: it stays in the caller's. Removing it is the
	// caller's, once the process is gone (StopPause).
	Cgroup string `json:"-"`

	// Namespaces, for a pod with a user namespace of its own
	// (hostUsers: false), are the other namespaces the pause process is
	// cloned into, kind ("user", "net", "ipc", "uts") → the file StartPause
	// pins it at, the user namespace with UIDMappings and GIDMappings and
	// the others owned by it; the PID namespace then belongs to it too, as
	// it must for the pod's containers to join both. StartPause then pins
	// them all and writes PidFile itself (a process whose root is mapped
	// may not mount on, or write into, the node's directories).
	Namespaces               map[string]string      `json:"-"`
	UIDMappings, GIDMappings []syscall.SysProcIDMap `json:"-"`
	// PinnedByParent tells the pause process that StartPause pins.
	PinnedByParent bool `json:"pinnedByParent,omitempty"`
}

// cloneFlags are the clone(2) flags of the kinds of namespace a pause
// process may be cloned into.
var cloneFlags = map[string]uintptr{"user": unix.CLONE_NEWUSER, "net": unix.CLONE_NEWNET, "ipc": unix.CLONE_NEWIPC, "uts": unix.CLONE_NEWUTS}

// StartPause starts a pause process with shim, the program that runs
// ShimMain (Runtime.Shim), and returns its PID once it has pinned its PID
// namespace at opts.NamespaceFile. It outlives the caller, as a shim does.
func StartPause(ctx context.Context, shim []string, opts PauseOptions) (int, error) {
	if len(shim) == 0 {
		return 0, errors.New("starting a pause process needs the shim's command line (Runtime.Shim)")
	}
	for _, d := range []string{filepath.Dir(opts.NamespaceFile), filepath.Dir(opts.PidFile), filepath.Dir(opts.Log)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(opts.Root, 0o555); err != nil {
		return 0, err
	}
	pins := map[string]string{"pid": opts.NamespaceFile}
	flags := uintptr(unix.CLONE_NEWPID)
	for k, p := range opts.Namespaces {
		if cloneFlags[k] == 0 {
			return 0, fmt.Errorf("a pause process cannot be cloned into a %q namespace (user, net, ipc, uts)", k)
		}
		pins[k], flags = p, flags|cloneFlags[k]
	}
	opts.PinnedByParent = len(opts.Namespaces) > 0
	for _, p := range pins {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o444)
		if err != nil {
			return 0, err
		}
		f.Close()
	}
	conf, err := json.Marshal(shimConfig{Pause: &opts})
	if err != nil {
		return 0, err
	}
	log, err := os.OpenFile(opts.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	cmd := exec.Command(shim[0], shim[1:]...)
	cmd.Env = append(os.Environ(), ShimConfigEnv+"="+string(conf))
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{wr} // fd 3
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Cloneflags: flags}
	if len(opts.UIDMappings) > 0 {
		cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = opts.UIDMappings, opts.GIDMappings
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true // runc calls setgroups(2) for supplementalGroups
	}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return 0, fmt.Errorf("starting the pause process (%s) in a new PID namespace: %w", shim[0], err)
	}
	wr.Close()
	if opts.Cgroup != "" {
		mounts, err := HostCgroupMounts()
		if err == nil {
			_, err = EnterCgroup(mounts, opts.Cgroup, cmd.Process.Pid)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, fmt.Errorf("placing the pause process in the pod's cgroup: %w", err)
		}
	}
	if opts.PinnedByParent {
		if err := pinPause(cmd.Process.Pid, pins, opts.PidFile); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, err
		}
	}
	b, err := awaitReady(ctx, cmd, rd)
	if err != nil {
		return 0, err
	}
	var ready shimReady
	if err := json.Unmarshal(b, &ready); err != nil || ready.Error != "" || ready.Pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if ready.Error != "" {
			return 0, fmt.Errorf("the pause process: %s", ready.Error)
		}
		said, _ := os.ReadFile(opts.Log)
		return 0, fmt.Errorf("the pause process exited without reporting (%s: %q)", opts.Log, said)
	}
	go func() { _ = cmd.Wait() }() // reap it when it ends, if we are still here
	return cmd.Process.Pid, nil
}

// pinPause bind-mounts the namespaces of process pid onto their files and
// writes its PID.
func pinPause(pid int, pins map[string]string, pidFile string) error {
	for k, p := range pins {
		src := fmt.Sprintf("/proc/%d/ns/%s", pid, k)
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s onto %s: %w", src, p, err)
		}
	}
	return os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// PauseRunning reports why the pause process of the PID namespace pinned
// at nsFile, whose PID is in pidFile, cannot hold new processes; nil when
// it is running.
func PauseRunning(pidFile, nsFile string) error {
	pid := readPid(pidFile)
	if pid <= 0 {
		return fmt.Errorf("no pause process PID in %s", pidFile)
	}
	if !sameNamespace(pid, nsFile) {
		return fmt.Errorf("the pause process (PID %d, %s) is gone: its PID namespace %s takes no new process", pid, pidFile, nsFile)
	}
	return nil
}

// sameNamespace: pid lives, and is in the PID namespace pinned at nsFile.
func sameNamespace(pid int, nsFile string) bool {
	var a, b unix.Stat_t
	if unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &a) != nil || unix.Stat(nsFile, &b) != nil {
		return false
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(st), ')')
	return err == nil && i > 0 && i+2 < len(st) && st[i+2] != 'Z'
}

// StopPause kills the pause process (which ends every process left in its
// PID namespace) and waits up to 5 s for it to go. The PID is checked
// against the pinned namespace first: a PID the kernel gave to another
// process since is left alone. Nothing to stop is not an error.
func StopPause(ctx context.Context, pidFile, nsFile string) error {
	pid := readPid(pidFile)
	if pid <= 0 || !sameNamespace(pid, nsFile) {
		return nil
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stopping the pause process %d: %w", pid, err)
	}
	waitGone(ctx, pid, 5*time.Second)
	if sameNamespace(pid, nsFile) {
		return fmt.Errorf("the pause process %d is still there 5s after SIGKILL", pid)
	}
	return nil
}

// pauseMain is the pause process (ShimMain with a pause configuration).
func pauseMain(opts *PauseOptions, tell func(shimReady)) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "podlab pause: %v\n", err)
		tell(shimReady{Error: err.Error()})
		return 1
	}
	if os.Getpid() != 1 {
		return fail(fmt.Errorf("not PID 1 of a new PID namespace (PID %d): start it with StartPause", os.Getpid()))
	}
	// /proc is the host's: /proc/self names this process by its host PID.
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fail(err)
	}
	hostPid, err := strconv.Atoi(self)
	if err != nil {
		return fail(fmt.Errorf("reading /proc/self: %q", self))
	}
	src := fmt.Sprintf("/proc/%d/ns/pid", hostPid)
	if !opts.PinnedByParent {
		if err := unix.Mount(src, opts.NamespaceFile, "", unix.MS_BIND, ""); err != nil {
			return fail(fmt.Errorf("bind-mounting %s onto %s: %w", src, opts.NamespaceFile, err))
		}
		if err := os.WriteFile(opts.PidFile, []byte(self+"\n"), 0o644); err != nil {
			return fail(err)
		}
	}
	// The pin is watched from inside the chroot through a descriptor of
	// its directory: once it is unmounted or removed (the sandbox torn
	// down by a runtime that lost the PID file, an umount by hand), nothing
	// can join the namespace any more, and the pause process leaves.
	var pinned unix.Stat_t
	if err := unix.Stat(src, &pinned); err != nil {
		return fail(err)
	}
	pinDir, err := unix.Open(filepath.Dir(opts.NamespaceFile), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	pinName := filepath.Base(opts.NamespaceFile)
	stillPinned := func() bool {
		var st unix.Stat_t
		return unix.Fstatat(pinDir, pinName, &st, 0) == nil && st.Dev == pinned.Dev && st.Ino == pinned.Ino
	}
	// Of the signals a process of the namespace may send its init, only
	// these three are handled (as pause.c's); the others are ignored.
	signal.Ignore(unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGWINCH)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGCHLD)
	// In a user namespace of the pod's own the pause process stays the
	// node's root, an id the namespace does not map: it keeps no
	// capability there across execve, so it cannot chroot; nor can the
	// pod's processes, mapped ids without CAP_SYS_PTRACE, open its /proc
	// files. (As the mapped root it could not even have been executed
	// from a 0700 directory.)
	if !opts.PinnedByParent {
		if err := unix.Chroot(opts.Root); err != nil {
			return fail(fmt.Errorf("chroot %s: %w", opts.Root, err))
		}
	}
	if err := unix.Chdir("/"); err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_DUMPABLE: %w", err))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err))
	}
	tell(shimReady{Pid: hostPid})
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if !stillPinned() {
				fmt.Fprintf(os.Stderr, "podlab pause: %s is no longer pinned: leaving\n", opts.NamespaceFile)
				return 0
			}
		case s := <-sigs:
			if s != unix.SIGCHLD {
				return 0
			}
			for { // reap every child that has exited
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
