package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// newContainerdCommand is `podlab containerd`: a real containerd beside
// podlab's own runtime, in the foreground.
func newContainerdCommand() *cli.Command {
	return &cli.Command{
		Name:      "containerd",
		Usage:     "run a real containerd (Debian's 1.6) with its CRI socket under the state directory, side by side with podlab's runtime",
		ArgsUsage: "[--registry-mirror http://127.0.0.1:5001]",
		Description: `The chain says the kubelet calls "the container runtime (docker,
containerd or CRI-O)". This command starts the real containerd, Debian's
1.6 (package containerd), in the foreground until Ctrl-C, configured so
that everything it writes lives under <state-dir>/containerd:

  config.toml          what it reads (version 2), rendered here at each start
  containerd.sock      its gRPC address: containerd's API and the CRI
                       (RuntimeService and ImageService), what crictl and a
                       kubelet talk to: unix://<state-dir>/containerd/containerd.sock
  crictl.yaml          crictl --config <it>: both endpoints, pull on create
  root/                /var/lib/containerd on a node: content store
                       (io.containerd.content.v1.content/blobs), snapshots
                       (io.containerd.snapshotter.v1.overlayfs/snapshots/N/fs)
  state/               /run/containerd on a node: each task's bundle
                       (io.containerd.runtime.v2.task/k8s.io/ID/config.json),
                       the pods' network namespaces (netns_mounts_under_state_dir)
  runc/k8s.io/ID       runc's --root (the runc shim's option Root)
  cni/net.d            its own CNI conflist: bridge plc<hash>, a /24 of 10.88.0.0/16
  containerd.log       its log
  pods/                where a CRI client may put its pods' logs

The CRI plugin runs podlab's runc (bin/runc, as BinaryName) with
restrict_oom_score_adj = true (root here lacks CAP_SYS_RESOURCE), and pulls
through the lab registry: <state-dir>/certs.d/docker.io/hosts.toml and
certs.d/registry.k8s.io/hosts.toml name --registry-mirror (podlab registry
serve) as the mirror of Docker Hub and of Kubernetes' registry. This
command writes them, at each start, because the mirror's address is only
known when the registry runs. Every pod's first container is the sandbox
image, registry.k8s.io/pause:3.10.2 (kubeadm 1.37's), which make images
builds from Kubernetes' own pause.c.

What containerd 1.6 still writes outside the state directory (it has no
setting for them):
  /run/containerd/s/<hash>           each shim's socket, while its pod runs;
                                     the empty directory stays
  /var/lib/cni/results/podlab-ID-eth0 and cni-loopback-ID-lo
                                     each pod's CNI results, until CNI DEL;
                                     the empty directory stays
and a pod's cgroup is the cgroup_parent its client gives: give one under
<cgroup root of the state dir>/containerd (podlab doctor prints the root).

Pods outlive containerd: their shims (containerd-shim-runc-v2) are their
parents. After Ctrl-C they keep running; crictl stopp and rmp them before,
or podlab reset (it stops this state directory's containerd and shims,
CNI DELs the pods, removes the shims' sockets, unmounts and removes the
rest). A second podlab containerd on the same state directory, or one
while a containerd answers on the socket, is refused.

  podlab registry serve &
  podlab containerd &
  crictl --config <state-dir>/containerd/crictl.yaml runp pod.json

A kubelet uses it with --container-runtime-endpoint
unix://<state-dir>/containerd/containerd.sock (the image service is the
same socket).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "registry-mirror", Value: "http://127.0.0.1:5001", EnvVars: []string{pull.MirrorEnv},
				Usage: "the lab registry, mirror of docker.io and registry.k8s.io (\"\" writes no hosts.toml)"},
			&cli.StringFlag{Name: "runtime", Usage: "the runc binary; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH"},
			&cli.StringFlag{Name: "cni-bin-dir", Value: cni.DefaultBinDirs()[0], Usage: "where the CNI plugins are"},
			&cli.DurationFlag{Name: "ready-timeout", Value: time.Minute, Usage: "how long to wait for its CRI to be ready"},
		},
		Action: runContainerd,
	}
}

func runContainerd(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("containerd takes no arguments (got %q)", c.Args().Slice())
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return err
	}
	bin, err := containerd.Find()
	if err != nil {
		return err
	}
	runcBin, err := runc.FindRuntime(c.String("runtime"))
	if err != nil {
		return err
	}
	if runcBin, err = filepath.Abs(runcBin); err != nil {
		return err
	}
	cfg := containerd.FromLayout(l, runcBin, c.String("cni-bin-dir"))
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(cfg.Layout.Dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(cfg.Layout.Log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening containerd's log: %w", err)
	}
	defer logf.Close()
	d, written, err := containerd.Start(ctx, cfg, bin, c.String("registry-mirror"), logf)
	if err != nil {
		return err
	}
	w := c.App.Writer
	printContainerdFiles(w, bin, written)
	r, err := containerd.Ready(ctx, cfg.Layout.Socket(), c.Duration("ready-timeout"), d.Exited())
	if err != nil {
		d.Stop(10 * time.Second)
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%w (log: %s)", err, cfg.Layout.Log())
	}
	printContainerdReady(w, cfg, r)
	select {
	case <-ctx.Done():
		d.Stop(10 * time.Second)
		fmt.Fprintf(w, "containerd stopped; pods it ran keep running under their shims (crictl stopp/rmp them, or podlab reset)\n")
		return nil
	case <-d.Exited():
		return fmt.Errorf("containerd exited by itself (%v): its log is %s", d.Wait(), cfg.Layout.Log())
	}
}

func printContainerdFiles(w io.Writer, bin string, written *containerd.Written) {
	fmt.Fprintf(w, "containerd %s\n  config    %s\n  crictl    %s\n  network   %s\n", bin, written.Config, written.Crictl, written.ConfList)
	for _, h := range written.Hosts {
		fmt.Fprintf(w, "  mirror    %s\n", h)
	}
}

func printContainerdReady(w io.Writer, cfg containerd.Config, r *containerd.Readiness) {
	l := cfg.Layout
	fmt.Fprintf(w, "%s %s answers CRI %s on %s:", r.Version.RuntimeName, r.Version.RuntimeVersion, r.Version.RuntimeApiVersion, containerd.Endpoint(l.Socket()))
	for _, c := range r.Conditions {
		fmt.Fprintf(w, " %s", c.Type)
	}
	fmt.Fprintf(w, "\n  log       %s\n  root      %s\n  state     %s\n  runc      %s (runc --root %s/%s list)\n",
		l.Log(), l.Root(), l.State(), cfg.Runc, l.RuncRoot(), containerd.Namespace)
	fmt.Fprintf(w, "For a CRI client (crictl, a kubelet):\n  endpoint       %s (runtime and image service)\n  cgroup_parent  %s/pod<uid>\n  log_directory  %s/<namespace>_<name>_<uid>\n",
		containerd.Endpoint(l.Socket()), l.CgroupParent, l.PodLogsDir())
	fmt.Fprintf(w, "Outside the state directory (containerd 1.6 has no setting for them):\n")
	for _, o := range containerd.Outside(l) {
		fmt.Fprintf(w, "  %s\n", o)
	}
	fmt.Fprintf(w, "Try: crictl --config %s info | head; Ctrl-C stops containerd\n", l.CrictlConfig())
}
