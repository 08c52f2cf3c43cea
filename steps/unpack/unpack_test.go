package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"github.com/podlab/podlab/internal/testenv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// want describes the rootfs a good image must unpack to.
type want struct {
	files    map[string]string      // path in the rootfs -> content
	symlinks map[string]string      // path -> target, verbatim
	dirs     []string               // must be directories
	absent   []string               // must not exist
	same     [][2]string            // hard links: the same inode
	total    Counts                 // Bytes is checked separately
	compress map[int]string         // layer index -> Compression
	modes    map[string]fs.FileMode // path -> permission bits
	owners   map[string]int         // path -> uid (as root)
	// overlayErr: the overlayfs snapshotter refuses the image with an
	// error saying this, as containerd's does.
	overlayErr string
}

func TestUnpack_Layers(t *testing.T) {
	tests := []struct {
		name   string
		layers func(t *testing.T) []v1.Layer
		want   want
	}{
		{
			name: "an upper layer overwrites a file of a lower one",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, dir("etc/"), file("etc/motd", "one\n"), dir("bin/"), file("bin/app", "v1")),
					gz(t, dir("etc/"), file("etc/motd", "two\n")),
					gz(t, file("etc/hostname", "pod\n")),
				}
			},
			want: want{
				files: map[string]string{"etc/motd": "two\n", "bin/app": "v1", "etc/hostname": "pod\n"},
				total: Counts{Files: 4, Dirs: 3},
			},
		},
		{
			name: "a whiteout removes a file and a directory of an earlier layer",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, dir("etc/"), file("etc/a", "a"), file("etc/b", "b"), dir("var/cache/"), file("var/cache/x", "x")),
					gz(t, whiteout("etc", "a"), whiteout("var", "cache")),
				}
			},
			want: want{
				files:  map[string]string{"etc/b": "b"},
				dirs:   []string{"var"},
				absent: []string{"etc/a", "etc/.wh.a", "var/cache", "var/.wh.cache"},
				total:  Counts{Files: 3, Dirs: 2, Whiteouts: 2},
			},
		},
		{
			name: "an opaque whiteout hides everything lower layers put in a directory",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, dir("app/"), file("app/old", "old"), dir("app/sub/"), file("app/sub/deep", "deep"), file("keep", "k")),
					gz(t, dir("app/"), opaque("app"), file("app/new", "new")),
				}
			},
			want: want{
				files:  map[string]string{"app/new": "new", "keep": "k"},
				absent: []string{"app/old", "app/sub", "app/.wh..wh..opq"},
				total:  Counts{Files: 4, Dirs: 3, OpaqueDirs: 1},
			},
		},
		{
			name: "an opaque whiteout after the layer's own files keeps them",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, dir("app/"), file("app/old", "old")),
					gz(t, dir("app/"), file("app/new", "new"), opaque("app")),
				}
			},
			want: want{
				files:  map[string]string{"app/new": "new"},
				absent: []string{"app/old"},
				total:  Counts{Files: 2, Dirs: 2, OpaqueDirs: 1},
			},
		},
		{
			name: "symlinks keep their targets verbatim, relative and absolute",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, dir("bin/"), file("bin/busybox", "bb"), symlink("bin/sh", "busybox"),
						dir("usr/bin/"), symlink("usr/bin/env", "/bin/busybox"), symlink("lib", "usr/lib")),
				}
			},
			want: want{
				files:    map[string]string{"bin/busybox": "bb", "bin/sh": "bb"},
				symlinks: map[string]string{"bin/sh": "busybox", "usr/bin/env": "/bin/busybox", "lib": "usr/lib"},
				total:    Counts{Files: 1, Dirs: 2, Symlinks: 3},
			},
		},
		{
			name: "hard links share an inode, within a layer and across layers",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, dir("usr/bin/"), file("usr/bin/a", "x"), hardlink("usr/bin/b", "usr/bin/a")),
					gz(t, hardlink("usr/bin/c", "usr/bin/a"), hardlink("usr/bin/d", "./usr/bin/a")),
				}
			},
			want: want{
				files: map[string]string{"usr/bin/b": "x", "usr/bin/c": "x"},
				same:  [][2]string{{"usr/bin/a", "usr/bin/b"}, {"usr/bin/a", "usr/bin/c"}, {"usr/bin/a", "usr/bin/d"}},
				total: Counts{Files: 1, Dirs: 1, Hardlinks: 3},
				// Each snapshot holds only its own layer: a link to a lower
				// layer's file has nothing to link to (containerd's overlay
				// applier and Docker's overlay2 refuse it too).
				overlayErr: "link /usr/bin/a /usr/bin/c: no such file or directory",
			},
		},
		{
			name: "uncompressed, gzip and zstd layers in one image",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					raw(t, file("raw", "r")),
					gz(t, file("gz", "g")),
					zst(t, file("zst", "z"), file("raw", "overwritten by zstd")),
				}
			},
			want: want{
				files:    map[string]string{"raw": "overwritten by zstd", "gz": "g", "zst": "z"},
				total:    Counts{Files: 4},
				compress: map[int]string{0: "none", 1: "gzip", 2: "zstd"},
			},
		},
		{
			name: "a layer that names a file but not its directory keeps the lower directory's mode and owner",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777}, entry{name: "home/app/", typ: tar.TypeDir, mode: 0o750, uid: 1000}),
					gz(t, file("tmp/x", "x"), file("home/app/.profile", "p")),
				}
			},
			want: want{
				files:  map[string]string{"tmp/x": "x", "home/app/.profile": "p"},
				modes:  map[string]fs.FileMode{"tmp": 0o777 | fs.ModeSticky, "home/app": 0o750},
				owners: map[string]int{"home/app": 1000},
				total:  Counts{Files: 2, Dirs: 2},
			},
		},
		{
			name: "modes, a FIFO and an empty layer",
			layers: func(t *testing.T) []v1.Layer {
				return []v1.Layer{
					gz(t, entry{name: "run.sh", body: "#!/bin/sh\n", mode: 0o750}, entry{name: "tmp/", typ: '5', mode: 0o1777},
						entry{name: "fifo", typ: '6', mode: 0o600}),
					gz(t),
				}
			},
			want: want{
				files: map[string]string{"run.sh": "#!/bin/sh\n"},
				modes: map[string]fs.FileMode{"run.sh": 0o750, "tmp": 0o777 | fs.ModeSticky},
				total: Counts{Files: 1, Dirs: 1, Others: 1},
			},
		},
	}
	for _, tt := range tests {
		for _, sn := range []Snapshotter{Native, Overlayfs} {
			t.Run(string(sn)+"/"+tt.name, func(t *testing.T) {
				testLayers(t, sn, tt.layers(t), tt.want)
			})
		}
	}
}

