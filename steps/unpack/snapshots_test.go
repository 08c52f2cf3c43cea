package unpack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/moby/sys/mountinfo"

	"github.com/podlab/podlab/internal/testenv"
)

// overlayBundles unpacks img with the overlayfs snapshotter into n bundles
// of one snapshots directory, returning the results (and removing the
// bundles when the test ends).
func overlayBundles(t *testing.T, snaps *Snapshots, img v1.Image, names ...string) ([]*Result, []string) {
	t.Helper()
	dir := t.TempDir()
	var out []*Result
	var bundles []string
	for _, n := range names {
		b := filepath.Join(dir, n)
		res, err := Unpack(context.Background(), img, b, Options{Snapshotter: Overlayfs, Snapshots: snaps, Key: "pod/" + n})
		if err != nil {
			t.Fatalf("Unpack into %s: %v", n, err)
		}
		t.Cleanup(func() { _ = RemoveBundle(b) })
		out = append(out, res)
		bundles = append(bundles, b)
	}
	return out, bundles
}

func newSnapshots(t *testing.T) *Snapshots {
	t.Helper()
	testenv.RequireRoot(t) // mount(2)
	snaps, err := OpenSnapshots(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}

func TestSnapshots_SecondContainerUnpacksNothing(t *testing.T) {
	snaps := newSnapshots(t)
	img := imageOf(t, gz(t, dir("etc/"), file("etc/os-release", "podlab\n")), gz(t, file("etc/motd", "hi\n")))
	res, bundles := overlayBundles(t, snaps, img, "first", "second")

	for i, lr := range res[0].Layers {
		if lr.Reused || lr.Snapshot != i+1 {
			t.Errorf("first container, layer %d: Reused %v Snapshot %d; want unpacked into snapshot %d", i+1, lr.Reused, lr.Snapshot, i+1)
		}
	}
	for i, lr := range res[1].Layers {
		if !lr.Reused || lr.Snapshot != i+1 || lr.Files != 0 || lr.Bytes != 0 {
			t.Errorf("second container, layer %d: %+v; want reused snapshot %d, nothing applied", i+1, lr, i+1)
		}
	}
	if res[1].Total != (Counts{}) {
		t.Errorf("the second container applied %+v, want nothing", res[1].Total)
	}

	// Each container writes into its own upper directory.
	first, second := filepath.Join(bundles[0], "rootfs"), filepath.Join(bundles[1], "rootfs")
	if err := os.WriteFile(filepath.Join(first, "etc", "written-by-first"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(first, "etc", "motd")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(second, "etc", "written-by-first")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the second container sees the first one's file (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(second, "etc", "motd")); err != nil || string(b) != "hi\n" {
		t.Errorf("the second container's etc/motd = %q, %v; the first one's delete must not reach it", b, err)
	}
	upper := snaps.FS(res[0].Snapshot.Active)
	if _, err := os.Stat(filepath.Join(upper, "etc", "written-by-first")); err != nil {
		t.Errorf("the first container's write should be in its upper directory %s: %v", upper, err)
	}

	ix, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, sn := range ix {
		kinds = append(kinds, string(sn.Kind)+":"+sn.Name[:min(len(sn.Name), 7)])
	}
	want := []string{"committed:sha256:", "committed:sha256:", "active:pod/fir", "active:pod/sec"}
	if !slices.Equal(kinds, want) {
		t.Errorf("index = %v, want %v", kinds, want)
	}
	if ix[1].Parent != 1 || ix[2].Parent != 2 || ix[3].Parent != 2 {
		t.Errorf("parents: %+v; want 2 on 1, both actives on 2", ix)
	}
	if chains := ChainIDs([]v1.Hash{res[0].Layers[0].DiffID, res[0].Layers[1].DiffID}); ix[0].Name != chains[0] || ix[1].Name != chains[1] {
		t.Errorf("committed names %s %s, want the chain IDs %v", ix[0].Name, ix[1].Name, chains)
	}
	if !strings.Contains(res[1].Snapshot.Mount, "lowerdir="+snaps.FS(2)+":"+snaps.FS(1)+",upperdir="+snaps.FS(4)) {
		t.Errorf("mount %q: want the lowers top first and the second container's upper", res[1].Snapshot.Mount)
	}
}

func TestSnapshots_RemoveBundleUnmountsAndRemovesTheUpper(t *testing.T) {
	snaps := newSnapshots(t)
	img := imageOf(t, gz(t, file("a", "a")))
	res, bundles := overlayBundles(t, snaps, img, "c")
	rootfs := filepath.Join(bundles[0], "rootfs")
	if !RootfsReady(bundles[0]) {
		t.Fatal("RootfsReady says no for a mounted overlay")
	}
	upper := snaps.Dir(res[0].Snapshot.Active)
	if err := RemoveBundle(bundles[0]); err != nil {
		t.Fatal(err)
	}
	if m, _ := mountinfo.Mounted(rootfs); m {
		t.Error("the rootfs is still mounted")
	}
	for _, p := range []string{bundles[0], upper} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s should be gone (%v)", p, err)
		}
	}
	ix, _ := snaps.List()
	if len(ix) != 1 || ix[0].Kind != Committed {
		t.Errorf("index %+v: want only the image's committed snapshot", ix)
	}
	if RootfsReady(bundles[0]) {
		t.Error("RootfsReady says yes for a removed bundle")
	}
}

