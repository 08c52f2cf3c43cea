package cri

// User namespaces: the runtime's half of hostUsers: false. The kubelet
// allocates the pod's range (a slot of host ids of its own) and passes it
// as the sandbox's NamespaceOption.userns_options (mode POD, the uid and
// gid mappings), as Kubernetes' kubelet does; the runtime then
//
//   - pins the user namespace with those mappings and, owned by it, the
//     pod's network, IPC and UTS namespaces (one clone(2) of a short-lived
//     child: a threaded process cannot unshare a user namespace), as
//     containerd makes the sandbox's namespaces inside its user namespace;
//   - makes every container's rootfs the range's: the node's snapshots
//     through idmapped lowers, or a copy chowned into the range
//     (unpack.Options.Shift);
//   - has config.json join the pinned user namespace with the mappings,
//     and idmaps the files it writes for the pod (/etc/hosts,
//     /etc/hostname, /etc/resolv.conf).
//
// What is missing for it (runc older than 1.2, a kernel or file system
// without idmapped mounts, no `cat` to hold the namespace) fails
// RunPodSandbox, before anything runs, with what to do.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/unpack"
)

// userNamespace is a sandbox's user namespace: one uid and one gid
// mapping, container id 0 of each the range's first host id.
type userNamespace struct {
	UID specs.LinuxIDMapping `json:"uid"`
	GID specs.LinuxIDMapping `json:"gid"`
}

// mappings are the spec's uid and gid mappings.
func (u *userNamespace) mappings() (uids, gids []specs.LinuxIDMapping) {
	return []specs.LinuxIDMapping{u.UID}, []specs.LinuxIDMapping{u.GID}
}

// shift is the rootfs's ownership in the range.
func (u *userNamespace) shift() *unpack.IDShift {
	return &unpack.IDShift{UIDBase: u.UID.HostID, GIDBase: u.GID.HostID, Size: u.UID.Size}
}

// sandboxUserNamespace reads userns_options: nil for NODE (the host's
// user namespace, hostUsers: true), the mappings for POD. It refuses what
// the runtime cannot make: TARGET, several mappings, uid 0 unmapped,
// different uid and gid ranges, a host namespace next to the pod's own.
func sandboxUserNamespace(cfg *runtimeapi.PodSandboxConfig) (*userNamespace, error) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	o := ns.GetUsernsOptions()
	if o == nil || o.Mode == runtimeapi.NamespaceMode_NODE {
		return nil, nil
	}
	if o.Mode != runtimeapi.NamespaceMode_POD {
		return nil, status.Errorf(codes.InvalidArgument, "userns_options mode %s: a pod's user namespace is POD (its own) or NODE (the host's)", o.Mode)
	}
	if len(o.Uids) != 1 || len(o.Gids) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "userns_options: want one uid and one gid mapping, have %d and %d (the kubelet gives each pod one range)", len(o.Uids), len(o.Gids))
	}
	uid, gid := o.Uids[0], o.Gids[0]
	switch {
	case uid.ContainerId != 0 || gid.ContainerId != 0:
		return nil, status.Error(codes.InvalidArgument, "userns_options: uid and gid 0 must be mapped (container_id 0)")
	case uid.Length == 0 || uid.HostId == 0 || uint64(uid.HostId)+uint64(uid.Length) > 1<<32:
		return nil, status.Errorf(codes.InvalidArgument, "userns_options: host ids %d+%d: want a range above the host's root that fits in 32 bits", uid.HostId, uid.Length)
	case uid.HostId != gid.HostId || uid.Length != gid.Length:
		return nil, status.Error(codes.InvalidArgument, "userns_options: the uid and gid mappings differ (podlab's runtime maps both the same)")
	case ns.GetNetwork() == runtimeapi.NamespaceMode_NODE || ns.GetIpc() == runtimeapi.NamespaceMode_NODE || ns.GetPid() == runtimeapi.NamespaceMode_NODE:
		return nil, status.Error(codes.InvalidArgument, "userns_options mode POD with the host's network, IPC or PID namespace: the host's namespaces are not the pod's user namespace's (the API server refuses hostUsers: false with hostNetwork, hostIPC or hostPID)")
	}
	m := specs.LinuxIDMapping{ContainerID: 0, HostID: uid.HostId, Size: uid.Length}
	return &userNamespace{UID: m, GID: m}, nil
}

// minRuncForUserNamespaces is the first runc that idmaps bind mounts and
// checks a joined user namespace against the spec's mappings.
const minRuncForUserNamespaces = "1.2.0"

// checkUserNamespaceSupport refuses a sandbox with a user namespace that
// the handler's runtime or this host cannot run.
func checkUserNamespaceSupport(h runc.Handler) error {
	if h.Name == runc.DefaultHandler {
		version := "unknown"
		if out, err := exec.Command(h.Binary, "--version").Output(); err == nil {
			_, version = runc.ParseRuntimeVersion(string(out))
		}
		if !versionAtLeast(version, minRuncForUserNamespaces) {
			return fmt.Errorf("%w: runc %s cannot idmap the pod's mounts (runc %s or later can; doctor shows which runc podlab uses)",
				ErrUserNamespacesUnsupported, version, minRuncForUserNamespaces)
		}
	}
	if _, err := exec.LookPath(namespaceHolder); err != nil {
		return fmt.Errorf("%w: the sandbox of a pod with its own user namespace runs %s (coreutils) to hold it while it is pinned, and %v (PATH=%q): install coreutils, or start the runtime with /usr/bin on its PATH",
			ErrUserNamespacesUnsupported, namespaceHolder, err, os.Getenv("PATH"))
	}
	return nil
}

