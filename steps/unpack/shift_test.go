package unpack

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
)

// owner is a file's uid, gid and mode bits, not following symlinks.
func owner(t *testing.T, p string) (uid, gid, mode uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid, st.Mode & 0o7777
}

// capV2 is a version 2 security.capability value: CAP_NET_BIND_SERVICE
// (bit 10) permitted and effective, as `setcap cap_net_bind_service+ep`.
func capV2() []byte {
	v := make([]byte, 20)
	binary.LittleEndian.PutUint32(v, capRevision2|capEffective)
	binary.LittleEndian.PutUint32(v[4:], 1<<10)
	return v
}

func TestShiftOwnership(t *testing.T) {
	testenv.RequireRoot(t) // only root gives files away
	root := filepath.Join(t.TempDir(), "rootfs")
	mk := func(name string, uid, gid int, mode os.FileMode) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("etc/passwd", 0, 0, 0o644)
	mk("home/app/notes", 1000, 50, 0o600)
	mk("usr/bin/su", 0, 0, 0o4755|os.ModeSetuid)
	mk("big", 70000, 70000, 0o644)
	ping := mk("usr/bin/ping", 0, 0, 0o755)
	if err := unix.Lsetxattr(ping, capabilityXattr, capV2(), 0); err != nil {
		t.Skipf("this file system keeps no file capabilities: %v", err)
	}
	if err := os.Link(filepath.Join(root, "home/app/notes"), filepath.Join(root, "notes-link")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(filepath.Dir(ping), 0o2755); err != nil { // setgid directory
		t.Fatal(err)
	}

	sh := IDShift{UIDBase: 65536, GIDBase: 131072, Size: 65536}
	res, err := ShiftOwnership(context.Background(), root, sh)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name           string
		path           string
		uid, gid, mode uint32
	}{
		{"root's file", "etc/passwd", 65536, 131072, 0o644},
		{"a user's file", "home/app/notes", 66536, 131122, 0o600},
		{"a hard link, shifted once", "notes-link", 66536, 131122, 0o600},
		{"setuid kept", "usr/bin/su", 65536, 131072, 0o4755},
		{"setgid directory kept", "usr/bin", 65536, 131072, 0o2755},
		{"an id the range cannot hold", "big", OverflowID, OverflowID, 0o644},
		{"the symlink itself", "escape", 65536, 131072, 0o777},
		{"the rootfs", "", 65536, 131072, 0o755},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid, gid, mode := owner(t, filepath.Join(root, tt.path))
			if uid != tt.uid || gid != tt.gid || mode != tt.mode {
				t.Errorf("%s: %d:%d %04o, want %d:%d %04o", tt.path, uid, gid, mode, tt.uid, tt.gid, tt.mode)
			}
		})
	}
	if uid, _, _ := owner(t, outside); uid != 0 {
		t.Errorf("the symlink's target outside the rootfs changed owner to %d", uid)
	}
	caps, err := getXattr(ping, capabilityXattr)
	if err != nil || len(caps) != capV3Size {
		t.Fatalf("capabilities of ping: %x, %v; want a version 3 value", caps, err)
	}
	if magic := binary.LittleEndian.Uint32(caps); magic != capRevision3|capEffective || binary.LittleEndian.Uint32(caps[4:]) != 1<<10 {
		t.Errorf("capabilities of ping: %x, want v3, effective, CAP_NET_BIND_SERVICE", caps)
	}
	if rootid := binary.LittleEndian.Uint32(caps[20:]); rootid != 65536 {
		t.Errorf("capabilities rootid %d, want the range's root 65536", rootid)
	}
	if res.Capabilities != 1 || res.Overflowed != 1 {
		t.Errorf("result %+v, want 1 capability rewritten and 1 overflow", res)
	}
}

func TestShiftOwnership_BadInput(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name string
		sh   IDShift
		want error
	}{
		{"no ids", IDShift{UIDBase: 65536, GIDBase: 65536}, ErrInvalidShift},
		{"past 32 bits", IDShift{UIDBase: 4294901760, GIDBase: 65536, Size: 65536}, ErrInvalidShift},
		{"gid past 32 bits", IDShift{UIDBase: 65536, GIDBase: 4294967295, Size: 1}, ErrInvalidShift},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ShiftOwnership(context.Background(), root, tt.sh); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if uid, _, _ := owner(t, root); uid != uint32(os.Getuid()) {
				t.Errorf("the rootfs changed owner on bad input")
			}
		})
	}
	if _, err := ShiftOwnership(context.Background(), filepath.Join(root, "missing"), IDShift{UIDBase: 65536, GIDBase: 65536, Size: 65536}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing rootfs: error %v, want ErrNotExist", err)
	}
}

func TestShiftOwnership_Cancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ShiftOwnership(ctx, t.TempDir(), IDShift{UIDBase: 65536, GIDBase: 65536, Size: 65536}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestCapsForRoot_BadInput(t *testing.T) {
	sh := IDShift{UIDBase: 65536, GIDBase: 65536, Size: 65536}
	for name, v := range map[string][]byte{
		"too short":        {1, 2},
		"unknown revision": append([]byte{0, 0, 0, 0x09}, make([]byte, 16)...),
		"v2 of v3's size":  append(capV2(), 0, 0, 0, 0),
	} {
		if _, err := capsForRoot(v, sh); !errors.Is(err, ErrBadCapabilities) {
			t.Errorf("%s: error %v, want ErrBadCapabilities", name, err)
		}
	}
}

func TestUnpack_Shift(t *testing.T) {
	testenv.RequireRoot(t)
	s := newSandbox(t)
	img := imageOf(t, gz(t, dir("etc"), entry{name: "etc/owned", body: "x", uid: 33}))
	res, err := Unpack(context.Background(), img, s.bundle, Options{Force: true, Shift: &IDShift{UIDBase: 196608, GIDBase: 196608, Size: 65536}})
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid, _ := owner(t, filepath.Join(res.RootFS, "etc/owned")); uid != 196608+33 || gid != 196608+33 {
		t.Errorf("etc/owned: %d:%d, want 196641:196641", uid, gid)
	}
	if uid, _, _ := owner(t, res.RootFS); uid != 196608 {
		t.Errorf("rootfs owned by %d, want 196608 (the range's root)", uid)
	}
	if res.Shifted == nil || res.Shifted.Files < 3 {
		t.Errorf("Shifted = %+v", res.Shifted)
	}
	// A bad range changes nothing.
	if _, err := Unpack(context.Background(), img, s.bundle, Options{Force: true, Shift: &IDShift{}}); !errors.Is(err, ErrInvalidShift) {
		t.Fatalf("error %v, want ErrInvalidShift", err)
	}
	if uid, _, _ := owner(t, filepath.Join(res.RootFS, "etc/owned")); uid != 196608+33 {
		t.Errorf("a refused shift touched the bundle")
	}
}
