package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/up"
)

var upCommand = &cli.Command{
	Name:      "up",
	Usage:     "the whole chain at once, for real: create a pod (or a Deployment) and have every component run it, step by step as the chain's description (lessons/README.md) numbers them",
	ArgsUsage: "[--deployment] [--image IMAGE] [--name NAME] [--registry-mirror URL]",
	Description: `podlab up is "kubectl run web --image nginx" on a cluster that lives in one
process, with every step of the chain printed as it happens, numbered as
its description numbers it (lessons/README.md, "The chain"): what the step
is, which component did it (and as which user), and what happened for real
(the revision written, the node chosen, the bundle path, the container id,
the namespaces read back from /proc).

  before    podlab init if the state directory has no control plane (its
            store, users, CA, certificates and kubeconfigs); kube-apiserver:
            the podlab apiserver serving the state directory if one runs,
            else the same server in-process on 127.0.0.1 and a free port,
            the only opener of the store while up runs; the image registry, in-process on 127.0.0.1 and a free port, serving
            <state-dir>/demo-images (make images builds them, offline) as
            the docker.io mirror, unless --registry-mirror names one; the
            kubelet of node-1 registers its Node; kube-scheduler (and, with
            --deployment, kube-controller-manager) start watching.
  1-3       you (as admin, admin.kubeconfig's client certificate) POST the
            pod over HTTPS; the API server's gate:
            authentication, RBAC, admission, validation; etcd (bbolt) stores
            it; 201 Created, Pending, no node.
  4-5       the scheduler's watch sees a pod with no node: filter, score,
            bind (pods/binding, as system:kube-scheduler).
  6-8       the node's kubelet (as system:node:node-1) sees it through its
            watch (spec.nodeName=node-1), plans syncPod, and makes the pod's
            sandbox: network, IPC and UTS namespaces, pinned.
  9-13      the container runtime pulls the image from the registry,
            unpacks it into a bundle, writes config.json, runc create; runc's
            namespaces, cgroup, pivot_root and capabilities read back from
            the kernel; runc start: the app runs.
  14-16     the kubelet watches the container and reports the status; the
            API server's revisions of the pod, replayed from a watch.

With --deployment it is the chain's 18 steps of "kubectl create deployment":
steps 4 and 5 are the controller-manager's (the Deployment controller makes
a ReplicaSet, whose controller makes the pod), and the pod's steps follow.

It ends when the pod is Running: it GETs the container's port from inside
the pod's network namespace (a thread of podlab setns(2)s into
<node>/netns/<pod-uid>: nginx's image has no curl), shows the container's
log, and says what to try next. The pod keeps running under its shim. The
registry, the scheduler and the controller-manager stop with podlab up:
later pulls need "podlab registry serve", and "podlab kubelet" keeps the pod
watched. Every component is a client of kube-apiserver over HTTPS with
its own kubeconfig, as when you run them by hand, and up ends with the
requests the server answered, client by client. Run twice, up says the pod exists and shows its state: use --name,
or podlab reset.

Examples:
  make images && podlab up
  podlab up --deployment
  podlab up --name hello --image podlab/hello:1.0
  podlab up --registry-mirror http://127.0.0.1:5001`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "deployment", Usage: "create a Deployment (the chain's 18 steps) instead of a bare pod (16)"},
		&cli.StringFlag{Name: "image", Value: up.DefaultImage, Usage: "the container image (docker.io names come through the mirror)"},
		&cli.StringFlag{Name: "name", Value: up.DefaultName, Usage: "the pod's (or the Deployment's) name"},
		namespaceFlag(),
		&cli.StringFlag{
			Name:    "registry-mirror",
			Usage:   "registry URL to pull docker.io images from; default: serve <state-dir>/demo-images in-process",
			EnvVars: []string{pull.MirrorEnv},
		},
		&cli.StringFlag{Name: "images", Usage: "the OCI layout the in-process registry serves", DefaultText: "<state-dir>/demo-images"},
		&cli.BoolFlag{Name: "insecure", Usage: "allow plain HTTP and unverified TLS to registries"},
		&cli.StringFlag{Name: "runtime", Usage: "the OCI runtime binary; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 0 {
			return fmt.Errorf("up takes no arguments (got %q): podlab up --name NAME --image IMAGE", c.Args().Slice())
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		bin, err := runc.FindRuntime(c.String("runtime"))
		if err != nil {
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		w := c.App.Writer
		opts := up.Options{
			StateDir: dir, Name: c.String("name"), Namespace: c.String("namespace"), Image: c.String("image"),
			Deployment: c.Bool("deployment"), Mirror: c.String("registry-mirror"), Insecure: c.Bool("insecure"),
			ImagesDir: c.String("images"), Runtime: bin, Shim: runc.ShimCommand(exe),
			RuntimeCommand: []string{exe, "--state-dir", dir, "runtime", "--runtime", bin},
			OnStep:         func(s up.Step) { printUpStep(w, s) },
		}
		if c.Bool("debug") {
			opts.OnCommand = traceTo(w)
		}
		// Ctrl-C ends the chain where it is, and still stops the
		// in-process registry and components.
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := up.Up(ctx, opts)
		if res != nil && len(res.Next) > 0 {
			fmt.Fprintln(w, "\nTry next:")
			for _, n := range res.Next {
				fmt.Fprintf(w, "  %s\n", n)
			}
		}
		return err
	},
}

// printUpStep prints one step: its number and the description's sentence, who
// did it, and what happened.
func printUpStep(w io.Writer, s up.Step) {
	if s.N == 0 {
		fmt.Fprintf(w, "\n== %s\n", s.Sentence)
		if s.Component != "" {
			fmt.Fprintf(w, "   by   %s\n", s.Component)
		}
		for _, d := range s.Did {
			fmt.Fprintf(w, "        %s\n", d)
		}
		return
	}
	fmt.Fprintf(w, "\n[%d/%d] %s\n", s.N, s.Of, s.Sentence)
	fmt.Fprintf(w, "   who  %s\n", s.Component)
	for i, d := range s.Did {
		label := "    "
		if i == 0 {
			label = "did "
		}
		fmt.Fprintf(w, "   %s %s\n", label, strings.TrimRight(d, " "))
	}
}
