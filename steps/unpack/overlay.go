package unpack

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	"golang.org/x/sys/unix"
)

// DefaultSnapshotter is overlayfs where the kernel mounts an overlay of
// two lower directories in root (containerd's overlayutils.Supported, the
// check it makes before it uses its overlayfs snapshotter, but with the
// mount in a mount namespace of its own: probe.go), and native otherwise,
// with why.
func DefaultSnapshotter(root string) (Snapshotter, error) {
	if err := overlaySupported(root, nil); err != nil {
		return Native, fmt.Errorf("overlayfs cannot be used in %s: %w", root, err)
	}
	return Overlayfs, nil
}

// ChainIDs are the chain IDs of an image's layers, from its config's
// diff_ids: the first layer's is its diff_id, the next one's
// sha256(chain + " " + diff_id), and so on. A chain ID names a layer
// together with everything under it: what a committed snapshot holds.
func ChainIDs(diffIDs []v1.Hash) []string {
	ds := make([]digest.Digest, len(diffIDs))
	for i, d := range diffIDs {
		ds[i] = digest.Digest(d.String())
	}
	ids := identity.ChainIDs(ds)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// BundleSnapshot is what a bundle whose rootfs is an overlay mount
// records of it, in <bundle>/snapshot.json: enough to unmount it and
// remove its upper directory later, and for a learner to read.
type BundleSnapshot struct {
	Snapshotter Snapshotter `json:"snapshotter"`
	Snapshots   string      `json:"snapshots"` // the snapshots directory
	Active      int         `json:"active"`    // the container's own snapshot: <snapshots>/<active>/fs is the upper dir
	Key         string      `json:"key"`
	Lowers      []int       `json:"lowers"` // the image's committed snapshots, top first
	Mount       string      `json:"mount"`  // the mount, as mount(8) would be told it
	// IDMapped: the lowers are idmapped into a user namespace's range
	// (uidmap=/gidmap= in Mount), the upper directory is its root's.
	IDMapped bool `json:"idmapped,omitempty"`
}

const bundleSnapshotFile = "snapshot.json"

// ReadBundleSnapshot reads bundle's snapshot.json; nil, nil when the
// bundle's rootfs is a plain directory (native).
func ReadBundleSnapshot(bundle string) (*BundleSnapshot, error) {
	b, err := os.ReadFile(filepath.Join(bundle, bundleSnapshotFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var bs BundleSnapshot
	if err := json.Unmarshal(b, &bs); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(bundle, bundleSnapshotFile), err)
	}
	return &bs, nil
}

// RootfsReady tells whether bundle has a root file system to run: a
// rootfs/ directory (native), or, when the bundle records an overlay, the
// overlay mounted on it (after a reboot the directory stays, the mount
// does not).
func RootfsReady(bundle string) bool {
	rootfs := filepath.Join(bundle, "rootfs")
	if fi, err := os.Stat(rootfs); err != nil || !fi.IsDir() {
		return false
	}
	bs, err := ReadBundleSnapshot(bundle)
	if err != nil {
		return false
	}
	if bs == nil {
		return true
	}
	mounted, err := mountinfo.Mounted(rootfs)
	return err == nil && mounted
}

// RemoveBundle removes a bundle: when its rootfs is an overlay, it is
// unmounted first and its active snapshot (the container's upper
// directory) removed; lowers stay, for other containers and images. A
// missing bundle is not an error.
func RemoveBundle(bundle string) error {
	bs, err := ReadBundleSnapshot(bundle)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := unmountRootfs(filepath.Join(bundle, "rootfs")); err != nil {
		return err
	}
	if bs != nil && bs.Snapshots != "" {
		snaps := &Snapshots{Root: bs.Snapshots}
		if err := snaps.RemoveActive(bs.Active); err != nil {
			return fmt.Errorf("removing the container's snapshot %d: %w", bs.Active, err)
		}
	}
	if err := removeAll(bundle); err != nil {
		return fmt.Errorf("removing the bundle %s: %w", bundle, err)
	}
	return nil
}

// unmountRootfs unmounts whatever is mounted on rootfs, every layer of it.
func unmountRootfs(rootfs string) error {
	for range 16 {
		err := unix.Unmount(rootfs, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmounting the rootfs %s: %w", rootfs, err)
		}
	}
	return fmt.Errorf("unmounting the rootfs %s: still mounted after 16 unmounts", rootfs)
}

// commitLayers makes sure every layer of the image has a committed
// snapshot. The layers that have none are applied in parallel, each into a
// temporary directory of its own (a layer's content does not depend on
// the layers under it: whiteouts stay in it as overlay whiteouts, 0/0
// character devices, and opaque directories as trusted.overlay.opaque, as
// containerd's overlay applier writes them); then, in order from the
// bottom, each applied and verified one is renamed to its number and
// added to the index. A layer that fails is not committed, nor any above
// it. It returns the snapshot ids, bottom first.
func (s *Snapshots) commitLayers(ctx context.Context, layers []v1.Layer, diffIDs []v1.Hash, applyOpts []archive.ApplyOpt, progress func(LayerResult)) ([]int, []LayerResult, error) {
	chains := ChainIDs(diffIDs)
	ix, err := s.List()
	if err != nil {
		return nil, nil, err
	}
	results := make([]LayerResult, len(layers))
	tmps := make([]string, len(layers))
	errs := make([]error, len(layers))
	explicit := make([]map[string]bool, len(layers)) // the directories each layer's tar names
	releases := make([]func(), len(layers))
	defer func() {
		for i, t := range tmps {
			if t != "" {
				_ = removeAll(t)
			}
			if releases[i] != nil {
				releases[i]()
			}
		}
	}()
	var todo []int
	for i, l := range layers {
		results[i].Index = i
		if sn := findCommitted(ix, chains[i]); sn != nil {
			results[i].Snapshot, results[i].Reused = sn.ID, true
			results[i].DiffID = diffIDs[i]
			results[i].Digest, _ = l.Digest()
			results[i].MediaType, _ = l.MediaType()
			continue
		}
		todo = append(todo, i)
	}

	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) {
		wg.Go(func() {
			for i := range work {
				if err := ctx.Err(); err != nil {
					errs[i] = fmt.Errorf("unpacking stopped before layer %d of %d: %w", i+1, len(layers), err)
					continue
				}
				tmp, release, err := s.makeTmp()
				if err != nil {
					errs[i] = err
					continue
				}
				tmps[i], releases[i] = tmp, release
				fsDir := filepath.Join(tmp, "fs")
				if err := os.Mkdir(fsDir, 0o755); err != nil {
					errs[i] = err
					continue
				}
				dirs := map[string]bool{}
				explicit[i] = dirs
				lr, err := applySnapshotLayer(ctx, fsDir, layers[i], diffIDs[i], applyOpts, func(hdr *tar.Header) {
					if hdr.Typeflag == tar.TypeDir {
						dirs[path.Clean("/"+hdr.Name)] = true
					}
				})
				lr.Index = i
				results[i] = lr
				if err != nil {
					errs[i] = fmt.Errorf("applying layer %d of %d (%s): %w", i+1, len(layers), short(lr.Digest), err)
				}
			}
		})
	}
	for _, i := range todo {
		work <- i
	}
	close(work)
	wg.Wait()

	// A layer that names a file but not its directory made the directory
	// itself, 0755 and root's: overlay would show that over the lower
	// layers' directory. Give it what the layers below say, as containerd's
	// applier does with its parents (here, once all are applied).
	for i := range layers {
		if errs[i] != nil {
			break
		}
		if tmps[i] == "" {
			continue // committed before
		}
		var lowers []string
		for j := i - 1; j >= 0; j-- {
			if tmps[j] != "" {
				lowers = append(lowers, filepath.Join(tmps[j], "fs"))
			} else if results[j].Snapshot != 0 {
				lowers = append(lowers, s.FS(results[j].Snapshot))
			}
		}
		if err := inheritParents(filepath.Join(tmps[i], "fs"), explicit[i], lowers); err != nil {
			errs[i] = fmt.Errorf("layer %d of %d: giving its implied directories their lower layers' owner and mode: %w", i+1, len(layers), err)
		}
	}

	ids := make([]int, len(layers))
	var failed error
	err = s.update(func(ix []Snapshot) ([]Snapshot, error) {
		parent := 0
		for i := range layers {
			if errs[i] != nil {
				failed = errs[i]
				break
			}
			if sn := findCommitted(ix, chains[i]); sn != nil {
				// Committed before (or by another unpack meanwhile).
				ids[i], parent = sn.ID, sn.ID
				results[i].Snapshot = sn.ID
				continue
			}
			id := nextID(ix)
			if err := os.Rename(tmps[i], s.Dir(id)); err != nil {
				failed = fmt.Errorf("committing layer %d as snapshot %d: %w", i+1, id, err)
				break
			}
			tmps[i] = ""
			ix = append(ix, Snapshot{ID: id, Kind: Committed, Parent: parent, Created: time.Now(), Name: chains[i]})
			ids[i], parent = id, id
			results[i].Snapshot = id
		}
		return ix, nil
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, nil, err
	}
	if progress != nil {
		for _, lr := range results {
			progress(lr)
		}
	}
	return ids, results, nil
}

// inheritParents gives each directory under fsDir that the layer's tar
// did not name (explicit: cleaned absolute paths) the mode, owner and times
// of the same directory in the nearest of lowers (top first) that has one.
func inheritParents(fsDir string, explicit map[string]bool, lowers []string) error {
	if len(lowers) == 0 {
		return nil
	}
	return filepath.WalkDir(fsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == fsDir {
			return err
		}
		rel, err := filepath.Rel(fsDir, p)
		if err != nil {
			return err
		}
		if explicit["/"+filepath.ToSlash(rel)] {
			return nil
		}
		for _, lower := range lowers {
			fi, err := os.Lstat(filepath.Join(lower, rel))
			if err != nil {
				continue
			}
			if !fi.IsDir() {
				return nil // a lower non-directory: this one replaces it
			}
			st := fi.Sys().(*syscall.Stat_t)
			if err := os.Lchown(p, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
				return err
			}
			if err := os.Chmod(p, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
				return err
			}
			return os.Chtimes(p, time.Unix(st.Atim.Unix()), fi.ModTime())
		}
		return nil
	})
}

