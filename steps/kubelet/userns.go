package kubelet

// User namespaces: what the kubelet does for a pod with hostUsers: false
// (UserNamespacesSupport, pkg/kubelet/userns in Kubernetes). The pod gets a
// range of 65,536 host ids of its own; its ids 0-65535 are host ids
// BASE-BASE+65535. Its root is then root only inside: it owns no host file,
// and its capabilities hold only over the namespaces its user namespace
// owns.
//
//   - The range. Ranges are multiples of 65,536 above the first 65,536
//     (host ids 0-65535 are the host's own users), one per pod, recorded
//     in the pod's directory (nodes/<node>/pods/<uid>/userns, Kubernetes'
//     own file format) so that a kubelet restart keeps them: the record is
//     the source of truth for the pod. Host ids are the machine's, and
//     every state directory's pods run on it, so the range is also claimed
//     machine-wide, before the record is written: a file per range under
//     statedir.UsernsClaimsDir, made with O_EXCL under a flock of the
//     directory's lock, naming the state directory, node and pod. A claim
//     whose pod's record is gone is stale and reclaimed; removing the pod
//     (RemoveStage) frees its claim, and podlab reset frees its state
//     directory's. Kubernetes picks a free range at random; podlab takes
//     the lowest.
//   - The sandbox. A network namespace created outside the user namespace
//     would stay the host root's: the pod's root could not mount /sys or set
//     its sysctls in it. So, as containerd does, the sandbox creates the
//     user namespace first and the network, IPC and UTS namespaces inside
//     it, in one clone(2) of a short-lived child, and pins all four.
//   - The container. config.json joins the pinned user namespace, with its
//     uid/gid mappings; the rootfs is the node's snapshots through idmapped
//     lowers with an upper directory of the range's root (a fresh copy
//     chowned into the range where overlayfs cannot idmap them: steps/
//     unpack's Options.Shift); the files the
//     kubelet writes (/etc/hosts, /etc/hostname) are idmapped bind mounts;
//     emptyDir volumes are owned by the range's root; hostPath volumes are
//     neither (their files show as nobody inside).
//
// Nothing of such a pod runs as host root: what is missing (a kernel
// without user namespaces or idmapped mounts for the state directory's file
// system, a runc older than 1.2) fails the sandbox, before any container,
// with a FailedCreatePodSandBox event naming it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/spec"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
)

// UserNamespaceLength is how many host ids a pod's user namespace maps
// (the kubelet's default idsPerPod).
const UserNamespaceLength = 65536

// IDMapping is one line of a uid_map or gid_map: Length ids from
// ContainerID inside are the host's from HostID.
type IDMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// UserNamespace is a pod's range, as recorded in its userns file.
type UserNamespace struct {
	UIDMappings []IDMapping `json:"uidMappings"`
	GIDMappings []IDMapping `json:"gidMappings"`
}

// Base is the first host id of the range: the pod's root on the host.
func (u UserNamespace) Base() uint32 { return u.UIDMappings[0].HostID }

func (u UserNamespace) specMappings() (uids, gids []specs.LinuxIDMapping) {
	conv := func(ms []IDMapping) []specs.LinuxIDMapping {
		var out []specs.LinuxIDMapping
		for _, m := range ms {
			out = append(out, specs.LinuxIDMapping{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Length})
		}
		return out
	}
	return conv(u.UIDMappings), conv(u.GIDMappings)
}

// usesUserNamespace: hostUsers: false.
func usesUserNamespace(pod *corev1.Pod) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

// usernsRanges are the slots the allocator hands out: slot i is host ids
// i*65536 to i*65536+65535, for i from first to first+count-1.
type usernsRanges struct{ first, count uint32 }

// defaultUsernsRanges are Kubernetes' defaults with no "kubelet" entry in
// /etc/subuid: every slot from 65536 up, but the last (which would hold
// 4294967295, the kernel's "no id").
var defaultUsernsRanges = usernsRanges{first: 1, count: 65534}

