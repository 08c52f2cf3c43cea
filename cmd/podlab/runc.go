package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/kubelet"

	"github.com/podlab/podlab/steps/last"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

var runcCommand = &cli.Command{
	Name:      "runc",
	Usage:     "run a bundle with the OCI runtime, runc: namespaces, cgroups, rootfs, capabilities, then the app (steps 12-13)",
	ArgsUsage: "create|start|run|state|ps|exec|kill|delete|logs ID [--bundle DIR]",
	Description: `The kubelet never starts a process itself. Over CRI it asks the container
runtime (containerd, CRI-O) to RunPodSandbox, then CreateContainer and
StartContainer. The runtime unpacks the image into a bundle (a rootfs plus
config.json, the OCI runtime spec) and hands the bundle to an OCI runtime:
runc. These subcommands call the real runc, print each command line they run,
and say which CRI call each step plays.

  create   runc create sets everything up and stops just before the app:
           it makes the namespaces (pid, ipc, uts, mount, network, cgroup),
           puts the process in its cgroups (writing memory, pids and cpu limits),
           mounts /proc and /dev, pivots into the rootfs, drops capabilities.
           The process, "runc init", then blocks on a fifo, <root>/<id>/exec.fifo.
           This is CRI's CreateContainer.
  start    runc start opens that exec fifo: runc init execs the app, which is
           now pid 1 of its pid namespace. This is CRI's StartContainer.
           Splitting create from start lets the runtime wire up networking and
           hooks after the namespaces exist and before the app runs.
  run      create and start in one. In the foreground (the default) runc runs
           with your terminal as the container's stdio and deletes the
           container when it exits; podlab exits with the container's exit code.
           --detach creates and starts it in the background instead.
  state    runc state (<root>/<id>/state.json): pid, status (created, running,
           stopped), bundle, plus what podlab reads back from the kernel: the
           cgroup path (/proc/<pid>/cgroup) and the limits in the cgroup files
           (memory.max or memory.limit_in_bytes, pids.max, cpu.max or
           cpu.cfs_quota_us) on cgroup v1, v2 and hybrid; and the exit code.
  ps       the container's processes (runc ps: the pids in its cgroup).
  exec     runs another process inside the container's namespaces and cgroups,
           as kubectl exec does (runc exec); its exit code becomes podlab's.
  kill     sends a signal (default SIGTERM) to the app, as the kubelet's
           StopContainer does before SIGKILL after the grace period.
  delete   runc delete removes runc's state and the container's cgroups
           (--force kills it first); podlab then removes containers/<id> and
           the empty cgroups runc leaves behind, down to (never including) the
           state directory's cgroup root /podlab-<hash> (podlab doctor shows it).
           This is CRI's RemoveContainer.
  logs     the container's stdout and stderr, as kubectl logs reads them.

runc does not stay around and runc state has no exit code. So, as containerd
starts containerd-shim-runc-v2 and CRI-O starts conmon, podlab starts a shim
for each detached container: it runs runc create, holds the container's
stdout and stderr pipes and writes them to containers/<id>/container.log in
the kubelet's CRI log format (TIME STREAM F|P MESSAGE), becomes the
container's parent (PR_SET_CHILD_SUBREAPER) and writes its exit code to
containers/<id>/exit.json.

runc's state lives under a private --root, <state-dir>/runc, never the
shared /run/runc. The runtime is --runtime PATH, else $PODLAB_RUNTIME, else
bin/runc next to podlab (make deps), else runc on PATH.

--runtime also takes a runtime handler's name, as a RuntimeClass's handler
names one on a node: runc (the default), runsc (gVisor: a user-space kernel
between the app and the host's; run with --network=host, which joins the
network namespace config.json names) or crun (the C runtime; it takes
config.json up to spec 1.1 and refuses hosts with hybrid cgroups). Each
keeps its state under its own --root, <state-dir>/runtimes/<name>: give the
same --runtime to state, kill and delete as to create.

Example (each takes what the one before made; see lessons 06-09):
  podlab pull nginx
  podlab unpack
  podlab spec
  podlab runc create
  podlab runc start

or in full:
  podlab runc create web --bundle $PODLAB_STATE_DIR/bundles/web
  podlab runc state web
  podlab runc start web
  podlab runc logs web -f
  podlab runc exec web -- /bin/sh -c 'cat /proc/1/cgroup'
  podlab runc kill web
  podlab runc delete web`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:  "runtime",
			Usage: "the OCI runtime: a handler's name (runc, runsc, crun) or a binary's path; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH",
		},
	},
	Subcommands: []*cli.Command{
		runcCreateCommand,
		runcStartCommand,
		runcRunCommand,
		runcStateCommand,
		runcPsCommand,
		runcExecCommand,
		runcKillCommand,
		runcDeleteCommand,
		runcLogsCommand,
		runcShimCommand,
	},
}