// applySnapshotLayer applies one layer into fsDir, an empty directory,
// keeping whiteouts as overlay whiteouts, and checks its diff_id. As in
// Unpack, the layer is decompressed and hashed by a goroutine of its own
// ahead of archive.Apply, into a read-ahead of its own (snapshotReadAhead
// chunks: layers are applied in parallel).
func applySnapshotLayer(ctx context.Context, fsDir string, l v1.Layer, want v1.Hash, applyOpts []archive.ApplyOpt, seen func(*tar.Header)) (LayerResult, error) {
	var lr LayerResult
	var err error
	if lr.Digest, err = l.Digest(); err != nil {
		return lr, fmt.Errorf("reading the layer digest: %w", err)
	}
	opts := append([]archive.ApplyOpt{archive.WithConvertWhiteout(archive.OverlayConvertWhiteout)}, applyOpts...)
	if size, err := l.Size(); err == nil && size < smallLayer {
		return applySmallLayer(ctx, fsDir, l, want, opts, seen)
	}
	ra, err := newReadAhead(snapshotReadAhead)
	if err != nil {
		return lr, err
	}
	defer ra.release()
	st, err := openLayer(l, want.Algorithm, ra, nil)
	if err != nil {
		return lr, err
	}
	defer st.close()
	return applyLayer(ctx, fsDir, l, st, want, opts, seen)
}

