package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/pkg/archive"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/log"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sirupsen/logrus"
)

// Options change how Unpack works. The zero value unpacks into a bundle
// directory that must not exist yet (or be empty).
type Options struct {
	// Force replaces an existing bundle. The old bundle is swapped out only
	// after the new one is complete, so a failed unpack leaves it as it was.
	Force bool

	// NoSameOwner leaves every file owned by the caller instead of the
	// uid/gid the layer names (tar's --no-same-owner). A caller that is not
	// root cannot give files away, so for it this is always on.
	NoSameOwner bool

	// Shift, if set, gives the rootfs's files owners in a user namespace's
	// range (see ShiftOwnership) before the bundle is put in place: the
	// bundle appears already shifted, or not at all.
	Shift *IDShift

	// Start, if set, is called once the bundle directory is known to be
	// free (or Force is set), before the first layer: with the temporary
	// directory the layers are applied into and the number of layers.
	Start func(tmpDir string, layers int)

	// Progress, if set, is called after each layer is applied and verified
	// (with the overlayfs snapshotter: once every layer is committed, in
	// order, reused ones too).
	Progress func(LayerResult)

	// Snapshotter is how the rootfs is made: Native (the zero value) applies
	// every layer into the bundle's own rootfs/; Overlayfs unpacks only the
	// layers Snapshots has no committed snapshot of, then mounts the rootfs
	// as an overlay of them with an upper directory of its own. With Shift
	// set, Overlayfs mounts idmapped lowers (the shared snapshots seen with
	// the range's ids, nothing chowned) and gives the upper directory to
	// the range's root; where the kernel cannot, it falls back to Native
	// (Result.Fallback says why).
	Snapshotter Snapshotter

	// Snapshots is the snapshots directory Overlayfs uses.
	Snapshots *Snapshots

	// Key names the container's active snapshot in the index (the kubelet:
	// <pod uid>/<container>); the bundle's path when empty.
	Key string

	// readAhead is how many chunks decompression may run ahead of
	// archive.Apply; 0 means maxChunks. Tests make it small.
	readAhead int
}

// Counts is what a layer (or a whole image) put into the rootfs, counted
// from the tar headers containerd's archive.Apply read.
type Counts struct {
	Files      int // regular files written
	Dirs       int // directories created or whose metadata was applied
	Symlinks   int // symbolic links
	Hardlinks  int // hard links (tar "link" entries)
	Others     int // device nodes and FIFOs
	Whiteouts  int // ".wh.NAME" entries: NAME of a lower layer was deleted
	OpaqueDirs int // ".wh..wh..opq" entries: a lower layer's directory was emptied

	// Bytes is the size of the uncompressed tar stream: what the diff_id
	// hashes.
	Bytes int64
}

func (c *Counts) add(o Counts) {
	c.Files += o.Files
	c.Dirs += o.Dirs
	c.Symlinks += o.Symlinks
	c.Hardlinks += o.Hardlinks
	c.Others += o.Others
	c.Whiteouts += o.Whiteouts
	c.OpaqueDirs += o.OpaqueDirs
	c.Bytes += o.Bytes
}

// count is an archive.Filter: it sees every tar header archive.Apply reads,
// after the name is cleaned and before the entry is applied, and lets every
// entry through.
func (c *Counts) count(hdr *tar.Header) (bool, error) {
	base := path.Base(filepath.ToSlash(hdr.Name))
	switch {
	case base == opaqueWhiteout:
		c.OpaqueDirs++
	case strings.HasPrefix(base, whiteoutPrefix):
		c.Whiteouts++
	default:
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old tars still carry TypeRegA
			c.Files++
		case tar.TypeDir:
			if hdr.Name != "." && hdr.Name != "/" {
				c.Dirs++
			}
		case tar.TypeSymlink:
			c.Symlinks++
		case tar.TypeLink:
			c.Hardlinks++
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			c.Others++
		}
	}
	return true, nil
}

