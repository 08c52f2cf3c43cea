package unpack

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Snapshotter is how a container's rootfs is made from its image's layers.
type Snapshotter string

const (
	// Native applies every layer, in order, into one plain directory per
	// container (containerd's "native" snapshotter copies; podlab applies).
	Native Snapshotter = "native"
	// Overlayfs unpacks each layer once into a committed snapshot and
	// mounts a container's rootfs as an overlay of them plus an upper
	// directory of its own (containerd's "overlayfs" snapshotter).
	Overlayfs Snapshotter = "overlayfs"
)

// ParseSnapshotter reads a --snapshotter value.
func ParseSnapshotter(s string) (Snapshotter, error) {
	switch Snapshotter(s) {
	case Native, Overlayfs:
		return Snapshotter(s), nil
	}
	return "", fmt.Errorf("%w: %q (choose native, every layer applied into one directory, or overlayfs, a snapshot per layer stacked with overlay)", ErrUnknownSnapshotter, s)
}

// MaxLayers is the most layers an image may have: Docker's limit (moby's
// layer store refuses a 126th layer, "max depth exceeded"; its overlay2
// driver stacks at most 128 lower directories). The kernel's overlayfs
// stacks at most 500 lower directories (OVL_MAX_STACK) and mount(2) takes
// its options in one page (4096 bytes): 125 lowers named by short numbers
// ("125/fs:124/fs:...", about 1 KB) fit with room to spare, where 125
// digests would not (a sha256 in hex is 64 bytes). containerd names its
// snapshots by numbers for the same reason. An image past the limit is
// refused before anything is unpacked, in both snapshotters: a node whose
// images can make it unpack for minutes is a node those images can stall.
const MaxLayers = 125

// SnapshotKind is what a snapshot is for.
type SnapshotKind string

const (
	// Committed snapshots hold one layer each, applied and verified, read
	// only from then on; containers' rootfs stack them as overlay lowers.
	Committed SnapshotKind = "committed"
	// Active snapshots are a container's writable upper directory (fs) and
	// overlay's work directory (work).
	Active SnapshotKind = "active"
)

// Snapshot is one line of a snapshots directory's index.
type Snapshot struct {
	ID      int          // its directory, <root>/<ID>
	Kind    SnapshotKind // committed or active
	Parent  int          // the snapshot below it, 0 for none
	Created time.Time
	// Name is a committed snapshot's layer chain ID (sha256:...), or an
	// active snapshot's key (the container it is the rootfs of).
	Name string
}

// Snapshots is a snapshots directory, containerd's overlayfs snapshotter's
// layout made readable:
//
//	<root>/index      one line per snapshot: id, kind, parent, created, name
//	<root>/<N>/fs     snapshot N's files (a layer's, or a container's upper)
//	<root>/<N>/work   overlay's work directory (active snapshots only)
//	<root>/tmp-*      layers being unpacked; renamed to <N> when verified
//	<root>/lock       held (flock) while the index is changed
type Snapshots struct {
	Root string
}

const (
	indexFile = "index"
	lockFile  = "lock"
	tmpPrefix = "tmp-"
)

// OpenSnapshots opens (making it if needed) the snapshots directory root.
// Leftovers of an unpack that was killed (tmp-* directories, and numbered
// directories the index does not name) are removed.
func OpenSnapshots(root string) (*Snapshots, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("snapshots directory %q: %w", root, err)
	}
	if strings.ContainsAny(abs, ",:") {
		return nil, fmt.Errorf("snapshots directory %s: overlay's mount options cannot name a path with a comma or a colon: choose another state directory, or --snapshotter native", abs)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("creating the snapshots directory: %w", err)
	}
	s := &Snapshots{Root: abs}
	return s, s.clean()
}

// clean removes what an unpack that was killed left: tmp-* directories,
// and numbered directories the index does not name.
func (s *Snapshots) clean() error {
	return s.update(func(ix []Snapshot) ([]Snapshot, error) {
		des, err := os.ReadDir(s.Root)
		if err != nil {
			return nil, err
		}
		for _, de := range des {
			id, err := strconv.Atoi(de.Name())
			stale := (strings.HasPrefix(de.Name(), tmpPrefix) && !inUse(filepath.Join(s.Root, de.Name()))) ||
				(err == nil && !slices.ContainsFunc(ix, func(sn Snapshot) bool { return sn.ID == id }))
			if stale {
				if err := removeAll(filepath.Join(s.Root, de.Name())); err != nil {
					return nil, fmt.Errorf("removing a leftover of the snapshots directory: %w", err)
				}
			}
		}
		return ix, nil
	})
}

