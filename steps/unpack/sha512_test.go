package unpack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// sha512Image writes an OCI layout whose every digest is a sha512 (the
// manifest, the config, the layer blobs and the config's diff_ids), as a
// registry that uses sha512 serves it and podlab pull stores it
// (blobs/sha512/), and reads the image back from it. Its first layer is
// small, its second over 256 KiB compressed (random bytes), so that the
// overlayfs snapshotter applies one in line and streams the other.
func sha512Image(t *testing.T, layers ...[]byte) v1.Image {
	t.Helper()
	return imageByAlg(t, "sha512", layers...)
}

// imageByAlg writes an OCI layout of the tars layers (gzipped) whose every
// digest is of algorithm alg ("sha256" or "sha512"), and reads the image
// back from it.
func imageByAlg(t testing.TB, alg string, layers ...[]byte) v1.Image {
	t.Helper()
	dir := t.TempDir()
	blobs := filepath.Join(dir, "blobs", alg)
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) v1.Hash {
		h, err := v1.Hasher(alg)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
		return v1.Hash{Algorithm: alg, Hex: hex.EncodeToString(h.Sum(nil))}
	}
	put := func(b []byte, mt types.MediaType) v1.Descriptor {
		d := sum(b)
		if err := os.WriteFile(filepath.Join(blobs, d.Hex), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(b))}
	}
	cfg := v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}}
	var descs []v1.Descriptor
	for _, tarball := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, sum(tarball))
		rc, err := layerOf(t, types.OCILayer, tarball).Compressed()
		if err != nil {
			t.Fatal(err)
		}
		gz, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		descs = append(descs, put(gz, types.OCILayer))
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: put(cb, types.OCIConfigJSON), Layers: descs})
	if err != nil {
		t.Fatal(err)
	}
	md := put(mb, types.OCIManifestSchema1)
	ib, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{md}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), ib, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := layout.Path(dir).Image(md.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// sha512Layers are the two layers of the sha512 test image: a small one,
// and one of 300 KiB of random bytes that the second replaces a file of.
func sha512Layers(t *testing.T) (small, big []byte, noise string) {
	t.Helper()
	b := make([]byte, 300<<10)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	noise = string(b)
	small = tarBytes(t, []entry{dir("etc/"), file("etc/motd", "signed with sha512\n"), file("etc/old", "gone\n")})
	big = tarBytes(t, []entry{dir("srv/"), file("srv/noise", noise), whiteout("etc", "old")})
	return small, big, noise
}

// An image whose digests are all sha512 unpacks, with both snapshotters,
// each layer verified against its sha512 diff_id.
func TestUnpack_SHA512(t *testing.T) {
	small, big, noise := sha512Layers(t)
	img := sha512Image(t, small, big)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range []Snapshotter{Native, Overlayfs} {
		t.Run(string(sn), func(t *testing.T) {
			s := newSandbox(t)
			res, err := Unpack(context.Background(), img, s.bundle, s.withSnapshots(t, sn, Options{}))
			if err != nil {
				t.Fatalf("unpacking an image with sha512 diff_ids: %v", err)
			}
			if len(res.Layers) != 2 {
				t.Fatalf("%d layer results, want 2", len(res.Layers))
			}
			for i, lr := range res.Layers {
				if lr.DiffID != cfg.RootFS.DiffIDs[i] || lr.DiffID.Algorithm != "sha512" {
					t.Errorf("layer %d: DiffID %s, want the config's sha512 %s", i, lr.DiffID, cfg.RootFS.DiffIDs[i])
				}
				if lr.Digest.Algorithm != "sha512" {
					t.Errorf("layer %d: Digest %s, want the manifest's sha512", i, lr.Digest)
				}
			}
			rootfs := filepath.Join(s.bundle, "rootfs")
			if b, err := os.ReadFile(filepath.Join(rootfs, "etc/motd")); err != nil || string(b) != "signed with sha512\n" {
				t.Errorf("etc/motd: %q, %v", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(rootfs, "srv/noise")); err != nil || !bytes.Equal(b, []byte(noise)) {
				t.Errorf("srv/noise: %d bytes, %v; want the layer's %d", len(b), err, len(noise))
			}
			if _, err := os.Lstat(filepath.Join(rootfs, "etc/old")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("etc/old: %v, want it deleted by the second layer's whiteout", err)
			}
		})
	}
}

// Bad sha512 input: a diff_id the layer does not hash to is refused by its
// sha512 (the small layer, hashed in line, and the large one, streamed),
// and an algorithm the OCI image spec does not register is refused before
// anything is unpacked.
func TestUnpack_SHA512_BadInput(t *testing.T) {
	small, big, _ := sha512Layers(t)
	img := sha512Image(t, small, big)
	flip := func(h v1.Hash) v1.Hash {
		b := []byte(h.Hex)
		b[0] = "01"[map[bool]int{true: 1, false: 0}[b[0] == '0']]
		return v1.Hash{Algorithm: h.Algorithm, Hex: string(b)}
	}
	tests := []struct {
		name    string
		change  func([]v1.Hash) []v1.Hash
		wantErr error
		wantMsg []string
	}{
		{"small layer's sha512 wrong", func(d []v1.Hash) []v1.Hash { return []v1.Hash{flip(d[0]), d[1]} }, ErrDiffIDMismatch, []string{"it hashes to sha512:"}},
		{"large layer's sha512 wrong", func(d []v1.Hash) []v1.Hash { return []v1.Hash{d[0], flip(d[1])} }, ErrDiffIDMismatch, []string{"it hashes to sha512:"}},
		{"md5 diff_id", func(d []v1.Hash) []v1.Hash {
			return []v1.Hash{d[0], {Algorithm: "md5", Hex: strings.Repeat("0", 32)}}
		}, ErrDigestAlgorithm, []string{"layer 2 of 2", `"md5"`, "sha256 and sha512"}},
	}
	for _, tt := range tests {
		for _, sn := range []Snapshotter{Native, Overlayfs} {
			t.Run(fmt.Sprintf("%s/%s", sn, tt.name), func(t *testing.T) {
				s := newSandbox(t)
				bad := withDiffIDs(t, img, tt.change)
				_, err := Unpack(context.Background(), bad, s.bundle, s.withSnapshots(t, sn, Options{}))
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				for _, m := range tt.wantMsg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not say %q", err, m)
					}
				}
				s.checkNoBundle(t)
			})
		}
	}
}