// withSnapshots are the Options that unpack with sn into the sandbox: for
// overlayfs, a snapshots directory in it, and the rootfs unmounted and its
// snapshot removed when the test ends.
func (s *sandbox) withSnapshots(t *testing.T, sn Snapshotter, opts Options) Options {
	t.Helper()
	opts.Snapshotter = sn
	if sn == Overlayfs {
		testenv.RequireRoot(t) // mount(2)
		// Not in t.TempDir(): subtest names put commas in it, which
		// overlay's mount options cannot hold.
		dir, err := os.MkdirTemp("", "podlab-snapshots-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		snaps, err := OpenSnapshots(dir)
		if err != nil {
			t.Fatal(err)
		}
		opts.Snapshots = snaps
		t.Cleanup(func() {
			if err := RemoveBundle(s.bundle); err != nil {
				t.Errorf("RemoveBundle: %v", err)
			}
		})
	}
	return opts
}

func testLayers(t *testing.T, sn Snapshotter, layers []v1.Layer, w want) {
	t.Helper()
	{
		{
			s := newSandbox(t)
			tt := struct{ want want }{w}
			img := imageOf(t, layers...)
			var progress []LayerResult
			res, err := Unpack(context.Background(), img, s.bundle, s.withSnapshots(t, sn, Options{Progress: func(lr LayerResult) { progress = append(progress, lr) }}))
			if w.overlayErr != "" && sn == Overlayfs {
				if err == nil || !strings.Contains(err.Error(), w.overlayErr) {
					t.Fatalf("Unpack: %v, want an error with %q", err, w.overlayErr)
				}
				s.checkNoBundle(t)
				return
			}
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			if res.Snapshotter != sn {
				t.Errorf("Result.Snapshotter = %q, want %q", res.Snapshotter, sn)
			}
			s.checkUntouched(t)
			checkBundleDir(t, s, res)
			checkRootFS(t, s.rootfs(), tt.want)

			if len(res.Layers) != len(layers) || len(progress) != len(layers) {
				t.Fatalf("%d layers in the image, %d in the result, %d progress calls", len(layers), len(res.Layers), len(progress))
			}
			var wantBytes int64
			for i, l := range layers {
				lr := res.Layers[i]
				if progress[i] != lr {
					t.Errorf("progress call %d = %+v, result has %+v", i, progress[i], lr)
				}
				digest, _ := l.Digest()
				diffID, _ := l.DiffID()
				mt, _ := l.MediaType()
				if lr.Index != i || lr.Digest != digest || lr.DiffID != diffID || lr.MediaType != mt {
					t.Errorf("layer %d: got index %d digest %s diff_id %s %s; want %s %s %s", i, lr.Index, lr.Digest, lr.DiffID, lr.MediaType, digest, diffID, mt)
				}
				n := uncompressedSize(t, l)
				if lr.Bytes != n {
					t.Errorf("layer %d: Bytes = %d, the uncompressed tar is %d", i, lr.Bytes, n)
				}
				wantBytes += n
				if c, ok := tt.want.compress[i]; ok && lr.Compression != c {
					t.Errorf("layer %d: Compression = %q, want %q", i, lr.Compression, c)
				}
			}
			got := res.Total
			if got.Bytes != wantBytes {
				t.Errorf("Total.Bytes = %d, want %d", got.Bytes, wantBytes)
			}
			got.Bytes = 0
			if got != tt.want.total {
				t.Errorf("Total = %+v, want %+v", got, tt.want.total)
			}
		}
	}
}

func uncompressedSize(t *testing.T, l v1.Layer) int64 {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkBundleDir checks the bundle's shape: 0700, holding only rootfs (0755).
func checkBundleDir(t *testing.T, s *sandbox, res *Result) {
	t.Helper()
	if res.Bundle != s.bundle || res.RootFS != s.rootfs() {
		t.Errorf("Result says bundle %s rootfs %s; want %s and %s", res.Bundle, res.RootFS, s.bundle, s.rootfs())
	}
	for p, mode := range map[string]fs.FileMode{s.bundle: 0o700, s.rootfs(): 0o755} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want a directory with %v", p, fi.Mode(), mode)
		}
	}
	des, err := os.ReadDir(s.bundle)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rootfs"}
	if res.Snapshotter == Overlayfs {
		want = []string{"rootfs", "snapshot.json"}
	}
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	if !slices.Equal(got, want) {
		t.Errorf("the bundle holds %v, want %v", got, want)
	}
}

