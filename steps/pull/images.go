package pull

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// ImageSummary is one line of `podlab images`, as `crictl images` lists
// what a node's runtime has stored.
type ImageSummary struct {
	// Reference is the full name, e.g. "docker.io/library/nginx:latest";
	// "" for an entry with no name (written by another tool).
	Reference string
	// Repository and Tag split Reference ("<none>" when absent).
	Repository string
	Tag        string
	// Digest is the stored manifest's digest.
	Digest    v1.Hash
	MediaType types.MediaType
	// Platform is "os/arch[/variant]" when known.
	Platform string
	// Size is config plus layers, compressed, as crictl reports it.
	Size int64
}

// List returns the images index.json names, in its order.
func (s *Store) List() ([]ImageSummary, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	var out []ImageSummary
	for _, d := range idx.Manifests {
		im := ImageSummary{Reference: d.Annotations[AnnotationRefName], Repository: "<none>", Tag: "<none>",
			Digest: d.Digest, MediaType: d.MediaType}
		if r, err := ParseReference(im.Reference); err == nil {
			im.Repository = r.Registry + "/" + r.Repository
			if r.Tag != "" {
				im.Tag = r.Tag
			}
		}
		if d.Platform != nil {
			im.Platform = platformString(*d.Platform)
		}
		if m, err := s.readManifest(d.Digest); err == nil && isImageManifest(d.MediaType) {
			im.Size = m.Config.Size
			for _, l := range m.Layers {
				im.Size += l.Size
			}
		} else {
			im.Size = d.Size
		}
		out = append(out, im)
	}
	return out, nil
}

// ImageDetails is what `podlab inspect` shows: the manifest, the config and
// each layer, with where each blob is on disk.
type ImageDetails struct {
	Reference string
	// Resolved is the digest the registry resolved the reference to (the
	// index's when the image came from an index).
	Resolved     string
	Manifest     Blob
	ManifestJSON *v1.Manifest
	Config       Blob
	ConfigJSON   *v1.ConfigFile
	Layers       []LayerDetails
	StoreDir     string
}

// LayerDetails is one layer: the compressed blob the registry serves
// (Digest) and the digest of its uncompressed tar (DiffID), which the
// config's rootfs.diff_ids lists in the same order.
type LayerDetails struct {
	Blob
	DiffID v1.Hash
}

// Inspect reads a stored image's manifest and config.
func (s *Store) Inspect(ref string) (*ImageDetails, error) {
	e, err := s.lookup(ref)
	if err != nil {
		return nil, err
	}
	if !isImageManifest(e.desc.MediaType) {
		return nil, fmt.Errorf("inspecting %s: %w %q", e.name, ErrUnsupportedMediaType, e.desc.MediaType)
	}
	m, err := s.readManifest(e.desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: reading manifest %s: %w", e.name, e.desc.Digest, err)
	}
	if m.Config.Size > MaxConfigSize {
		return nil, fmt.Errorf("inspecting %s: %w", e.name, tooLarge("config", m.Config.Digest, m.Config.Size, MaxConfigSize))
	}
	f, err := s.openBounded("config", m.Config.Digest, MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: reading config %s: %w", e.name, m.Config.Digest, err)
	}
	defer f.Close()
	cfg, err := v1.ParseConfigFile(f)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: reading config %s: %w", e.name, m.Config.Digest, err)
	}
	out := &ImageDetails{
		Reference:    e.name,
		Resolved:     e.desc.Annotations[AnnotationResolvedDigest],
		Manifest:     s.blobFor("manifest", e.desc),
		ManifestJSON: m,
		Config:       s.blobFor("config", m.Config),
		ConfigJSON:   cfg,
		StoreDir:     s.dir,
	}
	for i, l := range m.Layers {
		ld := LayerDetails{Blob: s.blobFor("layer", l)}
		if i < len(cfg.RootFS.DiffIDs) {
			ld.DiffID = cfg.RootFS.DiffIDs[i]
		}
		out.Layers = append(out.Layers, ld)
	}
	return out, nil
}

// RemoveResult tells what `podlab rmi` removed.
type RemoveResult struct {
	Reference string
	Digest    v1.Hash
	// Deleted are the blobs no other stored image used; they are gone.
	// Kind "unused" marks a blob no image used any more before this rmi.
	Deleted []Blob
	// Kept are the image's blobs still used by another stored image.
	Kept []Blob
	// BytesFreed is the size of Deleted.
	BytesFreed int64
	IndexPath  string
}

