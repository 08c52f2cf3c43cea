package pull

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}

// checkStored checks that the store holds img under ref, readable through
// Store.Image and through ggcr's layout package, every blob verified.
func checkStored(t *testing.T, s *Store, ref string, img v1.Image) {
	t.Helper()
	got, err := s.Image(ref)
	if err != nil {
		t.Fatalf("Image(%q): %v", ref, err)
	}
	if g, w := digestOf(t, got), digestOf(t, img); g != w {
		t.Fatalf("Image(%q) digest = %s, want %s", ref, g, w)
	}
	if err := verifyImage(got); err != nil {
		t.Fatalf("stored image %s does not validate: %v", ref, err)
	}
	// ggcr's own layout reader finds it by digest in index.json.
	p, err := layout.FromPath(s.Dir())
	if err != nil {
		t.Fatalf("the store is not a layout ggcr reads: %v", err)
	}
	if _, err := p.Image(digestOf(t, img)); err != nil {
		t.Fatalf("layout.Image: %v", err)
	}
}

func TestPull_ByTag(t *testing.T) {
	reg := newTestRegistry(t)
	img := ociImage(t, amd64, 3000, 2000, 1000)
	ref := reg.push(t, "demo/app:v1", img)
	s := openStore(t)
	var progress bytes.Buffer

	res, err := Pull(context.Background(), s, ref, Options{Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reference != ref {
		t.Errorf("Reference = %q, want %q", res.Reference, ref)
	}
	if res.Source != reg.Host+"/demo/app" {
		t.Errorf("Source = %q, want %s/demo/app", res.Source, reg.Host)
	}
	if res.Index != nil || res.UpToDate {
		t.Errorf("Index = %v, UpToDate = %v; want nil, false", res.Index, res.UpToDate)
	}
	if res.Manifest.Digest != digestOf(t, img) || res.Manifest.MediaType != types.OCIManifestSchema1 {
		t.Errorf("Manifest = %+v, want %s %s", res.Manifest, digestOf(t, img), types.OCIManifestSchema1)
	}
	if res.Platform != "linux/amd64" {
		t.Errorf("Platform = %q, want linux/amd64", res.Platform)
	}
	if len(res.Layers) != 3 {
		t.Fatalf("%d layers, want 3", len(res.Layers))
	}
	var total int64 = res.Config.Size
	for _, b := range append([]Blob{res.Manifest, res.Config}, res.Layers...) {
		if !b.Downloaded {
			t.Errorf("%s %s not downloaded on a first pull", b.Kind, b.Digest)
		}
		if !filepath.IsAbs(b.Path) || b.Path != filepath.Join(s.Dir(), "blobs", "sha256", b.Digest.Hex) {
			t.Errorf("%s path %q is not the blob's absolute path in the layout", b.Kind, b.Path)
		}
		if fi, err := os.Stat(b.Path); err != nil || fi.Size() != b.Size {
			t.Errorf("%s %s on disk: %v, size want %d", b.Kind, b.Digest, err, b.Size)
		}
		if b.Kind == "layer" {
			total += b.Size
			if !strings.Contains(progress.String(), "layer  "+ShortDigest(b.Digest)) {
				t.Errorf("progress has no line for layer %s:\n%s", ShortDigest(b.Digest), progress.String())
			}
		}
	}
	if res.Downloaded != total {
		t.Errorf("Downloaded = %d, want config+layers = %d", res.Downloaded, total)
	}
	checkStored(t, s, ref, img)

	// index.json names it with the full reference, for skopeo, umoci, crane and containerd.
	idx, err := s.readIndex()
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[AnnotationRefName] != ref ||
		idx.Manifests[0].Annotations[AnnotationContainerdName] != ref {
		t.Errorf("index.json entries = %+v, want one named %s", idx.Manifests, ref)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), ingestDir)); len(ents) != 1 { // gc.lock only... or index.lock
		names := []string{}
		for _, e := range ents {
			names = append(names, e.Name())
		}
		for _, n := range names {
			if strings.HasSuffix(n, ".partial") {
				t.Errorf("ingest/ keeps a partial blob: %v", names)
			}
		}
	}
}

