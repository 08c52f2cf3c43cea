package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
)

var deleteCommand = &cli.Command{
	Name:      "delete",
	Usage:     "delete objects through the API server, as kubectl delete",
	ArgsUsage: "RESOURCE NAME... | RESOURCE/NAME [-n NS] [--force] [--grace-period N]",
	Description: `Deleting a pod is graceful. A pod that a node runs is not removed at once:
the API server sets its deletionTimestamp (now plus the grace period,
terminationGracePeriodSeconds, 30 s by default) and the pod reads
Terminating. The node's kubelet sees the change, stops the containers
(SIGTERM, then SIGKILL when the grace period is over), and only then deletes
the pod for good, with a grace period of 0.

A pod no node runs (not scheduled yet, or finished) is removed at once, and
so is any pod with --force (kubectl delete --force --grace-period=0): the
object goes, whatever its kubelet is still doing.

Deleting a namespace marks it Terminating, deletes everything in it, and
removes it when its last pod is gone. default, kube-system and kube-public
may not be deleted.`,
	Flags: []cli.Flag{
		namespaceFlag(),
		&cli.BoolFlag{Name: "force", Usage: "remove at once, without waiting for the kubelet"},
		&cli.Int64Flag{Name: "grace-period", Value: -1, DefaultText: "the pod's own", Usage: "seconds the kubelet gives the containers to stop"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() < 1 {
			return fmt.Errorf("podlab delete needs an object: podlab delete pod NAME")
		}
		res, names, err := resourceArgs(c.Args().Slice())
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return fmt.Errorf("podlab delete %s needs a name: podlab delete %s NAME", res.Name, res.Singular)
		}
		opts := apiserver.DeleteOptions{Force: c.Bool("force")}
		if g := c.Int64("grace-period"); g >= 0 {
			opts.GracePeriodSeconds = &g
		}
		s, err := openAPI(c, true)
		if err != nil {
			return err
		}
		defer s.Close()
		w := c.App.Writer
		for _, name := range names {
			fmt.Fprintf(w, "DELETE %s %q, through the API server's gate:\n", res.Name, name)
			obj, err := s.client.Delete(c.Context, res.Name, namespaceOf(c), name, opts)
			if err != nil {
				return err
			}
			// kubectl's line; --force means a grace period of 0, unless one is given
			fmt.Fprintln(w, kubectl.DeletedLine(res.Kind, res.Group, namespaceOf(c), res.Namespaced, name, c.Bool("force") && c.Int64("grace-period") <= 0))
			switch o := obj.(type) {
			case nil:
			case *corev1.Pod:
				fmt.Fprintf(w, "  it is Terminating until the kubelet of node %q stops its containers (by %s)\n",
					o.Spec.NodeName, o.DeletionTimestamp.UTC().Format("15:04:05"))
			default:
				fmt.Fprintln(w, "  it is Terminating until what is in it is gone")
			}
		}
		return nil
	},
}
