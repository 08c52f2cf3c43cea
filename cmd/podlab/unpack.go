package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/units"
	"github.com/podlab/podlab/steps/last"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
)

var unpackCommand = &cli.Command{
	Name:      "unpack",
	Usage:     "unpack a pulled image's layers into an OCI bundle's rootfs (step 10)",
	ArgsUsage: "[REF] [--bundle DIR] [--force] [--snapshotter native|overlayfs] | --remove --bundle DIR",
	Description: `Step 10 of creating a Pod: before the container can start, the container
runtime prepares its root filesystem from the image in its content store.

LAYERS. An image is a stack of layers, listed in its manifest from the
bottom up. Each layer is a tar archive, usually gzip- or zstd-compressed, of
what it changes: the files it adds or replaces. Applying every layer in order
onto an empty directory gives the image's filesystem; a file in an upper
layer replaces the same path from a lower one.

DIGESTS AND DIFF_IDS. The manifest names each layer by the sha256 of its
COMPRESSED bytes (its digest: what the registry serves and the content store
keeps, blobs/sha256/<hex>). The image config names each layer by its
diff_id, the sha256 of the UNCOMPRESSED tar: compression is not part of the
image's identity. podlab hashes every layer as it decompresses it and refuses
the image when a hash is not the config's diff_id, so the files on disk are
exactly what the image's author built.

WHITEOUTS. A tar cannot say "delete". An upper layer deletes NAME of a lower
layer with an empty entry named .wh.NAME next to it (a WHITEOUT), and hides
everything lower layers put in a directory with an entry named .wh..wh..opq
inside it (an OPAQUE WHITEOUT: the directory is replaced, not merged). The
markers themselves never appear in the rootfs.

THE BUNDLE. The result is an OCI runtime bundle: a directory (mode 0700)
holding rootfs/, the container's files. "podlab spec" adds config.json next
to it, and runc needs nothing else.

TWO SNAPSHOTTERS. With --snapshotter native (the default here, because
seeing every layer applied in order is the lesson) podlab applies the
layers, with containerd's own archive code (whiteouts handled, and no path
in a layer can reach outside rootfs/, not through ../, absolute paths,
symlinks or hard links), one after the other into one plain directory: a
full copy for every container. As root it applies them on a thread whose
root directory is the rootfs (chroot, as Docker's chrootarchive does), so
the kernel confines the paths too.

With --snapshotter overlayfs it does what containerd's overlayfs snapshotter
does, and what a node's runtime does by default (the kubelet uses overlayfs
where the kernel has it): each layer is unpacked ONCE, into its own
directory <state-dir>/snapshots/N/fs (a "committed snapshot", found by the
layer's chain ID, named by a short number N; cat <state-dir>/snapshots/index),
the layers of an image in parallel. A deleted file stays in its layer's
snapshot as overlay's whiteout (a 0/0 character device), an opaque
directory as the attribute trusted.overlay.opaque=y. The container's rootfs
is then a mount: "mount -t overlay" of the image's snapshots, top first, as
read-only lowerdirs, plus an upperdir and workdir of the container's own
(an "active snapshot"). A second container of the same image unpacks
nothing: it gets its own upper directory and a mount, in milliseconds, and
what it writes the other never sees. The bundle's snapshot.json records
the mount; "podlab rmi" removes the snapshots no stored image uses.

An image of more than 125 layers is refused before anything is unpacked
(Docker's limit: overlay stacks at most 500 lowers, and mount(2) takes its
options in one 4096-byte page, which is why snapshots have short numbers).

The layers are unpacked into a temporary directory (next to the bundle, or
snapshots/tmp-*) and renamed into place only when all of them are applied
and verified: an interrupted or failed unpack leaves nothing half made, and
a layer that fails half-way is never committed as a snapshot. An existing bundle is
kept unless --force is given, and with --force it is replaced only once the
new one is complete (its config.json goes too: run "podlab spec" again).
Without --bundle the bundle goes to <state-dir>/bundles/<name>, the name
being the repository's last path element (nginx for docker.io/library/nginx).
Without REF it unpacks the image pulled last, and says so ("unpacking nginx
(the image pulled last) into bundles/nginx"); podlab spec then takes the
bundle unpacked last.

Examples:
  podlab pull nginx
  podlab unpack
  podlab unpack nginx
  podlab unpack 127.0.0.1:5001/podlab/hello:1.0 --bundle $PODLAB_STATE_DIR/bundles/hello --force
  ls -l $PODLAB_STATE_DIR/bundles/hello/rootfs
  podlab unpack hello --snapshotter overlayfs --bundle $PODLAB_STATE_DIR/bundles/hello-2
  cat $PODLAB_STATE_DIR/snapshots/index; mount | grep overlay
  podlab unpack --remove --bundle $PODLAB_STATE_DIR/bundles/hello-2`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:        "bundle",
			Usage:       "the bundle `DIR` to create; the image's files go to DIR/rootfs",
			DefaultText: "<state-dir>/bundles/<name>",
		},
		&cli.BoolFlag{
			Name:  "force",
			Usage: "replace an existing bundle (only once the new one is complete)",
		},
		&cli.BoolFlag{
			Name:  "remove",
			Usage: "remove the --bundle instead: unmount an overlay rootfs and remove its upper directory (what CRI RemoveContainer does to a rootfs)",
		},
		&cli.StringFlag{
			Name:  "snapshotter",
			Usage: "`native` (every layer applied into the bundle's own rootfs) or overlayfs (a snapshot per layer in <state-dir>/snapshots, the rootfs an overlay mount of them)",
			Value: string(unpack.Native),
		},
		insideCreateFlag(), namespaceFlag(), containerFlag(),
	},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, "unpack")
		}
		if c.Bool("remove") {
			return removeBundle(c)
		}
		if c.NArg() > 1 {
			return fmt.Errorf("unpack takes one image reference, got %q: e.g. `podlab unpack nginx --bundle DIR`", c.Args().Slice())
		}
		snapshotter, err := unpack.ParseSnapshotter(c.String("snapshotter"))
		if err != nil {
			return err
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		ref, remembered := c.Args().First(), false
		if ref == "" {
			rec, err := loadLast(c)
			if err != nil {
				return err
			}
			if rec.Pulled == "" {
				return fmt.Errorf("no image given, and none pulled yet in %s: pull one first (`podlab pull nginx`), or name one: podlab unpack REF", dir)
			}
			ref, remembered = rec.Pulled, true
		}
		store, err := pull.OpenStore(pull.StoreDir(dir))
		if err != nil {
			return err
		}
		img, err := store.Image(ref)
		if err != nil {
			if remembered && errors.Is(err, pull.ErrImageNotFound) {
				return fmt.Errorf("%w: %s, the image pulled last, is gone from the content store (removed with podlab rmi?): pull it again: podlab pull %s", pull.ErrImageNotFound, ref, ref)
			}
			if errors.Is(err, pull.ErrImageNotFound) && !strings.Contains(err.Error(), "podlab pull") {
				err = fmt.Errorf("%w (run `podlab pull %s` first)", err, ref)
			}
			return err
		}
		w := c.App.Writer
		bundle := c.String("bundle")
		switch {
		case bundle == "" && remembered:
			bundle = defaultBundle(dir, ref)
			fmt.Fprintf(w, "unpacking %s (the image pulled last) into %s\n", ref, inState(dir, bundle))
		case bundle == "":
			bundle = defaultBundle(dir, ref)
			fmt.Fprintf(w, "No --bundle given: unpacking into %s\n", bundle)
		case remembered:
			fmt.Fprintf(w, "unpacking %s (the image pulled last) into %s\n", ref, bundle)
		}
		if bundle, err = filepath.Abs(bundle); err != nil {
			return err
		}
		opts := unpack.Options{
			Force:       c.Bool("force"),
			Snapshotter: snapshotter,
			Start:       func(tmp string, n int) { printUnpackStart(w, ref, img, bundle, tmp, n) },
			Progress:    func(l unpack.LayerResult) { printUnpackLayer(w, l) },
		}
		if opts.Snapshotter == unpack.Overlayfs {
			if opts.Snapshots, err = unpack.OpenSnapshots(statedir.Layout{Dir: dir}.SnapshotsDir()); err != nil {
				return err
			}
			opts.Start = func(_ string, n int) { printSnapshotStart(w, ref, img, opts.Snapshots, n) }
		}
		lessGC()
		// Ctrl-C cancels the unpack, which then removes its temporary directory.
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := unpack.Unpack(ctx, img, bundle, opts)
		if err != nil {
			return err
		}
		recordLast(c, func(r *last.Record) { r.Unpacked, r.UnpackedImage = res.Bundle, ref })
		printUnpackResult(w, ref, res)
		return nil
	},
}

