package pull

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/podlab/podlab/internal/testenv"
)

// The content store is a plain OCI image layout: crane pushes it to a
// registry unchanged, and umoci lists its images by their ref.name.

func TestStore_ReadableByCrane(t *testing.T) {
	crane := testenv.LookPath(t, "crane")
	reg := newTestRegistry(t)
	img := ociImage(t, amd64, 2000, 1000)
	ref := reg.push(t, "demo/app:v1", img)
	s := openStore(t)
	if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
		t.Fatal(err)
	}
	dst := reg.Host + "/copied/app:v1"
	out, err := exec.Command(crane, "push", s.Dir(), dst).CombinedOutput()
	if err != nil {
		t.Fatalf("crane push %s %s: %v\n%s", s.Dir(), dst, err, out)
	}
	dstRef, err := name.ParseReference(dst)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(dstRef)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != digestOf(t, img) {
		t.Errorf("crane pushed %s from the store, want %s", desc.Digest, digestOf(t, img))
	}
}

func TestStore_ReadableByUmoci(t *testing.T) {
	umoci := testenv.LookPath(t, "umoci")
	reg := newTestRegistry(t)
	s := openStore(t)
	var refs []string
	for _, tag := range []string{"v1", "v2"} {
		ref := reg.push(t, "demo/app:"+tag, ociImage(t, amd64, 500))
		refs = append(refs, ref)
		if _, err := Pull(context.Background(), s, ref, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(umoci, "ls", "--layout", s.Dir()).CombinedOutput()
	if err != nil {
		t.Fatalf("umoci ls --layout %s: %v\n%s", s.Dir(), err, out)
	}
	for _, r := range refs {
		if !strings.Contains(string(out), r) {
			t.Errorf("umoci ls does not list %s:\n%s", r, out)
		}
	}
	out, err = exec.Command(umoci, "stat", "--image", s.Dir()+":"+refs[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("umoci stat: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "COPY hello /bin/hello") {
		t.Errorf("umoci stat shows no history:\n%s", out)
	}
}
