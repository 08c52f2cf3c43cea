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
//   - The runtime's part. The kubelet sends the range as the sandbox's
//     userns_options (RunPodSandbox); the runtime (steps/cri) makes the
//     user namespace first and the network, IPC and UTS namespaces inside
//     it, pins them, shifts the rootfs into the range and writes the
//     mappings into config.json. The kubelet's emptyDir volumes are owned
//     by the range's root; hostPath volumes are not (their files show as
//     nobody inside).
//
// Nothing of such a pod runs as host root: what is missing (a kernel
// without user namespaces or idmapped mounts for the state directory's file
// system, a runc older than 1.2) fails RunPodSandbox, before any
// container, with a FailedCreatePodSandBox event naming it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/statedir"
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