const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// LayerResult is what applying one layer did.
type LayerResult struct {
	Index     int             // 0 is the manifest's first (lowest) layer
	Digest    v1.Hash         // digest (sha256 or sha512) of the compressed blob: its name in the manifest and the content store
	DiffID    v1.Hash         // digest of the uncompressed tar, in the diff_id's algorithm (sha256 or sha512), verified against the config's rootfs.diff_ids
	MediaType types.MediaType // e.g. application/vnd.oci.image.layer.v1.tar+gzip
	// Compression is what the bytes turned out to be: "gzip", "zstd" or
	// "none" (detected from the stream, not trusted from the media type).
	Compression string
	Compressed  int64 // size of the compressed blob read
	// Chrooted: archive.Apply ran on a thread whose root directory was the
	// rootfs, so the kernel confined the layer's paths too (as root only).
	Chrooted bool
	// Snapshot is the committed snapshot that holds the layer (overlayfs),
	// and Reused tells that it was there already: nothing was unpacked
	// (only Index, Digest, DiffID, MediaType and Snapshot are then set).
	Snapshot int
	Reused   bool
	Counts
	Duration time.Duration
}

// Result is what Unpack made.
type Result struct {
	Bundle   string // absolute path of the bundle directory (mode 0700)
	RootFS   string // Bundle/rootfs (mode 0755): the container's root file system
	Replaced bool   // an existing bundle was replaced (Options.Force)
	Layers   []LayerResult
	Total    Counts // the sum over Layers
	// Shifted is what Options.Shift changed; nil without it.
	Shifted *ShiftResult
	// Snapshotter is the one that made the rootfs; Fallback says why it is
	// Native when Overlayfs was asked for.
	Snapshotter Snapshotter
	Fallback    string
	// Snapshot is the overlay mount of the rootfs and where its snapshots
	// are (overlayfs only; also in <bundle>/snapshot.json).
	Snapshot *BundleSnapshot
	Duration time.Duration
}