// parseUserNamespace reads and checks a userns record: what the kubelet
// writes, nothing else (one mapping, the same for uids and gids, root
// mapped, a whole slot).
func parseUserNamespace(b []byte) (UserNamespace, error) {
	var u UserNamespace
	if err := json.Unmarshal(b, &u); err != nil {
		return u, err
	}
	switch {
	case len(u.UIDMappings) != 1 || len(u.GIDMappings) != 1:
		return u, fmt.Errorf("want one uid and one gid mapping, have %d and %d", len(u.UIDMappings), len(u.GIDMappings))
	case u.UIDMappings[0] != u.GIDMappings[0]:
		return u, errors.New("the uid and gid mappings differ")
	case u.UIDMappings[0].ContainerID != 0:
		return u, errors.New("uid 0 is not mapped")
	case u.UIDMappings[0].Length != UserNamespaceLength:
		return u, fmt.Errorf("length %d, want %d", u.UIDMappings[0].Length, UserNamespaceLength)
	case u.Base()%UserNamespaceLength != 0 || u.Base() < UserNamespaceLength || uint64(u.Base())+UserNamespaceLength >= 1<<32:
		return u, fmt.Errorf("host id %d is not a multiple of %d above the host's own ids", u.Base(), UserNamespaceLength)
	}
	return u, nil
}

// readUserNamespace reads the pod's record; ok is false when it has none.
func readUserNamespace(path string) (u UserNamespace, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return u, false, nil
	}
	if err != nil {
		return u, false, err
	}
	if u, err = parseUserNamespace(b); err != nil {
		return u, false, fmt.Errorf("%w: %s: %v (remove the file only if its pod is gone from the node: its ids may still own files)", ErrUserNamespaceRecord, path, err)
	}
	return u, true, nil
}

// usernsClaim is the content of a machine-wide claim file: the pod whose
// record, in its state directory, holds the range.
type usernsClaim struct {
	StateDir string    `json:"stateDir"`
	Node     string    `json:"node"`
	PodUID   types.UID `json:"podUID"`
}

// claimOf is the claim this layout's pod uid makes.
func (l Layout) claimOf(uid types.UID) usernsClaim {
	return usernsClaim{StateDir: l.State().Dir, Node: l.Name, PodUID: uid}
}

// record is the path of the owner's record of the range.
func (c usernsClaim) record() string {
	return statedir.Layout{Dir: c.StateDir}.Node(c.Node).UsernsRecord(string(c.PodUID))
}

// holds reports whether the claim's owner still holds the range at base:
// its record is there and names base. An unreadable claim or record holds
// it (its ids may own files): only a missing or different record frees a
// claim.
func (c usernsClaim) holds(base uint32) bool {
	if c == (usernsClaim{}) {
		return true // an unreadable claim: not ours to judge
	}
	u, ok, err := readUserNamespace(c.record())
	return err != nil || (ok && u.Base() == base)
}

// lockClaims takes the machine-wide lock on the user namespace claims.
func lockClaims(claims statedir.UsernsClaims) (unlock func(), err error) {
	if err := os.MkdirAll(claims.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the machine-wide user namespace claims directory: %w", err)
	}
	lock, err := os.OpenFile(claims.Lock(), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the user namespace ranges: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("locking the user namespace ranges: %w", err)
	}
	return func() { lock.Close() }, nil // closing unlocks
}

// readClaims are the claims of the machine, by base.
func readClaims(claims statedir.UsernsClaims) (map[uint32]usernsClaim, error) {
	ents, err := os.ReadDir(claims.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading the user namespace claims: %w", err)
	}
	out := map[uint32]usernsClaim{}
	for _, e := range ents {
		base, ok := statedir.ParseClaim(e.Name())
		if !ok {
			continue
		}
		b, err := os.ReadFile(claims.Claim(base))
		if err != nil {
			return nil, fmt.Errorf("reading the user namespace claim %s: %w", claims.Claim(base), err)
		}
		var c usernsClaim
		if err := json.Unmarshal(b, &c); err != nil || c.StateDir == "" || c.Node == "" || c.PodUID == "" {
			c = usernsClaim{} // unreadable: it keeps its range out of use
		}
		out[base] = c
	}
	return out, nil
}

