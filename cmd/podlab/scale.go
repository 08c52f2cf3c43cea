package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/kubectl"
)

var scaleCommand = &cli.Command{
	Name:      "scale",
	Usage:     "set a Deployment's or ReplicaSet's replica count, as kubectl scale",
	ArgsUsage: "deployment/NAME --replicas N [--current-replicas N] [--resource-version RV] [-n NS]",
	Description: `kubectl scale changes one number, spec.replicas, and the API server stores
it (a new generation of the object). Nothing else is done here: the
controllers notice the change through their watch and create or delete
pods until the count matches, which is the whole idea of a controller.

It writes through the scale subresource (deployments/NAME/scale), which
shows only the count: a JSON merge patch {"spec":{"replicas":N}}. It names
no resourceVersion, so it cannot conflict with another write: whatever else
changed meanwhile, the count is N.

With --current-replicas or --resource-version it first reads the object and
checks them ("Expected replicas to be 3, was 2"), then writes the scale at
the resourceVersion it read; if another write came first (409 Conflict), it
reads and checks again, every second, for up to five minutes.`,
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "replicas", Value: -1, Usage: "the new number of replicas (required)"},
		&cli.IntFlag{Name: "current-replicas", Value: -1, Usage: "precondition: scale only if the current count is this (-1: no condition)"},
		&cli.StringFlag{Name: "resource-version", Usage: "precondition: scale only if the object's resourceVersion is this"},
		namespaceFlag(),
	},
	Action: func(c *cli.Context) error {
		if c.NArg() < 1 {
			return fmt.Errorf("podlab scale needs an object: podlab scale deployment/NAME --replicas N")
		}
		n := c.Int("replicas")
		if n < 0 {
			return fmt.Errorf("podlab scale needs --replicas N, with N at least 0")
		}
		res, names, err := resourceArgs(c.Args().Slice())
		if err != nil {
			return err
		}
		if res.Name != "deployments" && res.Name != "replicasets" {
			return fmt.Errorf("podlab can scale deployments and replicasets, not %s", res.Name)
		}
		if len(names) != 1 {
			return fmt.Errorf("podlab scale needs one name: podlab scale %s/NAME --replicas N", res.Singular)
		}
		var pre *kubectl.ScalePrecondition
		if c.Int("current-replicas") != -1 || c.String("resource-version") != "" {
			pre = &kubectl.ScalePrecondition{Size: c.Int("current-replicas"), ResourceVersion: c.String("resource-version")}
		}
		s, err := openAPI(c, true)
		if err != nil {
			return err
		}
		defer s.Close()
		name := restName(res) + "/" + names[0]
		if pre == nil {
			fmt.Fprintf(c.App.Writer, "%s: PATCH %s/%s/scale {\"spec\":{\"replicas\":%d}} (a JSON merge patch with no resourceVersion: it cannot conflict)\n", name, res.Name, names[0], n)
		}
		scale, err := kubectl.Scale(c.Context, s.client, res.Name, namespaceOf(c), names[0], int32(n), pre, kubectl.ScaleRetry())
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "%s scaled (replicas %d, resourceVersion %s): the controller-manager makes the pods match\n", name, scale.Spec.Replicas, scale.ResourceVersion)
		return nil
	},
}