// versionAtLeast compares dotted versions ("1.2.0-rc.1" counts as 1.2.0);
// an unreadable version is not at least anything.
func versionAtLeast(have, want string) bool {
	parse := func(s string) ([3]int, bool) {
		var v [3]int
		s, _, _ = strings.Cut(s, "-")
		parts := strings.Split(s, ".")
		if len(parts) != 3 {
			return v, false
		}
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return v, false
			}
			v[i] = n
		}
		return v, true
	}
	h, ok1 := parse(have)
	w, ok2 := parse(want)
	return ok1 && ok2 && slices.Compare(h[:], w[:]) >= 0
}

// namespaceHolder is what the sandbox clones into the pod's new
// namespaces to hold them while they are pinned: cat, waiting on stdin.
const namespaceHolder = "cat"

// pinInUserNamespace makes the user namespace with u's mappings and,
// owned by it, the other namespaces of kinds ("user" among them), and pins
// each at paths[kind].
func pinInUserNamespace(u *userNamespace, kinds []string, paths map[string]string) error {
	cat, err := exec.LookPath(namespaceHolder)
	if err != nil {
		return err
	}
	var flags uintptr
	for _, k := range kinds {
		flags |= map[string]uintptr{"user": unix.CLONE_NEWUSER, "net": unix.CLONE_NEWNET, "ipc": unix.CLONE_NEWIPC, "uts": unix.CLONE_NEWUTS}[k]
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	cmd := exec.Command(cat)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  flags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(u.UID.ContainerID), HostID: int(u.UID.HostID), Size: int(u.UID.Size)}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(u.GID.ContainerID), HostID: int(u.GID.HostID), Size: int(u.GID.Size)}},
		// runc calls setgroups(2) for the containers' supplementalGroups.
		GidMappingsEnableSetgroups: true,
		Pdeathsig:                  syscall.SIGKILL,
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return fmt.Errorf("%w: the kernel refused a new user namespace for ids %d-%d (%v): see /proc/sys/user/max_user_namespaces",
			ErrUserNamespacesUnsupported, u.UID.HostID, u.UID.HostID+u.UID.Size-1, err)
	}
	defer cmd.Wait() //nolint:errcheck // cat ends when its stdin closes
	defer w.Close()
	for _, k := range kinds {
		src := fmt.Sprintf("/proc/%d/ns/%s", cmd.Process.Pid, k)
		if err := unix.Mount(src, paths[k], "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s onto %s: %w", src, paths[k], err)
		}
	}
	return nil
}

// checkIDMappedMounts makes, and throws away, an idmapped mount of dir with
// the pinned user namespace: the kernel and dir's file system must support
// them for the pod's /etc/hosts and /etc/hostname.
func checkIDMappedMounts(dir, usernsPath string) error {
	ns, err := unix.Open(usernsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ns)
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("%w: open_tree(%s): %v (idmapped mounts need Linux 5.12 or later)", ErrUserNamespacesUnsupported, dir, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		var st unix.Statfs_t
		_ = unix.Statfs(dir, &st)
		return fmt.Errorf("%w: the file system of %s (type %#x) cannot be idmapped (%v): put the state directory on ext4, xfs, btrfs or tmpfs",
			ErrUserNamespacesUnsupported, dir, st.Type, err)
	}
	return nil
}

// openForUserns lets the range's root reach its rootfs: runc prepares the
// rootfs from inside the user namespace, where host-owned directories
// without search permission for others are closed to it. As containerd
// does, the runtime's own directories above the bundles get o+x, and the
// sandbox's bundle directory and each container's go to the range's root
// group, mode 0710 (openBundle); directories above the state directory
// must allow it already (the runtime changes nothing it did not make).
func (s *Server) openForUserns(u *userNamespace) error {
	own := []string{filepath.Dir(s.node.Dir), s.node.Dir, s.node.BundlesDir()}
	for _, d := range own {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("letting the pod's root search %s: %w", d, err)
			}
		}
	}
	for d := filepath.Dir(own[0]); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return err
		}
		if !searchable(st, u.UID.HostID) {
			return fmt.Errorf("%w: the pod's root (host uid %d) cannot reach its rootfs: %s has mode %04o; run chmod o+x %s",
				ErrUserNamespacesUnsupported, u.UID.HostID, d, st.Mode&0o7777, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// searchable: may host uid (and gid) id search directory st?
func searchable(st unix.Stat_t, id uint32) bool {
	switch {
	case st.Uid == id:
		return st.Mode&0o100 != 0
	case st.Gid == id:
		return st.Mode&0o010 != 0
	}
	return st.Mode&0o001 != 0
}

// openBundle gives the sandbox's bundles directory and the container's
// bundle to the range's root group, mode 0710.
func (s *Server) openBundle(u *userNamespace, sandboxID, bundle string) error {
	for _, d := range []string{s.node.PodBundles(sandboxID), bundle} {
		if err := os.Chown(d, 0, int(u.GID.HostID)); err != nil {
			return fmt.Errorf("giving %s to the pod's root group %d: %w", d, u.GID.HostID, err)
		}
		if err := os.Chmod(d, 0o710); err != nil {
			return err
		}
	}
	return nil
}