func checkRootFS(t *testing.T, rootfs string, w want) {
	t.Helper()
	for p, body := range w.files {
		b, err := os.ReadFile(filepath.Join(rootfs, p))
		if err != nil {
			t.Errorf("reading %s: %v", p, err)
		} else if string(b) != body {
			t.Errorf("%s = %q, want %q", p, b, body)
		}
	}
	for p, target := range w.symlinks {
		got, err := os.Readlink(filepath.Join(rootfs, p))
		if err != nil || got != target {
			t.Errorf("symlink %s -> %q (%v), want -> %q", p, got, err, target)
		}
	}
	for _, p := range w.dirs {
		if fi, err := os.Lstat(filepath.Join(rootfs, p)); err != nil || !fi.IsDir() {
			t.Errorf("%s: want a directory (%v)", p, err)
		}
	}
	for _, p := range w.absent {
		if _, err := os.Lstat(filepath.Join(rootfs, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s should not exist (Lstat: %v)", p, err)
		}
	}
	for _, pair := range w.same {
		a, errA := os.Lstat(filepath.Join(rootfs, pair[0]))
		b, errB := os.Lstat(filepath.Join(rootfs, pair[1]))
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			t.Errorf("%s and %s should be hard links of one file (%v, %v)", pair[0], pair[1], errA, errB)
		}
	}
	for p, uid := range w.owners {
		if os.Geteuid() != 0 {
			break
		}
		fi, err := os.Lstat(filepath.Join(rootfs, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if got := fi.Sys().(*syscall.Stat_t).Uid; int(got) != uid {
			t.Errorf("%s: owner %d, want %d", p, got, uid)
		}
	}
	for p, mode := range w.modes {
		fi, err := os.Lstat(filepath.Join(rootfs, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if got := fi.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSetuid | fs.ModeSetgid); got != mode {
			t.Errorf("%s: mode %v, want %v", p, got, mode)
		}
	}
}

// TestUnpack_Escapes feeds layers that try to write, link or delete outside
// the rootfs. containerd's archive.Apply may clamp them into the rootfs or
// refuse them; either way nothing outside the rootfs may change, and a
// refused unpack must leave no bundle behind.
func TestUnpack_Escapes(t *testing.T) {
	const pwned = "pwned\n"
	tests := []struct {
		name   string
		layers func(t *testing.T, s *sandbox) []v1.Layer
		// landed, when the unpack succeeds, is where the written file must be
		// found: inside the rootfs.
		landed string
		// overlayLanded is landed for the overlayfs snapshotter, when it
		// differs: each layer is applied into its own snapshot, so a path
		// through a lower layer's symlink is a real directory of the upper
		// one, which hides the symlink (as with containerd's overlayfs
		// snapshotter and Docker's overlay2): the file is at its own path.
		overlayLanded string
	}{
		{
			name: "../ path",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, file("../../sentinel/passwd", pwned))}
			},
			landed: "sentinel/passwd",
		},
		{
			name: "many ../ in the middle of a path",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, dir("a/"), file("a/../../../../../../../.."+s.victim, pwned))}
			},
			landed: victimPath,
		},
		{
			name: "absolute path",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, file(s.victim, pwned))}
			},
			landed: victimPath,
		},
		{
			name: "symlink to / then a file written through it",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", "/"), file("evil"+s.victim, pwned))}
			},
			landed: victimPath,
		},
		{
			name: "symlink to / in one layer, a file written through it in the next",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", "/")), gz(t, file("evil"+s.victim, pwned))}
			},
			landed:        victimPath,
			overlayLanded: "evil" + victimPath,
		},
		{
			name: "symlink to ../../.. then a file written through it",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", "../../../../../../../../.."), file("evil"+s.victim, pwned))}
			},
			landed: victimPath,
		},
		{
			name: "symlink to the sentinel directory then a file written through it",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", s.sentinel), file("evil/passwd", pwned))}
			},
			landed: victimPath,
		},
		{
			name: "relative symlink out of the rootfs then a file written through it",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", "../../sentinel"), file("evil/passwd", pwned))}
			},
			landed: "sentinel/passwd",
		},
		{
			name: "chained symlinks out of the rootfs",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, dir("d/"), symlink("d/up", ".."), symlink("a", "d/up/d/up/d/up/../.."), file("a/sentinel/passwd", pwned))}
			},
			landed: "sentinel/passwd",
		},
		{
			name: "a file replacing a symlink that points out of the rootfs",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", s.victim)), gz(t, file("evil", pwned))}
			},
			landed: "evil",
		},
		{
			name: "hard link to the host's /etc/passwd",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, hardlink("pw", "/etc/passwd"))}
			},
		},
		{
			name: "hard link to an absolute path outside",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, hardlink("pw", s.victim))}
			},
		},
		{
			name: "hard link to ../x",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, hardlink("pw", "../../sentinel/passwd"))}
			},
		},
		{
			name: "hard link to an absolute path that also exists inside",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				// the link must join the inside copy, never the outside file
				return []v1.Layer{gz(t, file(s.victim, pwned), hardlink("pw", s.victim))}
			},
			landed: "pw",
		},
		{
			name: "hard link through a symlink out of the rootfs",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", s.sentinel)), gz(t, hardlink("pw", "evil/passwd"))}
			},
		},
		{
			name: "hard link then a write through it",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, hardlink("pw", s.victim)), gz(t, file("pw", pwned))}
			},
			landed: "pw",
		},
		{
			name: "whiteout through a symlink out of the rootfs",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", s.sentinel)), gz(t, whiteout("evil", "passwd"), whiteout("evil", "sub"))}
			},
		},
		{
			name: "whiteout with ../ in its name",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, file("../../.wh.sentinel", ""), file("x/.wh..", ""), file(".wh.."+s.sentinel, ""))}
			},
		},
		{
			name: "opaque whiteout through a symlink out of the rootfs",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, symlink("evil", s.sentinel)), gz(t, opaque("evil"))}
			},
		},
		{
			name: "opaque whiteout of ../",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, file("../../sentinel/.wh..wh..opq", ""), file("../.wh..wh..opq", ""))}
			},
		},
		{
			name: "directory replaced by a symlink out of the rootfs, then written into",
			layers: func(t *testing.T, s *sandbox) []v1.Layer {
				return []v1.Layer{gz(t, dir("etc/"), file("etc/x", "x")), gz(t, symlink("etc", s.sentinel)), gz(t, file("etc/passwd", pwned), dir("etc/sub/"), file("etc/sub/keep", pwned))}
			},
			landed:        victimPath,
			overlayLanded: "etc/passwd",
		},
	}
	for _, tt := range tests {
		for _, sn := range []Snapshotter{Native, Overlayfs} {
			t.Run(string(sn)+"/"+tt.name, func(t *testing.T) {
				s := newSandbox(t)
				res, err := Unpack(context.Background(), imageOf(t, tt.layers(t, s)...), s.bundle, s.withSnapshots(t, sn, Options{}))
				s.checkUntouched(t)
				if err != nil {
					t.Logf("refused: %v", err)
					s.checkNoBundle(t)
					return
				}
				t.Logf("clamped into the rootfs: %+v", res.Total)
				checkBundleDir(t, s, res)
				if tt.landed != "" {
					landed := tt.landed
					if sn == Overlayfs && tt.overlayLanded != "" {
						landed = tt.overlayLanded
					}
					landed = strings.ReplaceAll(landed, victimPath, s.victim)
					b, err := os.ReadFile(filepath.Join(s.rootfs(), landed))
					if err != nil || string(b) != pwned {
						t.Errorf("the written file should be inside the rootfs at %s: %q, %v", landed, b, err)
					}
				}
				// No file in the rootfs may be a hard link of one outside.
				victim, _ := os.Lstat(s.victim)
				filepath.WalkDir(s.rootfs(), func(p string, d fs.DirEntry, err error) error {
					if err == nil {
						if fi, err := os.Lstat(p); err == nil && os.SameFile(fi, victim) {
							t.Errorf("ESCAPE: %s is a hard link of %s", p, s.victim)
						}
					}
					return nil
				})
			})
		}
	}
}