func TestPull_ByDigest(t *testing.T) {
	reg := newTestRegistry(t)
	img := ociImage(t, amd64, 500)
	reg.push(t, "demo/app:v1", img)
	s := openStore(t)
	ref := reg.Host + "/demo/app@" + digestOf(t, img).String()

	res, err := Pull(context.Background(), s, ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reference != ref || res.Resolved != digestOf(t, img) {
		t.Errorf("Reference, Resolved = %q, %s; want %q, %s", res.Reference, res.Resolved, ref, digestOf(t, img))
	}
	checkStored(t, s, ref, img)
	if _, err := s.Image(reg.Host + "/demo/app:v1"); !errors.Is(err, ErrImageNotFound) {
		t.Errorf("Image by tag after a pull by digest = %v, want ErrImageNotFound", err)
	}
}

func TestPull_Index(t *testing.T) {
	reg := newTestRegistry(t)
	idx, imgs := ociIndex(t, "linux/amd64", "linux/arm64/v8", "linux/arm/v7")
	ref := reg.push(t, "demo/multi:v1", idx)
	host := HostPlatform()
	tests := []struct {
		name, platform, want, reason string
	}{
		{"host platform by default", "", "linux/amd64", "matches this host's platform"},
		{"arm64 without variant", "linux/arm64", "linux/arm64/v8", "matches --platform linux/arm64"},
		{"arm v7", "linux/arm/v7", "linux/arm/v7", "matches --platform linux/arm/v7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.platform == "" && platformString(host) != "linux/amd64" {
				tt.want = platformString(host)
			}
			s := openStore(t)
			res, err := Pull(context.Background(), s, ref, Options{Platform: tt.platform})
			if err != nil {
				t.Fatal(err)
			}
			if res.Index == nil {
				t.Fatal("Index is nil for an image index")
			}
			if res.Index.Manifests != 4 || res.Index.Digest != digestOf(t, idx) || res.Resolved != digestOf(t, idx) {
				t.Errorf("Index = %+v, want 4 manifests, digest %s", res.Index, digestOf(t, idx))
			}
			wantLine := fmt.Sprintf("index with 4 manifests: chose %s (%s", tt.want, tt.reason)
			if !strings.HasPrefix(res.Index.String(), wantLine) {
				t.Errorf("Index.String() = %q, want prefix %q", res.Index.String(), wantLine)
			}
			if strings.Join(res.Index.Platforms, ",") != "linux/amd64,linux/arm64/v8,linux/arm/v7" {
				t.Errorf("Platforms = %v (attestations must be left out)", res.Index.Platforms)
			}
			if res.Platform != tt.want {
				t.Errorf("Platform = %q, want %q", res.Platform, tt.want)
			}
			checkStored(t, s, ref, imgs[tt.want])
			// The platform is recorded on the index.json entry.
			got, _ := s.readIndex()
			if p := got.Manifests[0].Platform; p == nil || platformString(*p) != tt.want {
				t.Errorf("index.json platform = %v, want %s", p, tt.want)
			}
		})
	}
}

