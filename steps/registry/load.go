package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	specv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/podlab/podlab/steps/pull"
)

// Loaded is one image Load pushed into a registry.
type Loaded struct {
	Ref       string          // its name in the layout: "library/nginx:latest"
	Reference string          // where it is now: "127.0.0.1:5001/library/nginx:latest"
	Digest    v1.Hash         // the manifest's (or index's) digest, the same as in the layout
	MediaType types.MediaType // an image manifest or an image index
	Blobs     int             // the blobs it references (config and layers, of every image)
	Uploaded  []v1.Hash       // the blobs sent; the others were in the registry already
}

// Load pushes every image of the OCI layout at layoutDir that has an
// org.opencontainers.image.ref.name annotation to the registry at addr, as
// addr/<ref name>: "library/nginx:latest" becomes
// 127.0.0.1:5001/library/nginx:latest. go-containerregistry asks the
// registry for each blob (HEAD /v2/<name>/blobs/<digest>) before sending it,
// so blobs the registry has are not sent again. Entries without a name are
// skipped; a layout with no named entry is ErrNoImages.
func Load(ctx context.Context, addr, layoutDir string) ([]Loaded, error) {
	if err := checkLayout(layoutDir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v (build it with `make images`)", ErrNoLayout, layoutDir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", layoutDir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading %s/index.json: %w", layoutDir, err)
	}

	var loaded []Loaded
	for _, d := range im.Manifests {
		if err := ctx.Err(); err != nil {
			return loaded, err
		}
		refName := d.Annotations[specv1.AnnotationRefName]
		if refName == "" {
			continue
		}
		ref, err := name.ParseReference(addr+"/"+refName, name.Insecure)
		if err != nil {
			return loaded, fmt.Errorf("image %s in %s: %w", refName, layoutDir, err)
		}
		counter := &uploadCounter{next: http.DefaultTransport}
		opts := []remote.Option{
			remote.WithContext(ctx),
			remote.WithTransport(counter),
			remote.WithUserAgent(loadUserAgent),
		}
		l := Loaded{Ref: refName, Reference: ref.String(), Digest: d.Digest, MediaType: d.MediaType}
		if err := checkManifestSize(layoutDir, d); err != nil {
			return loaded, fmt.Errorf("reading %s from %s: %w", refName, layoutDir, err)
		}
		switch {
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return loaded, fmt.Errorf("reading %s from %s: %w", refName, layoutDir, err)
			}
			if m, err := img.Manifest(); err == nil && m.Config.Size > pull.MaxConfigSize {
				return loaded, fmt.Errorf("reading %s from %s: %w: config %s is %d bytes, over the limit of %d bytes (4 MiB) a runtime pulling it would refuse",
					refName, layoutDir, pull.ErrTooLarge, m.Config.Digest, m.Config.Size, pull.MaxConfigSize)
			}
			if l.Blobs, err = countBlobs(img); err != nil {
				return loaded, fmt.Errorf("reading %s from %s: %w", refName, layoutDir, err)
			}
			err = remote.Write(ref, img, opts...)
			if err != nil {
				return loaded, fmt.Errorf("pushing %s to %s: %w", refName, addr, err)
			}
		case d.MediaType.IsIndex():
			ii, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return loaded, fmt.Errorf("reading %s from %s: %w", refName, layoutDir, err)
			}
			if l.Blobs, err = countIndexBlobs(ii); err != nil {
				return loaded, fmt.Errorf("reading %s from %s: %w", refName, layoutDir, err)
			}
			if err := remote.WriteIndex(ref, ii, opts...); err != nil {
				return loaded, fmt.Errorf("pushing %s to %s: %w", refName, addr, err)
			}
		default:
			continue // not an image: nothing a runtime would pull
		}
		l.Uploaded = counter.uploaded()
		loaded = append(loaded, l)
	}
	if len(loaded) == 0 {
		return nil, fmt.Errorf("%w: %s has %d entries, none named by an %s annotation (build it with `make images`)",
			ErrNoImages, layoutDir, len(im.Manifests), specv1.AnnotationRefName)
	}
	return loaded, nil
}

// checkManifestSize refuses a manifest or index of the layout over
// pull.MaxManifestSize, by its descriptor and by its file, before
// go-containerregistry reads it whole.
func checkManifestSize(layoutDir string, d v1.Descriptor) error {
	size := d.Size
	if fi, err := os.Stat(filepath.Join(layoutDir, "blobs", d.Digest.Algorithm, d.Digest.Hex)); err == nil {
		size = max(size, fi.Size())
	}
	if size > pull.MaxManifestSize {
		return fmt.Errorf("%w: manifest %s is %d bytes, over the limit of %d bytes (4 MiB) a runtime pulling it would refuse",
			pull.ErrTooLarge, d.Digest, size, pull.MaxManifestSize)
	}
	return nil
}

// checkLayout says, with a hint, when dir is not an OCI layout.
func checkLayout(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w at %s: no index.json (build the demo images with `make images`)", ErrNoLayout, dir)
		}
		return fmt.Errorf("%w at %s: %v", ErrNoLayout, dir, err)
	}
	return nil
}

func countBlobs(img v1.Image) (int, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	return 1 + len(layers), nil
}

func countIndexBlobs(ii v1.ImageIndex) (int, error) {
	m, err := ii.IndexManifest()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsImage():
			img, err := ii.Image(d.Digest)
			if err != nil {
				return 0, err
			}
			c, err := countBlobs(img)
			if err != nil {
				return 0, err
			}
			n += c
		case d.MediaType.IsIndex():
			child, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return 0, err
			}
			c, err := countIndexBlobs(child)
			if err != nil {
				return 0, err
			}
			n += c
		}
	}
	return n, nil
}

// uploadCounter watches a push: each finished blob upload is a PUT to
// /v2/<name>/blobs/uploads/<id>?digest=<digest>.
type uploadCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []v1.Hash
}

func (u *uploadCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/blobs/uploads/") {
		return resp, err
	}
	if resp.StatusCode == http.StatusCreated {
		if h, herr := v1.NewHash(r.URL.Query().Get("digest")); herr == nil {
			u.mu.Lock()
			u.got = append(u.got, h)
			u.mu.Unlock()
		}
	}
	return resp, err
}

func (u *uploadCounter) uploaded() []v1.Hash {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]v1.Hash(nil), u.got...)
}
