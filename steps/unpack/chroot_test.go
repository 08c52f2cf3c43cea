package unpack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
)

func TestInRoot(t *testing.T) {
	testenv.RequireRoot(t)
	rootfs := t.TempDir()
	if err := os.WriteFile(filepath.Join(rootfs, "marker"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}

	var gotRoot string
	err := inRoot(rootfs, func(root string) error {
		gotRoot = root
		b, err := os.ReadFile("/marker")
		if err != nil || string(b) != "inside" {
			t.Errorf("/marker inside the chroot: %q, %v; want the rootfs's marker", b, err)
		}
		if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the host's %s is visible from the chrooted thread (%v)", outside, err)
		}
		if wd, err := os.Getwd(); err != nil || wd != "/" {
			t.Errorf("working directory %q (%v), want / inside the rootfs", wd, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotRoot != "/" {
		t.Errorf("apply got root %q, want /", gotRoot)
	}
	// The process, and every other thread, keeps its own root.
	if b, err := os.ReadFile(outside); err != nil || string(b) != "outside" {
		t.Errorf("after inRoot the process cannot read %s: %q, %v", outside, b, err)
	}

	// The main thread never gets the rootfs as its root: Go would keep it,
	// and /proc/self shows its root to the whole process. The threads that
	// did get it end with their goroutines, shortly after inRoot returns.
	for i := 0; i < 20; i++ {
		if err := inRoot(rootfs, func(string) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if root, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/root", os.Getpid())); err != nil || root != "/" {
			t.Fatalf("the main thread's root is %q (%v), want /", root, err)
		}
	}
	chrooted := func() (left []string) {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if root, err := os.Readlink("/proc/self/task/" + task.Name() + "/root"); err == nil && root != "/" {
				left = append(left, task.Name()+" "+root)
			}
		}
		return left
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(chrooted()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := chrooted(); len(left) > 0 {
		t.Errorf("threads still chrooted 2s after inRoot returned: %v", left)
	}
	if _, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		t.Errorf("/proc/self/mountinfo after inRoot: %v", err)
	}

	want := errors.New("from apply")
	if err := inRoot(rootfs, func(string) error { return want }); !errors.Is(err, want) || !strings.Contains(err.Error(), rootfs) {
		t.Errorf("inRoot returned %v, want apply's error, saying its paths are inside %s", err, rootfs)
	}
}

// TestInRoot_PanicReachesCaller: a panic while applying on the chrooted
// thread comes back to inRoot's caller, where recover can catch it, instead
// of ending the program from a goroutine nobody can reach.
func TestInRoot_PanicReachesCaller(t *testing.T) {
	testenv.RequireRoot(t)
	rootfs := t.TempDir()
	boom := errors.New("boom")
	var got any
	func() {
		defer func() { got = recover() }()
		_ = inRoot(rootfs, func(string) error { panic(boom) })
		t.Error("inRoot returned; want it to panic as apply did")
	}()
	p, ok := got.(*ApplyPanic)
	if !ok {
		t.Fatalf("recovered %T %v, want *ApplyPanic", got, got)
	}
	if p.Value != boom || !errors.Is(p, boom) {
		t.Errorf("ApplyPanic.Value = %v, want the value apply panicked with, %v", p.Value, boom)
	}
	if !strings.Contains(string(p.Stack), "TestInRoot_PanicReachesCaller") {
		t.Errorf("ApplyPanic.Stack does not show where apply panicked:\n%s", p.Stack)
	}
	// The process goes on, and the next apply works.
	if err := inRoot(rootfs, func(string) error { return nil }); err != nil {
		t.Errorf("inRoot after a panic: %v", err)
	}
}

// TestInRoot_FallsBack: when the thread cannot be chrooted (here: the rootfs
// is not a directory), apply still runs, with the rootfs's own path.
func TestInRoot_FallsBack(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var gotRoot string
	if err := inRoot(notDir, func(root string) error { gotRoot = root; return nil }); err != nil {
		t.Fatal(err)
	}
	if gotRoot != notDir {
		t.Errorf("apply got root %q, want the path itself, %q", gotRoot, notDir)
	}
}

func TestUnpack_ChrootedAsRoot(t *testing.T) {
	s := newSandbox(t)
	res, err := Unpack(context.Background(), imageOf(t, gz(t, file("a", "a")), raw(t, file("b", "b"))), s.bundle, Options{})
	if err != nil {
		t.Fatal(err)
	}
	asRoot := os.Geteuid() == 0
	for _, l := range res.Layers {
		if l.Chrooted != asRoot {
			t.Errorf("layer %d: Chrooted %v, want %v (euid %d)", l.Index, l.Chrooted, asRoot, os.Geteuid())
		}
	}
	checkRootFS(t, s.rootfs(), want{files: map[string]string{"a": "a", "b": "b"}})
}