// writeClaim claims base for c: O_EXCL, so that it never replaces a claim
// (the caller removed a stale one first), then fsync'd with its directory.
func writeClaim(claims statedir.UsernsClaims, base uint32, c usernsClaim) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	p := claims.Claim(base)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("claiming host ids %d-%d: %w", base, base+UserNamespaceLength-1, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(claims.Dir)
	}
	if err != nil {
		os.Remove(p)
		return fmt.Errorf("claiming host ids %d-%d: %w", base, base+UserNamespaceLength-1, err)
	}
	return nil
}

// allocateUserNamespace returns the pod's range, recorded earlier or
// allocated now: the lowest slot that no claim of the machine (a live one:
// stale claims are reclaimed) and no record of the state directory holds.
// The range is claimed machine-wide before the pod's record is written,
// both under the machine-wide lock.
func (l Layout) allocateUserNamespace(uid types.UID, r usernsRanges) (UserNamespace, error) {
	unlock, err := lockClaims(l.Claims)
	if err != nil {
		return UserNamespace{}, err
	}
	defer unlock()
	claims, err := readClaims(l.Claims)
	if err != nil {
		return UserNamespace{}, err
	}
	me := l.claimOf(uid)
	used := map[uint32]bool{}
	for base, c := range claims {
		if c.holds(base) {
			used[base/UserNamespaceLength] = true
			continue
		}
		// Stale: its pod's record is gone (the pod was removed, its state
		// directory reset or deleted). Reclaimed.
		if err := os.Remove(l.Claims.Claim(base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return UserNamespace{}, fmt.Errorf("reclaiming the stale user namespace claim %s: %w", l.Claims.Claim(base), err)
		}
		delete(claims, base)
	}

	own := l.UserNamespaceFile(uid)
	if u, ok, err := readUserNamespace(own); err != nil || ok {
		if err != nil {
			return u, err
		}
		// Recorded earlier (a kubelet restart, or a record older than the
		// claims): its claim must be this pod's.
		switch c, claimed := claims[u.Base()]; {
		case claimed && c == me:
			return u, nil
		case claimed:
			return UserNamespace{}, fmt.Errorf("%w: pod %s's range, host ids %d-%d (%s), is claimed by pod %s of node %s in state directory %s (%s): delete one of the two pods",
				ErrUserNamespaceClaimed, uid, u.Base(), u.Base()+UserNamespaceLength-1, own, c.PodUID, c.Node, c.StateDir, l.Claims.Claim(u.Base()))
		}
		return u, writeClaim(l.Claims, u.Base(), me)
	}

	// The state directory's own records count too (made before a claim was
	// lost, or by an older podlab).
	records, err := l.State().UsernsRecords()
	if err != nil {
		return UserNamespace{}, err
	}
	for _, p := range records {
		u, ok, err := readUserNamespace(p)
		if err != nil {
			return UserNamespace{}, err
		}
		if ok {
			used[u.Base()/UserNamespaceLength] = true
		}
	}
	for slot := r.first; slot-r.first < r.count; slot++ {
		if used[slot] {
			continue
		}
		m := IDMapping{HostID: slot * UserNamespaceLength, ContainerID: 0, Length: UserNamespaceLength}
		u := UserNamespace{UIDMappings: []IDMapping{m}, GIDMappings: []IDMapping{m}}
		if err := writeClaim(l.Claims, u.Base(), me); err != nil {
			return UserNamespace{}, err
		}
		if err := writeRecord(own, u); err != nil {
			os.Remove(l.Claims.Claim(u.Base()))
			return UserNamespace{}, err
		}
		return u, nil
	}
	return UserNamespace{}, fmt.Errorf("%w: all %d ranges of %d ids from %d are held by pods of this machine (delete some pods with hostUsers: false; %s lists who holds each)",
		ErrUserNamespacesExhausted, r.count, UserNamespaceLength, r.first*UserNamespaceLength, l.Claims.Dir)
}

// releaseUserNamespace frees the machine-wide claims of the pod uid, once
// its record is gone (RemoveStage removed its pod directory).
func (l Layout) releaseUserNamespace(uid types.UID) error {
	if _, err := os.Stat(l.Claims.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil // nothing was ever claimed on this machine
	}
	_, err := releaseClaims(l.Claims, func(c usernsClaim) bool { return c == l.claimOf(uid) })
	return err
}

// ReleaseUserNamespaceClaims frees the machine-wide claims of the state
// directory state whose pods' records are gone: what `podlab reset` does
// after removing the node directories. It returns the claim files removed.
func ReleaseUserNamespaceClaims(claims statedir.UsernsClaims, state statedir.Layout) ([]string, error) {
	if _, err := os.Stat(claims.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return releaseClaims(claims, func(c usernsClaim) bool { return c.StateDir == state.Dir })
}

// releaseClaims removes, under the lock, the claims that match and whose
// owner no longer holds the range.
func releaseClaims(claims statedir.UsernsClaims, match func(usernsClaim) bool) ([]string, error) {
	unlock, err := lockClaims(claims)
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, err := readClaims(claims)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for base, c := range all {
		if !match(c) || c.holds(base) {
			continue
		}
		if err := os.Remove(claims.Claim(base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("freeing the user namespace claim %s: %w", claims.Claim(base), err))
			continue
		}
		removed = append(removed, claims.Claim(base))
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// writeRecord writes the record durably: a temporary file, fsync, rename,
// fsync of the directory, as the kubelet's file store does.
func writeRecord(path string, u UserNamespace) error {
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".userns-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// minRuncForUserNamespaces is the first runc that idmaps bind mounts and
// checks a joined user namespace against the spec's mappings.
const minRuncForUserNamespaces = "1.2.0"

// checkRuncForUserNamespaces refuses a runc too old for the pod's user
// namespace.
func checkRuncForUserNamespaces(version string) error {
	if !versionAtLeast(version, minRuncForUserNamespaces) {
		return fmt.Errorf("%w: runc %s cannot idmap the pod's mounts (runc %s or later can; doctor shows which runc podlab uses)",
			ErrUserNamespacesUnsupported, version, minRuncForUserNamespaces)
	}
	return nil
}

// versionAtLeast compares dotted versions ("1.5.3", "1.2.0-rc.1" counts as
// 1.2.0); an unreadable version is not at least anything.
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
	if !ok1 || !ok2 {
		return false
	}
	return slices.Compare(h[:], w[:]) >= 0
}

// pinInUserNamespace makes the pod's user namespace and, owned by it, the
// other namespaces of kinds; it pins each at its path. A process that
// uses threads cannot unshare(2) a user namespace, so a child (cat,
// waiting on its stdin) is cloned into all of them at once; its
// namespaces are bind-mounted, then it is let go.
func (l Layout) pinInUserNamespace(pod *corev1.Pod, u UserNamespace, kinds []string) error {
	cat, err := findNamespaceHolder()
	if err != nil {
		return err
	}
	flags := uintptr(0)
	for _, k := range kinds {
		flags |= map[string]uintptr{"user": unix.CLONE_NEWUSER, "net": unix.CLONE_NEWNET, "ipc": unix.CLONE_NEWIPC, "uts": unix.CLONE_NEWUTS}[k]
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	m := u.UIDMappings[0]
	cmd := exec.Command(cat)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  flags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(m.ContainerID), HostID: int(m.HostID), Size: int(m.Length)}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(m.ContainerID), HostID: int(m.HostID), Size: int(m.Length)}},
		// runc calls setgroups(2) for the containers' supplementalGroups.
		GidMappingsEnableSetgroups: true,
		Pdeathsig:                  syscall.SIGKILL,
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return fmt.Errorf("%w: the kernel refused a new user namespace for ids %d-%d (%v): see /proc/sys/user/max_user_namespaces",
			ErrUserNamespacesUnsupported, m.HostID, m.HostID+m.Length-1, err)
	}
	defer cmd.Wait() //nolint:errcheck // cat ends when its stdin closes
	defer w.Close()
	for _, k := range kinds {
		src := fmt.Sprintf("/proc/%d/ns/%s", cmd.Process.Pid, k)
		if err := unix.Mount(src, l.NamespacePath(k, pod.UID), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s onto %s: %w", src, l.NamespacePath(k, pod.UID), err)
		}
	}
	return nil
}

// namespaceHolder is the program the sandbox of a pod with hostUsers: false
// clones into the pod's new namespaces to hold them while they are pinned:
// cat, waiting on its stdin, does nothing else.
const namespaceHolder = "cat"

// findNamespaceHolder finds namespaceHolder on the kubelet's PATH.
func findNamespaceHolder() (string, error) {
	p, err := exec.LookPath(namespaceHolder)
	if err != nil {
		return "", fmt.Errorf("%w: the sandbox of a pod with hostUsers: false runs %s (coreutils) to hold the pod's new user namespace while it is pinned, and %v (PATH=%q): install coreutils, or start podlab with the directory that holds %s (usually /usr/bin) on its PATH",
			ErrUserNamespacesUnsupported, namespaceHolder, err, os.Getenv("PATH"), namespaceHolder)
	}
	return p, nil
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
	defer unix.Close(tree) // the detached copy goes with it
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		var st unix.Statfs_t
		_ = unix.Statfs(dir, &st)
		return fmt.Errorf("%w: the file system of %s (type %#x) cannot be idmapped (%v): put the state directory on ext4, xfs, btrfs or tmpfs",
			ErrUserNamespacesUnsupported, dir, st.Type, err)
	}
	return nil
}

