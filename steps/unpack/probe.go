package unpack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/continuity/fs"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// The overlay capability probe: containerd's overlayutils.Supported (d_type
// on the backing file system, then an overlay of two lower directories
// mounted and unmounted in a <root>/multiple-lowerdir-check* directory),
// with one difference. containerd mounts the probe's overlay in the mount
// namespace every other process sees: a process killed between the mount
// and the unmount leaves <root>/multiple-lowerdir-check*/merged mounted,
// and its directory cannot be removed ("device or resource busy"). Here
// the mount is made by one thread in a mount namespace of its own, which
// ends with the thread, or with the process if it is killed: the mount
// goes with it, and only an empty directory can be left, which the next
// probe removes.

// probeDirPattern is the probe's directory in root, as containerd names it.
const probeDirPattern = "multiple-lowerdir-check"

// staleProbeAge is how old a probe's directory must be before another
// probe removes it as left behind: a probe takes milliseconds, and another
// process may be probing in the same root (the doctor probes in the
// system's temporary directory).
const staleProbeAge = time.Minute

// overlaySupported says whether overlay can be used in root, as
// containerd's overlayutils.Supported, after removing what earlier probes
// left in root. mounted, if not nil, is called while the overlay is
// mounted (in the probe's own mount namespace).
func overlaySupported(root string, mounted func(merged string)) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	if err := removeStaleProbes(root, time.Now().Add(-staleProbeAge)); err != nil {
		return err
	}
	dtype, err := fs.SupportsDType(root)
	if err != nil {
		return err
	}
	if !dtype {
		return fmt.Errorf("%s does not support d_type. If the backing filesystem is xfs, please reformat with ftype=1 to enable d_type support", root)
	}
	return mountTwoLowers(root, mounted)
}

// mountTwoLowers mounts, then unmounts, an overlay of two lower directories
// in a new directory of root, in a private mount namespace of a thread
// that ends with it, and removes the directory.
func mountTwoLowers(root string, mounted func(merged string)) (err error) {
	td, err := os.MkdirTemp(root, probeDirPattern)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(td)) }()
	for _, d := range []string{"lower1", "lower2", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(td, d), 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s:%s,upperdir=%s,workdir=%s",
		filepath.Join(td, "lower2"), filepath.Join(td, "lower1"), filepath.Join(td, "upper"), filepath.Join(td, "work"))
	merged := filepath.Join(td, "merged")
	errc := make(chan error, 1)
	go throwawayThread(func() {
		// the mount namespace ends with the thread (throwawayThread)
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("probing overlay: a private mount namespace: %w", err)
			}
			// A copy of a shared mount stays its peer: without this, the
			// overlay would propagate back to the host's namespace.
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("probing overlay: making the probe's mount namespace private: %w", err)
			}
			if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
				return fmt.Errorf("failed to mount overlay: %w", err)
			}
			if mounted != nil {
				mounted(merged)
			}
			return unix.Unmount(merged, 0)
		}()
	})
	return <-errc
}

// removeStaleProbes removes the probe directories in root last changed
// before cutoff, unmounting what is still mounted in them first (left by
// a probe that made its mount where every process sees it: containerd's,
// or podlab's before it used a namespace of its own).
func removeStaleProbes(root string, cutoff time.Time) error {
	dirs, err := filepath.Glob(filepath.Join(root, probeDirPattern+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || fi.ModTime().After(cutoff) {
			continue
		}
		mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(d))
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the mounts under %s: %w", d, err))
			continue
		}
		// deepest first, one mount on another last made first
		for i := len(mounts) - 1; i >= 0; i-- {
			if err := unix.Unmount(mounts[i].Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmounting the overlay probe left at %s: %w", mounts[i].Mountpoint, err))
			}
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing the overlay probe left at %s: %w (is it still mounted? umount it)", d, err))
		}
	}
	return errors.Join(errs...)
}
