package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	specv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// RefNameAnnotation is the index.json annotation that names an image in an
// OCI layout ("org.opencontainers.image.ref.name"): what skopeo, umoci and
// podlab's registry use to find it by name.
const RefNameAnnotation = specv1.AnnotationRefName

func goarch() string { return runtime.GOARCH }

// BuildOptions are the inputs of BuildAll.
type BuildOptions struct {
	// ModuleDir is the podlab module, where the hello program's source is.
	// Empty means the current directory.
	ModuleDir string
	// CacheDir keeps the downloaded .deb files between builds. Required.
	CacheDir string
	// WorkDir holds the hello binary and the nginx root while building.
	// Empty means a temporary directory, removed at the end.
	WorkDir string
	// Log receives one line per step. Nil means nothing is printed.
	Log io.Writer
}

// Built describes one image BuildAll wrote.
type Built struct {
	Ref    string  // its name in the layout: "library/nginx:latest"
	Digest v1.Hash // the manifest's digest
	Size   int64   // manifest, config and compressed layers, in bytes
	Layers []BuiltLayer
}

// BuiltLayer is one layer of a Built image.
type BuiltLayer struct {
	Digest    v1.Hash // of the compressed blob
	Size      int64   // compressed
	CreatedBy string  // from the image's history
}

// BuildAll builds every demo image (podlab/hello:1.0,
// library/nginx:latest and pause:3.10.2) and writes them into the OCI image layout at
// layoutDir, each named by a ref.name annotation. Running it again replaces
// the images in place (and removes blobs no image uses any more): it never
// duplicates an entry.
func BuildAll(ctx context.Context, layoutDir string, opts BuildOptions) ([]Built, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("building the demo images: no .deb cache directory given")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.ModuleDir == "" {
		opts.ModuleDir = "."
	}
	work := opts.WorkDir
	if work == "" {
		tmp, err := os.MkdirTemp("", "podlab-images-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}

	bin := filepath.Join(work, "hello")
	fmt.Fprintf(opts.Log, "go build %s -> %s\n", HelloPackage, bin)
	if err := BuildHello(ctx, opts.ModuleDir, bin); err != nil {
		return nil, err
	}
	hello, err := Hello(ctx, HelloOptions{Binary: bin})
	if err != nil {
		return nil, err
	}

	nginxRoot := filepath.Join(work, "nginx-root")
	if err := os.RemoveAll(nginxRoot); err != nil {
		return nil, err
	}
	if _, err := PrepareNginxRoot(ctx, nginxRoot, NginxRootOptions{CacheDir: opts.CacheDir, Log: opts.Log}); err != nil {
		return nil, err
	}
	nginx, err := Nginx(ctx, nginxRoot)
	if err != nil {
		return nil, err
	}

	pauseBin := filepath.Join(work, "pause")
	fmt.Fprintf(opts.Log, "gcc -static pause.c -> %s\n", pauseBin)
	if err := BuildPause(ctx, pauseBin); err != nil {
		return nil, err
	}
	pause, err := Pause(ctx, PauseOptions{Binary: pauseBin})
	if err != nil {
		return nil, err
	}

	named := []Named{{Ref: NginxRef, Image: nginx}, {Ref: HelloRef, Image: hello}, {Ref: PauseRef, Image: pause}}
	if err := WriteLayout(ctx, layoutDir, named); err != nil {
		return nil, err
	}
	built := make([]Built, 0, len(named))
	for _, n := range named {
		b, err := describe(n)
		if err != nil {
			return nil, err
		}
		built = append(built, b)
	}
	return built, nil
}

// Named is an image and the name it gets in a layout.
type Named struct {
	Ref   string
	Image v1.Image
}

// WriteLayout writes images into the OCI image layout at dir (creating it if
// needed), each under a ref.name annotation. An image already there under the
// same name is replaced; blobs that no image in the layout references any
// more are removed.
func WriteLayout(ctx context.Context, dir string, images []Named) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("creating the OCI layout %s: %w", dir, err)
		}
	}
	for _, n := range images {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := p.ReplaceImage(n.Image, match.Annotation(RefNameAnnotation, n.Ref),
			layout.WithAnnotations(map[string]string{RefNameAnnotation: n.Ref}))
		if err != nil {
			return fmt.Errorf("writing %s into %s: %w", n.Ref, dir, err)
		}
	}
	return removeUnusedBlobs(p)
}

// removeUnusedBlobs deletes the blobs that index.json does not reach.
func removeUnusedBlobs(p layout.Path) error {
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	keep := map[v1.Hash]bool{}
	if err := markIndex(idx, keep); err != nil {
		return err
	}
	blobs := filepath.Join(string(p), "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !keep[v1.Hash{Algorithm: "sha256", Hex: e.Name()}] {
			if err := os.Remove(filepath.Join(blobs, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func markIndex(idx v1.ImageIndex, keep map[v1.Hash]bool) error {
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		keep[d.Digest] = true
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return err
			}
			if err := markIndex(child, keep); err != nil {
				return err
			}
			continue
		}
		if !d.MediaType.IsImage() {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		mf, err := img.Manifest()
		if err != nil {
			return err
		}
		keep[mf.Config.Digest] = true
		for _, l := range mf.Layers {
			keep[l.Digest] = true
		}
	}
	return nil
}

func describe(n Named) (Built, error) {
	b := Built{Ref: n.Ref}
	var err error
	if b.Digest, err = n.Image.Digest(); err != nil {
		return b, err
	}
	mf, err := n.Image.Manifest()
	if err != nil {
		return b, err
	}
	raw, err := n.Image.RawManifest()
	if err != nil {
		return b, err
	}
	cfg, err := n.Image.ConfigFile()
	if err != nil {
		return b, err
	}
	b.Size = int64(len(raw)) + mf.Config.Size
	var history []v1.History
	for _, h := range cfg.History {
		if !h.EmptyLayer {
			history = append(history, h)
		}
	}
	for i, l := range mf.Layers {
		bl := BuiltLayer{Digest: l.Digest, Size: l.Size}
		if i < len(history) {
			bl.CreatedBy = history[i].CreatedBy
		}
		b.Size += l.Size
		b.Layers = append(b.Layers, bl)
	}
	return b, nil
}
