package kubelet_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/unpack"
)

// TestKubelet_SecondPodUnpacksNothing: with the node's overlayfs
// snapshotter, a second pod of an image unpacks no layer; each pod's
// rootfs is an overlay mount with its own upper directory, so a file one
// writes the other does not see; removing a pod unmounts its rootfs and
// removes its upper directory, and the image's snapshots stay.
func TestKubelet_SecondPodUnpacksNothing(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	if name, why, err := c.kubelet.Snapshotter(); err != nil || name != unpack.Overlayfs {
		t.Fatalf("the node's snapshotter is %q (%s, %v); this kernel has overlayfs", name, why, err)
	}
	c.create(t, helloPod(t, "first"))
	c.create(t, helloPod(t, "second"))
	walkByHand(t, c, "first")

	second := c.get(t, "second")
	if _, err := c.kubelet.SandboxStage(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubelet.PullStage(ctx, c.get(t, "second"), "web"); err != nil {
		t.Fatal(err)
	}
	ur, err := c.kubelet.UnpackStage(ctx, c.get(t, "second"), "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ur.Unpack.Layers {
		if !l.Reused {
			t.Errorf("the second pod unpacked layer %d (%s): %+v", l.Index+1, l.Digest, l.Counts)
		}
	}
	if ur.Unpack.Total.Bytes != 0 || ur.Unpack.Snapshotter != unpack.Overlayfs {
		t.Errorf("second pod: %s, %d bytes unpacked; want overlayfs and none", ur.Unpack.Snapshotter, ur.Unpack.Total.Bytes)
	}
	walkByHand(t, c, "second")

	first := c.get(t, "first")
	rootfs := func(p string) string {
		return filepath.Join(c.kubelet.Layout().Bundle(c.get(t, p).UID, "web"), "rootfs")
	}
	for _, p := range []string{"first", "second"} {
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

	// Delete the first pod: its rootfs is unmounted, its upper goes.
	bs, err := unpack.ReadBundleSnapshot(filepath.Dir(rootfs("first")))
	if err != nil || bs == nil {
		t.Fatalf("the first pod's bundle records no snapshot: %v", err)
	}
	grace := int64(1)
	if _, err := c.admin.Delete(ctx, "pods", "default", "first", apiserver.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	first = c.get(t, "first")
	if _, err := c.kubelet.KillStage(ctx, first); err != nil {
		t.Fatal(err)
	}
	res, err := c.kubelet.RemoveStage(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	upper := filepath.Join(bs.Snapshots, strconv.Itoa(bs.Active))
	if _, err := os.Lstat(upper); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the first pod's upper directory %s is still there (%v); removed: %v", upper, err, res.Paths)
	}
	snaps, err := unpack.OpenSnapshots(c.kubelet.Layout().SnapshotsDir())
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := snaps.List()
	committed, active := 0, 0
	for _, sn := range ix {
		switch sn.Kind {
		case unpack.Committed:
			committed++
		case unpack.Active:
			active++
			if strings.HasPrefix(sn.Name, string(first.UID)) {
				t.Errorf("the deleted pod's snapshot %d is still in the index", sn.ID)
			}
		}
	}
	if committed != len(ur.Unpack.Layers) || active != 1 {
		t.Errorf("index: %d committed, %d active; want the image's %d layers and the second pod's rootfs", committed, active, len(ur.Unpack.Layers))
	}
	// The second pod still runs on the shared lowers.
	waitFor(t, 5*time.Second, "second Running", func() bool { return running(c.sync(t, "second")) })
}

// TestKubelet_NativeSnapshotter: a node told to use the native snapshotter
// copies the image into each rootfs, and says so.
func TestKubelet_NativeSnapshotter(t *testing.T) {
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.Snapshotter = unpack.Native })
	c.create(t, helloPod(t, "copy"))
	walkByHand(t, c, "copy")
	b := c.kubelet.Layout().Bundle(c.get(t, "copy").UID, "web")
	if m, _ := mountinfo.Mounted(filepath.Join(b, "rootfs")); m {
		t.Error("a native rootfs is a mount")
	}
	if bs, err := unpack.ReadBundleSnapshot(b); err != nil || bs != nil {
		t.Errorf("a native bundle records a snapshot: %+v, %v", bs, err)
	}
}