// smallLayer is the compressed size under which a layer is decompressed
// by the goroutine that applies it: handing it to a goroutine of its own
// would cost more than it saves (an empty layer: a read-ahead mapped and
// unmapped, a goroutine started and waited for).
const smallLayer = 256 << 10

// applySmallLayer is applyLayer with the layer decompressed and hashed
// in line.
func applySmallLayer(ctx context.Context, fsDir string, l v1.Layer, want v1.Hash, opts []archive.ApplyOpt, seen func(*tar.Header)) (LayerResult, error) {
	start := time.Now()
	lr := LayerResult{}
	var err error
	if lr.Digest, err = l.Digest(); err != nil {
		return lr, fmt.Errorf("reading the layer digest: %w", err)
	}
	if lr.MediaType, err = l.MediaType(); err != nil {
		return lr, fmt.Errorf("reading the layer media type: %w", err)
	}
	h, err := diffIDHasher(want.Algorithm)
	if err != nil {
		return lr, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return lr, fmt.Errorf("opening the layer blob: %w", err)
	}
	defer rc.Close()
	counted := &countingReader{r: rc}
	dr, err := decompress(counted)
	if err != nil {
		return lr, fmt.Errorf("starting to decompress the layer: %w", err)
	}
	defer dr.Close()
	lr.Compression = compressionName(dr.GetCompression())
	tarBytes := &countingReader{r: io.TeeReader(dr, h)}
	br := bufio.NewReaderSize(tarBytes, 32<<10)
	opts = append([]archive.ApplyOpt{archive.WithFilter(countAndSee(&lr.Counts, seen))}, opts...)
	if err := inRoot(fsDir, func(root string) error {
		lr.Chrooted = root != fsDir
		_, err := archive.Apply(ctx, root, br, opts...)
		return err
	}); err != nil {
		return lr, err
	}
	// The tar's padding after its end marker is part of the diff_id.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return lr, fmt.Errorf("reading the end of the layer: %w", err)
	}
	lr.DiffID = v1.Hash{Algorithm: want.Algorithm, Hex: hex.EncodeToString(h.Sum(nil))}
	lr.Bytes, lr.Compressed = tarBytes.n, counted.n
	lr.Duration = time.Since(start)
	if lr.DiffID != want {
		return lr, fmt.Errorf("%w: the image config says its uncompressed tar is %s, it hashes to %s",
			ErrDiffIDMismatch, want, lr.DiffID)
	}
	return lr, nil
}

