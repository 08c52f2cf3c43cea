package netagent

import "errors"

// Why a node gets no route: each Skip's Reason wraps one.
var (
	// ErrNoPodCIDR: the node has no spec.podCIDR yet (the node IPAM
	// controller gives it one: podlab controller-manager
	// --allocate-node-cidrs).
	ErrNoPodCIDR = errors.New("no spec.podCIDR")
	// ErrNoInternalIP: the node has no InternalIP address (of the podCIDR's
	// family) in its status: its kubelet has not registered it.
	ErrNoInternalIP = errors.New("no InternalIP")
	// ErrBadPodCIDR: the node's podCIDR is not a CIDR.
	ErrBadPodCIDR = errors.New("podCIDR is not a CIDR")
	// ErrNotOurs: a route to the node's podCIDR exists that the agent did
	// not make (another protocol): the agent leaves it alone.
	ErrNotOurs = errors.New("a route the agent did not make holds the destination")
)

// Errors of setting the agent up.
var (
	// ErrNoNode: Config.Node is empty.
	ErrNoNode = errors.New("no node name")
)

// Errors of a reconciliation.
var (
	// ErrUnknownNode: no Node has the agent's own name (a typo, or its
	// kubelet has not registered it yet). The agent changes no route
	// until it exists, as flanneld does not start without its Node.
	ErrUnknownNode = errors.New("the agent's node does not exist")
)
