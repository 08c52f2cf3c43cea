package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/kubelet"
)

var logsCommand = &cli.Command{
	Name:      "logs",
	Usage:     "print a container's log, as kubectl logs does",
	ArgsUsage: "POD [-c CONTAINER] [-f] [-n NAMESPACE] [--previous] [--timestamps]",
	Description: `kubectl logs asks the API server for pods/log; the API server asks the
kubelet of the pod's node (spec.nodeName), and the kubelet reads the file
the container runtime wrote: /var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log.

The runtime's shim holds the container's stdout and stderr and writes every
line to that file in the CRI log format:

  2026-12-02T10:00:00.12345678Z stdout F Hello from podlab/hello!

(the time, in RFC 3339 with trailing zeros dropped as containerd writes it,
the stream, F for a full line or P for part of a longer one, and the text).
kubectl logs prints only the text; --timestamps puts the time before it, as
the kubelet's ReadLogs does (not the stream nor the tag), in the kubelet's
fixed width, always nine digits:

  2026-12-02T10:00:00.123456780Z Hello from podlab/hello!

To see the lines as stored, read the file.

podlab logs reads the pod through the API server, finds its node, and reads
the container's log straight from that node's directory, where the
kubelet's container config told the runtime to write it:
<state-dir>/nodes/<node>/logs/pods/<namespace>_<pod>_<uid>/<container>/<N>.log,
N the restart count. -f follows it until the pod's status says the
container exited (or Ctrl-C); --previous reads the run before a restart,
which the kubelet keeps.

Examples:
  podlab logs web
  podlab logs web -c sidecar -f
  podlab logs crash --previous`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "container", Aliases: []string{"c"}, Usage: "the container (default: the pod's first)"},
		&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the container exits"},
		&cli.BoolFlag{Name: "previous", Aliases: []string{"p"}, Usage: "the log of the container's previous run"},
		&cli.BoolFlag{Name: "timestamps", Usage: "start each line with the time it was written (RFC 3339, nine digits of nanoseconds), as kubectl logs --timestamps"},
		namespaceFlag(),
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return fmt.Errorf("logs needs one pod name: podlab logs POD [-c CONTAINER]")
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		s, err := openAPI(c, false)
		if err != nil {
			return err
		}
		defer s.Close()
		obj, err := s.client.Get(c.Context, "pods", namespaceOf(c), c.Args().First())
		if err != nil {
			return err
		}
		pod := obj.(*corev1.Pod)
		if cs := pod.Spec.Containers; c.String("container") == "" && len(cs) > 1 {
			names := make([]string, len(cs))
			for i := range cs {
				names[i] = cs[i].Name
			}
			fmt.Fprintf(c.App.ErrWriter, "Defaulted container %q out of: %s\n", names[0], strings.Join(names, ", "))
		}
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		opts := kubelet.LogsOptions{
			Container: c.String("container"), Previous: c.Bool("previous"),
			Follow: c.Bool("follow"), TimestampPrefix: c.Bool("timestamps"),
		}
		if opts.Follow {
			// -f ends when the pod's status, as its kubelet reports it,
			// says the run is over (or a later run's log appears).
			name := opts.Container
			if name == "" && len(pod.Spec.Containers) > 0 {
				name = pod.Spec.Containers[0].Name
			}
			var last time.Time
			opts.Exited = func(restart int) bool {
				if time.Since(last) < time.Second {
					return false
				}
				last = time.Now()
				obj, err := s.client.Get(ctx, "pods", pod.Namespace, pod.Name)
				if err != nil {
					return true // gone
				}
				for _, cs := range obj.(*corev1.Pod).Status.ContainerStatuses {
					if cs.Name == name {
						return cs.State.Running == nil || int(cs.RestartCount) != restart
					}
				}
				return false
			}
		}
		_, err = kubelet.Logs(ctx, dir, pod, c.App.Writer, opts)
		return err
	},
}