// userNamespaceOpts are the spec options of a container of a pod with
// hostUsers: false: join the sandbox's user namespace with its mappings,
// idmap the kubelet's files (at kubeletFiles), and give the emptyDir
// volumes to the range's root.
func (k *Kubelet) userNamespaceOpts(pod *corev1.Pod, sb Sandbox, kubeletFiles []specs.Mount) ([]oci.SpecOpts, error) {
	if !usesUserNamespace(pod) {
		return nil, nil
	}
	u, ok, err := readUserNamespace(k.layout.UserNamespaceFile(pod.UID))
	if err != nil {
		return nil, err
	}
	nsPath, pinned := sb.Namespaces["user"]
	if !ok || !pinned {
		return nil, fmt.Errorf("%w: pod %s has hostUsers: false and no user namespace yet: run the sandbox stage first", ErrNoSandbox, podKey(pod))
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		dir := k.layout.EmptyDir(pod.UID, v.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if err := os.Lchown(dir, int(u.Base()), int(u.Base())); err != nil {
			return nil, fmt.Errorf("giving volume %s to the pod's root (host id %d): %w", v.Name, u.Base(), err)
		}
	}
	var dsts []string
	for _, m := range kubeletFiles {
		dsts = append(dsts, m.Destination)
	}
	uids, gids := u.specMappings()
	return []oci.SpecOpts{spec.WithUserNamespace(nsPath, uids, gids), spec.WithIDMappedMounts(dsts...)}, nil
}

// rootfsShift is the unpack option that gives a container's rootfs to its
// pod's range (idmapped snapshots, or a chowned copy); nil for a pod
// without a user namespace.
func (k *Kubelet) rootfsShift(pod *corev1.Pod) (*unpack.IDShift, error) {
	if !usesUserNamespace(pod) {
		return nil, nil
	}
	u, ok, err := readUserNamespace(k.layout.UserNamespaceFile(pod.UID))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: pod %s has hostUsers: false and no user namespace range yet: run the sandbox stage first", ErrNoSandbox, podKey(pod))
	}
	return &unpack.IDShift{UIDBase: u.UIDMappings[0].HostID, GIDBase: u.GIDMappings[0].HostID, Size: u.UIDMappings[0].Length}, nil
}

