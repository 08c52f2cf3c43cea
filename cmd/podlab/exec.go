package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/up"
)

var execCommand = &cli.Command{
	Name:      "exec",
	Usage:     "run a command in a pod's container, as kubectl exec",
	ArgsUsage: "POD [-c CONTAINER] [-i] [-t] [-n NAMESPACE] -- COMMAND [ARG...]",
	Description: `kubectl exec POD -- CMD asks the API server for the pods/exec subresource:
the API server authorizes "create pods/exec" (RBAC: admin may, viewer may
not), then connects to the kubelet of the pod's node, which asks its
container runtime (CRI Exec, or ExecSync for a command without a stream),
which runs "runc exec" in the container: a new process that joins the
container's namespaces (its PID namespace: it sees the app as pid 1; its
network namespace: 127.0.0.1 is the pod's), its cgroup, its rootfs, its user
and capabilities. It is not a child of the app, and the app does not see it
start.

podlab exec reads the pod through the API server as the user the global
flags name (--as, default admin), asks RBAC the same question, finds the
container's ID in the pod's status (containerID podlab://ID) and the node's
runc root in <state-dir>/nodes/<node>/runc, and runs runc exec there with
your stdin, stdout and stderr. The command's exit code becomes podlab's
("command terminated with exit code N", as kubectl says it).

An image has only what it was built with: nginx's has no curl, podlab/hello's
has only /hello.

Examples:
  podlab exec web -- nginx -v
  podlab exec hello -- /hello --once
  podlab exec shell -i -t -- /bin/sh      # in an image that has a shell`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "container", Aliases: []string{"c"}, Usage: "the container (default: the pod's first)"},
		&cli.BoolFlag{Name: "stdin", Aliases: []string{"i"}, Usage: "pass stdin to the command"},
		&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the command a terminal"},
		namespaceFlag(),
		&cli.StringFlag{Name: "runtime", Usage: "the OCI runtime binary; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH"},
	},
	Action: func(c *cli.Context) error {
		args := c.Args().Slice()
		if len(args) < 1 || args[0] == "--" {
			return fmt.Errorf("exec needs a pod: podlab exec POD -- COMMAND [ARG...]")
		}
		pod, cmd := args[0], args[1:]
		if len(cmd) > 0 && cmd[0] == "--" {
			cmd = cmd[1:]
		}
		if len(cmd) == 0 {
			return fmt.Errorf("exec needs a command after --: podlab exec %s -- COMMAND [ARG...]", pod)
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		bin, err := runc.FindRuntime(c.String("runtime"))
		if err != nil {
			return err
		}
		s, err := openAPI(c, false)
		if err != nil {
			return err
		}
		defer s.Close()
		stdio := runc.IO{Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
		if c.Bool("stdin") || c.Bool("tty") {
			stdio.Stdin = c.App.Reader
		}
		opts := up.ExecOptions{
			StateDir: dir, Client: s.client, Namespace: namespaceOf(c), Pod: pod, Container: c.String("container"),
			Args: cmd, Runtime: bin, IO: stdio, Tty: c.Bool("tty"),
		}
		if c.Bool("debug") {
			opts.OnCommand = traceTo(c.App.ErrWriter)
		}
		t, code, err := up.Exec(c.Context, opts)
		if t != nil && len(t.Defaulted) > 0 {
			fmt.Fprintf(c.App.ErrWriter, "Defaulted container %q out of: %v\n", t.Container, t.Defaulted)
		}
		if err != nil {
			return err
		}
		if code != 0 {
			return cli.Exit(fmt.Sprintf("command terminated with exit code %d", code), code)
		}
		return nil
	},
}
