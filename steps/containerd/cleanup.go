package containerd

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

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/statedir"
)

// CNICacheDir is libcni's cache directory as containerd 1.6's CRI plugin
// uses it (go-cni's default; 1.6 has no setting for it): outside the
// state directory.
const CNICacheDir = "/var/lib/cni"

// LoopbackResultPrefix starts the name of libcni's cache file of the
// loopback network containerd's CRI plugin attaches to every pod besides
// the conflist's (go-cni's built-in "cni-loopback").
const LoopbackResultPrefix = "cni-loopback-"

// ShimSocketDir is where the runc shim v2 of containerd 1.6 puts its
// sockets: containerd's compiled-in state directory, not the configured
// one.
const ShimSocketDir = "/run/containerd/s"

// Outside lists what the lab containerd of l writes outside the state
// directory, for the learner (podlab containerd, lesson 18) and Cleanup.
func Outside(l statedir.Containerd) []string {
	return []string{
		ShimSocketDir + "/<sha256 of " + l.Socket() + ", namespace and task id>: each shim's ttrpc socket (containerd 1.6 has no setting for it)",
		CNICacheDir + "/results/" + cni.NetworkName + "-<sandbox id>-eth0 and " + LoopbackResultPrefix + "<sandbox id>-lo: libcni's cache of each pod's CNI ADD results (CNI DEL removes them)",
	}
}

// Process is a process of the lab containerd: containerd itself or a shim.
type Process struct {
	PID     int
	Command string // its command line, space-separated
}

// Processes are the processes of the lab containerd of l that run: the
// containerd reading l's config.toml, and the shims started with l's
// socket as their -address (each shim is the parent of one pod's
// containers).
func Processes(l statedir.Containerd) (daemons, shims []Process, err error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, fmt.Errorf("listing processes: %w", err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		p := Process{PID: pid, Command: strings.Join(args, " ")}
		switch filepath.Base(args[0]) {
		case "containerd":
			if argAfter(args, "--config", "-c") == l.Config() {
				daemons = append(daemons, p)
			}
		case ShimBinary:
			if argAfter(args, "-address", "--address") == l.Socket() {
				shims = append(shims, p)
			}
		}
	}
	return daemons, shims, nil
}

// argAfter is the value of the flag named one of names in args: "--f v"
// or "--f=v".
func argAfter(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

// Cleaned is what Cleanup undid.
type Cleaned struct {
	Stopped    []string // processes: containerd, then shims
	Network    []string // CNI DEL of each pod, the bridge
	Containers []string // runc delete --force
	Outside    []string // files removed outside the state directory
}

// Cleanup undoes what the lab containerd of l left running or holding, as
// podlab reset does before it unmounts and removes the state directory:
// it stops containerd (SIGTERM), runs CNI DEL for each pod it attached
// (its veth, address, firewall rules and libcni's cache file), deletes
// each container from runc's root (runcBin --root ... delete --force),
// kills the shims, removes the shims' sockets under /run/containerd/s
// that its tasks name, and deletes its bridge. The mounts under the state
// directory (rootfs overlays, the pods' netns and shm) and the cgroups are
// left to reset, which unmounts and removes those of the whole directory.
func Cleanup(ctx context.Context, l statedir.Containerd, runcBin string) (*Cleaned, error) {
	out := &Cleaned{}
	var errs []error
	daemons, _, err := Processes(l)
	if err != nil {
		return out, err
	}
	for _, p := range daemons {
		if err := stop(ctx, p.PID); err != nil {
			errs = append(errs, fmt.Errorf("stopping containerd (pid %d): %w", p.PID, err))
			continue
		}
		out.Stopped = append(out.Stopped, fmt.Sprintf("containerd pid %d", p.PID))
	}

	// The pods' network, while their namespaces are still mounted.
	if sandboxes, _ := dirNames(filepath.Join(l.State(), "io.containerd.grpc.v1.cri", "sandboxes")); len(sandboxes) > 0 {
		n, err := cni.New(cni.Config{ConfDir: l.CNIConfDir(), CacheDir: CNICacheDir})
		if err == nil {
			for _, id := range sandboxes {
				rs, err := n.Teardown(ctx, id)
				line := "CNI DEL of pod sandbox " + id
				for _, r := range rs {
					if r.ResultPath != "" {
						line += " (removed " + r.ResultPath + ")"
					}
				}
				lo := filepath.Join(CNICacheDir, "results", LoopbackResultPrefix+id+"-lo")
				if err := os.Remove(lo); err == nil {
					line += " (removed " + lo + ")"
				}
				out.Network = append(out.Network, line)
				if err != nil {
					errs = append(errs, fmt.Errorf("CNI DEL of pod sandbox %s: %w", id, err))
				}
			}
		}
	}

	// The containers, from runc's root: runc delete --force kills and
	// removes each.
	runcRoot := filepath.Join(l.RuncRoot(), Namespace)
	ids, _ := dirNames(runcRoot)
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		cmd := exec.CommandContext(ctx, runcBin, "--root", runcRoot, "delete", "--force", id)
		if b, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("runc --root %s delete --force %s: %w: %s", runcRoot, id, err, bytes.TrimSpace(b)))
			continue
		}
		out.Containers = append(out.Containers, runcRoot+" "+id)
	}

	_, shims, err := Processes(l)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range shims {
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("killing shim pid %d: %w", p.PID, err))
			continue
		}
		out.Stopped = append(out.Stopped, fmt.Sprintf("%s pid %d", ShimBinary, p.PID))
	}

	// The shims' sockets, named in each task's bundle.
	tasks := filepath.Join(l.State(), "io.containerd.runtime.v2.task", Namespace)
	ids, _ = dirNames(tasks)
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(tasks, id, "address"))
		if err != nil {
			continue
		}
		sock := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
		if filepath.Dir(sock) != ShimSocketDir {
			continue // not where 1.6 puts them: not ours to remove
		}
		if err := os.Remove(sock); err == nil {
			out.Outside = append(out.Outside, sock)
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the shim socket %s: %w", sock, err))
		}
	}

	if deleted, err := cni.DeleteBridge(l.BridgeName(), ""); err != nil {
		errs = append(errs, err)
	} else if deleted {
		out.Network = append(out.Network, "deleted bridge "+l.BridgeName())
	}
	return out, errors.Join(errs...)
}

// stop sends pid SIGTERM and waits up to 10 seconds for it to go, then
// kills it.
func stop(ctx context.Context, pid int) error {
	if err := unix.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return err
	}
	gone := func(context.Context) (bool, error) {
		return unix.Kill(pid, 0) != nil || isZombie(pid), nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(wctx, 50*time.Millisecond, true, gone); err != nil {
		_ = unix.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func dirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
