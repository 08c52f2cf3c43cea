package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
)

// newRuntimeCommand is `podlab runtime --node NAME`: the node's container
// runtime as a CRI server, in the foreground.
func newRuntimeCommand() *cli.Command {
	return &cli.Command{
		Name:      "runtime",
		Usage:     "serve a node's container runtime on its CRI socket, as containerd does (crictl works against it)",
		ArgsUsage: "--node NAME [-v]",
		Description: `A kubelet never pulls an image or calls runc itself: it asks the node's
container runtime over the CRI (Container Runtime Interface), gRPC on a
unix socket: containerd's /run/containerd/containerd.sock, CRI-O's
/var/run/crio/crio.sock. This command serves podlab's runtime the same way,
on <state-dir>/nodes/NAME/cri.sock, until Ctrl-C:

  podlab runtime --node node-1 -v
  crictl --runtime-endpoint unix://<state-dir>/nodes/node-1/cri.sock pods

Each CRI call runs the stages you can run by hand:

  RunPodSandbox    the pod's net, ipc and uts namespaces, pinned under
                   nodes/NAME/{net,ipc,uts}ns/<id>, and CNI ADD
  PullImage        podlab pull, into nodes/NAME/content, through the
                   mirrors <state-dir>/certs.d names
  CreateContainer  podlab unpack (nodes/NAME/bundles/<sandbox>/<id>),
                   podlab spec (config.json from the ContainerConfig), and
                   a shim that runs runc create
  StartContainer   runc start
  StopContainer    runc kill (SIGTERM, then SIGKILL)
  RemoveContainer  runc delete, the bundle, the log

REGISTRIES. It finds a registry's mirrors as containerd's CRI plugin does
in its config_path: <state-dir>/certs.d/<registry>/hosts.toml, read on every
pull, the files podlab pull and the lab containerd read and podlab registry
serve writes, naming itself. A node that joined the lab network (podlab
node join) runs its runtime inside its machine, where only the lab network
is: the registry must then listen on the lab's gateway (podlab registry
serve --addr GATEWAY:PORT), and hosts.toml names it there. containerd has
no flag for a mirror; --registry-mirror sends docker.io images to one
registry instead of the files, as podlab pull's does: a kubelet that
starts the runtime passes on its own --registry-mirror (or the host's
$PODLAB_REGISTRY_MIRROR, but not into a joined node's machine, where the
host's loopback is not), podlab up the registry of its own run. The
runtime itself does not read $PODLAB_REGISTRY_MIRROR.

It records each sandbox and container in nodes/NAME/cri/ (one JSON file
each), so a restarted runtime knows them again, and cleans what a runtime
killed mid-create left half-made. -v prints every call with its request
and response in protobuf text, as crictl --debug shows them.

It records its pid in nodes/NAME/runtime.pid (removed when it stops), so
that podlab reset stops a runtime left running. A kubelet whose node has no
runtime answering starts this command itself, in the background, its
output in nodes/NAME/runtime.log.

Runtime handlers are containerd's runtimes table: a RuntimeClass's handler
names one in RunPodSandbox's runtime_handler. runc (the default), runsc
(gVisor) and crun are known; --runtime-handler NAME=PATH adds one or points
one at another binary, as the kubelet's flag of the same name does. An
unknown handler fails RunPodSandbox with containerd's text.

Containers' root file systems come from the node's snapshotter
(nodes/NAME/snapshots): overlayfs where the kernel mounts it, as
containerd's default, each layer unpacked once and every rootfs an overlay
with an upper directory of its own; --snapshotter native makes a full copy
per container.

A socket path that is not a socket is refused and left alone; a socket
another runtime answers on is refused, naming it; a stale socket nobody
answers on is removed.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node", Value: "node-1", Usage: "the node whose runtime this is"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "print each CRI call with its request and response"},
			&cli.StringFlag{Name: "runtime", Usage: "the OCI runtime binary (default: runc next to podlab, in bin/, or on PATH)"},
			&cli.StringFlag{Name: "registry-mirror", Usage: "pull docker.io images from this registry instead of the mirrors <state-dir>/certs.d/docker.io/hosts.toml names"},
			&cli.BoolFlag{Name: "insecure", Usage: "allow plain HTTP registries"},
			&cli.StringSliceFlag{Name: "runtime-handler", Usage: "NAME=PATH: a runtime handler (a RuntimeClass's handler) and its OCI runtime binary, repeatable; runc, runsc and crun are known"},
			&cli.StringFlag{Name: "snapshotter", Usage: "how containers' rootfs are made: overlayfs or native (default: overlayfs where the kernel mounts it)"},
			&cli.StringFlag{Name: "stream-address", Value: "127.0.0.1:0", Usage: "where the streaming server (exec, attach, port-forward) listens"},
		},
		Action: runRuntime,
	}
}

func runRuntime(c *cli.Context) error {
	node := c.String("node")
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return fmt.Errorf("node name %q: %s", node, errs[0])
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return err
	}
	bin, err := runc.FindRuntime(c.String("runtime"))
	if err != nil {
		return err
	}
	handlers, err := runtimeHandlers(bin, c.StringSlice("runtime-handler"))
	if err != nil {
		return err
	}
	var snap unpack.Snapshotter
	if s := c.String("snapshotter"); s != "" {
		if snap, err = unpack.ParseSnapshotter(s); err != nil {
			return fmt.Errorf("--snapshotter: %w", err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	w := c.App.Writer
	n := l.Node(node)
	cfg := cri.Config{Node: n, Runtime: bin, Shim: runc.ShimCommand(exe),
		Mirror: c.String("registry-mirror"), Insecure: c.Bool("insecure"),
		StreamAddress: c.String("stream-address"), Handlers: handlers, Snapshotter: snap}
	if c.Bool("verbose") {
		cfg.Log, cfg.OnCommand = w, traceTo(w)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The socket first: a second runtime must not clean the first one's creates.
	ln, stale, err := cri.Listen(ctx, n.CRISocket())
	if err != nil {
		return err
	}
	if stale {
		fmt.Fprintf(w, "removed the stale socket %s (nothing answered on it: a runtime that was killed)\n", n.CRISocket())
	}
	srv, cleaned, err := cri.New(ctx, cfg)
	for _, cl := range cleaned {
		fmt.Fprintf(w, "cleaned the half-made %s %s (a create the last runtime did not finish): removed %v\n", cl.Kind, cl.ID, cl.Removed)
	}
	if err != nil {
		ln.Close()
		return err
	}
	// Its pid, for podlab reset (a kubelet that started it wrote the same).
	if err := criremote.WritePidFile(n.RuntimePidFile(), os.Getpid()); err != nil {
		ln.Close()
		return fmt.Errorf("recording the runtime's pid: %w", err)
	}
	defer os.Remove(n.RuntimePidFile())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	fmt.Fprintf(w, "podlab runtime of node %s: CRI v1 on %s (runc %s); Ctrl-C stops\n", node, n.CRISocket(), bin)
	fmt.Fprintf(w, "  crictl --runtime-endpoint unix://%s pods\n", n.CRISocket())
	fmt.Fprintf(w, "records in %s, content store %s\n", n.CRIDir(), n.ContentDir())
	var names []string
	for _, h := range handlers {
		names = append(names, h.Name+"="+h.Binary)
	}
	sn, why, _ := srv.Snapshotter()
	if why != "" {
		why = " (" + why + ")"
	}
	fmt.Fprintf(w, "runtime handlers %s; snapshotter %s%s\n", strings.Join(names, ", "), sn, why)
	err = <-done
	if err != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("the runtime stopped: %w", err)
	}
	fmt.Fprintln(w, "stopped")
	return nil
}

// runtimeHandlers are the handlers a node's runtime knows: the defaults
// (runc as bin, runsc, crun) with each --runtime-handler NAME=PATH added
// or replacing its namesake.
func runtimeHandlers(bin string, flags []string) ([]runc.Handler, error) {
	handlers := runc.DefaultHandlers(bin)
	var extra []runc.Handler
	for _, s := range flags {
		h, err := runc.ParseHandler(s, handlers)
		if err != nil {
			return nil, fmt.Errorf("--runtime-handler: %w", err)
		}
		extra = append(extra, h)
	}
	return runc.MergeHandlers(handlers, extra), nil
}