// removeBundle is unpack --remove --bundle DIR.
func removeBundle(c *cli.Context) error {
	bundle := c.String("bundle")
	if bundle == "" || c.NArg() != 0 {
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		return fmt.Errorf("unpack --remove needs --bundle DIR and no image, e.g. `podlab unpack --remove --bundle %s`", filepath.Join(dir, "bundles", "hello"))
	}
	bs, err := unpack.ReadBundleSnapshot(bundle)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(bundle, "rootfs")); err != nil {
		return fmt.Errorf("%s has no rootfs/: not a bundle podlab unpack made (nothing removed)", bundle)
	}
	if err := unpack.RemoveBundle(bundle); err != nil {
		return err
	}
	if bs != nil {
		fmt.Fprintf(c.App.Writer, "Unmounted %s/rootfs and removed its upper directory %s/%d\n", bundle, bs.Snapshots, bs.Active)
	}
	fmt.Fprintf(c.App.Writer, "Removed %s\n", bundle)
	return nil
}

// lessGC lets the heap grow to 5 times what is live before the garbage
// collector runs (GOGC=400), unless GOGC is set. archive.Apply allocates a few
// short path strings for each of its system calls while the live heap stays
// at a few MB, so with the default the collector ran about 50 times on the
// bench image; at 400, unpacking 32,000 small files took 7-10% less time.
func lessGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

