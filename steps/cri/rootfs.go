package cri

// The container's rootfs, through the node's snapshotter, as containerd's
// CRI plugin asks its snapshotter (containerd's default, overlayfs, where
// the kernel has it): each layer of an image unpacked once into the
// node's snapshots directory (<node>/snapshots, a committed snapshot per
// layer chain ID), and every container's rootfs an overlay mount of them
// with an upper directory of its own, the container's active snapshot,
// keyed <sandbox id>/<container id>. With the native snapshotter (no
// overlayfs here, or Config.Snapshotter says so) the rootfs is a full
// copy per container. The bundle's snapshot.json records the mount, so
// removing the container unmounts it and removes the upper directory;
// the image's snapshots stay (podlab rmi's GC removes them).

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/podlab/podlab/steps/unpack"
)

// snapshotter is the node's choice of snapshotter, made once.
type snapshotter struct {
	once  sync.Once
	name  unpack.Snapshotter
	why   string // why native, when it is
	snaps *unpack.Snapshots
	err   error
}

// Snapshotter is the node's snapshotter (Config.Snapshotter, else
// overlayfs where the kernel mounts an overlay in the node's snapshots
// directory, native otherwise) and, for native, why.
func (s *Server) Snapshotter() (unpack.Snapshotter, string, error) {
	sn := &s.snap
	sn.once.Do(func() {
		if s.cfg.Snapshotter != "" {
			sn.name = s.cfg.Snapshotter
		} else {
			var err error
			if sn.name, err = unpack.DefaultSnapshotter(s.node.SnapshotsDir()); err != nil {
				sn.why = err.Error()
			}
		}
		if sn.name == unpack.Overlayfs {
			sn.snaps, sn.err = unpack.OpenSnapshots(s.node.SnapshotsDir())
		}
	})
	return sn.name, sn.why, sn.err
}

// snapshotKey is a container's active snapshot's key.
func snapshotKey(c *containerRecord) string { return c.SandboxID + "/" + c.ID }

// rootfsOptions are the unpack options of a container's rootfs: the
// node's snapshotter and, for overlayfs, its snapshots and the key.
func (s *Server) rootfsOptions(c *containerRecord) (unpack.Options, error) {
	name, _, err := s.Snapshotter()
	if err != nil {
		return unpack.Options{}, fmt.Errorf("opening the node's snapshots %s: %w", s.node.SnapshotsDir(), err)
	}
	return unpack.Options{Force: true, Snapshotter: name, Snapshots: s.snap.snaps, Key: snapshotKey(c)}, nil
}

// removeRootfs unmounts a container's overlay rootfs and removes its
// active snapshot (unpack.RemoveBundle), then any active snapshot of the
// container a create killed before the bundle recorded it left behind.
func (s *Server) removeRootfs(c *containerRecord) error {
	errs := []error{unpack.RemoveBundle(c.Bundle)}
	if name, _, err := s.Snapshotter(); err == nil && name == unpack.Overlayfs {
		_, err := s.snap.snaps.RemoveActives(func(key string) bool { return key == snapshotKey(c) })
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeSandboxSnapshots removes the active snapshots of a sandbox's
// containers that no record names any more.
func (s *Server) removeSandboxSnapshots(sandboxID string) error {
	if name, _, err := s.Snapshotter(); err != nil || name != unpack.Overlayfs {
		return nil
	}
	_, err := s.snap.snaps.RemoveActives(func(key string) bool { return strings.HasPrefix(key, sandboxID+"/") })
	return err
}
