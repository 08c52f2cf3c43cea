package machine

import "errors"

// Errors of choosing the lab network (EnsureLab, LoadLab).
var (
	// ErrNoLab: the state directory has no lab network recorded yet;
	// `podlab init` chooses it.
	ErrNoLab = errors.New("no lab network chosen yet")
	// ErrBadCIDR: the CIDR asked for cannot be a lab network.
	ErrBadCIDR = errors.New("not a lab network")
	// ErrOverlap: the lab network overlaps a route or address the host
	// already has.
	ErrOverlap = errors.New("the lab network overlaps a network of this host")
	// ErrLabMismatch: a lab network was recorded already, and another one
	// is asked for.
	ErrLabMismatch = errors.New("the state directory has another lab network")
)

// Errors of joining and leaving (Join, Leave, Load).
var (
	// ErrBadNodeName: the name cannot be a machine's host name.
	ErrBadNodeName = errors.New("invalid node name")
	// ErrJoined: the node is a machine already.
	ErrJoined = errors.New("the node has joined already")
	// ErrNotJoined: the node never joined (or left): it has no machine.
	ErrNotJoined = errors.New("the node has not joined")
	// ErrLabFull: every address of the lab network is taken.
	ErrLabFull = errors.New("no free address left on the lab network")
	// ErrNoIptables: the iptables command is missing.
	ErrNoIptables = errors.New("iptables is not installed (apt-get install iptables)")
)
