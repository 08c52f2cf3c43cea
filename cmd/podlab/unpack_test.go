package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/unpack"
)

// TestUnpack_Snapshotters: the overlayfs snapshotter unpacks hello's layers
// once; a second bundle of it unpacks nothing and says so; rmi keeps the
// snapshots a bundle's rootfs stands on and removes them once it is gone.
func TestUnpack_Snapshotters(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	ref := helloRegistry(t)
	mustPodlab(t, state, "pull", ref)
	first, second := filepath.Join(state, "bundles", "one"), filepath.Join(state, "bundles", "two")
	t.Cleanup(func() {
		_ = unpack.RemoveBundle(first)
		_ = unpack.RemoveBundle(second)
	})

	out := mustPodlab(t, state, "unpack", ref, "--snapshotter", "overlayfs", "--bundle", first)
	for _, want := range []string{"with the overlayfs snapshotter", "committed as snapshot 1", "committed as snapshot 4",
		"Unpacked 4 of 4 layers", "mount -t overlay overlay -o lowerdir=" + filepath.Join(state, "snapshots", "4", "fs") + ":"} {
		if !strings.Contains(out, want) {
			t.Errorf("first unpack: no %q in:\n%s", want, out)
		}
	}
	out = mustPodlab(t, state, "unpack", ref, "--snapshotter", "overlayfs", "--bundle", second)
	for _, want := range []string{"already unpacked (snapshot 1)", "already unpacked (snapshot 4)", "Unpacked 0 of 4 layers", "upperdir=" + filepath.Join(state, "snapshots", "6", "fs")} {
		if !strings.Contains(out, want) {
			t.Errorf("second unpack: no %q in:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(second, "rootfs", "srv", "www", "index.html")); err != nil || len(b) == 0 {
		t.Errorf("the second rootfs has no srv/www/index.html: %v", err)
	}

	out = mustPodlab(t, state, "rmi", ref)
	if strings.Contains(out, "removed snapshot") {
		t.Errorf("rmi removed snapshots two rootfs stand on:\n%s", out)
	}
	for _, b := range []string{first, second} {
		out := mustPodlab(t, state, "unpack", "--remove", "--bundle", b)
		if !strings.Contains(out, "Unmounted "+b+"/rootfs and removed its upper directory") {
			t.Errorf("unpack --remove: %s", out)
		}
	}
	mustPodlab(t, state, "pull", ref)
	out = mustPodlab(t, state, "rmi", ref)
	for _, want := range []string{"removed snapshot 1 ", "removed snapshot 4 "} {
		if !strings.Contains(out, want) {
			t.Errorf("rmi with no bundle left: no %q in:\n%s", want, out)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "snapshots")); len(ents) != 2 { // index and lock
		t.Errorf("snapshots/ holds %d entries after rmi, want only index and lock", len(ents))
	}
}

func TestUnpack_BadInput(t *testing.T) {
	state := testenv.StateDir(t)
	notBundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(notBundle, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown snapshotter", []string{"unpack", "nginx", "--snapshotter", "zfs"}, "choose native"},
		{"remove without a bundle", []string{"unpack", "--remove"}, "needs --bundle DIR and no image, e.g. `podlab unpack --remove --bundle " + state + "/bundles/hello`"},
		{"remove a directory that is no bundle", []string{"unpack", "--remove", "--bundle", notBundle}, "not a bundle podlab unpack made (nothing removed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := podlab(t, state, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("podlab %v: %v, want an error saying %q", tt.args, err, tt.want)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(notBundle, "keep")); err != nil || string(b) != "mine" {
		t.Errorf("a refused --remove touched the directory: %q, %v", b, err)
	}
}
