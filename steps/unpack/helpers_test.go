package unpack

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	ggcrcompression "github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one tar header (and body) of a test layer.
type entry struct {
	name string
	typ  byte // tar.TypeReg when zero
	body string
	link string // Linkname of symlinks and hard links
	mode int64  // 0644 (files) or 0755 (dirs) when zero
	uid  int
}

func dir(name string) entry                 { return entry{name: name, typ: tar.TypeDir} }
func file(name, body string) entry          { return entry{name: name, body: body} }
func symlink(name, target string) entry     { return entry{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) entry    { return entry{name: name, typ: tar.TypeLink, link: target} }
func whiteout(dirName, victim string) entry { return file(filepath.Join(dirName, ".wh."+victim), "") }
func opaque(dirName string) entry           { return file(filepath.Join(dirName, ".wh..wh..opq"), "") }

// tarBytes writes entries as a tar archive, exactly as given (no cleaning of
// names: the bad inputs depend on it).
func tarBytes(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Typeflag: e.typ,
			Linkname: e.link,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.uid,
			ModTime:  time.Unix(1700000000, 0),
			Format:   tar.FormatPAX,
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing tar header %q: %v", e.name, err)
		}
		if h.Size > 0 {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layerOf compresses a tar as the media type says, the way an image
// builder would.
func layerOf(t testing.TB, mt types.MediaType, tarball_ []byte) v1.Layer {
	t.Helper()
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarball_)), nil }
	var (
		l   v1.Layer
		err error
	)
	switch mt {
	case types.OCIUncompressedLayer:
		return static.NewLayer(tarball_, mt)
	case types.OCILayer:
		l, err = tarball.LayerFromOpener(opener, tarball.WithMediaType(mt), tarball.WithCompressedCaching)
	case types.OCILayerZStd:
		l, err = tarball.LayerFromOpener(opener, tarball.WithMediaType(mt),
			tarball.WithCompression(ggcrcompression.ZStd), tarball.WithCompressedCaching)
	default:
		t.Fatalf("no test layer for media type %s", mt)
	}
	if err != nil {
		t.Fatalf("building a %s layer: %v", mt, err)
	}
	return l
}

func gz(t testing.TB, entries ...entry) v1.Layer {
	return layerOf(t, types.OCILayer, tarBytes(t, entries))
}
func raw(t testing.TB, entries ...entry) v1.Layer {
	return layerOf(t, types.OCIUncompressedLayer, tarBytes(t, entries))
}
func zst(t testing.TB, entries ...entry) v1.Layer {
	return layerOf(t, types.OCILayerZStd, tarBytes(t, entries))
}

// imageOf stacks layers, in order, onto an empty OCI image.
func imageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatalf("appending layers: %v", err)
	}
	return img
}

// withDiffIDs replaces the config's rootfs.diff_ids.
func withDiffIDs(t testing.TB, img v1.Image, change func([]v1.Hash) []v1.Hash) v1.Image {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.RootFS.DiffIDs = change(cfg.RootFS.DiffIDs)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// sandbox is a test's temporary directory: the bundle goes in it, next to a
// sentinel directory that no layer may touch. victim stands for a host file
// such as /etc/passwd.
type sandbox struct {
	dir      string // t.TempDir()
	bundle   string // dir/bundle
	sentinel string // dir/sentinel
	victim   string // dir/sentinel/passwd
	before   map[string]string
	hostPwd  fs.FileInfo
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	d := t.TempDir()
	s := &sandbox{dir: d, bundle: filepath.Join(d, "bundle"), sentinel: filepath.Join(d, "sentinel")}
	s.victim = filepath.Join(s.sentinel, "passwd")
	if err := os.MkdirAll(filepath.Join(s.sentinel, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{s.victim: "root:x:0:0:root:/root:/bin/sh\n", filepath.Join(s.sentinel, "sub", "keep"): "keep\n"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.before = snapshot(t, s.sentinel)
	s.hostPwd, _ = os.Lstat("/etc/passwd")
	return s
}

// snapshot describes every file under root: type, mode, size, link count,
// mtime and the sha256 of its content (or a symlink's target).
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v size=%d nlink=%d ino=%d mtime=%d.%09d", fi.Mode(), fi.Size(), st.Nlink, st.Ino, st.Mtim.Sec, st.Mtim.Nsec)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

// checkUntouched fails the test if anything outside the bundle changed: the
// sentinel tree, the sandbox's entries, the host's /etc/passwd.
func (s *sandbox) checkUntouched(t *testing.T) {
	t.Helper()
	after := snapshot(t, s.sentinel)
	for p, want := range s.before {
		if got, ok := after[p]; !ok {
			t.Errorf("ESCAPE: %s was removed", p)
		} else if got != want {
			t.Errorf("ESCAPE: %s changed:\n  before %s\n  after  %s", p, want, got)
		}
	}
	for p := range after {
		if _, ok := s.before[p]; !ok {
			t.Errorf("ESCAPE: %s was created", p)
		}
	}
	names := s.entries(t)
	for _, n := range names {
		if n != "sentinel" && n != "bundle" {
			t.Errorf("ESCAPE or leftover: %s appeared next to the bundle (entries: %v)", filepath.Join(s.dir, n), names)
		}
	}
	if s.hostPwd != nil {
		now, err := os.Lstat("/etc/passwd")
		if err != nil || now.ModTime() != s.hostPwd.ModTime() || now.Size() != s.hostPwd.Size() ||
			now.Sys().(*syscall.Stat_t).Nlink != s.hostPwd.Sys().(*syscall.Stat_t).Nlink {
			t.Errorf("ESCAPE: the host's /etc/passwd changed")
		}
	}
}

// checkNoBundle fails the test if a bundle or a temporary bundle is left.
func (s *sandbox) checkNoBundle(t *testing.T) {
	t.Helper()
	for _, n := range s.entries(t) {
		if n != "sentinel" {
			t.Errorf("a failed unpack left %s behind", filepath.Join(s.dir, n))
		}
	}
}

func (s *sandbox) entries(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names
}

func (s *sandbox) rootfs() string { return filepath.Join(s.bundle, "rootfs") }
