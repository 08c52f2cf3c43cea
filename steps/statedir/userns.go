package statedir

import (
	"path/filepath"
	"strconv"
)

// User namespaces (hostUsers: false). A pod's range of host ids is
// recorded in its pod directory (Kubernetes' own file), and claimed
// machine-wide: host ids are the machine's, not a state directory's, so two
// state directories must never hand out the same range.

// The names of the user namespace files.
const (
	usernsRecordFile = "userns"
	usernsLockFile   = "lock"
)

// UsernsClaimsDir is the one machine-wide location podlab writes, the
// exception to "everything under the state directory": one claim file per
// range of host ids handed out to a pod with hostUsers: false, by any state
// directory of the machine. It lives under /var/lib, not /run: the range
// owns files on disk (the pod's rootfs copies and emptyDir volumes) that
// outlive a reboot, as does the pod's record; a claim cleared at boot would
// let another state directory hand the same ids to a pod of its own, which
// could then read and write the first pod's files.
//
//	/var/lib/podlab-userns/
//	  lock        flock(2)ed while a range is claimed, checked or freed
//	  <base>      a claim: {"stateDir":..., "node":..., "podUID":...}
//
// A claim whose owner (the state directory's record of that pod) is gone is
// stale: the next allocation reclaims it, and `podlab reset` removes those
// of its state directory.
const UsernsClaimsDir = "/var/lib/podlab-userns"

// UsernsClaims is a directory of machine-wide claims on user namespace
// ranges: MachineUsernsClaims, or another directory in tests.
type UsernsClaims struct {
	Dir string
}

// MachineUsernsClaims are the claims of this machine, at UsernsClaimsDir.
func MachineUsernsClaims() UsernsClaims { return UsernsClaims{Dir: UsernsClaimsDir} }

// Lock is the file flock(2)ed while claims are read or written.
func (c UsernsClaims) Lock() string { return filepath.Join(c.Dir, usernsLockFile) }

// Claim is the claim file of the range that starts at host id base.
func (c UsernsClaims) Claim(base uint32) string {
	return filepath.Join(c.Dir, strconv.FormatUint(uint64(base), 10))
}

// ParseClaim is the base of a claim file's name; ok is false for any
// other entry of the directory (the lock, a temporary file).
func ParseClaim(name string) (base uint32, ok bool) {
	n, err := strconv.ParseUint(name, 10, 32)
	if err != nil || strconv.FormatUint(n, 10) != name {
		return 0, false
	}
	return uint32(n), true
}

// UsernsRecord is where a pod's user namespace range is recorded, in
// Kubernetes' format: <pod dir>/userns.
func (n Node) UsernsRecord(uid string) string { return filepath.Join(n.PodDir(uid), usernsRecordFile) }

// UsernsRecords are the records of every pod of every node of the state
// directory.
func (l Layout) UsernsRecords() ([]string, error) {
	return filepath.Glob(filepath.Join(l.NodesDir(), "*", podsDir, "*", usernsRecordFile))
}

// State is the layout of the state directory the node is in.
func (n Node) State() Layout { return Layout{Dir: filepath.Dir(filepath.Dir(n.Dir))} }