// Remove removes ref's entry from index.json, then deletes the blobs
// (manifest, config, layers) that no other stored image uses, as
// containerd's garbage collector does once an image's name is gone. It also
// deletes any other blob no stored image reaches (Kind "unused"), such as
// the old manifest of a tag that a later pull moved.
func (s *Store) Remove(ref string) (*RemoveResult, error) {
	// Exclusive: no pull is between writing a blob and naming it.
	unlock, err := s.lock(gcLockFile, unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer unlock()

	var res *RemoveResult
	var remaining []v1.Descriptor
	err = s.updateIndex(func(idx *v1.IndexManifest) error {
		e, err := s.lookupIn(idx, ref)
		if err != nil {
			return err
		}
		res = &RemoveResult{Reference: e.name, Digest: e.desc.Digest, IndexPath: s.indexPath()}
		idx.Manifests = slices.DeleteFunc(idx.Manifests, func(d v1.Descriptor) bool {
			return d.Annotations[AnnotationRefName] == e.name && d.Digest == e.desc.Digest
		})
		remaining = idx.Manifests
		return nil
	})
	if err != nil {
		return nil, err
	}

	used := map[v1.Hash]bool{}
	for _, d := range remaining {
		s.markUsed(d, used)
	}
	candidates := []Blob{}
	if m, err := s.readManifest(res.Digest); err == nil {
		candidates = append(candidates, s.blobFor("config", m.Config))
		for _, l := range m.Layers {
			candidates = append(candidates, s.blobFor("layer", l))
		}
	}
	if fi, err := os.Stat(s.BlobPath(res.Digest)); err == nil {
		candidates = append(candidates, Blob{Kind: "manifest", Digest: res.Digest, Size: fi.Size(), Path: s.BlobPath(res.Digest)})
	}
	seen := map[v1.Hash]bool{}
	for _, b := range candidates {
		if seen[b.Digest] {
			continue
		}
		seen[b.Digest] = true
		if used[b.Digest] {
			res.Kept = append(res.Kept, b)
			continue
		}
		if err := s.deleteBlob(b, res); err != nil {
			return res, err
		}
	}
	// Sweep the rest: blobs no name reaches any more, such as those of an
	// image whose tag a later pull moved to another manifest.
	for _, alg := range []string{"sha256", "sha512"} {
		ents, err := os.ReadDir(filepath.Join(s.dir, "blobs", alg))
		if errors.Is(err, fs.ErrNotExist) && alg != "sha256" {
			continue // made on first use
		}
		if err != nil {
			return res, fmt.Errorf("removing %s: %w", res.Reference, err)
		}
		for _, e := range ents {
			d := v1.Hash{Algorithm: alg, Hex: e.Name()}
			if seen[d] || used[d] || e.IsDir() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			if err := s.deleteBlob(Blob{Kind: "unused", Digest: d, Size: fi.Size(), Path: s.BlobPath(d)}, res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func (s *Store) deleteBlob(b Blob, res *RemoveResult) error {
	if err := os.Remove(b.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: deleting blob %s: %w", res.Reference, b.Digest, err)
	}
	res.Deleted = append(res.Deleted, b)
	res.BytesFreed += b.Size
	return nil
}

// markUsed marks d and every blob it references (recursively, for an
// index) as used.
func (s *Store) markUsed(d v1.Descriptor, used map[v1.Hash]bool) {
	if used[d.Digest] {
		return
	}
	used[d.Digest] = true
	switch {
	case isImageManifest(d.MediaType):
		m, err := s.readManifest(d.Digest)
		if err != nil {
			return
		}
		used[m.Config.Digest] = true
		for _, l := range m.Layers {
			used[l.Digest] = true
		}
	case isIndex(d.MediaType):
		f, err := s.openBounded("index", d.Digest, MaxManifestSize)
		if err != nil {
			return
		}
		defer f.Close()
		idx, err := v1.ParseIndexManifest(f)
		if err != nil {
			return
		}
		for _, c := range idx.Manifests {
			s.markUsed(c, used)
		}
	}
}

// Images are the stored images that have a reference, as v1.Image: what
// a snapshot GC keeps the layers of (unpack.KeepImages).
func (s *Store) Images() ([]v1.Image, error) {
	images, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []v1.Image
	for _, im := range images {
		if im.Reference == "" {
			continue
		}
		img, err := s.Image(im.Reference)
		if err != nil {
			return nil, fmt.Errorf("reading the stored image %s: %w", im.Reference, err)
		}
		out = append(out, img)
	}
	return out, nil
}
