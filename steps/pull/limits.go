package pull

import (
	"fmt"
	"hash"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Limits on what a runtime reads into memory whole. Layers are streamed
// and never held in memory; manifests, indexes and configs are parsed as
// JSON, so a registry (or a layout on disk) that serves a huge one could make
// the node's runtime run out of memory. Each is checked against its size
// before it is read: the size a registry announces, the size a descriptor
// names, the size of the file in the content store.
const (
	// MaxManifestSize bounds a manifest or an index: 4 MiB, containerd's
	// limit when it resolves a reference (remotes/docker.MaxManifestSize)
	// and skopeo's (containers/image iolimits.MaxManifestBodySize). A
	// 128-layer manifest is about 32 KiB.
	MaxManifestSize = 4 << 20
	// MaxConfigSize bounds an image config: 4 MiB, skopeo's limit
	// (iolimits.MaxConfigBodySize). A config holds the entrypoint, the
	// environment, labels and the history: a few KiB in real images.
	MaxConfigSize = 4 << 20
	// MaxIndexDepth bounds how many indexes deep Pull follows an index whose
	// entry for the platform is itself an index, as containerd follows
	// them; real images have one index, or two.
	MaxIndexDepth = 4
)

// tooLarge is the error for a blob over its limit.
func tooLarge(kind string, d v1.Hash, size, limit int64) error {
	name := kind
	if d.Hex != "" {
		name += " " + d.String()
	}
	what := kind + "s"
	if kind == "manifest" || kind == "index" { // one limit for both
		what = "manifests and indexes"
	}
	return fmt.Errorf("%w: %s is %d bytes, over podlab's limit of %d bytes (%d MiB) for %s, "+
		"the limit containerd and skopeo apply too; it was not read and nothing was stored",
		ErrTooLarge, name, size, limit, limit>>20, what)
}

// manifestKind names what a manifest-like media type is, for errors:
// "index" for an OCI index or a Docker manifest list, else "manifest".
func manifestKind(mt types.MediaType) string {
	if isIndex(mt) {
		return "index"
	}
	return "manifest"
}

// hasherFor returns a hash for d's algorithm: sha256 or sha512.
func hasherFor(d v1.Hash) (hash.Hash, error) {
	switch d.Algorithm {
	case "sha256", "sha512":
		return v1.Hasher(d.Algorithm)
	}
	return nil, fmt.Errorf("%w: %s (podlab verifies sha256 and sha512 digests)", ErrUnsupportedDigest, d)
}

// hashBytes computes b's digest with algorithm alg ("sha256" or "sha512").
func hashBytes(alg string, b []byte) (v1.Hash, error) {
	h, err := hasherFor(v1.Hash{Algorithm: alg})
	if err != nil {
		return v1.Hash{}, err
	}
	h.Write(b)
	return v1.Hash{Algorithm: alg, Hex: fmt.Sprintf("%x", h.Sum(nil))}, nil
}

// openBounded opens the stored blob d of the given kind, refusing it, before
// reading a byte, when its file is larger than limit. The reader stops at
// limit bytes in any case.
func (s *Store) openBounded(kind string, d v1.Hash, limit int64) (io.ReadCloser, error) {
	f, err := os.Open(s.BlobPath(d))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Size() > limit {
		f.Close()
		return nil, tooLarge(kind, d, fi.Size(), limit)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, limit), f}, nil
}
