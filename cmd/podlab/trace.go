package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/trace"
)

var traceCommand = &cli.Command{
	Name:      "trace",
	Usage:     "the timeline of a pod: each stage, the component that did it, the store revision it wrote, and when",
	ArgsUsage: "pod/NAME | NAME | deployment/NAME [-n NS] [-o text|mermaid|json]",
	Description: `Kubernetes keeps no timeline of a pod, yet the store holds one. Every
write of the pod is a revision of etcd, and a watch from an old revision
replays them in order: the API server's create, the scheduler's binding
(spec.nodeName set), each status its kubelet wrote, the deletionTimestamp a
delete set, and the kubelet's final delete. Components also record what
they did as Events, each a write with its own revision: the
replicaset-controller's SuccessfulCreate, the scheduler's Scheduled, the
kubelet's Pulling, Pulled, Created, Started and Killing.

podlab trace watches pods and events from revision 1, compares each
version of the pod with the one before to name the stage it was, and lays
the Events between them: the chain, as it really ran, with who did
each step. Revisions order every write exactly; times are another matter:
objects keep timestamps to the second, while an Event's name holds its time
to the nanosecond (client-go names an event <object>.<UnixNano in hex>). A
pod write's time is placed between the Events around it, and marked ~. T+ms
counts from the create: the pod's creationTimestamp, a whole second.

The store compacts its history as it grows: a watch from revision 1 then
fails with "too old resource version" (410 Gone), and trace says from which
revision on the log is complete.

  podlab trace pod/web                  the table, then create -> Running
  podlab trace web -o mermaid           a sequenceDiagram (paste it into a
                                        GitHub Markdown file in a mermaid block)
  podlab trace web -o json              {t_ms, time, revision, component,
                                        stage, detail} for tools
  podlab trace deployment/web           the Deployment, its ReplicaSets and
                                        all their pods, merged`,
	Flags: []cli.Flag{
		namespaceFlag(),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: strings.Join(trace.Formats(), ", ")},
	},
	Action: func(c *cli.Context) error {
		format := c.String("output")
		if err := trace.ValidFormat(format); err != nil {
			return err
		}
		target, err := trace.ParseTarget(c.Args().Slice())
		if err != nil {
			return err
		}
		s, err := openAPI(c, false)
		if err != nil {
			return err
		}
		defer s.Close()
		tl, err := trace.Trace(c.Context, s.client, namespaceOf(c), target)
		if err != nil {
			return err
		}
		return trace.Write(c.App.Writer, tl, format)
	},
}