var bundleFlag = &cli.StringFlag{
	Name:  "bundle",
	Usage: "the bundle directory: rootfs/ and config.json (podlab unpack, podlab spec)",
}

var runcCreateCommand = &cli.Command{
	Name:      "create",
	Usage:     "set a container up and stop before the app runs (CRI CreateContainer)",
	ArgsUsage: "[ID] [--bundle DIR]",
	Description: `runc create reads the bundle's config.json and builds the container: new
namespaces, the cgroups with their limits, the mounts and the pivot into
rootfs/, the capabilities and rlimits. What is left is "runc init", the
container's pid 1, blocked on <root>/<ID>/exec.fifo: nothing of the app has
run yet. A podlab shim starts runc create with the container's stdout and
stderr on pipes and stays to collect the log and the exit code.

Without ID and --bundle it creates the bundle whose spec was written last
(podlab spec), named after the bundle (nginx for bundles/nginx), and says so;
with ID alone, the bundle <state-dir>/bundles/ID.
Next: podlab runc start (the container created last) or podlab runc start ID.`,
	Flags: []cli.Flag{podFlag(), namespaceFlag(), containerFlag(), bundleFlag},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, kubelet.StageCreate)
		}
		r, err := runcRuntime(c, c.String("runtime")) // the runtime is checked before the bundle
		if err != nil {
			return err
		}
		id, bundle, err := createTarget(c, c.App.Writer)
		if err != nil {
			return err
		}
		cr, err := r.Create(c.Context, id, bundle)
		if err != nil {
			return err
		}
		recordCreated(c, id)
		printCreated(c.App.Writer, cr)
		fmt.Fprintf(c.App.Writer, "Next: podlab runc start   (or: podlab runc start %s)\n", id)
		return nil
	},
}

var runcStartCommand = &cli.Command{
	Name:      "start",
	Usage:     "run the app of a created container (CRI StartContainer)",
	ArgsUsage: "[ID]",
	Description: `runc start opens the created container's exec fifo; runc init, waiting on it,
execs the app from config.json's process.args. The app is pid 1 in its own
pid namespace. Its output goes to the log the shim writes.

Without ID it starts the container created last (podlab runc create), and
says so. runc start only starts a created container: with none created, it
says so and how to create one (podlab runc create, or podlab runc run -d to
create and start at once). state, ps, kill, delete and logs without ID act
on the container created last too.`,
	Flags: []cli.Flag{podFlag(), namespaceFlag(), containerFlag()},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, kubelet.StageStart)
		}
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		st, err := r.Start(c.Context, id)
		if err != nil && c.Args().First() == "" {
			return fmt.Errorf("%w\n  %s, the container created last, may be gone (deleted?): create it again: podlab runc create", err, id)
		}
		if err != nil {
			return err
		}
		printStarted(c.App.Writer, st)
		return nil
	},
}

// recordCreated remembers id as the container created last, with the
// runtime that made it.
func recordCreated(c *cli.Context, id string) {
	recordLast(c, func(r *last.Record) { r.Created, r.Runtime = id, c.String("runtime") })
}

