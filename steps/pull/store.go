package pull

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/steps/statedir"
)

// Annotations podlab writes on each index.json entry.
const (
	// AnnotationRefName is the OCI annotation skopeo, umoci and crane use to
	// address an image in a layout. podlab stores the full normalized
	// reference, e.g. "docker.io/library/nginx:latest", as containerd does.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is containerd's name for the same thing.
	AnnotationContainerdName = "io.containerd.image.name"
	// AnnotationResolvedDigest is the digest the registry resolved the
	// reference to: the index's digest when the image came from an index,
	// else the manifest's. A re-pull compares it with the registry's answer.
	AnnotationResolvedDigest = "io.podlab.image.resolved-digest"
)

const (
	ociLayoutFile    = "oci-layout"
	ociLayoutContent = `{"imageLayoutVersion":"1.0.0"}`
	indexFile        = "index.json"
	ingestDir        = "ingest"     // temporary files of blobs being written, as containerd's ingest/
	indexLockFile    = "index.lock" // in ingestDir: held while index.json is read, changed, renamed
	gcLockFile       = "gc.lock"    // in ingestDir: shared by pulls, exclusive for rmi's deletions
)

// Store is the content store: one OCI image layout on disk, shared by every
// pod, holding blobs by digest and naming images in index.json.
type Store struct {
	dir string
}

// StoreDir is where the content store lives under podlab's state directory.
func StoreDir(stateDir string) string { return statedir.Layout{Dir: stateDir}.ContentDir() }

