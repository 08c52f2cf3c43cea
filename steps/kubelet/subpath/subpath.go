package subpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// resolve are openat2's rules for every path this package opens inside a
// root: stay beneath it (a symlink may point anywhere inside, not out),
// and follow no /proc magic link (/proc/self/root leads to the host's /).
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// CheckText refuses a subPath that is absolute (ErrAbsolute) or has a ".."
// component (ErrBacksteps), as the kubelet does before it resolves
// anything. An empty subPath is the volume itself.
func CheckText(subPath string) error {
	if strings.HasPrefix(subPath, "/") {
		return fmt.Errorf("%w: %q (a subPath is relative to its volume: drop the leading /)", ErrAbsolute, subPath)
	}
	if slices.Contains(strings.Split(subPath, "/"), "..") {
		return fmt.Errorf("%w: %q (name a path inside the volume)", ErrBacksteps, subPath)
	}
	return nil
}

// Open opens subPath inside the directory volume, never leaving it (see the
// package doc): a symlink on the way or at the end is followed only while
// it stays inside volume. The file is opened with O_PATH: it can be
// bind-mounted, stat'ed and used as a directory for *at calls, not read.
// A subPath that does not exist is fs.ErrNotExist; one that leaves the
// volume is ErrEscape.
func Open(volume, subPath string) (*os.File, error) {
	if err := CheckText(subPath); err != nil {
		return nil, err
	}
	root, err := openRoot(volume)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := openBeneath(root, path.Clean(subPath), unix.O_PATH)
	if err != nil {
		return nil, resolveError(volume, subPath, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(volume, subPath)), nil
}

// MkdirAll makes the directories of rel under root that are missing, each
// with mode perm (not masked by the umask), and returns the last one, open
// for reading. Directories that exist are resolved as Open does, so a
// symlink on the way must stay inside root; each new directory is made with
// mkdirat(2) in its parent, already open, and opened without following a
// symlink: a container that swaps a name meanwhile cannot make it create
// or open anything outside root.
func MkdirAll(root, rel string, perm fs.FileMode) (*os.File, error) {
	if err := CheckText(rel); err != nil {
		return nil, err
	}
	rootFD, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootFD)
	parent, err := openBeneath(rootFD, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, resolveError(root, ".", err)
	}
	clean := path.Clean(rel)
	if clean == "." {
		return os.NewFile(uintptr(parent), root), nil
	}
	comps := strings.Split(clean, "/")
	for i, name := range comps {
		sub := strings.Join(comps[:i+1], "/")
		fd, err := openBeneath(rootFD, sub, unix.O_RDONLY|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			fd, err = mkdirIn(parent, name, perm)
		}
		unix.Close(parent)
		if err != nil {
			return nil, fmt.Errorf("making %q inside %s: %w", sub, root, resolveError(root, sub, err))
		}
		parent = fd
	}
	return os.NewFile(uintptr(parent), filepath.Join(root, clean)), nil
}

