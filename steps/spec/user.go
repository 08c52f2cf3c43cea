package spec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// maxIDFile is the largest /etc/passwd or /etc/group read from an image.
const maxIDFile = 4 << 20

// maxID is the largest uid or gid a process can have: 2^32-1 is (uid_t)-1,
// which setuid(2) and chown(2) take to mean "leave unchanged".
const maxID = 1<<32 - 2

type passwdEntry struct {
	name     string
	uid, gid uint32
}

type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

// resolveUser turns a user string (name, uid, uid:gid, name:group,
// uid:group) into the process identity runc will switch to.
func resolveUser(rootfs, user string) (specs.User, error) {
	if user == "" {
		return specs.User{UID: 0, GID: 0}, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(user, ":")
	if userPart == "" || (hasGroup && (groupPart == "" || strings.Contains(groupPart, ":"))) {
		return specs.User{}, fmt.Errorf("%w %q: want name, uid, uid:gid, name:group or uid:group", ErrInvalidUser, user)
	}

	var (
		name     string
		uid, gid uint32
	)
	if looksNumeric(userPart) {
		id, err := parseID(userPart, "user")
		if err != nil {
			return specs.User{}, err
		}
		uid = id
		// A numeric uid needs no entry; if the image names it, its primary
		// group and memberships apply (as Docker and the CRI runtimes do).
		users, err := readPasswd(rootfs)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return specs.User{}, err
		}
		if i := slices.IndexFunc(users, func(e passwdEntry) bool { return e.uid == uid }); i >= 0 {
			name, gid = users[i].name, users[i].gid
		}
	} else {
		users, err := readPasswd(rootfs)
		if errors.Is(err, fs.ErrNotExist) {
			return specs.User{}, fmt.Errorf("%w %q: the image has no /etc/passwd (use a numeric uid)", ErrUnknownUser, userPart)
		}
		if err != nil {
			return specs.User{}, err
		}
		i := slices.IndexFunc(users, func(e passwdEntry) bool { return e.name == userPart })
		if i < 0 {
			return specs.User{}, fmt.Errorf("%w %q: not in the image's /etc/passwd (use a numeric uid, or a user the image defines)", ErrUnknownUser, userPart)
		}
		name, uid, gid = users[i].name, users[i].uid, users[i].gid
	}

	var groups []groupEntry
	if hasGroup || name != "" {
		var err error
		groups, err = readGroup(rootfs)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return specs.User{}, err
		}
		if hasGroup && !looksNumeric(groupPart) && errors.Is(err, fs.ErrNotExist) {
			return specs.User{}, fmt.Errorf("%w %q: the image has no /etc/group (use a numeric gid)", ErrUnknownGroup, groupPart)
		}
	}
	if hasGroup {
		if looksNumeric(groupPart) {
			id, err := parseID(groupPart, "group")
			if err != nil {
				return specs.User{}, err
			}
			gid = id
		} else {
			i := slices.IndexFunc(groups, func(g groupEntry) bool { return g.name == groupPart })
			if i < 0 {
				return specs.User{}, fmt.Errorf("%w %q: not in the image's /etc/group (use a numeric gid, or a group the image defines)", ErrUnknownGroup, groupPart)
			}
			gid = groups[i].gid
		}
	}

	u := specs.User{UID: uid, GID: gid}
	if name != "" {
		u.AdditionalGids = []uint32{gid}
		for _, g := range groups {
			if slices.Contains(g.members, name) && !slices.Contains(u.AdditionalGids, g.gid) {
				u.AdditionalGids = append(u.AdditionalGids, g.gid)
			}
		}
	}
	return u, nil
}

// looksNumeric reports whether s is meant as an id rather than a name:
// it starts with a digit or a sign.
func looksNumeric(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '+')
}

func parseID(s, what string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxID {
		return 0, fmt.Errorf("%w: %s id %q: want a number from 0 to %d", ErrIDOutOfRange, what, s, uint64(maxID))
	}
	return uint32(n), nil
}