func TestSnapshots_ForceReplacesAnOverlayBundle(t *testing.T) {
	snaps := newSnapshots(t)
	img := imageOf(t, gz(t, file("a", "a")))
	res, bundles := overlayBundles(t, snaps, img, "c")
	old := res[0].Snapshot.Active
	again, err := Unpack(context.Background(), img, bundles[0], Options{Snapshotter: Overlayfs, Snapshots: snaps, Key: "pod/c", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replaced || again.Snapshot.Active == old {
		t.Errorf("Replaced %v, active %d (old %d): want a fresh upper", again.Replaced, again.Snapshot.Active, old)
	}
	if _, err := os.Lstat(snaps.Dir(old)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old upper %s should be gone (%v)", snaps.Dir(old), err)
	}
	if b, err := os.ReadFile(filepath.Join(bundles[0], "rootfs", "a")); err != nil || string(b) != "a" {
		t.Errorf("rootfs/a = %q, %v", b, err)
	}
}

func TestSnapshots_GCKeepsWhatImagesAndContainersUse(t *testing.T) {
	snaps := newSnapshots(t)
	base := gz(t, file("base", "b"))
	one := imageOf(t, base, gz(t, file("one", "1")))
	two := imageOf(t, base, gz(t, file("two", "2")))
	_, bundles := overlayBundles(t, snaps, one, "uses-one")
	overlayBundles(t, snaps, two, "uses-two")
	if err := RemoveBundle(bundles[0]); err != nil {
		t.Fatal(err)
	}
	cfg, _ := two.ConfigFile()
	// Image one is gone (rmi); image two stays; its container runs.
	keep := map[string]bool{}
	for _, c := range ChainIDs(cfg.RootFS.DiffIDs) {
		keep[c] = true
	}
	removed, err := snaps.GC(keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].ID != 2 {
		t.Fatalf("GC removed %+v, want only snapshot 2 (image one's own layer)", removed)
	}
	// Without image two, its container still stands on its lowers.
	if removed, err = snaps.GC(nil); err != nil || len(removed) != 0 {
		t.Errorf("GC removed %+v (%v) under a running container", removed, err)
	}
}

func TestSnapshots_BadInput(t *testing.T) {
	tests := []struct {
		name  string
		index string
		want  string
	}{
		{"too few fields", "1\tcommitted\t-\n", "want 5 tab-separated fields"},
		{"a bad kind", "1\tlost\t-\t2026-12-03T16:00:00Z\tsha256:x\n", "bad kind"},
		{"a bad id", "x\tcommitted\t-\t2026-12-03T16:00:00Z\tsha256:x\n", "bad id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "index"), []byte(tt.index), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenSnapshots(dir)
			if !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenSnapshots: %v, want ErrBadIndex saying %q", err, tt.want)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "index")); string(b) != tt.index {
				t.Errorf("the index was changed to %q", b)
			}
		})
	}
	if _, err := OpenSnapshots(filepath.Join(t.TempDir(), "a,b")); err == nil || !strings.Contains(err.Error(), "comma") {
		t.Errorf("a snapshots directory with a comma: %v, want a refusal naming the comma", err)
	}
	if _, err := ParseSnapshotter("zfs"); !errors.Is(err, ErrUnknownSnapshotter) {
		t.Errorf("ParseSnapshotter(zfs): %v, want ErrUnknownSnapshotter", err)
	}
	if _, err := Unpack(context.Background(), imageOf(t, gz(t)), filepath.Join(t.TempDir(), "b"), Options{Snapshotter: Overlayfs}); !errors.Is(err, ErrNoSnapshots) {
		t.Errorf("overlayfs without a snapshots directory: %v, want ErrNoSnapshots", err)
	}
}