// victimPath, as a landing place, is the victim's absolute path re-rooted
// in the rootfs.
const victimPath = "$victim"

// TestUnpack_Failures is the table of inputs that must fail, leaving no
// bundle and no temporary directory, and touching nothing else.
func TestUnpack_Failures(t *testing.T) {
	notTar := strings.Repeat("this is a text file, not a tar archive\n", 40)
	tests := []struct {
		name    string
		image   func(t *testing.T) v1.Image
		ctx     func() context.Context
		wantErr error
		wantMsg []string
		// committed is how many snapshots the overlayfs snapshotter
		// commits: the layers below the one that fails.
		committed int
	}{
		{
			name: "diff_id mismatch",
			image: func(t *testing.T) v1.Image {
				img := imageOf(t, gz(t, file("a", "a")), gz(t, file("b", "b")))
				return withDiffIDs(t, img, func(ids []v1.Hash) []v1.Hash {
					ids[1] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
					return ids
				})
			},
			wantErr:   ErrDiffIDMismatch,
			wantMsg:   []string{"layer 2 of 2", "sha256:" + strings.Repeat("ab", 32)},
			committed: 1,
		},
		{
			name: "more diff_ids than layers",
			image: func(t *testing.T) v1.Image {
				img := imageOf(t, gz(t, file("a", "a")))
				return withDiffIDs(t, img, func(ids []v1.Hash) []v1.Hash { return append(ids, ids[0]) })
			},
			wantErr: ErrLayerCount,
		},
		{
			name: "an uncompressed layer that is not a tar",
			image: func(t *testing.T) v1.Image {
				return imageOf(t, gz(t, file("a", "a")), static.NewLayer([]byte(notTar), types.OCIUncompressedLayer))
			},
			wantMsg:   []string{"layer 2 of 2"},
			committed: 1,
		},
		{
			name: "a gzip layer that is not a tar",
			image: func(t *testing.T) v1.Image {
				return imageOf(t, layerOf(t, types.OCILayer, []byte(notTar)))
			},
			wantMsg: []string{"layer 1 of 1"},
		},
		{
			name: "a truncated gzip layer",
			image: func(t *testing.T) v1.Image {
				good := gz(t, file("big", strings.Repeat("0123456789abcdef", 4096)))
				rc, _ := good.Compressed()
				b, _ := io.ReadAll(rc)
				return imageOf(t, static.NewLayer(b[:len(b)/2], types.OCILayer))
			},
		},
		{
			name: "a layer that fails half-way, above a good one and below another",
			image: func(t *testing.T) v1.Image {
				var entries []entry
				for i := range 64 {
					entries = append(entries, file(fmt.Sprintf("half/f%02d", i), strings.Repeat("x", 4096)))
				}
				good := gz(t, entries...)
				rc, _ := good.Compressed()
				b, _ := io.ReadAll(rc)
				return imageOf(t, gz(t, file("below", "b")), static.NewLayer(b[:len(b)/2], types.OCILayer), gz(t, file("above", "a")))
			},
			wantMsg:   []string{"layer 2 of 3"},
			committed: 1,
		},
		{
			name: "more layers than a snapshotter stacks",
			image: func(t *testing.T) v1.Image {
				layers := make([]v1.Layer, MaxLayers+1)
				for i := range layers {
					layers[i] = gz(t, file(fmt.Sprintf("l%d", i), ""))
				}
				return imageOf(t, layers...)
			},
			wantErr: ErrTooManyLayers,
			wantMsg: []string{"126 layers", "at most 125", "4096-byte page", "500 lower directories"},
		},
		{
			name:    "a cancelled context",
			image:   func(t *testing.T) v1.Image { return imageOf(t, gz(t, file("a", "a"))) },
			ctx:     func() context.Context { ctx, cancel := context.WithCancel(context.Background()); cancel(); return ctx },
			wantErr: context.Canceled,
		},
	}
	for _, tt := range tests {
		for _, sn := range []Snapshotter{Native, Overlayfs} {
			t.Run(string(sn)+"/"+tt.name, func(t *testing.T) {
				s := newSandbox(t)
				ctx := context.Background()
				if tt.ctx != nil {
					ctx = tt.ctx()
				}
				opts := s.withSnapshots(t, sn, Options{})
				res, err := Unpack(ctx, tt.image(t), s.bundle, opts)
				if sn == Overlayfs {
					checkCommitted(t, opts.Snapshots, tt.committed)
				}
				if err == nil {
					t.Fatalf("Unpack succeeded (%+v), want an error", res.Total)
				}
				t.Logf("error: %v", err)
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("error %v, want %v", err, tt.wantErr)
				}
				for _, m := range tt.wantMsg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q should mention %q", err, m)
					}
				}
				s.checkUntouched(t)
				s.checkNoBundle(t)
			})
		}
	}
}

