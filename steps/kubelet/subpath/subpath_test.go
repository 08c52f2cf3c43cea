package subpath_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/kubelet/subpath"
)

// volume makes a volume as a container could have left it: directories,
// files, symlinks that stay inside and symlinks that lead out.
func volume(t *testing.T) string {
	t.Helper()
	v := filepath.Join(t.TempDir(), "vol")
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(v, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(v, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(v, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("dir/sub")
	write("file.txt", "file at the top")
	write("dir/file.txt", "file in dir")
	link("dir", "link-in")                  // relative, stays inside
	link("../file.txt", "dir/back")         // climbs, but not above the volume
	link("link-in/sub", "chain-in")         // a chain that stays inside
	link("/", "evil")                       // CVE-2017-1002101's symlink
	link("../..", "up")                     // above the volume by ..
	link("dir/out", "chain-out")            // a chain: chain-out -> dir/out -> ../../..
	link("../../..", "dir/out")             //
	link("/proc/self/root", "magic")        // a magic link to the host's /
	link(filepath.Join(v, "dir"), "abs-in") // absolute, even if it names the volume
	link("nowhere", "dangling")
	return v
}

func TestOpen(t *testing.T) {
	v := volume(t)
	tests := []struct {
		name, subPath, want string // want: the path inside v that must be opened
	}{
		{"a directory", "dir", "dir"},
		{"a file", "file.txt", "file.txt"},
		{"a file in a directory", "dir/file.txt", "dir/file.txt"},
		{"a symlink that stays inside", "link-in", "dir"},
		{"through a symlink that stays inside", "link-in/file.txt", "dir/file.txt"},
		{"a symlink with .. that stays inside", "dir/back", "file.txt"},
		{"a chain of symlinks that stays inside", "chain-in", "dir/sub"},
		{"the volume itself", ".", "."},
		{"untidy slashes", "./dir//sub/", "dir/sub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := subpath.Open(v, tt.subPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !sameFile(t, f, filepath.Join(v, tt.want)) {
				t.Errorf("Open(%q) opened something else than %s", tt.subPath, tt.want)
			}
		})
	}
}

// TestOpen_Refused is the table of subPaths that must never be opened.
func TestOpen_Refused(t *testing.T) {
	v := volume(t)
	tests := []struct {
		name, subPath string
		want          error
	}{
		{"a symlink to /", "evil", subpath.ErrEscape},
		{"through a symlink to /", "evil/etc/passwd", subpath.ErrEscape},
		{"a symlink to ../..", "up", subpath.ErrEscape},
		{"through a symlink to ../..", "up/etc", subpath.ErrEscape},
		{"a chain of symlinks that leaves", "chain-out", subpath.ErrEscape},
		{"a magic link to the host's /", "magic", subpath.ErrEscape},
		{"an absolute symlink, even into the volume", "abs-in", subpath.ErrEscape},
		{"a path through a file", "file.txt/x", unix.ENOTDIR},
		{"a path that does not exist", "missing", fs.ErrNotExist},
		{"a dangling symlink", "dangling", fs.ErrNotExist},
		{"absolute", "/etc", subpath.ErrAbsolute},
		{"..", "..", subpath.ErrBacksteps},
		{".. inside", "dir/../../etc", subpath.ErrBacksteps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := subpath.Open(v, tt.subPath)
			if err == nil {
				f.Close()
				t.Fatalf("Open(%q) opened %s", tt.subPath, f.Name())
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Open(%q): %v, want %v", tt.subPath, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.subPath) {
				t.Errorf("the error does not name the subPath %q: %v", tt.subPath, err)
			}
		})
	}
}

func TestMkdirAll(t *testing.T) {
	v := volume(t)
	tests := []struct {
		name, rel, want string
	}{
		{"new directories", "a/b/c", "a/b/c"},
		{"under a symlink that stays inside", "link-in/new", "dir/new"},
		{"existing", "dir/sub", "dir/sub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := subpath.MkdirAll(v, tt.rel, 0o777)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !sameFile(t, f, filepath.Join(v, tt.want)) {
				t.Errorf("MkdirAll(%q) did not return %s", tt.rel, tt.want)
			}
		})
	}
	fi, err := os.Stat(filepath.Join(v, "a/b"))
	if err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("a/b: %v, mode %v; want 0777 whatever the umask", err, fi.Mode())
	}

	host := filepath.Join("/", "podlab-subpath-test-"+filepath.Base(filepath.Dir(v)))
	bad := []struct {
		name, rel string
		want      error
	}{
		{"under a symlink to /", "evil/" + filepath.Base(host), subpath.ErrEscape},
		{"under ../..", "up/x", subpath.ErrEscape},
		{"through a file", "file.txt/x", unix.ENOTDIR},
		{"a dangling symlink", "dangling", fs.ErrNotExist},
		{"..", "a/../../x", subpath.ErrBacksteps},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			f, err := subpath.MkdirAll(v, tt.rel, 0o777)
			if err == nil {
				f.Close()
				t.Fatalf("MkdirAll(%q) made %s", tt.rel, f.Name())
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("MkdirAll(%q): %v, want %v", tt.rel, err, tt.want)
			}
		})
	}
	if _, err := os.Lstat(host); err == nil {
		os.Remove(host)
		t.Errorf("MkdirAll made %s on the host", host)
	}
}

