package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// bigConfigImage is an image whose config is padded (a label) to more than
// size bytes.
func bigConfigImage(t testing.TB, size int) v1.Image {
	t.Helper()
	img := ociImage(t, amd64, 100)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Labels = map[string]string{"pad": strings.Repeat("x", size)}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// nestIndex wraps inner in depth indexes, each whose only entry, for
// linux/amd64, is the index below.
func nestIndex(t testing.TB, inner v1.ImageIndex, depth int) v1.ImageIndex {
	t.Helper()
	for range depth {
		p := amd64
		inner = mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
			mutate.IndexAddendum{Add: inner, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return inner
}

// Hostile images are refused before they are read, each with an error that
// says what was refused and which limit applied, and the store is unchanged.
func TestPull_HostileImages(t *testing.T) {
	reg := newTestRegistry(t)
	big := bigConfigImage(t, MaxConfigSize)
	bigRef := reg.push(t, "hostile/bigconfig:v1", big)
	bigCfg, err := big.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	hugeManifest := mutate.Annotations(ociImage(t, amd64, 100), map[string]string{"pad": strings.Repeat("y", MaxManifestSize)}).(v1.Image)
	hugeRef := reg.push(t, "hostile/bigmanifest:v1", hugeManifest)
	inner, _ := ociIndex(t, "linux/amd64", "linux/arm64")
	deepRef := reg.push(t, "hostile/deep:v1", nestIndex(t, inner, MaxIndexDepth))
	hugeIndex := mutate.Annotations(inner, map[string]string{"pad": strings.Repeat("z", MaxManifestSize)}).(v1.ImageIndex)
	hugeIndexRef := reg.push(t, "hostile/bigindex:v1", hugeIndex)
	hugeNestedRef := reg.push(t, "hostile/bignested:v1", nestIndex(t, hugeIndex, 1))
	hugeIndexDigest := digestOf(t, hugeIndex).String()

	tests := []struct {
		name     string
		ref      string
		wantErr  error
		contains []string
		notGot   string // a blob, manifest or index that must never be fetched
	}{
		{"config over 4 MiB", bigRef, ErrTooLarge, []string{"config " + bigCfg.String(), "4194304 bytes (4 MiB) for configs"}, "/blobs/" + bigCfg.String()},
		{"manifest over 4 MiB", hugeRef, ErrTooLarge, []string{"manifest", "4194304 bytes (4 MiB) for manifests"}, ""},
		{"index over 4 MiB", hugeIndexRef, ErrTooLarge, []string{"index " + hugeIndexDigest, "4194304 bytes (4 MiB) for manifests and indexes"}, "/manifests/"},
		{"nested index over 4 MiB", hugeNestedRef, ErrTooLarge, []string{"index " + hugeIndexDigest, "4194304 bytes (4 MiB) for manifests and indexes"}, "/manifests/" + hugeIndexDigest},
		{"indexes nested too deep", deepRef, ErrTooLarge, []string{"nests indexes more than 4 deep for linux/amd64"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			before := snap(t, s)
			reg.reset()
			_, err := Pull(context.Background(), s, tt.ref, Options{Platform: "linux/amd64"})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want errors.Is %v", err, tt.wantErr)
			}
			for _, c := range tt.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not mention %q", err, c)
				}
			}
			if tt.notGot != "" {
				if got := reg.seen("GET", tt.notGot); len(got) > 0 {
					t.Errorf("the refused blob was fetched: %q", got)
				}
			}
			if !snap(t, s).equal(before) {
				t.Error("the refused pull changed the store")
			}
			t.Logf("error (as a learner sees it): %v", err)
		})
	}
}

// An index whose linux/amd64 entry is itself an index is followed, as
// containerd follows it, and the result says through which index.
func TestPull_NestedIndex(t *testing.T) {
	reg := newTestRegistry(t)
	inner, imgs := ociIndex(t, "linux/amd64", "linux/arm64")
	outer := nestIndex(t, inner, 1)
	ref := reg.push(t, "demo/nested:v1", outer)
	s := openStore(t)
	res, err := Pull(context.Background(), s, ref, Options{})
	if err != nil {
		t.Fatalf("pulling an index whose linux/amd64 entry is an index: %v", err)
	}
	if res.Index == nil || res.Index.Digest != digestOf(t, outer) || len(res.Index.Via) != 1 || res.Index.Via[0] != digestOf(t, inner) {
		t.Errorf("index choice = %+v, want the outer index through %s", res.Index, digestOf(t, inner))
	}
	if !strings.Contains(res.Index.String(), "through nested index "+digestOf(t, inner).String()) {
		t.Errorf("IndexChoice.String() = %q does not say it went through the nested index", res.Index)
	}
	checkStored(t, s, ref, imgs["linux/amd64"])

	// The nested index lacks the platform: the error says which index.
	_, err = Pull(context.Background(), openStore(t), ref, Options{Platform: "linux/s390x"})
	if !errors.Is(err, ErrNoMatchingPlatform) {
		t.Fatalf("error = %v, want ErrNoMatchingPlatform", err)
	}
	onlyArm, _ := ociIndex(t, "linux/arm64")
	armRef := reg.push(t, "demo/nested-arm:v1", nestIndex(t, onlyArm, 1))
	_, err = Pull(context.Background(), openStore(t), armRef, Options{})
	if !errors.Is(err, ErrNoMatchingPlatform) || !strings.Contains(err.Error(), "nested index "+digestOf(t, onlyArm).String()) ||
		!strings.Contains(err.Error(), "available platforms: linux/arm64") {
		t.Errorf("error = %v, want ErrNoMatchingPlatform naming the nested index and its platforms", err)
	}
}