// checkCommitted checks that the snapshots directory holds n committed
// snapshots, numbered 1 to n, and nothing else: no active snapshot, no
// tmp-* directory of a layer that was not committed.
func checkCommitted(t *testing.T, snaps *Snapshots, n int) {
	t.Helper()
	ix, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		want = append(want, strconv.Itoa(i+1))
		if i < len(ix) && ix[i].Kind != Committed {
			t.Errorf("snapshot %d is %s, want committed", ix[i].ID, ix[i].Kind)
		}
	}
	if len(ix) != n {
		t.Errorf("the index lists %d snapshots, want %d committed: %+v", len(ix), n, ix)
	}
	des, err := os.ReadDir(snaps.Root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, de := range des {
		if de.Name() != "index" && de.Name() != "lock" {
			got = append(got, de.Name())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the snapshots directory holds %v, want %v (a layer that failed is never committed, and leaves no tmp-*)", got, want)
	}
}

func TestUnpack_DiffIDMismatchNamesLayerExpectedAndGot(t *testing.T) {
	s := newSandbox(t)
	l := gz(t, file("a", "a"))
	digest, _ := l.Digest()
	diffID, _ := l.DiffID()
	fake := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
	img := withDiffIDs(t, imageOf(t, l), func([]v1.Hash) []v1.Hash { return []v1.Hash{fake} })
	_, err := Unpack(context.Background(), img, s.bundle, Options{})
	if !errors.Is(err, ErrDiffIDMismatch) {
		t.Fatalf("error %v, want ErrDiffIDMismatch", err)
	}
	for _, m := range []string{digest.Hex[:12], fake.String(), diffID.String()} {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q should name %s", err, m)
		}
	}
	s.checkNoBundle(t)
}

