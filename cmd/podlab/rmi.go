package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/units"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
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

Containers already unpacked into bundles keep running: a native bundle's
rootfs is a copy, not a link to the store. With the overlayfs snapshotter
(podlab unpack --snapshotter overlayfs), the layers' snapshots in
<state-dir>/snapshots that no stored image uses any more are removed too,
as containerd's garbage collector removes snapshots no image references;
those a container's rootfs still stands on stay until its bundle goes.`,
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
				fmt.Fprintf(c.App.Writer, "  deleted %-8s %s  %s\n", b.Kind, b.Path, units.HumanSize(b.Size))
			}
			for _, b := range res.Kept {
				fmt.Fprintf(c.App.Writer, "  kept    %-8s %s  (another image uses it)\n", b.Kind, pull.ShortDigest(b.Digest))
			}
			fmt.Fprintf(c.App.Writer, "Deleted %d blob(s), freed %s\n", len(res.Deleted), units.HumanSize(res.BytesFreed))
		}
		return gcSnapshots(c, store)
	},
}

// gcSnapshots removes the state directory's snapshots no stored image
// uses (and no container's rootfs stands on).
func gcSnapshots(c *cli.Context, store *pull.Store) error {
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	root := statedir.Layout{Dir: dir}.SnapshotsDir()
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	snaps, err := unpack.OpenSnapshots(root)
	if err != nil {
		return err
	}
	imgs, err := store.Images()
	if err != nil {
		return err
	}
	keep, err := unpack.KeepImages(imgs)
	if err != nil {
		return err
	}
	removed, err := snaps.GC(keep)
	for _, sn := range removed {
		fmt.Fprintf(c.App.Writer, "  removed snapshot %d (%s): no stored image uses it\n", sn.ID, pull.ShortDigest(v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(sn.Name, "sha256:")}))
	}
	return err
}