var runcRunCommand = &cli.Command{
	Name:      "run",
	Usage:     "create and start a container; in the foreground, exit with its exit code",
	ArgsUsage: "[ID] [--bundle DIR] [--detach]",
	Description: `In the foreground, runc run creates and starts the container with your
terminal as its stdin, waits for it, and then deletes it, as runc run does:
runc forgets it and podlab removes the empty cgroups runc leaves, so the same
ID can run again at once. Its stdout and stderr come to your terminal and,
as a shim would keep them, to containers/<ID>/container.log in the CRI log
format (so the app sees pipes, as a Kubernetes container without tty does);
podlab keeps that log and the exit code in containers/<ID>/exit.json, where
podlab runc logs ID and podlab runc state ID read them, until the next run of
the ID or podlab runc delete ID. podlab exits with the container's exit code
(a container killed by signal N exits 128+N, as in Kubernetes). Messages
from podlab go to stderr; stdout is the container's.

--keep keeps the stopped container, as runc run --keep: runc state ID still
knows it, its cgroups stay, and the ID stays taken until podlab runc delete.

With --detach, podlab does what the kubelet's runtime does: create (with a
shim that keeps the log and the exit code), then start.

Without ID and --bundle it runs the bundle whose spec was written last
(podlab spec), named after the bundle, and says so:
  podlab pull nginx; podlab unpack; podlab spec; podlab runc run -d`,
	Flags: []cli.Flag{
		bundleFlag,
		&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "create and start it in the background, its output in the CRI log"},
		&cli.BoolFlag{Name: "keep", Usage: "keep the stopped container after a foreground run (runc run --keep) until podlab runc delete"},
	},
	Action: func(c *cli.Context) error {
		w := c.App.Writer
		if !c.Bool("detach") {
			w = c.App.ErrWriter // stdout is the container's
		}
		r, err := runcRuntime(c, c.String("runtime")) // the runtime is checked before the bundle
		if err != nil {
			return err
		}
		id, bundle, err := createTarget(c, w)
		if err != nil {
			return err
		}
		if c.Bool("detach") {
			cr, err := r.Create(c.Context, id, bundle)
			if err != nil {
				return err
			}
			recordCreated(c, id)
			printCreated(c.App.Writer, cr)
			st, err := r.Start(c.Context, id)
			if err != nil {
				return err
			}
			printStarted(c.App.Writer, st)
			return nil
		}
		r.OnCommand = traceTo(c.App.ErrWriter) // stdout is the container's
		keep := c.Bool("keep")
		ex, err := r.RunWithOptions(c.Context, id, bundle,
			runc.IO{Stdin: c.App.Reader, Stdout: c.App.Writer, Stderr: c.App.ErrWriter}, runc.RunOptions{Keep: keep})
		if err != nil {
			return err
		}
		printRunEnded(c.App.ErrWriter, r, id, ex, keep)
		if ex.Code != 0 {
			return cli.Exit("", ex.Code)
		}
		return nil
	},
}

var runcStateCommand = &cli.Command{
	Name:      "state",
	Usage:     "show a container's state, its cgroup and limits read back from the kernel, and its exit code",
	ArgsUsage: "ID",
	Description: `runc state prints what runc keeps in <root>/<ID>/state.json: the container's
pid, status (created: waiting on the exec fifo; running; paused; stopped) and
bundle. podlab adds what the kernel says: the cgroup from /proc/<pid>/cgroup,
and the limits runc wrote into the cgroup files: memory.max (v2) or
memory.limit_in_bytes (v1), pids.max, cpu.max (v2) or cpu.cfs_quota_us and
cpu.cfs_period_us (v1). A quota of 50000 per period of 100000 is half a CPU,
what resources.limits.cpu: 500m becomes. Once stopped, the exit code the
shim collected.`,
	Action: func(c *cli.Context) error {
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		st, err := r.State(c.Context, id)
		if err != nil {
			return err
		}
		printState(c.App.Writer, st)
		return nil
	},
}

