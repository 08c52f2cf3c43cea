package main

import (
	"errors"
	"io"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/statedir"
)

// Run builds the podlab application and runs it with args. It never exits the
// process: main does, with the error Run returns.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	app := newApp(stdin, stdout, stderr)
	kubectlUsage(app)
	return app.Run(cliargs.FlagsFirst(app, args))
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "podlab",
		Usage: "walk, stage by stage and for real, how Kubernetes creates a Pod",
		Description: `podlab re-enacts the chain that turns "kubectl run" into a running process.
Each subcommand is one stage, done for real, and prints what it did in
Kubernetes terms and where its artifacts are, so you can open them:

  up               the whole chain at once, numbered as the seed numbers it
  reset            remove everything podlab made
  init             make the API server's store and users (run it first)
  run, apply,      send objects through the API server's gate:
  create, scale,   authentication, authorization (RBAC), admission,
  delete           validation, then the store (steps 1-3)
  get, describe    read them back (step 2); get -w watches every change
  store            the raw store: keys, revisions, watch (etcd's role)
  auth can-i       ask RBAC what a user may do
  webhook serve    an admission webhook server the API server's gate calls
  node add         add a node with declared capacity
  scheduler        binds pending pods to nodes: filter, score, bind (steps 4-5)
  controller-manager  Deployments to ReplicaSets to Pods, and garbage collection
  kubelet          a node's agent: runs the pods bound to it through the runtime
                   steps below, and reports their status (steps 6-8, 14-16)
  runtime          a node's container runtime as a CRI server, on its socket
                   (crictl works against it; containerd's role)
  logs             a container's log, from its node
  trace            a pod's timeline: each stage, who did it, the revision, when
  exec             run a command in a pod's container (runc exec)
  lesson [N]       the labs, one per stage; check N verifies you did lesson N

  registry serve   the image registry the runtime pulls from (step 9)
  pull             the container runtime pulls an image into its content store (step 9)
  unpack           the runtime unpacks the image's layers into a bundle (step 10)
  spec             the runtime writes the bundle's OCI runtime spec, config.json (step 11)
  runc             the OCI runtime sets up namespaces, cgroups, rootfs and
                   capabilities, then runs the app (steps 12 and 13)
  containerd       a real containerd with a CRI socket of its own, side by side
  doctor           checks that this machine can do all of the above`,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		// "--args a,b" is one argument, as in a PodSpec: never split slice flags on commas.
		DisableSliceFlagSeparator: true,
		Reader:                    stdin,
		Writer:                    stdout,
		ErrWriter:                 stderr,
		ExitErrHandler:            func(*cli.Context, error) {}, // main decides how to exit
		Flags: append([]cli.Flag{
			&cli.StringFlag{
				Name:    "state-dir",
				Usage:   "where podlab keeps everything it makes: content store, bundles, runc state, logs",
				EnvVars: []string{"PODLAB_STATE_DIR"},
				Value:   defaultStateDir(),
			},
			&cli.BoolFlag{
				Name:    "debug",
				Usage:   "print more about what each step does",
				EnvVars: []string{"PODLAB_DEBUG"},
			},
		}, apiFlags()...),
		Commands: []*cli.Command{
			upCommand,
			resetCommand,
			newInitCommand(),
			newAPIServerCommand(),
			newEtcdCommand(),
			newContainerdCommand(),
			runCommand,
			applyCommand,
			createCommand,
			scaleCommand,
			getCommand,
			describeCommand,
			deleteCommand,
			nodeCommand,
			authCommand,
			newWebhookCommand(),
			storeCommand,
			schedulerCommand,
			controllerManagerCommand,
			kubeletCommand,
			newRuntimeCommand(),
			newNetworkAgentCommand(),
			logsCommand,
			traceCommand,
			execCommand,
			lessonCommand,
			checkCommand,
			registryCommand,
			pullCommand,
			imagesCommand,
			inspectCommand,
			rmiCommand,
			unpackCommand,
			specCommand,
			runcCommand,
			doctorCommand,
		},
	}
}

// defaultStateDir is /var/lib/podlab for root, else under $XDG_DATA_HOME
// or ~/.local/share (statedir.Default, shared with podlab-runc).
func defaultStateDir() string { return statedir.Default() }

// stateDir is the global --state-dir, made absolute so that every path podlab
// prints can be opened from anywhere.
func stateDir(c *cli.Context) (string, error) {
	d := c.String("state-dir")
	if d == "" {
		return "", errors.New("no state directory: pass --state-dir DIR or set PODLAB_STATE_DIR")
	}
	return filepath.Abs(d)
}

// exitCode is 1 for every error, unless the error carries its own code (for
// instance the exit code of a container run in the foreground).
func exitCode(err error) int {
	var coder cli.ExitCoder
	if errors.As(err, &coder) && coder.ExitCode() != 0 {
		return coder.ExitCode()
	}
	return 1
}

// contentStore opens the runtime's content store, <state-dir>/content: the
// one OCI image layout that pull fills and unpack and spec read.
func contentStore(c *cli.Context) (*pull.Store, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	return pull.OpenStore(pull.StoreDir(dir))
}
