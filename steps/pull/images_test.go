package pull

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// twoImagesSharingLayers pulls app:v1 (two layers) and app:v2 (the same two
// layers plus one) into a fresh store.
func twoImagesSharingLayers(t *testing.T) (s *Store, ref1, ref2 string, img1, img2 v1.Image) {
	t.Helper()
	reg := newTestRegistry(t)
	img1 = ociImage(t, amd64, 3000, 2000)
	layers, _ := img1.Layers()
	extra, _ := ociImage(t, amd64, 1000).Layers()
	img2 = withLayers(t, ociBase(t, amd64), append(layers, extra...)...)
	ref1 = reg.push(t, "demo/app:v1", img1)
	ref2 = reg.push(t, "demo/app:v2", img2)
	s = openStore(t)
	for _, r := range []string{ref1, ref2} {
		if _, err := Pull(context.Background(), s, r, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	return s, ref1, ref2, img1, img2
}

func sizeOf(t *testing.T, img v1.Image) int64 {
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

func TestStore_List(t *testing.T) {
	s, ref1, ref2, img1, img2 := twoImagesSharingLayers(t)
	got, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("List() = %d images, want 2", len(got))
	}
	for i, want := range []struct {
		ref, tag string
		img      v1.Image
	}{{ref1, "v1", img1}, {ref2, "v2", img2}} {
		g := got[i]
		if g.Reference != want.ref || g.Tag != want.tag || g.Digest != digestOf(t, want.img) ||
			g.Size != sizeOf(t, want.img) || g.Platform != "linux/amd64" {
			t.Errorf("List()[%d] = %+v, want %s tag %s digest %s size %d", i, g, want.ref, want.tag, digestOf(t, want.img), sizeOf(t, want.img))
		}
	}
	if got[0].Repository != got[1].Repository {
		t.Errorf("Repository %q != %q", got[0].Repository, got[1].Repository)
	}
}

func TestStore_Inspect(t *testing.T) {
	s, ref1, _, img1, _ := twoImagesSharingLayers(t)
	d, err := s.Inspect(ref1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.ConfigJSON.Config
	if !slices.Equal(cfg.Entrypoint, []string{"/bin/hello"}) || !slices.Equal(cfg.Cmd, []string{"--port", "8080"}) ||
		cfg.WorkingDir != "/srv" || cfg.User != "1000:1000" || len(cfg.ExposedPorts) != 1 || !slices.Contains(cfg.Env, "GREETING=hi") {
		t.Errorf("config = %+v", cfg)
	}
	if d.Manifest.Digest != digestOf(t, img1) || d.Config.Path != s.BlobPath(d.Config.Digest) {
		t.Errorf("manifest %s, config path %s", d.Manifest.Digest, d.Config.Path)
	}
	layers, _ := img1.Layers()
	if len(d.Layers) != len(layers) {
		t.Fatalf("%d layers, want %d", len(d.Layers), len(layers))
	}
	for i, l := range layers {
		diffID, _ := l.DiffID()
		if d.Layers[i].Digest != digestOf(t, l) || d.Layers[i].DiffID != diffID || d.Layers[i].Path != s.BlobPath(digestOf(t, l)) {
			t.Errorf("layer %d = %+v, want digest %s diff_id %s", i, d.Layers[i], digestOf(t, l), diffID)
		}
	}
	if len(d.ConfigJSON.History) != 2 || d.ConfigJSON.History[0].CreatedBy == "" {
		t.Errorf("history = %+v", d.ConfigJSON.History)
	}
}

func TestStore_Remove_KeepsSharedBlobs(t *testing.T) {
	s, ref1, ref2, img1, img2 := twoImagesSharingLayers(t)
	m1, _ := img1.Manifest()

	res, err := s.Remove(ref1)
	if err != nil {
		t.Fatal(err)
	}
	// v1's manifest and config go; its layers stay: v2 uses them.
	var deleted []v1.Hash
	for _, b := range res.Deleted {
		deleted = append(deleted, b.Digest)
		if _, err := os.Stat(b.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("deleted blob %s still at %s", b.Digest, b.Path)
		}
	}
	wantDeleted := []v1.Hash{m1.Config.Digest, digestOf(t, img1)}
	if !sameHashes(deleted, wantDeleted) {
		t.Errorf("Deleted = %v, want %v", deleted, wantDeleted)
	}
	if res.BytesFreed != m1.Config.Size+res.Deleted[slices.IndexFunc(res.Deleted, func(b Blob) bool { return b.Kind == "manifest" })].Size {
		t.Errorf("BytesFreed = %d", res.BytesFreed)
	}
	if len(res.Kept) != 2 {
		t.Errorf("Kept = %v, want the 2 shared layers", res.Kept)
	}
	if _, err := s.Image(ref1); !errors.Is(err, ErrImageNotFound) {
		t.Errorf("Image(removed) = %v, want ErrImageNotFound", err)
	}
	checkStored(t, s, ref2, img2)

	// Removing v2 too empties blobs/.
	if _, err := s.Remove(ref2); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "blobs", "sha256")); len(ents) != 0 {
		t.Errorf("blobs/sha256 keeps %d files after removing every image", len(ents))
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Errorf("List() = %v after removing every image", l)
	}
}

func TestStore_Remove_TwoTagsOneManifest(t *testing.T) {
	reg := newTestRegistry(t)
	img := ociImage(t, amd64, 500)
	a := reg.push(t, "demo/app:a", img)
	b := reg.push(t, "demo/app:b", img)
	s := openStore(t)
	for _, r := range []string{a, b} {
		if _, err := Pull(context.Background(), s, r, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Remove(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 0 || res.BytesFreed != 0 {
		t.Errorf("removing one of two tags of a manifest deleted %v", res.Deleted)
	}
	checkStored(t, s, b, img)
}

func TestStore_Remove_Unknown(t *testing.T) {
	s := openStore(t)
	_, err := s.Remove("nginx")
	if !errors.Is(err, ErrImageNotFound) {
		t.Fatalf("Remove(unknown) = %v, want ErrImageNotFound", err)
	}
	if want := "docker.io/library/nginx:latest"; !containsAll(err.Error(), want, "podlab pull") {
		t.Errorf("error %q should name %s and hint at podlab pull", err, want)
	}
	if _, err := s.Remove("Bad Ref"); !errors.Is(err, ErrBadReference) {
		t.Errorf("Remove(bad) = %v, want ErrBadReference", err)
	}
}

func TestOpenStore_NotALayout(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"9"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dir); !errors.Is(err, ErrNotLayout) {
		t.Errorf("OpenStore(other layout version) = %v, want ErrNotLayout", err)
	}
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "index.json"), []byte(`not json`), 0o644)
	if _, err := OpenStore(dir); !errors.Is(err, ErrNotLayout) {
		t.Errorf("OpenStore(bad index.json) = %v, want ErrNotLayout", err)
	}
	s, err := OpenStore(filepath.Join(t.TempDir(), "new"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir() != filepath.Clean(s.Dir()) || !filepath.IsAbs(s.Dir()) {
		t.Errorf("Dir() = %q, want absolute", s.Dir())
	}
	if StoreDir("/var/lib/podlab") != "/var/lib/podlab/content" {
		t.Errorf("StoreDir = %q", StoreDir("/var/lib/podlab"))
	}
}

func sameHashes(a, b []v1.Hash) bool {
	key := func(h v1.Hash) string { return h.String() }
	as, bs := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		as[i] = key(a[i])
	}
	for i := range b {
		bs[i] = key(b[i])
	}
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestStore_Remove_SweepsBlobsOfMovedTags(t *testing.T) {
	reg := newTestRegistry(t)
	s := openStore(t)
	old := ociImage(t, amd64, 600)
	ref := reg.push(t, "demo/app:v1", old)
	if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	reg.push(t, "demo/app:v1", ociImage(t, amd64, 700)) // the tag moves
	if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	other := reg.push(t, "demo/other:v1", ociImage(t, amd64, 800))
	if _, err := Pull(context.Background(), s, other, Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Remove(other)
	if err != nil {
		t.Fatal(err)
	}
	oldLayers, _ := old.Layers()
	var unused []v1.Hash
	for _, b := range res.Deleted {
		if b.Kind == "unused" {
			unused = append(unused, b.Digest)
		}
	}
	m, _ := old.Manifest()
	if want := []v1.Hash{digestOf(t, old), m.Config.Digest, digestOf(t, oldLayers[0])}; !sameHashes(unused, want) {
		t.Errorf("unused blobs deleted = %v, want the moved tag's old blobs %v", unused, want)
	}
	if _, err := s.Image(ref); err != nil {
		t.Errorf("the moved tag's current image is gone: %v", err)
	}
}