var runcPsCommand = &cli.Command{
	Name:      "ps",
	Usage:     "list the processes in a container",
	ArgsUsage: "ID",
	Description: `runc ps lists the processes in the container's cgroup, by their pids on the
host; inside, the app sees itself as pid 1.`,
	Action: func(c *cli.Context) error {
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		procs, err := r.Ps(c.Context, id)
		if err != nil {
			return err
		}
		w := c.App.Writer
		fmt.Fprintf(w, "%-8s %-8s %s\n", "PID", "PPID", "COMMAND")
		for _, p := range procs {
			fmt.Fprintf(w, "%-8d %-8d %s\n", p.Pid, p.PPid, p.Command)
		}
		fmt.Fprintf(w, "%d process(es) in container %s (host pids; see /proc/<pid>/cgroup)\n", len(procs), id)
		return nil
	},
}

var runcExecCommand = &cli.Command{
	Name:      "exec",
	Usage:     "run a process inside a running container, as kubectl exec",
	ArgsUsage: "ID [--tty] -- CMD [ARG...]",
	Description: `runc exec starts a new process that joins the container's namespaces and
cgroups, with its capabilities and rootfs. kubectl exec reaches it through
the API server, the kubelet and CRI's Exec. stdio is attached; podlab exits
with the process's exit code. Messages from podlab go to stderr.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the process a terminal"},
	},
	Action: func(c *cli.Context) error {
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		args := c.Args().Tail()
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		r.OnCommand = traceTo(c.App.ErrWriter)
		code, err := r.Exec(c.Context, id, args, runc.ExecOptions{
			IO:  runc.IO{Stdin: c.App.Reader, Stdout: c.App.Writer, Stderr: c.App.ErrWriter},
			Tty: c.Bool("tty"),
		})
		if err != nil {
			return err
		}
		if code != 0 {
			return cli.Exit("", code)
		}
		return nil
	},
}

var runcKillCommand = &cli.Command{
	Name:      "kill",
	Usage:     "send a signal to a container's app (default SIGTERM)",
	ArgsUsage: "ID [SIGNAL]",
	Description: `runc kill signals the container's pid 1. The kubelet stops a container the
same way: SIGTERM, then SIGKILL once terminationGracePeriodSeconds is over.
The app sees the signal as pid 1 of its namespace: it is not killed by a
signal it does not handle, except SIGKILL. The shim records the exit code.`,
	Flags: []cli.Flag{podFlag(), namespaceFlag(), containerFlag()},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, kubelet.StageKill)
		}
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		sig := c.Args().Get(1)
		if sig == "" {
			sig = "SIGTERM"
		}
		if err := r.Kill(c.Context, id, sig); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "Sent %s to container %s (the kubelet's StopContainer starts the same way)\n", sig, id)
		fmt.Fprintf(c.App.Writer, "The shim writes the exit code to %s: podlab runc state %s\n", r.ExitPath(id), id)
		return nil
	},
}

var runcDeleteCommand = &cli.Command{
	Name:      "delete",
	Usage:     "delete a stopped container: runc state, podlab's files, empty cgroups (CRI RemoveContainer)",
	ArgsUsage: "ID [--force]",
	Description: `runc delete removes <root>/<ID> and the container's cgroups; --force kills a
running container first. podlab then waits for the shim to finish, removes
containers/<ID> (log, exit.json) and the empty cgroups runc leaves behind,
but nothing at or above the state directory's cgroup root (/podlab-<hash>,
shown by podlab doctor): another state directory's containers, and this one's
others, are not touched.`,
	Flags: []cli.Flag{podFlag(), namespaceFlag(), containerFlag(),
		&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "kill the container first if it is running"},
	},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, kubelet.StageRemove)
		}
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		d, err := r.Delete(c.Context, id, c.Bool("force"))
		if err != nil {
			return err
		}
		if rec, _ := loadLast(c); rec.Created == id {
			recordLast(c, func(r *last.Record) { r.Created, r.Runtime = "", "" })
		}
		w := c.App.Writer
		fmt.Fprintf(w, "Deleted container %s (CRI RemoveContainer)\n", id)
		if d.StateDir != "" {
			fmt.Fprintf(w, "  runc state removed:   %s\n", d.StateDir)
		}
		if d.Dir != "" {
			fmt.Fprintf(w, "  podlab files removed: %s\n", d.Dir)
		}
		for _, cg := range d.Cgroups {
			fmt.Fprintf(w, "  empty cgroup removed: %s\n", cg)
		}
		if d.CgroupErr != nil {
			fmt.Fprintf(w, "  warning: %v\n", d.CgroupErr)
		}
		return nil
	},
}

var runcLogsCommand = &cli.Command{
	Name:      "logs",
	Usage:     "print a container's stdout and stderr, as kubectl logs",
	ArgsUsage: "ID [-f] [--timestamps]",
	Description: `The shim writes the container's output to containers/<ID>/container.log in