// mkdirIn makes directory name in the open directory parent and opens it,
// not following a symlink.
func mkdirIn(parent int, name string, perm fs.FileMode) (int, error) {
	err := unix.Mkdirat(parent, name, uint32(perm.Perm()))
	created := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// A symlink took the name; openat2 found nothing at its end.
			return -1, fmt.Errorf("%q is a symlink to a path that does not exist: %w", name, unix.ENOENT)
		}
		return -1, err
	}
	if created {
		if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// Bind opens subPath inside volume (Open) and bind-mounts it onto target
// through the descriptor's /proc/self/fd/N, so that what is mounted is
// what was opened. A subPath that does not exist is made first, as a
// directory with the volume's mode (the kubelet does the same, so that a
// runtime does not make it later with another owner and mode). target, a
// path the caller owns, is made to match (a directory for a directory, an
// empty file for anything else); whatever was mounted there before is
// unmounted.
func Bind(volume, subPath, target string) error {
	f, err := Open(volume, subPath)
	if errors.Is(err, fs.ErrNotExist) {
		var st unix.Stat_t
		if err := unix.Stat(volume, &st); err != nil {
			return fmt.Errorf("reading the mode of volume %s: %w", volume, err)
		}
		d, merr := MkdirAll(volume, subPath, fs.FileMode(st.Mode&0o7777))
		if merr != nil {
			return merr
		}
		d.Close()
		f, err = Open(volume, subPath)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat of %s: %w", f.Name(), err)
	}
	if err := prepareTarget(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	src := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(target)
		return fmt.Errorf("bind-mounting %s (%s) onto %s: %w", src, f.Name(), target, err)
	}
	return nil
}

// prepareTarget unmounts whatever is at target and makes it a directory or
// an empty file.
func prepareTarget(target string, dir bool) error {
	if err := unmountAll(target); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if fi, err := os.Lstat(target); err == nil && (fi.IsDir() != dir || fi.Mode()&fs.ModeSymlink != 0) {
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replacing %s: %w", target, err)
		}
	}
	if dir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// unmountAll unmounts target until nothing is mounted there (mounts can be
// stacked).
func unmountAll(target string) error {
	for range 100 {
		err := unix.Unmount(target, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmounting %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmounting %s: still mounted after 100 unmounts", target)
}

// Clean unmounts every mount at or under dir, deepest first, then removes
// dir and everything in it. It never removes through a mount: when a mount
// is left, it removes nothing and says which (ErrUnsafeMount). It returns
// the mount points it unmounted. A dir that does not exist is no error.
func Clean(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var unmounted []string
	var left []string
	for range 10 {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(real))
		if err != nil {
			return unmounted, fmt.Errorf("reading the mounts under %s: %w", dir, err)
		}
		left = left[:0]
		for _, m := range ms {
			left = append(left, m.Mountpoint)
		}
		if len(left) == 0 {
			break
		}
		slices.SortFunc(left, func(a, b string) int { // deepest first
			if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
				return d
			}
			return strings.Compare(b, a)
		})
		for _, p := range left {
			if err := unix.Unmount(p, unix.MNT_DETACH); err == nil || errors.Is(err, unix.EINVAL) {
				if !slices.Contains(unmounted, p) {
					unmounted = append(unmounted, p)
				}
			}
		}
	}
	if len(left) > 0 {
		return unmounted, fmt.Errorf("%w: %s (unmount it by hand: umount -l %s), so %s was not removed", ErrUnsafeMount, strings.Join(left, ", "), left[0], dir)
	}
	return unmounted, os.RemoveAll(dir)
}

// openRoot opens the directory every path is resolved beneath. Its own
// path is trusted: the kubelet made it, or the pod's author named it as a
// hostPath.
func openRoot(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening volume %s: %w", dir, err)
	}
	return fd, nil
}

// openBeneath opens rel beneath the directory root with openat2; the
// kernel answers EAGAIN when a rename elsewhere raced with a ".." step,
// and the call is tried again.
func openBeneath(root int, rel string, flags int) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolve}
	for range 16 {
		fd, err := unix.Openat2(root, rel, how)
		if !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
	return -1, fmt.Errorf("openat2 %q: %w (renames kept racing with the lookup)", rel, unix.EAGAIN)
}

// resolveError says what an openat2 error means for the path.
func resolveError(root, rel string, err error) error {
	var hint string
	switch {
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %q inside %s: a symlink on the way is absolute or climbs above it, and is never followed (point the subPath at a path inside the volume)", ErrEscape, rel, root)
	case errors.Is(err, unix.ENOTDIR):
		hint = ": a component of the path is not a directory"
	case errors.Is(err, unix.ELOOP):
		hint = ": too many symlinks, or a /proc magic link, on the way"
	case errors.Is(err, unix.ENOSYS):
		hint = ": openat2(2) needs Linux 5.6 or later"
	}
	return fmt.Errorf("resolving %q inside %s%s: %w", rel, root, hint, err)
}
