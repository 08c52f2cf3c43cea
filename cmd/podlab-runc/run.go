package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

func newRunCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create and start a container in the foreground and exit with its exit code (podlab runc run)",
		ArgsUsage: "ID --bundle DIR [--keep]",
		Description: `The same foreground run as podlab runc run: runc run creates and starts the
container with your terminal as its stdin, waits for it, and then deletes
it. Its stdout and stderr come to your terminal and to
containers/<ID>/container.log (CRI log format); the exit code is kept in
containers/<ID>/exit.json, where podlab runc logs ID and podlab runc state
ID read them. podlab-runc exits with the container's exit code (128+N when
signal N killed it). Messages go to stderr; stdout is the container's.

--keep keeps the stopped container (runc run --keep) until podlab runc delete.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "bundle", Usage: "the bundle directory: rootfs/ and config.json (podlab unpack, podlab spec)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the stopped container (runc run --keep) until podlab runc delete"},
		},
		Action: func(c *cli.Context) error {
			id := c.Args().First()
			if id == "" {
				return fmt.Errorf("no container ID: podlab-runc run %s", c.Command.ArgsUsage)
			}
			l, err := statedir.New(c.String("state-dir"))
			if err != nil {
				return err
			}
			h, err := runc.HandlerFor(c.String("runtime"))
			if err != nil {
				return err
			}
			rl := l.Runtime()
			r := runc.NewRuntime(h, rl.HandlerRoot(h.Name), rl.Dir)
			r.CgroupParent = rl.CgroupParent
			r.OnCommand = func(argv []string) { fmt.Fprintf(c.App.ErrWriter, "+ %s\n", strings.Join(argv, " ")) }
			keep := c.Bool("keep")
			ex, err := r.RunWithOptions(c.Context, id, c.String("bundle"),
				runc.IO{Stdin: c.App.Reader, Stdout: c.App.Writer, Stderr: c.App.ErrWriter}, runc.RunOptions{Keep: keep})
			if err != nil {
				return err
			}
			printEnded(c.App.ErrWriter, r, id, ex, keep)
			if ex.Code != 0 {
				return cli.Exit("", ex.Code)
			}
			return nil
		},
	}
}

func printEnded(w io.Writer, r *runc.Runtime, id string, ex *runc.Exit, kept bool) {
	how := "runc removed it, and the ID is free to run again"
	if kept {
		how = "kept (--keep): podlab runc delete " + id + " removes it"
	}
	sig := ""
	if ex.Signal != "" {
		sig = " (killed by " + ex.Signal + ")"
	}
	fmt.Fprintf(w, "Container %s exited with code %d%s; %s\n", id, ex.Code, sig, how)
	fmt.Fprintf(w, "  log:       %s (podlab runc logs %s)\n", r.LogPath(id), id)
	fmt.Fprintf(w, "  exit code: %s (podlab runc state %s)\n", r.ExitPath(id), id)
}