func TestPull_RepullFetchesNoBlob(t *testing.T) {
	reg := newTestRegistry(t)
	idx, _ := ociIndex(t, "linux/amd64", "linux/arm64")
	ref := reg.push(t, "demo/multi:v1", idx)
	s := openStore(t)
	if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	reg.reset()

	res, err := Pull(context.Background(), s, ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate {
		t.Error("UpToDate = false on a re-pull of an unchanged image")
	}
	if got := reg.seen("/blobs/"); len(got) != 0 {
		t.Errorf("re-pull fetched blobs: %v", got)
	}
	if got := reg.seen("GET", "/manifests/"); len(got) != 0 {
		t.Errorf("re-pull downloaded manifests: %v", got)
	}
	if got := reg.seen("HEAD", "/manifests/v1"); len(got) != 1 {
		t.Errorf("re-pull asked for the tag's digest %d times, want once (HEAD): all requests %v", len(got), reg.seen(""))
	}
	for _, b := range append([]Blob{res.Manifest, res.Config}, res.Layers...) {
		if b.Downloaded {
			t.Errorf("%s %s reported downloaded on an up-to-date re-pull", b.Kind, b.Digest)
		}
	}
	if !before.equal(snap(t, s)) {
		t.Error("an up-to-date re-pull changed the store")
	}

	// Another platform of the same tag is a different image: it is fetched.
	res, err = Pull(context.Background(), s, ref, Options{Platform: "linux/arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate || res.Platform != "linux/arm64" {
		t.Errorf("UpToDate, Platform = %v, %q after switching platform; want false, linux/arm64", res.UpToDate, res.Platform)
	}
}

func TestPull_NewTagSharesLayers(t *testing.T) {
	reg := newTestRegistry(t)
	base := ociImage(t, amd64, 4000, 3000)
	ref := reg.push(t, "demo/app:v1", base)
	s := openStore(t)
	if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	// v2 = v1 plus one layer, as a rebuild that changes only the top layer.
	v2 := ociImage(t, amd64) // fresh config
	baseLayers, _ := base.Layers()
	extra := ociImage(t, amd64, 1500)
	extraLayers, _ := extra.Layers()
	v2 = withLayers(t, v2, append(baseLayers, extraLayers...)...)
	ref2 := reg.push(t, "demo/app:v1", v2) // the tag moves
	reg.reset()

	res, err := Pull(context.Background(), s, ref2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate {
		t.Fatal("UpToDate after the tag moved")
	}
	for i, l := range res.Layers {
		if wantDownloaded := i == 2; l.Downloaded != wantDownloaded {
			t.Errorf("layer %d Downloaded = %v, want %v", i, l.Downloaded, wantDownloaded)
		}
	}
	if got := reg.seen("GET", "/blobs/"); len(got) != 2 { // the new config and the new layer
		t.Errorf("blob GETs = %v, want 2 (new config, new layer)", got)
	}
	checkStored(t, s, ref2, v2)
	if idx, _ := s.readIndex(); len(idx.Manifests) != 1 {
		t.Errorf("index.json has %d entries for one tag, want 1", len(idx.Manifests))
	}
}

func TestPull_Mirror(t *testing.T) {
	mirror := newTestRegistry(t)
	img := ociImage(t, amd64, 800)
	mirror.push(t, "library/nginx:latest", img)
	other := newTestRegistry(t)
	otherImg := ociImage(t, amd64, 700)
	otherRef := other.push(t, "demo/app:v1", otherImg)
	mirror.reset()

	tests := []struct {
		name, ref, mirrorURL, wantRef, wantSource string
		img                                       v1.Image
		mirrorHits                                bool
	}{
		{"short docker.io name goes to the mirror", "nginx", mirror.URL, "docker.io/library/nginx:latest", mirror.Host + "/library/nginx", img, true},
		{"full docker.io name goes to the mirror", "docker.io/library/nginx:latest", mirror.URL, "docker.io/library/nginx:latest", mirror.Host + "/library/nginx", img, true},
		{"mirror given as host only", "index.docker.io/library/nginx", mirror.Host, "docker.io/library/nginx:latest", mirror.Host + "/library/nginx", img, true},
		{"other registries are not mirrored", otherRef, mirror.URL, otherRef, other.Host + "/demo/app", otherImg, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mirror.reset()
			s := openStore(t)
			res, err := Pull(context.Background(), s, tt.ref, Options{Mirror: tt.mirrorURL})
			if err != nil {
				t.Fatal(err)
			}
			if res.Reference != tt.wantRef || res.Source != tt.wantSource {
				t.Errorf("Reference, Source = %q, %q; want %q, %q", res.Reference, res.Source, tt.wantRef, tt.wantSource)
			}
			if hits := len(mirror.seen("/v2/library/nginx/")) > 0; hits != tt.mirrorHits {
				t.Errorf("mirror received library/nginx requests: %v, want %v", hits, tt.mirrorHits)
			}
			if tt.mirrorHits != (res.Mirror != "") {
				t.Errorf("Mirror = %q", res.Mirror)
			}
			// Later steps find it by the name the user typed.
			checkStored(t, s, tt.ref, tt.img)
			checkStored(t, s, tt.wantRef, tt.img)
		})
	}
}

func TestPull_ConcurrentPullsKeepEveryName(t *testing.T) {
	reg := newTestRegistry(t)
	const n = 6
	var refs []string
	var imgs []v1.Image
	for i := range n {
		img := ociImage(t, amd64, 1000, 700) // distinct random layers
		imgs = append(imgs, img)
		refs = append(refs, reg.push(t, fmt.Sprintf("demo/app%d:v1", i), img))
	}
	s := openStore(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Each goroutine opens the store itself, as separate processes would.
			s2, err := OpenStore(s.Dir())
			if err == nil {
				_, err = Pull(context.Background(), s2, refs[i], Options{})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
		checkStored(t, s, refs[i], imgs[i])
	}
}

func TestPull_BadInputs(t *testing.T) {
	reg := newTestRegistry(t)
	img := ociImage(t, amd64, 2000, 1000)
	ref := reg.push(t, "demo/app:v1", img)
	idx, _ := ociIndex(t, "linux/amd64", "linux/arm64")
	idxRef := reg.push(t, "demo/multi:v1", idx)
	layers, _ := img.Layers()
	topLayer := digestOf(t, layers[1])

	// A second registry serves the same image with its top layer tampered:
	// one byte flipped; a third with it one byte short.
	tampered := newTestRegistry(t)
	tamperedRef := tampered.push(t, "demo/app:v1", img)
	tampered.setTamper(topLayer)
	short := newTestRegistry(t)
	shortRef := short.push(t, "demo/app:v1", img)
	short.setTruncate(topLayer)

	down := newTestRegistry(t)
	down.Close()

	tests := []struct {
		name     string
		ref      string
		opts     Options
		wantErr  error
		contains []string
	}{
		{"malformed reference", "Demo/App:v1", Options{}, ErrBadReference, []string{"Demo/App"}},
		{"empty reference", "", Options{}, ErrBadReference, nil},
		{"truncated digest", reg.Host + "/demo/app@sha256:abc", Options{}, ErrBadReference, nil},
		{"unknown tag", reg.Host + "/demo/app:nope", Options{}, ErrManifestUnknown, []string{"tag nope", reg.Host + "/demo/app"}},
		{"unknown repository", reg.Host + "/demo/nothing:v1", Options{}, ErrManifestUnknown, []string{"demo/nothing"}},
		{"unknown digest", reg.Host + "/demo/app@" + someDigest, Options{}, ErrManifestUnknown, []string{someDigest}},
		{"registry down", down.Host + "/demo/app:v1", Options{}, ErrRegistryUnreachable, []string{down.Host}},
		{"tampered layer", tamperedRef, Options{}, ErrDigestMismatch, []string{"expected " + topLayer.String(), "got sha256:"}},
		{"truncated layer", shortRef, Options{}, ErrSizeMismatch, []string{topLayer.String()}},
		{"platform not in the index", idxRef, Options{Platform: "linux/s390x"}, ErrNoMatchingPlatform, []string{"linux/s390x", "available platforms: linux/amd64, linux/arm64"}},
		{"platform not of a single image", ref, Options{Platform: "linux/arm64"}, ErrNoMatchingPlatform, []string{"linux/amd64", "linux/arm64"}},
		{"malformed platform", ref, Options{Platform: "linux"}, nil, []string{"os/arch"}},
		{"mirror with a path", "nginx", Options{Mirror: reg.URL + "/some/path"}, nil, []string{"invalid registry mirror"}},
		{"mirror with a bad scheme", "nginx", Options{Mirror: "ftp://" + reg.Host}, nil, []string{"scheme must be http or https"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			before := snap(t, s)
			_, err := Pull(context.Background(), s, tt.ref, tt.opts)
			if err == nil {
				t.Fatal("pull succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v\nwant errors.Is %v", err, tt.wantErr)
			}
			for _, c := range tt.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not mention %q", err, c)
				}
			}
			if after := snap(t, s); !after.equal(before) {
				t.Errorf("a failed pull changed the store:\nbefore %+v\nafter  %+v", before, after)
			}
			t.Logf("error (as a learner sees it): %v", err)
		})
	}

	t.Run("tampered layer next to a good store", func(t *testing.T) {
		// A store that already holds other images stays as it was.
		s := openStore(t)
		other := ociImage(t, amd64, 300)
		if _, err := Pull(context.Background(), s, tampered.push(t, "demo/other:v1", other), Options{}); err != nil {
			t.Fatal(err)
		}
		before := snap(t, s)
		_, err := Pull(context.Background(), s, tamperedRef, Options{})
		if !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("error = %v, want ErrDigestMismatch", err)
		}
		if !snap(t, s).equal(before) {
			t.Error("the failed pull changed the store")
		}
		if s.Has(topLayer) {
			t.Error("the tampered layer entered the store")
		}
	})
}

// verifyImage reads every blob of img and checks its sha256 and size
// against the manifest (what validate.Image does, without its go-cmp
// dependency).
func verifyImage(img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if h, n, _ := v1.SHA256(bytes.NewReader(raw)); h != m.Config.Digest || n != m.Config.Size {
		return fmt.Errorf("config: %s (%d bytes), manifest says %s (%d)", h, n, m.Config.Digest, m.Config.Size)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		h, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		if h != m.Layers[i].Digest || n != m.Layers[i].Size {
			return fmt.Errorf("layer %d: %s (%d bytes), manifest says %s (%d)", i, h, n, m.Layers[i].Digest, m.Layers[i].Size)
		}
	}
	return nil
}
