package kubelet_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/unpack"
)

// A second pod of an image unpacks nothing: the node's runtime (overlayfs
// snapshotter) made the image's snapshots for the first pod, and the second
// pod's rootfs is an overlay of the same snapshots with an upper directory
// of its own, so a file one pod writes the other does not see.
func TestKubelet_SecondPodUnpacksNothing(t *testing.T) {
	c := newClusterWithRuntime(t, func(cfg *cri.Config) { cfg.Snapshotter = unpack.Overlayfs })
	snapshots := func() (committed []int, active int) {
		t.Helper()
		snaps, err := unpack.OpenSnapshots(filepath.Join(c.dir, "nodes", "node-1", "snapshots"))
		if err != nil {
			t.Fatal(err)
		}
		all, err := snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.Kind == unpack.Active {
				active++
			} else {
				committed = append(committed, s.ID)
			}
		}
		return committed, active
	}
	first := c.create(t, helloPod(t, "first"))
	c.syncUntil(t, "first", 10*time.Second, "Running", running)
	before, _ := snapshots()
	if len(before) == 0 {
		t.Fatal("no committed snapshot after the first pod: the runtime did not use overlayfs")
	}
	second := c.create(t, helloPod(t, "second"))
	c.syncUntil(t, "second", 10*time.Second, "Running", running)
	after, active := snapshots()
	if !slices.Equal(before, after) {
		t.Errorf("the second pod changed the committed snapshots %v to %v: it unpacked", before, after)
	}
	if active != 2 {
		t.Errorf("%d active snapshots, want one upper directory per pod", active)
	}

	rootfs := func(name string) string {
		return filepath.Join(c.inspectContainer(t, c.get(t, name), "web").Info.Bundle, "rootfs")
	}
	for _, p := range []string{first.Name, second.Name} {
		if m, err := mountinfo.Mounted(rootfs(p)); err != nil || !m {
			t.Errorf("pod %s: its rootfs %s is not a mount (%v)", p, rootfs(p), err)
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs("first"), "only-in-first"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rootfs("second"), "only-in-first")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the second pod sees the first one's file (%v)", err)
	}
}