// pushSHA512Image pushes, blob by blob, an image whose config and layer are
// named by sha512 digests (the OCI image spec allows them; ggcr's writer
// names blobs by sha256 only), and returns its reference and layer.
func pushSHA512Image(t *testing.T, reg *testRegistry, repoTag string) (string, v1.Layer) {
	t.Helper()
	layer, err := random.Layer(2000, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	return pushImageByAlg(t, reg, repoTag, "sha512", layer), layer
}

// pushImageByAlg pushes, blob by blob, an image of layers whose config and
// layer blobs are named by digests of algorithm alg ("sha256" or
// "sha512"), and returns its reference.
func pushImageByAlg(t testing.TB, reg *testRegistry, repoTag, alg string, layers ...v1.Layer) string {
	t.Helper()
	repo, tag, _ := strings.Cut(repoTag, ":")
	put := func(b []byte) v1.Descriptor {
		d, err := hashBytes(alg, b)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(fmt.Sprintf("%s/v2/%s/blobs/uploads/?digest=%s", reg.URL, repo, d), "application/octet-stream", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("pushing blob %s: %s", d, resp.Status)
		}
		return v1.Descriptor{Digest: d, Size: int64(len(b))}
	}
	cfg := v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Entrypoint: []string{"/bin/hello"}}}
	var lds []v1.Descriptor
	for _, layer := range layers {
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		lb, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		diffID, err := layer.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
		ld := put(lb)
		ld.MediaType = types.OCILayer
		lds = append(lds, ld)
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cd := put(cb)
	cd.MediaType = types.OCIConfigJSON
	mb, err := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cd, Layers: lds})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/%s", reg.URL, repo, tag), bytes.NewReader(mb))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", string(types.OCIManifestSchema1))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("pushing the manifest: %s", resp.Status)
	}
	return reg.Host + "/" + repoTag
}

// Blobs named by sha512 digests are pulled, verified, stored under
// blobs/sha512/ and read back; a lying one is refused.
func TestPull_SHA512(t *testing.T) {
	reg := newTestRegistry(t)
	ref, layer := pushSHA512Image(t, reg, "demo/sha512:v1")
	s := openStore(t)
	res, err := Pull(context.Background(), s, ref, Options{})
	if err != nil {
		t.Fatalf("pulling an image with sha512 digests: %v", err)
	}
	for _, b := range append([]Blob{res.Config}, res.Layers...) {
		if b.Digest.Algorithm != "sha512" || !strings.Contains(b.Path, filepath.Join("blobs", "sha512")) {
			t.Errorf("%s %s stored at %s, want under blobs/sha512/", b.Kind, b.Digest, b.Path)
		}
		if _, err := os.Stat(b.Path); err != nil {
			t.Errorf("%s not stored: %v", b.Kind, err)
		}
	}
	img, err := s.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers of the stored image: %v, %v", ls, err)
	}
	got, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := layer.Uncompressed()
	gb, _ := io.ReadAll(got)
	wb, _ := io.ReadAll(want)
	if !bytes.Equal(gb, wb) {
		t.Error("the stored sha512 layer does not read back as pushed")
	}
	if _, err := s.Remove(ref); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "blobs", "sha512")); len(ents) != 0 {
		t.Errorf("rmi left sha512 blobs: %v", ents)
	}

	// The same blob served with a byte flipped is refused by its sha512.
	reg.setTamper(res.Layers[0].Digest)
	_, err = Pull(context.Background(), openStore(t), ref, Options{})
	if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), "got sha512:") {
		t.Errorf("tampered sha512 layer: %v, want ErrDigestMismatch with its sha512", err)
	}
}

// The content store refuses, before reading them, a manifest or config over
// its limit that came from elsewhere than a pull (a layout copied in).
func TestStore_Image_RefusesOversizedConfig(t *testing.T) {
	s := openStore(t)
	big := bigConfigImage(t, MaxConfigSize)
	const name = "docker.io/library/big:latest"
	if err := layout.Path(s.Dir()).AppendImage(big, layout.WithAnnotations(map[string]string{AnnotationRefName: name})); err != nil {
		t.Fatal(err)
	}
	cfgName, _ := big.ConfigName()
	for what, read := range map[string]func() error{
		"Image":   func() error { _, err := s.Image("big"); return err },
		"Inspect": func() error { _, err := s.Inspect("big"); return err },
	} {
		err := read()
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "config "+cfgName.String()) {
			t.Errorf("%s of an image with a %d-byte config: %v, want ErrTooLarge naming the config", what, MaxConfigSize, err)
		}
	}
}
