package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
)

var doctorCommand = &cli.Command{
	Name:      "doctor",
	Usage:     "check that this machine can run containers the way a kubelet's runtime does",
	ArgsUsage: "[--runtime PATH]",
	Description: `A node must offer what the kubelet's container runtime relies on before a Pod
can run there. doctor checks, and says how to fix what is missing:

  root        runc needs root to make namespaces, cgroups and mounts
  runtime     the OCI runtime (runc or crun) podlab will use, and its version:
              runc before 1.2.8, 1.3.3 or 1.4.0-rc.3 lacks the fixes for
              CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881 (container
              escapes through /dev/null, /dev/console and procfs writes);
              Debian 12's runc 1.1.5 is one. make deps installs runc 1.5.3.
  cgroups     v1, v2 or hybrid, and the memory, pids and cpu controllers that
              enforce a Pod's resources.limits
  namespaces  pid, ipc, uts, mnt, net and cgroup, which isolate each container
  seccomp     the kernel's syscall filter (RuntimeDefault profiles)
  pigz        optional: parallel gunzip makes unpacking layers faster
  handlers    the other runtime handlers a RuntimeClass can name: runsc
              (gVisor) and crun, whether each is installed (and which
              Debian package is if not), and whether it accepts this host:
              crun refuses every container on a host with hybrid cgroups
              whose v2 mount has controllers, found the way crun looks
              (/sys/fs/cgroup a tmpfs, /sys/fs/cgroup/unified a cgroup2
              mount, its cgroup.controllers not empty), and doctor says so
              in the one line a pod's FailedCreatePodSandBox event carries

It then names this state directory's cgroup root, /podlab-<hash>: each state
directory has its own (the hash is of its absolute path), so two learners, or
a lesson and a test, on one machine never share a cgroup, and podlab reset
removes only its own. Containers of podlab runc go at <root>/<id>; a node's
pods at <root>/nodes/<node>/kubepods/[burstable|besteffort/]pod<uid>.
It exits non-zero when a required check fails.`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:  "runtime",
			Usage: "the OCI runtime binary to check; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH",
		},
	},
	Action: func(c *cli.Context) error {
		bin, _ := runc.FindRuntime(c.String("runtime")) // "" when none: reported as a finding
		facts := runc.GatherFacts(c.Context, bin)
		facts.Snapshotter, facts.SnapshotterWhy = nodeSnapshotter(c)
		findings := runc.Diagnose(facts)
		w := c.App.Writer
		failed := 0
		for _, f := range findings {
			fmt.Fprintf(w, "%-4s  %-16s %s\n", f.Status, f.Check, f.Detail)
			if f.Fix != "" {
				fmt.Fprintf(w, "      %-16s fix: %s\n", "", f.Fix)
			}
			if f.Status == runc.StatusFail {
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d required check(s) failed: fix them as shown above", failed)
		}
		if dir, err := stateDir(c); err == nil {
			l := statedir.Layout{Dir: dir}
			fmt.Fprintf(w, "state directory %s: cgroup root %s\n", l.Dir, l.CgroupRoot())
			fmt.Fprintf(w, "user namespace ranges (hostUsers: false), claimed machine-wide by every state directory: %s\n", statedir.UsernsClaimsDir)
		}
		fmt.Fprintln(w, "This machine can run podlab's containers.")
		return nil
	},
}

// nodeSnapshotter is the snapshotter a node's runtime picks on this machine
// (unpack.DefaultSnapshotter), tried where the state directory keeps its
// snapshots (the system's temporary directory when it has none yet).
func nodeSnapshotter(c *cli.Context) (string, error) {
	root := os.TempDir()
	if dir, err := stateDir(c); err == nil {
		if _, err := os.Stat(dir); err == nil {
			root = dir
		}
	}
	sn, err := unpack.DefaultSnapshotter(root)
	return string(sn), err
}
