package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/units"
	"github.com/podlab/podlab/steps/pull"
)

var imagesCommand = &cli.Command{
	Name:  "images",
	Usage: "list the images in the content store (like crictl images)",
	Description: `Lists what the runtime has pulled, as "crictl images" does on a node: the
images named in the content store's index.json (<state-dir>/content).

Each line is one name (REPOSITORY:TAG) pointing at one manifest DIGEST. Two
tags may point at the same manifest, and two images may share layers: the
content store keeps every blob once, by its sha256 digest, however many
images use it. SIZE is the config plus the compressed layers, what was (or
would be) downloaded; unpacked on disk the layers take more.

The kubelet reads this list to decide whether an image with
imagePullPolicy: IfNotPresent needs pulling, and its image garbage collector
removes unused images from it when the disk fills up.`,
	Action: func(c *cli.Context) error {
		store, err := contentStore(c)
		if err != nil {
			return err
		}
		images, err := store.List()
		if err != nil {
			return err
		}
		if len(images) == 0 {
			fmt.Fprintf(c.App.Writer, "No images in %s yet: try `podlab pull nginx`.\n", store.Dir())
			return nil
		}
		tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "REPOSITORY\tTAG\tDIGEST\tPLATFORM\tSIZE")
		for _, im := range images {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", im.Repository, im.Tag, pull.ShortDigest(im.Digest), im.Platform, units.HumanSize(im.Size))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "\n%d image(s) in the content store %s (names in %s)\n", len(images), store.Dir(), store.IndexPath())
		return nil
	},
}