func TestUnpack_CancelBetweenLayers(t *testing.T) {
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	img := imageOf(t, gz(t, file("a", "a")), gz(t, file("b", "b")), gz(t, file("c", "c")))
	calls := 0
	_, err := Unpack(ctx, img, s.bundle, Options{Progress: func(LayerResult) { calls++; cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("%d layers applied after the cancel, want the first only", calls)
	}
	s.checkUntouched(t)
	s.checkNoBundle(t)
}

// cancellingLayer cancels a context once its compressed bytes start being
// read: the cancel arrives while archive.Apply is in the middle of the layer.
type cancellingLayer struct {
	v1.Layer
	cancel context.CancelFunc
}

func (l cancellingLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(&cancelOnRead{r: io.LimitReader(rc, 4096), cancel: l.cancel}, rc), rc}, nil
}

type cancelOnRead struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelOnRead) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		c.cancel()
	}
	return n, err
}

func TestUnpack_CancelInsideLayer(t *testing.T) {
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var entries []entry
	for i := 0; i < 2000; i++ {
		entries = append(entries, file(fmt.Sprintf("f%d", i), strings.Repeat("x", 1000)))
	}
	img := imageOf(t, cancellingLayer{Layer: gz(t, entries...), cancel: cancel})
	var progress []LayerResult
	_, err := Unpack(ctx, img, s.bundle, Options{Progress: func(lr LayerResult) { progress = append(progress, lr) }})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "applying layer 1 of 1") {
		t.Fatalf("error %v, want context.Canceled while applying layer 1", err)
	}
	if len(progress) != 0 {
		t.Errorf("%d layers reported done, want none (the cancel came inside the only one)", len(progress))
	}
	s.checkUntouched(t)
	s.checkNoBundle(t)
}