the CRI log format the kubelet reads from /var/log/pods/.../0.log:

  2026-12-02T12:00:00.123456789Z stdout F hello

one line per line: the time, the stream, F for a full line or P for part of a
longer one, the message. podlab logs prints the messages; --timestamps prints
the lines as stored. -f follows the log until the container exits.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the container exits"},
		&cli.BoolFlag{Name: "timestamps", Usage: "print each line as stored, with time, stream and tag"},
	},
	Action: func(c *cli.Context) error {
		r, id, err := runcSetup(c)
		if err != nil {
			return err
		}
		r.OnCommand = nil
		return r.Logs(c.Context, id, c.App.Writer, runc.LogsOptions{Follow: c.Bool("follow"), Timestamps: c.Bool("timestamps")})
	},
}

// runcShimCommand is the shim process that create starts (see runc.ShimMain).
var runcShimCommand = &cli.Command{
	Name:   "shim",
	Hidden: true,
	Usage:  "podlab's container shim (started by create; not for direct use)",
	Action: func(*cli.Context) error {
		if code := runc.ShimMain(); code != 0 {
			return cli.Exit("", code)
		}
		return nil
	},
}

// runcSetup builds the Runtime from the flags and reads the container ID.
// Without an ID, a command other than exec acts on the container created
// last (steps/last), with the runtime that created it.
func runcSetup(c *cli.Context) (*runc.Runtime, string, error) {
	id, runtime := c.Args().First(), c.String("runtime")
	if id == "" && c.Command.Name == "exec" {
		return nil, "", fmt.Errorf("no container ID: podlab runc %s %s", c.Command.Name, c.Command.ArgsUsage)
	}
	if id == "" {
		rec, err := loadLast(c)
		if err != nil {
			return nil, "", err
		}
		if rec.Created == "" {
			return nil, "", noneCreated(c, rec)
		}
		id = rec.Created
		if runtime == "" {
			runtime = rec.Runtime
		}
		fmt.Fprintf(c.App.Writer, "container %s (the container created last)\n", id)
	}
	r, err := runcRuntime(c, runtime)
	return r, id, err
}

// noneCreated says that no container was created yet, and the exact
// command that creates one.
func noneCreated(c *cli.Context, rec last.Record) error {
	create := "podlab runc create ID --bundle DIR (a bundle with config.json: podlab spec)"
	if rec.Spec != "" {
		create = "podlab runc create   (it takes " + filepath.Base(rec.Spec) + ", the bundle whose spec was written last)"
	}
	return fmt.Errorf("no container ID given, and no container created yet: runc %s acts on a created container; create one first:\n  %s\n  or create and start it at once: podlab runc run -d", c.Command.Name, create)
}