// snapshotReadAhead is each layer's read-ahead with the overlayfs
// snapshotter, in chunks: 16 MiB (of address space; the kernel gives pages
// as they are used).
const snapshotReadAhead = 128

// overlayMount is the overlay of lowers (bottom first) with active's
// upper and work directories; with no lowers, a bind mount of the upper.
func (s *Snapshots) overlayMount(lowers []int, active int) mount.Mount {
	upper, work := s.FS(active), filepath.Join(s.Dir(active), "work")
	if len(lowers) == 0 {
		return mount.Mount{Type: "bind", Source: upper, Options: []string{"rbind", "rw"}}
	}
	dirs := make([]string, len(lowers))
	for i, id := range lowers {
		dirs[len(lowers)-1-i] = s.FS(id) // top first
	}
	return mount.Mount{Type: "overlay", Source: "overlay", Options: []string{
		"lowerdir=" + strings.Join(dirs, ":"), "upperdir=" + upper, "workdir=" + work,
	}}
}

func mountCommand(m mount.Mount, target string) string {
	return fmt.Sprintf("mount -t %s %s -o %s %s", m.Type, m.Source, strings.Join(m.Options, ","), target)
}

// mountRootfs prepares active snapshot key over the image's top snapshot
// and mounts the overlay on tmpBundle/rootfs, recording it in
// tmpBundle/snapshot.json.
// errIDMap is returned when the kernel would not mount idmapped lowers.
var errIDMap = errors.New("idmapped overlay layers")

func (s *Snapshots) mountRootfs(tmpBundle, bundle, key string, lowers []int, shift *IDShift) (*BundleSnapshot, error) {
	top := 0
	if len(lowers) > 0 {
		top = lowers[len(lowers)-1]
	}
	active, err := s.prepare(key, top)
	if err != nil {
		return nil, err
	}
	m := s.overlayMount(lowers, active)
	if shift != nil {
		// As containerd's overlayfs snapshotter with remapped ids: the
		// lowers are idmapped (core/mount makes an idmapped bind mount of
		// each, a detached one, for the overlay), and the upper and work
		// directories belong to the range's root.
		for _, d := range []string{s.FS(active), filepath.Join(s.Dir(active), "work")} {
			if err := os.Lchown(d, int(shift.UIDBase), int(shift.GIDBase)); err != nil {
				_ = s.RemoveActive(active)
				return nil, fmt.Errorf("giving the upper directory to the user namespace's root: %w", err)
			}
		}
		if len(lowers) > 0 {
			m.Options = append(m.Options,
				fmt.Sprintf("uidmap=0:%d:%d", shift.UIDBase, shift.Size), fmt.Sprintf("gidmap=0:%d:%d", shift.GIDBase, shift.Size))
		}
	}
	rootfs := filepath.Join(tmpBundle, "rootfs")
	bs := &BundleSnapshot{Snapshotter: Overlayfs, Snapshots: s.Root, Active: active, Key: key, Mount: mountCommand(m, filepath.Join(bundle, "rootfs"))}
	for i := len(lowers) - 1; i >= 0; i-- {
		bs.Lowers = append(bs.Lowers, lowers[i])
	}
	bs.IDMapped = shift != nil
	b, _ := json.MarshalIndent(bs, "", "  ")
	if err := os.WriteFile(filepath.Join(tmpBundle, bundleSnapshotFile), append(b, '\n'), 0o644); err != nil {
		_ = s.RemoveActive(active)
		return nil, err
	}
	if err := m.Mount(rootfs); err != nil {
		_ = s.RemoveActive(active)
		_ = os.Remove(filepath.Join(tmpBundle, bundleSnapshotFile))
		if shift != nil {
			return nil, fmt.Errorf("%w: the kernel refused them (%v), so the rootfs is a copy chowned into the user namespace's ids", errIDMap, err)
		}
		return nil, fmt.Errorf("mounting the container's rootfs (%s): %w", bs.Mount, err)
	}
	return bs, nil
}
