package unpack

// Shifting a rootfs into a user namespace's range. A container in a user
// namespace with the mapping "0 BASE SIZE" sees host uid BASE+u as its uid
// u. For the image's files to keep their owners inside (root's files owned
// by root, www-data's by www-data), the files on the host must be owned by
// BASE+u. runc idmaps bind mounts but not the rootfs, so podlab gives each
// container's own rootfs (a fresh copy per container and restart) real
// owners in the range, as containerd does when its snapshotter cannot make
// an idmapped mount. The kernel clears setuid/setgid bits and drops file
// capabilities on chown: both are put back, the capabilities rewritten
// (version 3, rootid BASE) so that they count only inside this user
// namespace.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OverflowID is the owner given to a file whose uid or gid the range cannot
// hold: the kernel's overflowuid, shown as "nobody" inside and owned by no
// pod's range outside.
const OverflowID = 65534

// IDShift moves ownership into a user namespace's range: uid u becomes
// UIDBase+u and gid g becomes GIDBase+g, for u and g below Size; larger ids
// become OverflowID.
type IDShift struct {
	UIDBase, GIDBase, Size uint32
}

func (sh IDShift) check() error {
	if sh.Size == 0 {
		return fmt.Errorf("%w: size 0 maps no id", ErrInvalidShift)
	}
	if uint64(sh.UIDBase)+uint64(sh.Size) > math.MaxUint32 || uint64(sh.GIDBase)+uint64(sh.Size) > math.MaxUint32 {
		return fmt.Errorf("%w: uid base %d, gid base %d and size %d go past id 4294967294", ErrInvalidShift, sh.UIDBase, sh.GIDBase, sh.Size)
	}
	return nil
}

func (sh IDShift) uid(u uint32) uint32 {
	if u >= sh.Size {
		return OverflowID
	}
	return sh.UIDBase + u
}

func (sh IDShift) gid(g uint32) uint32 {
	if g >= sh.Size {
		return OverflowID
	}
	return sh.GIDBase + g
}

// ShiftResult is what ShiftOwnership changed.
type ShiftResult struct {
	Files int // files, directories, links and devices given new owners
	// Overflowed are the files whose owner the range cannot hold (now
	// OverflowID); Capabilities the files whose file capabilities were
	// rewritten for the range's root.
	Overflowed, Capabilities int
}

// capabilityXattr holds a file's capabilities (see capabilities(7)).
const capabilityXattr = "security.capability"

// ShiftOwnership gives every file under rootfs (rootfs included, symbolic
// links themselves, hard links once) the owner sh makes of its owner,
// keeping setuid/setgid bits and file capabilities. It checks ctx between
// files; on an error the rootfs is half shifted and should be thrown away.
func ShiftOwnership(ctx context.Context, rootfs string, sh IDShift) (ShiftResult, error) {
	var res ShiftResult
	if err := sh.check(); err != nil {
		return res, err
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	err := filepath.WalkDir(rootfs, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		typ := st.Mode & unix.S_IFMT
		if typ != unix.S_IFDIR && st.Nlink > 1 {
			if seen[inode{st.Dev, st.Ino}] {
				return nil
			}
			seen[inode{st.Dev, st.Ino}] = true
		}
		var caps []byte
		if typ == unix.S_IFREG {
			if caps, err = getXattr(p, capabilityXattr); err != nil {
				return fmt.Errorf("reading the file capabilities of %s: %w", p, err)
			}
		}
		uid, gid := sh.uid(st.Uid), sh.gid(st.Gid)
		if uid == OverflowID && st.Uid != OverflowID || gid == OverflowID && st.Gid != OverflowID {
			res.Overflowed++
		}
		if err := unix.Lchown(p, int(uid), int(gid)); err != nil {
			return fmt.Errorf("shifting the owner of %s from %d:%d to %d:%d: %w", p, st.Uid, st.Gid, uid, gid, err)
		}
		if typ != unix.S_IFLNK && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
			if err := unix.Chmod(p, st.Mode&0o7777); err != nil {
				return fmt.Errorf("restoring the mode %04o of %s: %w", st.Mode&0o7777, p, err)
			}
		}
		if caps != nil {
			v3, err := capsForRoot(caps, sh)
			if err != nil {
				return fmt.Errorf("file capabilities of %s: %w", p, err)
			}
			if err := unix.Lsetxattr(p, capabilityXattr, v3, 0); err != nil {
				return fmt.Errorf("rewriting the file capabilities of %s: %w", p, err)
			}
			res.Capabilities++
		}
		res.Files++
		return nil
	})
	return res, err
}

// getXattr reads an extended attribute; nil when the file has none.
func getXattr(p, name string) ([]byte, error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(p, name, buf)
	switch {
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return buf[:n], nil
}

// File capability revisions (linux/capability.h): v1 has one 32-bit set,
// v2 two, v3 two and the uid of the namespace root they are for.
const (
	capRevisionMask = 0xFF000000
	capRevision1    = 0x01000000
	capRevision2    = 0x02000000
	capRevision3    = 0x03000000
	capEffective    = 0x000001
	capV3Size       = 24
)

// capsForRoot rewrites a security.capability value as version 3, for the
// root of the range: the kernel honours it only in a user namespace whose
// root is that host uid (and its ancestors), not in other pods'.
func capsForRoot(v []byte, sh IDShift) ([]byte, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCapabilities, len(v))
	}
	magic := binary.LittleEndian.Uint32(v)
	var data []byte // permitted/inheritable pairs
	var rootid uint32
	switch rev := magic & capRevisionMask; {
	case rev == capRevision1 && len(v) == 12:
		data = append(v[4:12:12], make([]byte, 8)...)
	case rev == capRevision2 && len(v) == 20:
		data = v[4:20]
	case rev == capRevision3 && len(v) == capV3Size:
		data, rootid = v[4:20], binary.LittleEndian.Uint32(v[20:])
	default:
		return nil, fmt.Errorf("%w: revision %#x, %d bytes", ErrBadCapabilities, rev, len(v))
	}
	out := make([]byte, capV3Size)
	binary.LittleEndian.PutUint32(out, capRevision3|magic&capEffective)
	copy(out[4:20], data)
	binary.LittleEndian.PutUint32(out[20:], sh.uid(rootid))
	return out, nil
}
