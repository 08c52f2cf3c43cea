package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/unpack"
)

// The container's rootfs, as the node's runtime makes it: with the
// overlayfs snapshotter where the kernel has it (containerd's default),
// each layer unpacked once into the node's snapshots directory and every
// container's rootfs an overlay mount of them with an upper directory of
// its own; with the native snapshotter otherwise, a full copy per
// container. A pod with its own user namespace (hostUsers: false) sees
// the shared snapshots through idmapped lowers (a copy chowned into its
// range where the kernel cannot idmap them, or with native).

// snapshotter is the node's choice of snapshotter, made once.
type snapshotter struct {
	once  sync.Once
	name  unpack.Snapshotter
	why   string // why native, when it is
	snaps *unpack.Snapshots
	err   error
}

// Snapshotter is the node's snapshotter (overlayfs where the kernel mounts
// an overlay in the node's snapshots directory, native otherwise) and,
// for native, why.
func (k *Kubelet) Snapshotter() (unpack.Snapshotter, string, error) {
	s := &k.snap
	s.once.Do(func() {
		if k.cfg.Snapshotter != "" {
			s.name = k.cfg.Snapshotter
		} else {
			var err error
			if s.name, err = unpack.DefaultSnapshotter(k.layout.SnapshotsDir()); err != nil {
				s.why = err.Error()
			}
		}
		if s.name == unpack.Overlayfs {
			s.snaps, s.err = unpack.OpenSnapshots(k.layout.SnapshotsDir())
		}
	})
	return s.name, s.why, s.err
}

// rootfsOptions are the unpack options of a container's rootfs on this
// node: its snapshotter and, for overlayfs, the node's snapshots and the
// container's key there (<pod uid>/<container>).
func (k *Kubelet) rootfsOptions(uid types.UID, container string) (unpack.Options, error) {
	name, _, err := k.Snapshotter()
	if err != nil {
		return unpack.Options{}, fmt.Errorf("opening the node's snapshots: %w", err)
	}
	return unpack.Options{Snapshotter: name, Snapshots: k.snap.snaps, Key: snapshotKey(uid, container)}, nil
}

func snapshotKey(uid types.UID, container string) string { return string(uid) + "/" + container }

// removeRootfses unmounts the rootfs of each of the pod's bundles and
// removes its upper directory (the container's active snapshot), then any
// active snapshot of the pod left by a runtime killed between making one
// and the bundle that records it. The image's snapshots stay.
func (k *Kubelet) removeRootfses(uid types.UID) ([]string, error) {
	var removed []string
	var errs []error
	bundles, _ := os.ReadDir(k.layout.PodBundles(uid))
	for _, b := range bundles {
		dir := filepath.Join(k.layout.PodBundles(uid), b.Name())
		bs, err := unpack.ReadBundleSnapshot(dir)
		if err != nil || bs == nil {
			continue // a native rootfs goes with the bundle
		}
		if err := unpack.RemoveBundle(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, filepath.Join(dir, "rootfs"), filepath.Join(bs.Snapshots, fmt.Sprint(bs.Active)))
	}
	if root := k.layout.SnapshotsDir(); exists(root) {
		snaps, err := unpack.OpenSnapshots(root)
		if err == nil {
			var ids []int
			ids, err = snaps.RemoveActives(func(key string) bool { return strings.HasPrefix(key, string(uid)+"/") })
			for _, id := range ids {
				removed = append(removed, snaps.Dir(id))
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
