package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/pull"
)

var rmiCommand = &cli.Command{
	Name:      "rmi",
	Usage:     "remove an image from the content store, and the blobs only it used",
	ArgsUsage: "REF [REF...]",
	Description: `Removes an image as "crictl rmi" does: first its name goes from the content
store's index.json, then every blob it used (manifest, config, layers) that
no other stored image uses is deleted from blobs/sha256/. A layer shared with
another image stays: the store keeps each blob once, and deletes it only when
nothing names it any more. containerd does the same in two steps (delete the
image record, then its garbage collector removes unreferenced content); the
kubelet's image garbage collector calls RemoveImage when the node's disk
fills up.

Containers already unpacked into bundles keep running: a bundle's rootfs is
a copy, not a link to the store.`,
	Action: func(c *cli.Context) error {
		if c.NArg() == 0 {
			return fmt.Errorf("rmi needs an image reference, e.g. `podlab rmi nginx` (see `podlab images`)")
		}
		store, err := contentStore(c)
		if err != nil {
			return err
		}
		for _, ref := range c.Args().Slice() {
			res, err := store.Remove(ref)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "Untagged %s (its entry is gone from %s)\n", res.Reference, res.IndexPath)
			for _, b := range res.Deleted {
				fmt.Fprintf(c.App.Writer, "  deleted %-8s %s  %s\n", b.Kind, b.Path, pull.HumanSize(b.Size))
			}
			for _, b := range res.Kept {
				fmt.Fprintf(c.App.Writer, "  kept    %-8s %s  (another image uses it)\n", b.Kind, pull.ShortDigest(b.Digest))
			}
			fmt.Fprintf(c.App.Writer, "Deleted %d blob(s), freed %s\n", len(res.Deleted), pull.HumanSize(res.BytesFreed))
		}
		return nil
	},
}