// pinSandbox makes the pod's sandbox; for hostUsers: false, after checking
// that runc can run the pod in a user namespace, with a range allocated
// (or the one recorded) and the namespaces owned by its user namespace.
func (k *Kubelet) pinSandbox(pod *corev1.Pod) (Sandbox, error) {
	if !usesUserNamespace(pod) {
		return k.layout.pinNamespaces(pod, nil)
	}
	if pod.Spec.HostNetwork || pod.Spec.HostIPC || pod.Spec.HostPID {
		return Sandbox{}, fmt.Errorf("%w: pod %s has hostUsers: false with hostNetwork, hostIPC or hostPID: the host's namespaces are not the pod's user namespace's (the API server refuses this)", ErrUnsupported, podKey(pod))
	}
	if err := checkRuncForUserNamespaces(runtimeVersion(k.cfg.Runtime)); err != nil {
		return Sandbox{}, err
	}
	if _, err := findNamespaceHolder(); err != nil { // before a range is taken
		return Sandbox{}, err
	}
	u, err := k.layout.allocateUserNamespace(pod.UID, defaultUsernsRanges)
	if err != nil {
		return Sandbox{}, err
	}
	if err := k.layout.openForUserns(u); err != nil {
		return Sandbox{}, err
	}
	sb, err := k.layout.pinNamespaces(pod, &u)
	if err != nil {
		return sb, err
	}
	if err := checkIDMappedMounts(k.layout.PodDir(pod.UID), sb.Namespaces["user"]); err != nil {
		_ = k.layout.removeSandbox(pod.UID)
		return Sandbox{}, err
	}
	return sb, nil
}