// createTarget is the container ID and bundle of podlab runc create and
// run: as given; else the bundle whose spec was written last (saying so),
// the ID its spec was written for (the bundle's name); else, for an ID
// alone, <state-dir>/bundles/<ID>; for a bundle alone, the bundle's name.
func createTarget(c *cli.Context, w io.Writer) (id, bundle string, err error) {
	dir, err := stateDir(c)
	if err != nil {
		return "", "", err
	}
	id, bundle = c.Args().First(), c.String("bundle")
	switch {
	case id != "" && bundle != "":
	case id != "":
		// runc says what is missing when there is no such bundle.
		bundle = statedir.Layout{Dir: dir}.Bundle(id)
		fmt.Fprintf(w, "No --bundle given: using %s\n", inState(dir, bundle))
	case bundle != "":
		if bundle, err = filepath.Abs(bundle); err != nil {
			return "", "", err
		}
		id = filepath.Base(bundle)
		fmt.Fprintf(w, "No container ID given: using the bundle's name, %s\n", id)
	default:
		rec, err := loadLast(c)
		if err != nil {
			return "", "", err
		}
		if rec.Spec == "" {
			return "", "", fmt.Errorf("no container ID or --bundle given, and no spec written yet in %s: write one first (`podlab pull nginx`, `podlab unpack`, `podlab spec`), or name both: podlab runc %s ID --bundle DIR", dir, c.Command.Name)
		}
		if !pathExists(filepath.Join(rec.Spec, "config.json")) {
			return "", "", fmt.Errorf("%s, the bundle whose spec was written last, has no config.json any more (removed, or unpacked again with --force?): write it again: podlab spec --bundle %s --image REF", inState(dir, rec.Spec), rec.Spec)
		}
		bundle, id = rec.Spec, rec.SpecID
		if id == "" {
			id = filepath.Base(bundle)
		}
		fmt.Fprintf(w, "creating %s from %s (the bundle whose spec was written last)\n", id, inState(dir, bundle))
	}
	return id, bundle, nil
}

// runcRuntime builds the Runtime of the handler or binary named runtime.
func runcRuntime(c *cli.Context, runtime string) (*runc.Runtime, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	h, err := runc.HandlerFor(runtime)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	l := statedir.Layout{Dir: dir}.Runtime()
	r := runc.NewRuntime(h, l.HandlerRoot(h.Name), l.Dir)
	r.CgroupParent = l.CgroupParent
	r.Shim = runc.ShimCommand(exe)
	r.OnCommand = traceTo(c.App.Writer)
	return r, nil
}

// traceTo prints each runtime command line as the shell's set -x does.
func traceTo(w io.Writer) func([]string) {
	return func(argv []string) {
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = shellQuote(a)
		}
		fmt.Fprintf(w, "+ %s\n", strings.Join(q, " "))
	}
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printRunEnded says how a foreground run ended and where its log and exit
// code are.
func printRunEnded(w io.Writer, r *runc.Runtime, id string, ex *runc.Exit, kept bool) {
	if kept {
		fmt.Fprintf(w, "Container %s exited with code %d%s; kept (--keep): runc state %s says stopped, its cgroups stay; podlab runc delete %s removes it\n",
			id, ex.Code, signalNote(ex), r.StateFile(id), id)
	} else {
		fmt.Fprintf(w, "Container %s exited with code %d%s; runc removed it (--keep keeps it), and the ID is free to run again\n",
			id, ex.Code, signalNote(ex))
	}
	fmt.Fprintf(w, "  log:       %s (podlab runc logs %s)\n", r.LogPath(id), id)
	fmt.Fprintf(w, "  exit code: %s (podlab runc state %s)\n", r.ExitPath(id), id)
}

func signalNote(ex *runc.Exit) string {
	if ex.Signal == "" {
		return ""
	}
	return " (killed by " + ex.Signal + ")"
}

