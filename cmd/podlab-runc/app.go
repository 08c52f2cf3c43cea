package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// Run builds the podlab-runc application and runs it with args. It never
// exits the process: main does, with the error Run returns.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	app := newApp(stdin, stdout, stderr)
	return app.Run(cliargs.FlagsFirst(app, args))
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "podlab-runc",
		Usage: "podlab's runtime, per container, in a small binary: a foreground run and the shim",
		Description: `podlab-runc is the part of podlab's runtime that runs once per container, in
a binary that starts in about 2 ms, as containerd-shim-runc-v2 sits
beside containerd. bin/podlab holds the whole chain and Go initialises all of
it at every start (about 10 ms); podlab-runc holds only steps/runc. It shares
podlab's state directory: podlab runc state, logs and delete read what it
writes. podlab runc --help explains each runc step.`,
		HideHelpCommand: true,
		Reader:          stdin,
		Writer:          stdout,
		ErrWriter:       stderr,
		ExitErrHandler:  func(*cli.Context, error) {}, // main decides how to exit
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "state-dir",
				Usage:   "podlab's state directory (the same as podlab's)",
				EnvVars: []string{"PODLAB_STATE_DIR"},
				Value:   statedir.Default(),
			},
			&cli.StringFlag{
				Name:  "runtime",
				Usage: "the OCI runtime: a handler's name (runc, runsc, crun) or a binary's path; default $PODLAB_RUNTIME, else bin/runc next to podlab-runc, else runc on PATH",
			},
		},
		Commands: []*cli.Command{newRunCommand(), newShimCommand()},
	}
}

// newShimCommand is the shim process that podlab's create starts (see
// runc.ShimMain and runc.ShimCommand).
func newShimCommand() *cli.Command {
	return &cli.Command{
		Name:   "shim",
		Hidden: true,
		Usage:  "podlab's container shim (started by create; not for direct use)",
		Action: func(*cli.Context) error {
			if os.Getenv(runc.ShimConfigEnv) == "" {
				return fmt.Errorf("podlab-runc shim is started by podlab runc create, the kubelet or podlab runtime, with %s set; run podlab runc create ID --bundle DIR instead", runc.ShimConfigEnv)
			}
			if code := runc.ShimMain(); code != 0 {
				return cli.Exit("", code)
			}
			return nil
		},
	}
}