func readPasswd(rootfs string) ([]passwdEntry, error) {
	data, err := readRootfsFile(rootfs, "etc/passwd")
	if err != nil {
		return nil, err
	}
	var out []passwdEntry
	for _, f := range idFileLines(data) {
		// name:password:uid:gid:gecos:home:shell
		if len(f) < 4 {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil || f[0] == "" || uid > maxID || gid > maxID {
			continue // as libc does, a malformed line names no one
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid)})
	}
	return out, nil
}

func readGroup(rootfs string) ([]groupEntry, error) {
	data, err := readRootfsFile(rootfs, "etc/group")
	if err != nil {
		return nil, err
	}
	var out []groupEntry
	for _, f := range idFileLines(data) {
		// name:password:gid:member,member
		if len(f) < 3 {
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil || f[0] == "" || gid > maxID {
			continue
		}
		g := groupEntry{name: f[0], gid: uint32(gid)}
		if len(f) > 3 && f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		out = append(out, g)
	}
	return out, nil
}

// idFileLines splits /etc/passwd or /etc/group into colon-separated fields,
// skipping blank lines and comments.
func idFileLines(data []byte) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxIDFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}

// readRootfsFile reads name (relative, e.g. "etc/passwd") inside rootfs. The
// lookup is confined to rootfs (os.Root): a symlink that leads out of it is
// refused, never followed. The file must be a regular file (a FIFO would block
// us; a device could be anything) of at most maxIDFile bytes. A missing file
// is an error matching fs.ErrNotExist.
func readRootfsFile(rootfs, name string) ([]byte, error) {
	if rootfs == "" {
		return nil, fmt.Errorf("/%s: no rootfs given: %w", name, fs.ErrNotExist)
	}
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return nil, fmt.Errorf("opening rootfs: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the image's /%s: %v (a link out of the rootfs is never followed)", ErrUnsafeFile, name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the image's /%s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: the image's /%s is not a regular file (%s)", ErrUnsafeFile, name, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIDFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the image's /%s: %w", name, err)
	}
	if len(data) > maxIDFile {
		return nil, fmt.Errorf("%w: the image's /%s is larger than %d bytes", ErrUnsafeFile, name, maxIDFile)
	}
	return data, nil
}

// checkWorkdir cleans dir (relative to /) and refuses it if it is, or leads
// through the rootfs' symlinks to, /proc or /dev/fd (which runc links to
// /proc/self/fd).
func checkWorkdir(rootfs, dir string) (string, error) {
	if dir == "" {
		return "/", nil
	}
	if strings.ContainsRune(dir, 0) {
		return "", fmt.Errorf("working directory %q: contains a NUL byte", dir)
	}
	cwd := path.Clean("/" + dir)
	if inProc(cwd) {
		return "", fmt.Errorf("%w: %q is %s: a process started there can reach the host through a leaked file descriptor (CVE-2024-21626)", ErrWorkdirInProc, dir, cwd)
	}
	if rootfs == "" {
		return cwd, nil
	}
	resolved, err := resolveInRootfs(rootfs, cwd)
	if err != nil {
		return "", fmt.Errorf("working directory %q: %w", dir, err)
	}
	if inProc(resolved) {
		return "", fmt.Errorf("%w: %q leads through the image's symlinks to %s: a process started there can reach the host through a leaked file descriptor (CVE-2024-21626)", ErrWorkdirInProc, dir, resolved)
	}
	return cwd, nil
}

func inProc(p string) bool {
	for _, d := range []string{"/proc", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// resolveInRootfs follows the symlinks of the clean absolute path p inside
// rootfs, as the container will see them (an absolute link target starts
// again at the rootfs; ".." stops at it). It stops at the first component
// that does not exist or is not a directory, and returns the path so far
// joined with the rest.
func resolveInRootfs(rootfs, p string) (string, error) {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return "", fmt.Errorf("opening rootfs: %w", err)
	}
	defer root.Close()

	resolved := "/"
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, c)
		fi, err := root.Lstat(strings.TrimPrefix(next, "/"))
		if err != nil {
			// Missing, or a file in the middle of the path: runc will create
			// or fail; nothing below it can be a link.
			return path.Join(append([]string{next}, rest...)...), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("too many levels of symbolic links at %s", next)
		}
		target, err := root.Readlink(strings.TrimPrefix(next, "/"))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}