func TestUnpack_StartReportsTheTemporaryDirectory(t *testing.T) {
	s := newSandbox(t)
	var tmp string
	var layers int
	res, err := Unpack(context.Background(), imageOf(t, gz(t, file("a", "a")), raw(t, file("b", "b"))), s.bundle, Options{
		Start: func(dir string, n int) {
			tmp, layers = dir, n
			if fi, err := os.Stat(filepath.Join(dir, "rootfs")); err != nil || !fi.IsDir() {
				t.Errorf("Start: %s/rootfs should exist: %v", dir, err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if layers != 2 || filepath.Dir(tmp) != s.dir || !strings.HasPrefix(filepath.Base(tmp), "bundle.unpack-tmp-") {
		t.Errorf("Start(%q, %d), want a bundle.unpack-tmp-* sibling of the bundle and 2 layers", tmp, layers)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary directory %s is still there after the rename: %v", tmp, err)
	}
	checkBundleDir(t, s, res)
	s.checkUntouched(t)
}

// oldBundle makes a bundle that looks like one from an earlier unpack, with
// a spec in it.
func oldBundle(t *testing.T, s *sandbox) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(s.rootfs(), "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.bundle, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUnpack_ExistingBundleNeedsForce(t *testing.T) {
	s := newSandbox(t)
	oldBundle(t, s)
	before := snapshot(t, s.bundle)
	_, err := Unpack(context.Background(), imageOf(t, gz(t, file("new", "n"))), s.bundle, Options{})
	if !errors.Is(err, ErrBundleExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("error %v, want ErrBundleExists with a --force hint", err)
	}
	if after := snapshot(t, s.bundle); len(after) != len(before) {
		t.Errorf("the existing bundle changed: %v -> %v", before, after)
	}
	s.checkUntouched(t)
}

func TestUnpack_EmptyBundleDirIsUsed(t *testing.T) {
	s := newSandbox(t)
	if err := os.Mkdir(s.bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Unpack(context.Background(), imageOf(t, gz(t, file("new", "n"))), s.bundle, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkBundleDir(t, s, res)
	checkRootFS(t, s.rootfs(), want{files: map[string]string{"new": "n"}})
	s.checkUntouched(t)
}

func TestUnpack_ForceReplacesBundle(t *testing.T) {
	s := newSandbox(t)
	oldBundle(t, s)
	res, err := Unpack(context.Background(), imageOf(t, gz(t, file("new", "n"))), s.bundle, Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replaced {
		t.Error("Result.Replaced = false")
	}
	checkBundleDir(t, s, res)
	checkRootFS(t, s.rootfs(), want{files: map[string]string{"new": "n"}, absent: []string{"old"}})
	s.checkUntouched(t) // no old bundle or temporary directory left
}

func TestUnpack_ForceKeepsOldBundleWhenUnpackFails(t *testing.T) {
	s := newSandbox(t)
	oldBundle(t, s)
	before := snapshot(t, s.bundle)
	img := withDiffIDs(t, imageOf(t, gz(t, file("new", "n"))), func(ids []v1.Hash) []v1.Hash {
		return []v1.Hash{{Algorithm: "sha256", Hex: strings.Repeat("1", 64)}}
	})
	if _, err := Unpack(context.Background(), img, s.bundle, Options{Force: true}); !errors.Is(err, ErrDiffIDMismatch) {
		t.Fatalf("error %v, want ErrDiffIDMismatch", err)
	}
	after := snapshot(t, s.bundle)
	for p, d := range before {
		if after[p] != d {
			t.Errorf("old bundle changed at %s: %q -> %q", p, d, after[p])
		}
	}
	s.checkUntouched(t)
}

func TestUnpack_ForceRefusesNonBundle(t *testing.T) {
	s := newSandbox(t)
	// --bundle pointed at a directory of someone's files, or at a file.
	for _, target := range []string{s.sentinel, s.victim} {
		_, err := Unpack(context.Background(), imageOf(t, gz(t, file("new", "n"))), target, Options{Force: true})
		if !errors.Is(err, ErrNotBundle) {
			t.Errorf("Unpack --force into %s: error %v, want ErrNotBundle", target, err)
		}
	}
	s.checkUntouched(t)
	s.checkNoBundle(t)
}

func TestUnpack_OwnershipAsRoot(t *testing.T) {
	testenv.RequireRoot(t) // only root can give files away
	s := newSandbox(t)
	img := imageOf(t, gz(t, entry{name: "owned", body: "x", uid: 1234}))
	for _, noSameOwner := range []bool{false, true} {
		res, err := Unpack(context.Background(), img, s.bundle, Options{Force: true, NoSameOwner: noSameOwner})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(res.RootFS, "owned"))
		if err != nil {
			t.Fatal(err)
		}
		uid := int(fi.Sys().(*syscall.Stat_t).Uid)
		if want := map[bool]int{false: 1234, true: 0}[noSameOwner]; uid != want {
			t.Errorf("NoSameOwner=%v: owner %d, want %d", noSameOwner, uid, want)
		}
	}
}