// The pod's root must reach its rootfs: runc prepares the rootfs from inside
// the user namespace, where host-owned directories without search
// permission for others are closed to it. As containerd does, the pod's
// bundle directories go to the range's root group with mode 0710; the
// kubelet's own directories above them get o+x; the state directory and
// its parents must already allow it (the kubelet does not change what it
// did not make).

// openForUserns makes the kubelet's directories above the pod's bundles
// searchable, and refuses when a directory above them stays closed to the
// range's root.
func (l Layout) openForUserns(u UserNamespace) error {
	nodes := l.State().NodesDir()
	own := []string{nodes, l.Dir, l.BundlesDir()}
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
	for d := filepath.Dir(nodes); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return err
		}
		if !searchable(st, u.Base()) {
			return fmt.Errorf("%w: the pod's root (host uid %d) cannot reach its rootfs: %s has mode %04o; run chmod o+x %s",
				ErrUserNamespacesUnsupported, u.Base(), d, st.Mode&0o7777, d)
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

// openBundle gives the pod's bundle directories to the range's root group,
// mode 0710, after each unpack (which makes the bundle 0700 and root's).
func (k *Kubelet) openBundle(pod *corev1.Pod, container string) error {
	if !usesUserNamespace(pod) {
		return nil
	}
	u, ok, err := readUserNamespace(k.layout.UserNamespaceFile(pod.UID))
	if err != nil || !ok {
		return err
	}
	for _, d := range []string{k.layout.PodBundles(pod.UID), k.layout.Bundle(pod.UID, container)} {
		if err := os.Chown(d, 0, int(u.Base())); err != nil {
			return fmt.Errorf("giving %s to the pod's root group %d: %w", d, u.Base(), err)
		}
		if err := os.Chmod(d, 0o710); err != nil {
			return err
		}
	}
	return nil
}