// TestBind: what is mounted on the target is what the subPath names inside
// the volume, a directory or a file; binding again replaces it; Clean
// unmounts and removes the targets and nothing of the volume.
func TestBind(t *testing.T) {
	testenv.RequireRoot(t)
	v := volume(t)
	targets := filepath.Join(t.TempDir(), "volume-subpaths")
	t.Cleanup(func() { subpath.Clean(targets) })
	tests := []struct {
		name, subPath, target, read, want string
	}{
		{"a directory", "dir", "vol/c/0", "file.txt", "file in dir"},
		{"a file", "file.txt", "vol/c/1", "", "file at the top"},
		{"a symlink that stays inside", "link-in", "vol/c/2", "file.txt", "file in dir"},
		{"a symlink to a file, with ..", "dir/back", "vol/c/3", "", "file at the top"},
		{"a missing subPath is made a directory", "made/here", "vol/c/4", "", ""},
		{"again on a used target: replaced", "dir/file.txt", "vol/c/0", "", "file in dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := filepath.Join(targets, tt.target)
			if err := subpath.Bind(v, tt.subPath, target); err != nil {
				t.Fatal(err)
			}
			if tt.subPath == "made/here" {
				fi, err := os.Stat(filepath.Join(v, "made/here"))
				if err != nil || !fi.IsDir() || !sameStat(t, target, filepath.Join(v, "made/here")) {
					t.Errorf("made/here: %v; target %s should be it", err, target)
				}
				return
			}
			b, err := os.ReadFile(filepath.Join(target, tt.read))
			if err != nil || string(b) != tt.want {
				t.Errorf("read %q, %v; want %q", b, err, tt.want)
			}
		})
	}

	bad := []struct{ name, subPath string }{
		{"a symlink to /", "evil"},
		{"a symlink to ../..", "up"},
		{"a chain that leaves", "chain-out"},
		{"through a file", "file.txt/x"},
	}
	for i, tt := range bad {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			target := filepath.Join(targets, "vol/bad", string(rune('0'+i)))
			if err := subpath.Bind(v, tt.subPath, target); err == nil {
				t.Fatalf("Bind(%q) mounted it", tt.subPath)
			}
			if mounted(t, target) {
				t.Errorf("%s is mounted", target)
			}
		})
	}

	unmounted, err := subpath.Clean(targets)
	if err != nil {
		t.Fatal(err)
	}
	if len(unmounted) != 5 {
		t.Errorf("Clean unmounted %d mounts, want 5: %v", len(unmounted), unmounted)
	}
	if _, err := os.Lstat(targets); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there: %v", targets, err)
	}
	for _, p := range []string{"dir/file.txt", "file.txt", "dir/sub"} {
		if _, err := os.Stat(filepath.Join(v, p)); err != nil {
			t.Errorf("Clean removed the volume's %s: %v", p, err)
		}
	}
}

// TestBind_Race: a container swaps a directory of the volume for a symlink
// to / and back, as fast as it can, while the kubelet binds it. Every bind
// that succeeds has the directory, never the host's /.
func TestBind_Race(t *testing.T) {
	testenv.RequireRoot(t)
	v := volume(t)
	targets := filepath.Join(t.TempDir(), "volume-subpaths")
	t.Cleanup(func() { subpath.Clean(targets) })
	flip := filepath.Join(v, "flip")
	if err := os.Mkdir(flip, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(flip, "inside"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			os.Rename(flip, flip+".dir")
			os.Symlink("/", flip)
			os.Remove(flip)
			os.Rename(flip+".dir", flip)
		}
	})
	target := filepath.Join(targets, "flip/c/0")
	bound, refused := 0, 0
	for range 300 {
		if err := subpath.Bind(v, "flip", target); err != nil {
			refused++
			continue
		}
		bound++
		// (Bind may also have made flip anew, empty, while it was missing.)
		if _, err := os.Stat(filepath.Join(target, "etc/passwd")); err == nil || sameStat(t, target, "/") {
			t.Errorf("a bind that won the race has the host's /")
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d binds, %d refused or missed", bound, refused)
}

func TestClean_Missing(t *testing.T) {
	if u, err := subpath.Clean(filepath.Join(t.TempDir(), "nothing")); err != nil || len(u) != 0 {
		t.Errorf("Clean of a missing directory: %v, %v", u, err)
	}
}

func sameFile(t *testing.T, f *os.File, p string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(p, &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func sameStat(t *testing.T, p, q string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if unix.Stat(p, &a) != nil || unix.Stat(q, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func mounted(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), " "+p+" ")
}
