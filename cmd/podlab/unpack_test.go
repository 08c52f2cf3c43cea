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
	if err := unpack.RemoveBundle(first); err != nil {
		t.Fatal(err)
	}
	if err := unpack.RemoveBundle(second); err != nil {
		t.Fatal(err)
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

func TestUnpack_BadSnapshotter(t *testing.T) {
	state := testenv.StateDir(t)
	_, _, err := podlab(t, state, "unpack", "nginx", "--snapshotter", "zfs")
	if err == nil || !strings.Contains(err.Error(), "choose native") {
		t.Errorf("--snapshotter zfs: %v, want an error naming the choices", err)
	}
}