func printUnpackStart(w io.Writer, ref string, img v1.Image, bundle, tmp string, layers int) {
	fmt.Fprintf(w, "Unpacking %s", ref)
	if d, err := img.Digest(); err == nil {
		fmt.Fprintf(w, " (manifest %s)", d)
	}
	fmt.Fprintf(w, "\n  %d layers, bottom first, each one's sha256 checked against the config's diff_id,\n", layers)
	fmt.Fprintf(w, "  into %s/rootfs,\n  renamed to %s once every layer is applied and verified:\n", tmp, bundle)
}

func printSnapshotStart(w io.Writer, ref string, img v1.Image, snaps *unpack.Snapshots, layers int) {
	fmt.Fprintf(w, "Unpacking %s with the overlayfs snapshotter", ref)
	if d, err := img.Digest(); err == nil {
		fmt.Fprintf(w, " (manifest %s)", d)
	}
	fmt.Fprintf(w, "\n  %d layers, each into a snapshot of its own in %s (cat %s/index),\n", layers, snaps.Root, snaps.Root)
	fmt.Fprintf(w, "  unless it has one already; the missing ones in parallel, each one's sha256 checked against\n")
	fmt.Fprintf(w, "  the config's diff_id, and committed (renamed to its number) only then:\n")
}

func printUnpackLayer(w io.Writer, l unpack.LayerResult) {
	if l.Reused {
		fmt.Fprintf(w, "  layer %-3d %s  already unpacked (snapshot %d)\n", l.Index+1, pull.ShortDigest(l.Digest), l.Snapshot)
		return
	}
	fmt.Fprintf(w, "  layer %-3d %s  %s (%s)  %s -> %s uncompressed\n",
		l.Index+1, pull.ShortDigest(l.Digest), l.MediaType, l.Compression,
		units.HumanSize(l.Compressed), units.HumanSize(l.Bytes))
	fmt.Fprintf(w, "            %s  diff_id %s ok  %s\n", countsLine(l.Counts), pull.ShortDigest(l.DiffID), roundDuration(l.Duration))
	if l.Snapshot != 0 {
		fmt.Fprintf(w, "            committed as snapshot %d\n", l.Snapshot)
	}
}

func countsLine(c unpack.Counts) string {
	s := fmt.Sprintf("files %d  dirs %d  symlinks %d  hardlinks %d", c.Files, c.Dirs, c.Symlinks, c.Hardlinks)
	if c.Others > 0 {
		s += fmt.Sprintf("  devices/fifos %d", c.Others)
	}
	return s + fmt.Sprintf("  whiteouts %d  opaque dirs %d", c.Whiteouts, c.OpaqueDirs)
}