// OpenStore opens the OCI image layout at dir, creating an empty one (an
// oci-layout file, an empty index.json, blobs/sha256/) if dir has none.
func OpenStore(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening content store %s: %w", dir, err)
	}
	s := &Store{dir: abs}
	for _, d := range []string{filepath.Join(abs, "blobs", "sha256"), filepath.Join(abs, ingestDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("opening content store: %w", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(abs, ociLayoutFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := writeFileAtomic(filepath.Join(abs, ociLayoutFile), []byte(ociLayoutContent)); err != nil {
			return nil, fmt.Errorf("opening content store: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("opening content store: %w", err)
	default:
		var l struct {
			Version string `json:"imageLayoutVersion"`
		}
		if err := json.Unmarshal(b, &l); err != nil || l.Version != "1.0.0" {
			return nil, fmt.Errorf("%w: %s has %s %q (want imageLayoutVersion 1.0.0)", ErrNotLayout, abs, ociLayoutFile, b)
		}
	}
	err = s.withIndexLock(func() error {
		if _, err := os.Stat(s.indexPath()); errors.Is(err, fs.ErrNotExist) {
			return s.writeIndex(&v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex})
		}
		_, err := s.readIndex()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening content store %s: %w", abs, err)
	}
	return s, nil
}

// Dir is the layout's absolute directory.
func (s *Store) Dir() string { return s.dir }

// IndexPath is the absolute path of the layout's index.json.
func (s *Store) IndexPath() string { return s.indexPath() }

// BlobPath is where the blob with digest d lives (or would live) on disk.
func (s *Store) BlobPath(d v1.Hash) string {
	return filepath.Join(s.dir, "blobs", d.Algorithm, d.Hex)
}

// Has reports whether the blob with digest d is in the store.
func (s *Store) Has(d v1.Hash) bool {
	_, err := os.Stat(s.BlobPath(d))
	return err == nil
}

// Image returns the stored image named ref, normalized as pull normalizes
// it ("nginx" is "docker.io/library/nginx:latest"). A reference with a
// digest also finds the image pulled by tag whose manifest (or index) has
// that digest. It returns an error wrapping ErrImageNotFound when the store
// has no such image.
func (s *Store) Image(ref string) (v1.Image, error) {
	e, err := s.lookup(ref)
	if err != nil {
		return nil, err
	}
	if err := s.checkSizes(e); err != nil {
		return nil, fmt.Errorf("reading image %s from %s: %w", e.name, s.dir, err)
	}
	img, err := layout.Path(s.dir).Image(e.desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("reading image %s from %s: %w", e.name, s.dir, err)
	}
	return img, nil
}

// checkSizes refuses an image whose manifest or config is over its limit
// (MaxManifestSize, MaxConfigSize), by the sizes the descriptors name and
// the sizes of the files, before anything reads them whole: the reader of
// the image returned (unpack, spec) parses both.
func (s *Store) checkSizes(e entry) error {
	if e.desc.Size > MaxManifestSize {
		return tooLarge("manifest", e.desc.Digest, e.desc.Size, MaxManifestSize)
	}
	if !isImageManifest(e.desc.MediaType) {
		return nil // ggcr's layout says what it is not
	}
	m, err := s.readManifest(e.desc.Digest)
	if err != nil {
		return fmt.Errorf("reading manifest %s: %w", e.desc.Digest, err)
	}
	if m.Config.Size > MaxConfigSize {
		return tooLarge("config", m.Config.Digest, m.Config.Size, MaxConfigSize)
	}
	if fi, err := os.Stat(s.BlobPath(m.Config.Digest)); err == nil && fi.Size() > MaxConfigSize {
		return tooLarge("config", m.Config.Digest, fi.Size(), MaxConfigSize)
	}
	return nil
}

// entry is one named image in index.json.
type entry struct {
	name string // the normalized reference, from AnnotationRefName
	desc v1.Descriptor
}

func (s *Store) lookup(ref string) (entry, error) {
	idx, err := s.readIndex()
	if err != nil {
		return entry{}, err
	}
	return s.lookupIn(idx, ref)
}

func (s *Store) lookupIn(idx *v1.IndexManifest, ref string) (entry, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return entry{}, err
	}
	want := r.String()
	for _, d := range idx.Manifests {
		if d.Annotations[AnnotationRefName] == want {
			return entry{name: want, desc: d}, nil
		}
	}
	if r.Digest != "" {
		// "nginx@sha256:..." finds "nginx:latest" when that has the digest.
		for _, d := range idx.Manifests {
			n := d.Annotations[AnnotationRefName]
			sr, err := ParseReference(n)
			if err != nil || sr.Registry != r.Registry || sr.Repository != r.Repository {
				continue
			}
			if d.Digest.String() == r.Digest || d.Annotations[AnnotationResolvedDigest] == r.Digest {
				return entry{name: n, desc: d}, nil
			}
		}
	}
	return entry{}, fmt.Errorf("%w: %s (run `podlab pull %s` first, or `podlab images` to see what is stored)", ErrImageNotFound, want, ref)
}

func (s *Store) indexPath() string { return filepath.Join(s.dir, indexFile) }

func (s *Store) readIndex() (*v1.IndexManifest, error) {
	b, err := os.ReadFile(s.indexPath())
	if err != nil {
		return nil, fmt.Errorf("reading the content store's index: %w", err)
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotLayout, s.indexPath(), err)
	}
	return idx, nil
}

// writeIndex replaces index.json atomically: a reader sees the old or the
// new file, never half of one. Call it with the index lock held.
func (s *Store) writeIndex(idx *v1.IndexManifest) error {
	if idx.Manifests == nil {
		idx.Manifests = []v1.Descriptor{}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(s.indexPath(), append(b, '\n'))
}

// updateIndex reads index.json, lets change edit it, and writes it back, all
// under an exclusive lock so that two podlab processes never lose each
// other's entries.
func (s *Store) updateIndex(change func(idx *v1.IndexManifest) error) error {
	return s.withIndexLock(func() error {
		idx, err := s.readIndex()
		if err != nil {
			return err
		}
		if err := change(idx); err != nil {
			return err
		}
		return s.writeIndex(idx)
	})
}

func (s *Store) withIndexLock(fn func() error) error {
	unlock, err := s.lock(indexLockFile, unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// lock takes a flock(2) on a file in the ingest directory. Pulls hold the
// gc lock shared while they add blobs; rmi holds it exclusively while it
// deletes them, so that it never deletes a blob a pull is about to name.
func (s *Store) lock(file string, how int) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.dir, ingestDir, file), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the content store: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the content store (%s): %w", f.Name(), err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// writeFileAtomic writes b to a temporary file next to path, then renames it
// over path.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing left to remove
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