// TestUnpack_TenThousandEmptyLayersRefusedAtOnce is the hostile image of
// issue 15: 10,000 empty layers (it took four minutes and 360 MB to
// unpack). It is an OCI layout, as the content store keeps images, and is
// refused from its manifest, before its layers are even listed.
func TestUnpack_TenThousandEmptyLayersRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	l := gz(t)
	rc, _ := l.Compressed()
	blob, _ := io.ReadAll(rc)
	digest, _ := l.Digest()
	diffID, _ := l.DiffID()
	if err := p.WriteBlob(digest, io.NopCloser(bytes.NewReader(blob))); err != nil {
		t.Fatal(err)
	}
	cfg := &v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}}
	m := &v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1}
	for range 10000 {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: int64(len(blob)), Digest: digest})
	}
	writeJSON := func(v any) v1.Descriptor {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		h, n, _ := v1.SHA256(bytes.NewReader(b))
		if err := p.WriteBlob(h, io.NopCloser(bytes.NewReader(b))); err != nil {
			t.Fatal(err)
		}
		return v1.Descriptor{Digest: h, Size: n}
	}
	m.Config = writeJSON(cfg)
	m.Config.MediaType = types.OCIConfigJSON
	desc := writeJSON(m)
	desc.MediaType = types.OCIManifestSchema1
	if err := p.AppendDescriptor(desc); err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}

	for _, sn := range []Snapshotter{Native, Overlayfs} {
		t.Run(string(sn), func(t *testing.T) {
			s := newSandbox(t)
			opts := s.withSnapshots(t, sn, Options{})
			start := time.Now()
			_, err := Unpack(context.Background(), img, s.bundle, opts)
			took := time.Since(start)
			if !errors.Is(err, ErrTooManyLayers) || !strings.Contains(err.Error(), "10000 layers") {
				t.Fatalf("Unpack: %v, want ErrTooManyLayers naming 10000 layers", err)
			}
			if took > 2*time.Second {
				t.Errorf("refusing took %v: the count must come before the layers are listed", took)
			}
			s.checkNoBundle(t)
			if opts.Snapshots != nil {
				checkCommitted(t, opts.Snapshots, 0)
			}
		})
	}
}

// TestSnapshots_IDMappedLowersForAUserNamespace: with Shift, the overlayfs
// snapshotter shares the image's snapshots with a user namespace's
// container by idmapping them (nothing is chowned: the committed files stay
// root's), and gives the container's upper directory to the range's root.
func TestSnapshots_IDMappedLowersForAUserNamespace(t *testing.T) {
	snaps := newSnapshots(t)
	img := imageOf(t, gz(t, dir("etc/"), file("etc/a", "a"), entry{name: "home/app/", typ: '5', uid: 1000, mode: 0o755}))
	shift := &IDShift{UIDBase: 200000, GIDBase: 300000, Size: 65536}
	b := filepath.Join(t.TempDir(), "b")
	res, err := Unpack(context.Background(), img, b, Options{Snapshotter: Overlayfs, Snapshots: snaps, Shift: shift})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = RemoveBundle(b) })
	if res.Snapshotter != Overlayfs || res.Snapshot == nil || !res.Snapshot.IDMapped || res.Fallback != "" {
		t.Fatalf("Result: snapshotter %s, fallback %q, snapshot %+v; want idmapped overlayfs", res.Snapshotter, res.Fallback, res.Snapshot)
	}
	owner := func(p string) [2]uint32 {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return [2]uint32{st.Uid, st.Gid}
	}
	rootfs := filepath.Join(b, "rootfs")
	for p, want := range map[string][2]uint32{"": {200000, 300000}, "etc/a": {200000, 300000}, "home/app": {201000, 301000}} {
		if got := owner(filepath.Join(rootfs, p)); got != want {
			t.Errorf("rootfs/%s is owned by %v, want %v (the range's ids)", p, got, want)
		}
	}
	if got := owner(filepath.Join(snaps.FS(1), "etc", "a")); got != [2]uint32{0, 0} {
		t.Errorf("the committed snapshot's etc/a is owned by %v: the shared snapshot must not be chowned", got)
	}
}
