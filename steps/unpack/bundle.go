package unpack

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkBundle reports whether bundle exists and holds something. A missing
// path or an empty directory is free to use. Anything else is refused with
// ErrBundleExists unless force is set; with force, only a directory that has
// a rootfs/ in it may be replaced (ErrNotBundle otherwise).
func checkBundle(bundle string, force bool) (exists bool, err error) {
	fi, err := os.Lstat(bundle)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking the bundle directory: %w", err)
	}
	if fi.IsDir() {
		empty, err := isEmptyDir(bundle)
		if err != nil {
			return false, fmt.Errorf("checking the bundle directory: %w", err)
		}
		if empty {
			return false, nil
		}
	}
	if !force {
		return true, fmt.Errorf("%w: %s (pass --force to replace it, or choose another --bundle)", ErrBundleExists, bundle)
	}
	if !fi.IsDir() {
		return true, fmt.Errorf("%w: %s is not a directory; refusing to replace it", ErrNotBundle, bundle)
	}
	if rfi, err := os.Lstat(filepath.Join(bundle, "rootfs")); err != nil || !rfi.IsDir() {
		return true, fmt.Errorf("%w: %s has no rootfs/ directory; refusing to delete it to make room (remove it yourself if you mean to)", ErrNotBundle, bundle)
	}
	return true, nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// install moves the finished temporary bundle tmp to bundle. When an old
// bundle is there (exists), the two are swapped in one rename
// (RENAME_EXCHANGE) and the old one, now at tmp, is removed: at every moment
// bundle is either the old complete bundle or the new one.
func install(tmp, bundle string, exists bool) (replaced bool, err error) {
	if !exists {
		// rename(2) replaces an empty directory and fails on a non-empty
		// one (os.Rename refuses any existing directory).
		if err := unix.Rename(tmp, bundle); err != nil {
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				return false, fmt.Errorf("%w: %s appeared while unpacking (pass --force to replace it)", ErrBundleExists, bundle)
			}
			return false, fmt.Errorf("moving the new bundle into place: %w", err)
		}
		return false, nil
	}
	old := tmp
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, bundle, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// No RENAME_EXCHANGE on this file system: two renames.
		old = tmp + ".old"
		if err = os.Rename(bundle, old); err == nil {
			if err = os.Rename(tmp, bundle); err != nil {
				_ = os.Rename(old, bundle) // put the old bundle back
				old = tmp
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("replacing the old bundle %s: %w", bundle, err)
	}
	if err := RemoveBundle(old); err != nil {
		return true, fmt.Errorf("removing the old bundle (now at %s): %w", old, err)
	}
	return true, nil
}

// removeAll removes dir like os.RemoveAll, first making every directory in it
// writable when that is what stops it (a non-root caller cannot delete the
// contents of a layer's read-only directory).
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