// makeTmp makes a tmp-* directory for a layer being unpacked, held
// (flock) until release is called, so that clean leaves it alone.
func (s *Snapshots) makeTmp() (dir string, release func(), err error) {
	dir, err = os.MkdirTemp(s.Root, tmpPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("making a directory to unpack a layer into: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return "", nil, err
	}
	return dir, func() { f.Close() }, nil
}

// inUse tells whether an unpack holds the tmp-* directory dir.
func inUse(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
}

// Dir is snapshot id's directory.
func (s *Snapshots) Dir(id int) string { return filepath.Join(s.Root, strconv.Itoa(id)) }

// FS is snapshot id's files.
func (s *Snapshots) FS(id int) string { return filepath.Join(s.Dir(id), "fs") }

// List reads the index.
func (s *Snapshots) List() ([]Snapshot, error) {
	return readIndex(filepath.Join(s.Root, indexFile))
}

// update runs change on the index with the lock held and writes the index
// back (by rename) when change returns nil.
func (s *Snapshots) update(change func(ix []Snapshot) ([]Snapshot, error)) error {
	lf, err := os.OpenFile(filepath.Join(s.Root, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("opening the snapshots lock: %w", err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking the snapshots index: %w", err)
	}
	ix, err := s.List()
	if err != nil {
		return err
	}
	ix, err = change(ix)
	if err != nil {
		return err
	}
	return writeIndex(filepath.Join(s.Root, indexFile), ix)
}

func nextID(ix []Snapshot) int {
	n := 0
	for _, sn := range ix {
		n = max(n, sn.ID)
	}
	return n + 1
}

func findCommitted(ix []Snapshot, chain string) *Snapshot {
	for i := range ix {
		if ix[i].Kind == Committed && ix[i].Name == chain {
			return &ix[i]
		}
	}
	return nil
}

const indexHeader = "# podlab's snapshots (as containerd's overlayfs snapshotter keeps them in its metadata.db)\n" +
	"# id  kind  parent  created  name (a layer's chain ID, or the container an active snapshot is the rootfs of)\n"

func writeIndex(path string, ix []Snapshot) error {
	var b strings.Builder
	b.WriteString(indexHeader)
	for _, sn := range ix {
		parent := "-"
		if sn.Parent != 0 {
			parent = strconv.Itoa(sn.Parent)
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\t%s\n", sn.ID, sn.Kind, parent, sn.Created.UTC().Format(time.RFC3339), sn.Name)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the snapshots index: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the snapshots index: %w", err)
	}
	return nil
}

func readIndex(path string) ([]Snapshot, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the snapshots index: %w", err)
	}
	defer f.Close()
	var ix []Snapshot
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.SplitN(text, "\t", 5)
		bad := func(why string) error {
			return fmt.Errorf("%w: %s line %d: %s (remove the snapshots directory to start afresh: podlab reset)", ErrBadIndex, path, line, why)
		}
		if len(fields) != 5 {
			return nil, bad("want 5 tab-separated fields")
		}
		var sn Snapshot
		if sn.ID, err = strconv.Atoi(fields[0]); err != nil || sn.ID <= 0 {
			return nil, bad("bad id")
		}
		sn.Kind = SnapshotKind(fields[1])
		if sn.Kind != Committed && sn.Kind != Active {
			return nil, bad("bad kind")
		}
		if fields[2] != "-" {
			if sn.Parent, err = strconv.Atoi(fields[2]); err != nil {
				return nil, bad("bad parent")
			}
		}
		if sn.Created, err = time.Parse(time.RFC3339, fields[3]); err != nil {
			return nil, bad("bad time")
		}
		sn.Name = fields[4]
		ix = append(ix, sn)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the snapshots index: %w", err)
	}
	return ix, nil
}

// prepare adds an active snapshot over parent (0: none) named key and
// makes its fs and work directories.
func (s *Snapshots) prepare(key string, parent int) (int, error) {
	var id int
	err := s.update(func(ix []Snapshot) ([]Snapshot, error) {
		id = nextID(ix)
		for _, d := range []string{"fs", "work"} {
			if err := os.MkdirAll(filepath.Join(s.Dir(id), d), 0o755); err != nil {
				return nil, fmt.Errorf("making active snapshot %d: %w", id, err)
			}
		}
		return append(ix, Snapshot{ID: id, Kind: Active, Parent: parent, Created: time.Now(), Name: key}), nil
	})
	if err != nil {
		_ = removeAll(s.Dir(id))
		return 0, err
	}
	return id, nil
}

// chainOf lists the committed snapshots from id's parent down (top first).
func chainOf(ix []Snapshot, parent int) ([]int, error) {
	var out []int
	for p := parent; p != 0; {
		i := slices.IndexFunc(ix, func(sn Snapshot) bool { return sn.ID == p })
		if i < 0 {
			return nil, fmt.Errorf("%w: snapshot %d's parent is not in the index", ErrBadIndex, p)
		}
		out = append(out, p)
		p = ix[i].Parent
		if len(out) > MaxLayers+1 {
			return nil, fmt.Errorf("%w: the parents of snapshot %d loop", ErrBadIndex, parent)
		}
	}
	return out, nil
}

// RemoveActive removes active snapshot id (its upper and work
// directories): the caller has unmounted the rootfs that used it.
func (s *Snapshots) RemoveActive(id int) error {
	return s.remove(func(sn Snapshot) bool { return sn.Kind == Active && sn.ID == id })
}

// RemoveActives removes the active snapshots whose key match says yes to
// (e.g. every container of a pod), returning their ids. Their rootfs must
// be unmounted.
func (s *Snapshots) RemoveActives(match func(key string) bool) ([]int, error) {
	var ids []int
	err := s.remove(func(sn Snapshot) bool {
		if sn.Kind == Active && match(sn.Name) {
			ids = append(ids, sn.ID)
			return true
		}
		return false
	})
	return ids, err
}

// remove drops the snapshots gone says yes to from the index, then their
// directories: a directory the index does not name is never used again.
func (s *Snapshots) remove(gone func(Snapshot) bool) error {
	var dirs []string
	err := s.update(func(ix []Snapshot) ([]Snapshot, error) {
		kept := ix[:0]
		for _, sn := range ix {
			if gone(sn) {
				dirs = append(dirs, s.Dir(sn.ID))
				continue
			}
			kept = append(kept, sn)
		}
		return kept, nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		if err := removeAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing snapshot %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// GC removes the committed snapshots that no chain in keep uses and that
// no active snapshot stands on (a running container's lowers stay), and
// returns them. keep holds the chain IDs of every layer of every image
// still stored (ChainIDs of each image's diff_ids).
func (s *Snapshots) GC(keep map[string]bool) ([]Snapshot, error) {
	var removed []Snapshot
	var dirs []string
	err := s.update(func(ix []Snapshot) ([]Snapshot, error) {
		used := map[int]bool{}
		for _, sn := range ix {
			if sn.Kind == Active || keep[sn.Name] {
				used[sn.ID] = true
				chain, err := chainOf(ix, sn.Parent)
				if err != nil {
					return nil, err
				}
				for _, id := range chain {
					used[id] = true
				}
			}
		}
		kept := ix[:0]
		for _, sn := range ix {
			if used[sn.ID] {
				kept = append(kept, sn)
				continue
			}
			removed = append(removed, sn)
			dirs = append(dirs, s.Dir(sn.ID))
		}
		return kept, nil
	})
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, d := range dirs {
		if err := removeAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing snapshot %s: %w", d, err))
		}
	}
	return removed, errors.Join(errs...)
}

// KeepImages is the keep set of GC for the images still stored: the chain
// IDs of all their layers.
func KeepImages(imgs []v1.Image) (map[string]bool, error) {
	keep := map[string]bool{}
	for _, img := range imgs {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("reading an image config to see which snapshots it uses: %w", err)
		}
		for _, c := range ChainIDs(cfg.RootFS.DiffIDs) {
			keep[c] = true
		}
	}
	return keep, nil
}
