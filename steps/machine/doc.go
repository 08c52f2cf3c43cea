// Package machine makes podlab's nodes machines of their own, on one host:
// what `podlab node join` and `podlab node leave` do, and what `podlab
// reset` undoes.
//
// A real cluster's nodes are hosts on a network: each has its own network
// stack, its own address, and reaches the API server across the network.
// Here a node's "machine" is a Linux network namespace, and the network is
// a bridge in the host's namespace:
//
//	host namespace                                  node-1's namespace
//	  plab1a2b3c4d (bridge) 172.20.5.1/24  <- the gateway, where
//	    |                                     podlab apiserver listens too
//	    +-- pv0123456789 (veth) ======== eth0 172.20.5.2/24, lo
//	    +-- pv9876543210 (veth) ======== eth0 172.20.5.3/24 (node-2), lo
//
// The lab network (Lab) is one per state directory, chosen once (EnsureLab,
// run by `podlab init`) and recorded at statedir.Layout.LabRecord so every
// command agrees: a private /24 of 172.16.0.0/12 chosen by the state
// directory's hash (the next free one when the host has a route or an
// address there), or the network --lab-cidr / PODLAB_LAB_CIDR names (refused
// when it overlaps one of the host's). Names are global to the host, so
// they come from the state directory too: the bridge plab<8 hex digits>, a
// node's veth pv<10 hex digits> (BridgeName, VethName; link names have at
// most 15 bytes).
//
// Traffic stays on the lab network and loopback: a machine has no default
// route, only its /24 on eth0, and nothing is routed to the outside. Root
// in a machine can add a route, though, so what keeps two labs of one host
// apart is rules, not routes: each lab has two chains of its own in the
// host's filter table, named after its bridge (ForwardChain, InputChain),
// reached from the first rules of FORWARD and INPUT, whose comment names the
// state directory. The forward chain accepts what the bridge forwards
// between its own ports (the host bridges with netfilter on,
// bridge-nf-call-iptables=1, so its FORWARD policy would decide over
// traffic between two machines otherwise) and drops whatever would be
// routed out of the lab or into it; the input chain accepts from the
// bridge only the lab network to the lab network (the gateway), so another
// lab's gateway, an address of the host too, is out of reach. The host's
// own processes reach every lab as before. Up writes them, Down removes
// them with the bridge when the last machine leaves (Rules lists them).
//
// A namespace lives as long as a process or a mount holds it: Join pins the
// machine's with a bind mount at statedir.Node.MachineNetns (as `ip netns
// add` does under /run/netns), and Leave unmounts it after stopping what
// still runs inside (Processes: every /proc/PID/ns/net that is it).
//
// Running something inside a machine: Do runs a function on a thread that
// has entered the namespace (a socket it opens and a process it starts are
// in the namespace), Dial connects from there, and Exec replaces the
// current process with a program inside it (the kubelet of a joined node
// re-executes itself so, before it starts anything). Code that works with
// netlink can instead open MachineNetns with netns.GetFromPath and
// netlink.NewHandleAt.
//
// This package knows nothing of the control plane: it takes a state
// directory's layout and names, and returns what it made.
package machine