func printCreated(w io.Writer, cr *runc.Created) {
	fmt.Fprintf(w, "Created container %s (CRI CreateContainer): runc made its namespaces and cgroups, mounted\n", cr.ID)
	fmt.Fprintf(w, "its root file system and set its capabilities; its process, pid %d on the host and pid 1\n", cr.Pid)
	fmt.Fprintf(w, "inside, is runc init, blocked on the exec fifo: the app has not run yet.\n")
	fmt.Fprintf(w, "  bundle:     %s\n", cr.Bundle)
	fmt.Fprintf(w, "  runc state: %s\n", cr.StateFile)
	fmt.Fprintf(w, "  exec fifo:  %s\n", cr.ExecFifo)
	fmt.Fprintf(w, "  shim:       pid %d (holds stdout/stderr, waits for the exit code)\n", cr.ShimPid)
	fmt.Fprintf(w, "  log:        %s\n", cr.LogPath)
	fmt.Fprintf(w, "  exit code:  %s (once it exits)\n", cr.ExitPath)
	printCgroup(w, cr.Cgroup)
}

func printStarted(w io.Writer, st *runc.State) {
	fmt.Fprintf(w, "Started container %s (CRI StartContainer): runc start opened the exec fifo and runc init\n", st.ID)
	fmt.Fprintf(w, "exec'd the app; status %s, pid %d.\n", st.Status, st.Pid)
	fmt.Fprintf(w, "  log: %s (podlab runc logs %s -f)\n", st.LogPath, st.ID)
	if st.Exit != nil {
		fmt.Fprintf(w, "  it already exited with code %d%s (%s)\n", st.Exit.Code, signalNote(st.Exit), st.ExitPath)
	}
}

func printState(w io.Writer, st *runc.State) {
	fmt.Fprintf(w, "Container %s\n", st.ID)
	fmt.Fprintf(w, "  status:     %s\n", st.Status)
	if st.Pid > 0 {
		fmt.Fprintf(w, "  pid:        %d (on the host; pid 1 inside)\n", st.Pid)
	}
	fmt.Fprintf(w, "  bundle:     %s\n", st.Bundle)
	if !st.Created.IsZero() {
		fmt.Fprintf(w, "  created:    %s\n", st.Created.Format(time.RFC3339))
	}
	if st.StateFile != "" {
		fmt.Fprintf(w, "  runc state: %s\n", st.StateFile)
	} else {
		fmt.Fprintf(w, "  runc state: none (runc forgot it: a foreground run deletes the container when it exits)\n")
	}
	if st.ExecFifo != "" {
		fmt.Fprintf(w, "  exec fifo:  %s (runc init waits on it: podlab runc start %s)\n", st.ExecFifo, st.ID)
	}
	if st.ShimPid > 0 {
		fmt.Fprintf(w, "  shim:       pid %d\n", st.ShimPid)
	}
	if st.LogPath != "" {
		fmt.Fprintf(w, "  log:        %s\n", st.LogPath)
	}
	if st.Exit != nil {
		fmt.Fprintf(w, "  exit code:  %d%s at %s (%s)\n", st.Exit.Code, signalNote(st.Exit), st.Exit.ExitedAt.Format(time.RFC3339), st.ExitPath)
	}
	printCgroup(w, st.Cgroup)
}

func printCgroup(w io.Writer, cg *runc.Cgroup) {
	if cg == nil {
		return
	}
	fmt.Fprintf(w, "  cgroup:     %s (cgroups %s)\n", cg.Path, cg.Layout)
	for _, l := range []struct {
		name string
		lim  runc.Limit
	}{{"memory", cg.Memory}, {"pids", cg.Pids}, {"cpu quota", cg.CPUQuota}, {"cpu period", cg.CPUPeriod}} {
		if l.lim.Known {
			fmt.Fprintf(w, "    %-10s %-12s %s\n", l.name, l.lim, l.lim.File)
		} else {
			fmt.Fprintf(w, "    %-10s %s\n", l.name, l.lim)
		}
	}
	for _, d := range cg.Dirs {
		fmt.Fprintf(w, "    dir        %s\n", d)
	}
}