// Unpack applies img's layers, in order, into bundleDir/rootfs, checking
// each layer's uncompressed digest (sha256 or sha512) against the image
// config's diff_ids.
//
// The layers are applied into a temporary sibling directory of bundleDir
// (bundleDir.unpack-tmp-XXXX), renamed into place only when every layer has
// been applied and verified; on any error, or when ctx is cancelled, the
// temporary directory is removed and bundleDir is left as it was. An
// existing, non-empty bundleDir is refused with ErrBundleExists unless
// opts.Force is set.
func Unpack(ctx context.Context, img v1.Image, bundleDir string, opts Options) (*Result, error) {
	start := time.Now()
	bundle, err := filepath.Abs(bundleDir)
	if err != nil {
		return nil, fmt.Errorf("bundle directory %q: %w", bundleDir, err)
	}
	exists, err := checkBundle(bundle, opts.Force)
	if err != nil {
		return nil, err
	}
	if opts.Shift != nil {
		if err := opts.Shift.check(); err != nil {
			return nil, err
		}
	}

	// The count comes from one read of the manifest, before img.Layers():
	// go-containerregistry's Layers() of an OCI layout image reads the
	// manifest again for each layer, so listing 10,000 layers would itself
	// take minutes.
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("reading the image manifest: %w", err)
	}
	if n := len(m.Layers); n > MaxLayers {
		return nil, tooManyLayers(n)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("reading the image's layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	diffIDs := cfg.RootFS.DiffIDs
	for i, d := range diffIDs {
		if _, err := diffIDHasher(d.Algorithm); err != nil {
			return nil, fmt.Errorf("layer %d of %d: %w", i+1, len(diffIDs), err)
		}
	}
	if len(diffIDs) != len(layers) {
		return nil, fmt.Errorf("%w: the manifest lists %d layers, the config's rootfs.diff_ids %d",
			ErrLayerCount, len(layers), len(diffIDs))
	}
	snapshotter := opts.Snapshotter
	if snapshotter == "" {
		snapshotter = Native
	}
	if _, err := ParseSnapshotter(string(snapshotter)); err != nil {
		return nil, err
	}
	var fallback string
	if snapshotter == Overlayfs && opts.Snapshots == nil {
		return nil, fmt.Errorf("%w: the overlayfs snapshotter needs one", ErrNoSnapshots)
	}

	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		return nil, fmt.Errorf("creating the bundle's parent directory: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(bundle), filepath.Base(bundle)+".unpack-tmp-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary bundle next to %s: %w", bundle, err)
	}
	done := false
	defer func() {
		if !done {
			removeAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, err
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(rootfs, 0o755); err != nil { // whatever the umask
		return nil, err
	}

	var applyOpts []archive.ApplyOpt
	if opts.NoSameOwner || os.Geteuid() != 0 {
		applyOpts = append(applyOpts, archive.WithNoSameOwner())
	}
	ctx = quietLogs(ctx)

	if snapshotter == Overlayfs {
		if opts.Start != nil {
			opts.Start(tmp, len(layers))
		}
		res, err := unpackOverlay(ctx, layers, diffIDs, tmp, bundle, exists, applyOpts, opts)
		if errors.Is(err, errIDMap) {
			// The kernel would not idmap the lowers: a shifted copy.
			snapshotter, fallback = Native, err.Error()
		} else if err != nil {
			return nil, err
		} else {
			done = true
			res.Duration = time.Since(start)
			return res, nil
		}
	}

	// Layer i+1 is opened while layer i is applied, and starts decompressing
	// as soon as layer i is all decompressed.
	ra, err := newReadAhead(opts.readAhead)
	if err != nil {
		return nil, err
	}
	streams := make([]*layerStream, len(layers))
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.close()
			}
		}
		ra.release()
	}()
	openStream := func(i int) error {
		if i >= len(layers) || streams[i] != nil {
			return nil
		}
		var after <-chan struct{}
		if i > 0 && streams[i-1] != nil {
			after = streams[i-1].done
		}
		s, err := openLayer(layers[i], diffIDs[i].Algorithm, ra, after)
		if err != nil {
			d, _ := layers[i].Digest()
			return fmt.Errorf("layer %d of %d (%s): %w", i+1, len(layers), short(d), err)
		}
		streams[i] = s
		return nil
	}

	if opts.Start != nil {
		opts.Start(tmp, len(layers))
	}
	res := &Result{Bundle: bundle, RootFS: filepath.Join(bundle, "rootfs"), Snapshotter: Native, Fallback: fallback}
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("unpacking stopped before layer %d of %d: %w", i+1, len(layers), err)
		}
		if err := openStream(i); err != nil {
			return nil, err
		}
		if err := openStream(i + 1); err != nil {
			return nil, err
		}
		lr, err := applyLayer(ctx, rootfs, l, streams[i], diffIDs[i], applyOpts, nil)
		lr.Index = i
		streams[i].close()
		if err != nil {
			return nil, fmt.Errorf("applying layer %d of %d (%s): %w", i+1, len(layers), short(lr.Digest), err)
		}
		res.Layers = append(res.Layers, lr)
		res.Total.add(lr.Counts)
		if opts.Progress != nil {
			opts.Progress(lr)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("unpacking stopped after the last layer: %w", err)
	}

	if opts.Shift != nil {
		sr, err := ShiftOwnership(ctx, rootfs, *opts.Shift)
		if err != nil {
			return nil, fmt.Errorf("shifting the rootfs into the user namespace's ids %d-%d: %w", opts.Shift.UIDBase, uint64(opts.Shift.UIDBase)+uint64(opts.Shift.Size)-1, err)
		}
		res.Shifted = &sr
	}

	replaced, err := install(tmp, bundle, exists)
	if err != nil {
		return nil, err
	}
	done = true
	res.Replaced = replaced
	res.Duration = time.Since(start)
	return res, nil
}

func tooManyLayers(n int) error {
	return fmt.Errorf("%w: the image has %d layers, podlab unpacks at most %d (Docker's limit): "+
		"overlayfs stacks at most 500 lower directories and mount(2) takes its options in one 4096-byte page, "+
		"which is why snapshots are named by short numbers; flatten the image (fewer RUN steps, or a squashed build)",
		ErrTooManyLayers, n, MaxLayers)
}

