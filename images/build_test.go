package images

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
)

func TestBuildAll_Idempotent(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "demo-images")
	opts := BuildOptions{ModuleDir: testenv.RepoRoot(), CacheDir: debCache(t)}

	var log bytes.Buffer
	opts.Log = &log
	first, err := BuildAll(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go build", "extracted nginx_", "library libc.so.6"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	opts.Log = nil
	second, err := BuildAll(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}

	inLayout, im := layoutRefs(t, dir)
	if len(im.Manifests) != 3 || len(inLayout) != 3 {
		t.Fatalf("index.json has %d entries (%v), want 3", len(im.Manifests), inLayout)
	}
	for i, b := range first {
		if b.Digest != second[i].Digest {
			t.Errorf("%s: built %s, then %s", b.Ref, b.Digest, second[i].Digest)
		}
		if inLayout[b.Ref] != b.Digest.String() {
			t.Errorf("%s: layout has %s, built %s", b.Ref, inLayout[b.Ref], b.Digest)
		}
		wantLayers := 4
		if b.Ref == PauseRef {
			wantLayers = 1
		}
		if len(b.Layers) != wantLayers || b.Size <= 0 || b.Layers[0].CreatedBy == "" {
			t.Errorf("%s: described as %+v", b.Ref, b)
		}
	}
	if _, ok := inLayout[NginxRef]; !ok {
		t.Errorf("no %s in the layout", NginxRef)
	}
	if _, ok := inLayout[HelloRef]; !ok {
		t.Errorf("no %s in the layout", HelloRef)
	}
	if _, ok := inLayout[PauseRef]; !ok {
		t.Errorf("no %s in the layout (the sandbox image, registry.k8s.io/%s through the lab registry)", PauseRef, PauseRef)
	}
}
