package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestTarLayer(t *testing.T) {
	entries := []entry{
		textEntry("srv/www/index.html", "hi"),
		whiteoutEntry("etc/motd"),
		opaqueEntry("/srv/www/"),
		linkEntry("lib64/ld.so", "/lib/ld.so"),
		dirEntry("tmp", 0o1777),
	}
	raw, err := tarLayer(entries)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	want := []string{"etc/", "etc/.wh.motd", "lib64/", "lib64/ld.so", "srv/", "srv/www/", "srv/www/.wh..wh..opq", "srv/www/index.html", "tmp/"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("entries\n got %q\nwant %q", names, want)
	}

	// Same entries in another order: same bytes.
	again, err := tarLayer([]entry{entries[4], entries[3], entries[2], entries[1], entries[0]})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, again) {
		t.Error("the same entries in another order gave other bytes")
	}

	if _, err := tarLayer([]entry{textEntry("a", "1"), textEntry("/a", "2")}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a duplicate entry: error = %v", err)
	}
	if _, err := tarLayer([]entry{{name: "dev/null", typ: tar.TypeChar}}); err == nil || !strings.Contains(err.Error(), "unsupported") {
		t.Errorf("a device: error = %v", err)
	}
}

func TestWriteLayout_ReplacesByName(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "demo-images")
	first, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	second, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	hello := helloImage(t)

	if err := WriteLayout(ctx, dir, []Named{{"library/nginx:latest", first}, {HelloRef, hello}}); err != nil {
		t.Fatal(err)
	}
	// Again, with another image under the first name.
	if err := WriteLayout(ctx, dir, []Named{{"library/nginx:latest", second}, {HelloRef, hello}}); err != nil {
		t.Fatal(err)
	}

	got, im := layoutRefs(t, dir)
	secondDigest, _ := second.Digest()
	helloDigest, _ := hello.Digest()
	want := map[string]string{"library/nginx:latest": secondDigest.String(), HelloRef: helloDigest.String()}
	if len(im.Manifests) != 2 || got["library/nginx:latest"] != want["library/nginx:latest"] || got[HelloRef] != want[HelloRef] {
		b, _ := json.MarshalIndent(im, "", "  ")
		t.Fatalf("index.json after two writes:\n%s\nwant %v", b, want)
	}

	// The first image's blobs are gone; the second's and hello's are there.
	firstDigest, _ := first.Digest()
	if _, err := os.Stat(filepath.Join(dir, "blobs", "sha256", firstDigest.Hex)); !os.IsNotExist(err) {
		t.Errorf("the replaced image's manifest is still in blobs/: %v", err)
	}
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 2*(1+1)+2+4 { // 2 manifests, 2 configs, 2+4 layers
		t.Errorf("%d blobs in the layout, want 10", len(blobs))
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"library/nginx:latest", HelloRef} {
		if _, err := p.Image(mustHash(t, got[ref])); err != nil {
			t.Errorf("reading %s back: %v", ref, err)
		}
	}
}

// layoutRefs reads the OCI layout at dir: each ref name with its manifest
// digest, and the index itself.
func layoutRefs(t *testing.T, dir string) (map[string]string, *v1.IndexManifest) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{}
	for _, d := range im.Manifests {
		refs[d.Annotations[RefNameAnnotation]] = d.Digest.String()
	}
	return refs, im
}