// unpackOverlay commits the layers' snapshots, mounts the container's
// overlay on tmp/rootfs and moves tmp into place as the bundle.
func unpackOverlay(ctx context.Context, layers []v1.Layer, diffIDs []v1.Hash, tmp, bundle string, exists bool, applyOpts []archive.ApplyOpt, opts Options) (*Result, error) {
	snaps := opts.Snapshots
	ids, lrs, err := snaps.commitLayers(ctx, layers, diffIDs, applyOpts, opts.Progress)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("unpacking stopped after the last layer: %w", err)
	}
	res := &Result{Bundle: bundle, RootFS: filepath.Join(bundle, "rootfs"), Snapshotter: Overlayfs, Layers: lrs}
	for _, lr := range lrs {
		res.Total.add(lr.Counts)
	}
	key := opts.Key
	if key == "" {
		key = bundle
	}
	if res.Snapshot, err = snaps.mountRootfs(tmp, bundle, key, ids, opts.Shift); err != nil {
		return nil, err
	}
	replaced, err := install(tmp, bundle, exists)
	if err != nil {
		_ = RemoveBundle(tmp)
		return nil, err
	}
	res.Replaced = replaced
	return res, nil
}

// countAndSee is the archive.Filter that counts each header into c and
// tells seen of it.
func countAndSee(c *Counts, seen func(*tar.Header)) archive.Filter {
	return func(hdr *tar.Header) (bool, error) {
		if seen != nil {
			seen(hdr)
		}
		return c.count(hdr)
	}
}

// applyLayer applies one layer's stream into rootfs with containerd's
// archive.Apply and checks its diff_id.
// seen, if set, is told every header too.
func applyLayer(ctx context.Context, rootfs string, l v1.Layer, s *layerStream, want v1.Hash, applyOpts []archive.ApplyOpt, seen func(*tar.Header)) (LayerResult, error) {
	start := time.Now()
	var lr LayerResult
	var err error
	if lr.Digest, err = l.Digest(); err != nil {
		return lr, fmt.Errorf("reading the layer digest: %w", err)
	}
	if lr.MediaType, err = l.MediaType(); err != nil {
		return lr, fmt.Errorf("reading the layer media type: %w", err)
	}
	lr.Compression = s.compression

	// The stream serves the tar reader's many small reads (headers are 512
	// bytes) from memory.
	opts := append([]archive.ApplyOpt{archive.WithFilter(countAndSee(&lr.Counts, seen))}, applyOpts...)
	if err := inRoot(rootfs, func(root string) error {
		lr.Chrooted = root != rootfs
		_, err := archive.Apply(ctx, root, s, opts...)
		return err
	}); err != nil {
		return lr, err
	}
	if lr.DiffID, lr.Bytes, lr.Compressed, err = s.finish(); err != nil {
		return lr, err
	}
	lr.Duration = time.Since(start)
	if lr.DiffID != want {
		return lr, fmt.Errorf("%w: the image config says its uncompressed tar is %s, it hashes to %s",
			ErrDiffIDMismatch, want, lr.DiffID)
	}
	return lr, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	return n, err
}

func compressionName(c compression.Compression) string {
	switch c {
	case compression.Gzip:
		return "gzip"
	case compression.Zstd:
		return "zstd"
	case compression.Uncompressed:
		return "none"
	}
	return "unknown"
}

// quietLogs keeps containerd's archive code from writing to the process's
// standard logger (the package never prints), unless the caller put its own
// logger in ctx.
func quietLogs(ctx context.Context) context.Context {
	if log.G(ctx).Logger != logrus.StandardLogger() {
		return ctx
	}
	l := logrus.New()
	l.Out = io.Discard
	return log.WithLogger(ctx, logrus.NewEntry(l))
}

func short(h v1.Hash) string {
	if h.Hex == "" {
		return "digest unknown"
	}
	if len(h.Hex) < 12 {
		return h.String()
	}
	return h.Algorithm + ":" + h.Hex[:12]
}
