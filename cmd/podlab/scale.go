package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	appsv1 "k8s.io/api/apps/v1"
)

var scaleCommand = &cli.Command{
	Name:      "scale",
	Usage:     "set a Deployment's or ReplicaSet's replica count, as kubectl scale",
	ArgsUsage: "deployment/NAME --replicas N [-n NS]",
	Description: `kubectl scale changes one number, spec.replicas, and the API server stores
it (a new generation of the object). Nothing else is done here: the
controllers notice the change through their watch and create or delete
pods until the count matches, which is the whole idea of a controller.
(kubectl writes through the scale subresource; podlab updates the object.)`,
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "replicas", Value: -1, Usage: "the new number of replicas (required)"},
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
		s, err := openAPI(c, true)
		if err != nil {
			return err
		}
		defer s.Close()
		obj, err := s.client.Get(c.Context, res.Name, namespaceOf(c), names[0])
		if err != nil {
			return err
		}
		replicas := int32(n)
		var was int32
		switch o := obj.(type) {
		case *appsv1.Deployment:
			was = *o.Spec.Replicas
			o.Spec.Replicas = &replicas
		case *appsv1.ReplicaSet:
			was = *o.Spec.Replicas
			o.Spec.Replicas = &replicas
		}
		fmt.Fprintf(c.App.Writer, "update %s spec.replicas %d -> %d, through the API server's gate:\n", kindName(obj), was, n)
		updated, err := s.client.Update(c.Context, obj)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "%s scaled (generation %d, resourceVersion %s): the controller-manager makes the pods match\n", kindName(updated), updated.GetGeneration(), updated.GetResourceVersion())
		return nil
	},
}