func printUnpackResult(w io.Writer, ref string, res *unpack.Result) {
	if res.Snapshot != nil {
		printSnapshotResult(w, ref, res)
		return
	}
	t := res.Total
	fmt.Fprintf(w, "\nUnpacked %d layers in %s: %d files written, %s uncompressed, every diff_id matched\n",
		len(res.Layers), roundDuration(res.Duration), t.Files, units.HumanSize(t.Bytes))
	if t.Whiteouts+t.OpaqueDirs > 0 {
		fmt.Fprintf(w, "  whiteouts applied: %d; opaque whiteouts applied: %d (what lower layers had put there is gone)\n", t.Whiteouts, t.OpaqueDirs)
	}
	if res.Replaced {
		fmt.Fprintln(w, "  --force: the old bundle was replaced, and its config.json with it")
	}
	if len(res.Layers) > 0 && res.Layers[0].Chrooted {
		fmt.Fprintln(w, "  containerd's archive code applied each layer on a thread chrooted into the rootfs:")
		fmt.Fprintln(w, "  no path in a layer could reach outside it, by containerd's checks and by the kernel's")
	} else {
		fmt.Fprintln(w, "  containerd's archive code applied each layer, resolving every path inside the rootfs")
		fmt.Fprintln(w, "  (not root: no chroot, so containerd's own checks are what keeps paths inside)")
	}
	fmt.Fprintf(w, "\nBundle (an OCI runtime bundle, mode 0700): %s\n", res.Bundle)
	fmt.Fprintf(w, "  rootfs/      %s  the container's root filesystem (mode 0755); ls it\n", res.RootFS)
	fmt.Fprintf(w, "  config.json  not there yet: \"podlab spec\" writes it\n")

	fmt.Fprintln(w, "\nKubernetes: this is the container runtime preparing the container's root filesystem")
	fmt.Fprintln(w, "from the pulled image, after PullImage and before the container is created. containerd")
	fmt.Fprintln(w, "would apply each layer once into a snapshot and stack the snapshots with overlayfs")
	fmt.Fprintln(w, "(shared by every container of the image, written to in a thin upper layer); podlab")
	fmt.Fprintln(w, "unpacks into a plain directory so that you can look at every file.")
	fmt.Fprintf(w, "\nNext: podlab spec   (or in full: podlab spec --bundle %s --image %s)\n", res.Bundle, ref)
}

// roundDuration keeps two or three significant digits: 81ms, 1.24s, 350µs.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

func printSnapshotResult(w io.Writer, ref string, res *unpack.Result) {
	reused := 0
	for _, l := range res.Layers {
		if l.Reused {
			reused++
		}
	}
	sn := res.Snapshot
	fmt.Fprintf(w, "\nUnpacked %d of %d layers in %s (%d were snapshots already): %d files written, %s uncompressed\n",
		len(res.Layers)-reused, len(res.Layers), roundDuration(res.Duration), reused, res.Total.Files, units.HumanSize(res.Total.Bytes))
	fmt.Fprintf(w, "\nThe container's rootfs is an overlay mount (recorded in %s/snapshot.json):\n  %s\n", res.Bundle, sn.Mount)
	fmt.Fprintf(w, "  lowerdir  the image's snapshots %v, top first, read-only, shared with every container of the image\n", sn.Lowers)
	fmt.Fprintf(w, "  upperdir  %s/%d/fs, snapshot %d, this container's own: what it writes or deletes goes there\n", sn.Snapshots, sn.Active, sn.Active)
	fmt.Fprintf(w, "  workdir   %s/%d/work, overlay's scratch space\n", sn.Snapshots, sn.Active)
	fmt.Fprintf(w, "\nBundle (an OCI runtime bundle, mode 0700): %s\n", res.Bundle)
	fmt.Fprintf(w, "  rootfs/      %s  the overlay mount (mount | grep %s)\n", res.RootFS, res.RootFS)
	fmt.Fprintf(w, "  config.json  not there yet: \"podlab spec\" writes it\n")
	fmt.Fprintln(w, "\nKubernetes: this is what containerd's overlayfs snapshotter does for CreateContainer: each layer")
	fmt.Fprintln(w, "unpacked once (at PullImage), and a thin writable layer per container over the shared ones.")
	fmt.Fprintf(w, "\nNext: podlab spec --bundle %s --image %s\n", res.Bundle, ref)
}
