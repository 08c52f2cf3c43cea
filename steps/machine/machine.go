package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/steps/statedir"
)

// Interface is the name of a machine's link to the lab network, inside
// its namespace, as on a real host.
const Interface = "eth0"

// Machine is a joined node: its own network namespace, with lo and eth0,
// one end of a veth pair whose other end is on the lab bridge.
type Machine struct {
	Node string `json:"node"`
	// Address is eth0's address, with the lab network's prefix length.
	Address netip.Prefix `json:"address"`
	Gateway netip.Addr   `json:"gateway"`
	// HostVeth is the veth's end in the host's namespace, on Bridge.
	HostVeth  string `json:"hostVeth"`
	Interface string `json:"interface"`
	Bridge    string `json:"bridge"`
	// Netns is the bind mount that pins the namespace (MachineNetns).
	Netns string `json:"netns"`
}

// IP is the machine's address on the lab network.
func (m Machine) IP() netip.Addr { return m.Address.Addr() }

// Load reads the machine of node n (ErrNotJoined if it never joined).
func Load(n statedir.Node) (Machine, error) {
	var m Machine
	b, err := os.ReadFile(n.MachineRecord())
	if errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("node %s: %w (podlab node join %s makes it a machine of its own)", n.Name, ErrNotJoined, n.Name)
	}
	if err != nil {
		return m, fmt.Errorf("reading the machine of node %s: %w", n.Name, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("reading the machine of node %s (%s): %w", n.Name, n.MachineRecord(), err)
	}
	return m, nil
}

// Joined are the machines of l's nodes, by node name.
func Joined(l statedir.Layout) ([]Machine, error) {
	nodes, err := l.Nodes()
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, n := range nodes {
		m, err := Load(n)
		if errors.Is(err, ErrNotJoined) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// lock holds the lab's lock (statedir.Layout.LabLock) until unlock.
func lock(l statedir.Layout) (unlock func(), err error) {
	if err := os.MkdirAll(l.LabDir(), 0o755); err != nil {
		return nil, fmt.Errorf("locking the lab network: %w", err)
	}
	f, err := os.OpenFile(l.LabLock(), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the lab network: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the lab network: %w", err)
	}
	return func() { f.Close() }, nil
}

// Joining is what Join made, in order, for the caller to print.
type Joining struct {
	Machine Machine
	// Lab is what Up made of the lab network for this join.
	Lab Made
}

// Join makes node a machine of its own on lab: a network namespace
// pinned at its MachineNetns, lo up, and a veth pair, one end on the lab
// bridge (made if it is the first machine), the other eth0 in the
// namespace with the first free address of the lab network. The machine
// is recorded at MachineRecord. On any failure it removes what it made.
func Join(ctx context.Context, l statedir.Layout, lab Lab, node string) (_ *Joining, err error) {
	if err := CheckNodeName(node); err != nil {
		return nil, err
	}
	n := l.Node(node)
	if _, err := os.Lstat(n.MachineNetns()); err == nil {
		return nil, fmt.Errorf("node %s: %w (%s exists): podlab node leave %s first", node, ErrJoined, n.MachineNetns(), node)
	}
	unlock, err := lock(l)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var undo []func() error
	defer func() {
		if err == nil {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				err = errors.Join(err, fmt.Errorf("rolling back: %w", uerr))
			}
		}
	}()
	others, err := Joined(l)
	if err != nil {
		return nil, err
	}
	made, err := Up(ctx, lab)
	if len(others) == 0 {
		undo = append(undo, func() error { return Down(context.WithoutCancel(ctx), lab) })
	}
	if err != nil {
		return nil, err
	}
	addr, err := allocate(lab, others)
	if err != nil {
		return nil, err
	}
	m := Machine{
		Node: node, Address: addr, Gateway: lab.Gateway,
		HostVeth: VethName(l, node), Interface: Interface, Bridge: lab.Bridge, Netns: n.MachineNetns(),
	}
	if err := os.MkdirAll(n.MachineDir(), 0o755); err != nil {
		return nil, fmt.Errorf("making the machine's directory: %w", err)
	}
	undo = append(undo, func() error { return os.RemoveAll(n.MachineDir()) })
	if err := newNetns(m.Netns); err != nil {
		return nil, fmt.Errorf("making the network namespace of node %s: %w", node, err)
	}
	undo = append(undo, func() error { return removeNetns(m.Netns) })
	if err := link(lab, m); err != nil {
		return nil, fmt.Errorf("linking node %s to the lab network: %w", node, err)
	}
	undo = append(undo, func() error { return delLink(m.HostVeth) })
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.MachineRecord(), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("recording the machine of node %s: %w", node, err)
	}
	return &Joining{Machine: m, Lab: made}, nil
}

// allocate is the first address of lab after the gateway that no other
// machine has.
func allocate(lab Lab, others []Machine) (netip.Prefix, error) {
	taken := map[netip.Addr]bool{lab.Gateway: true}
	for _, o := range others {
		taken[o.IP()] = true
	}
	for a := lab.Gateway.Next(); lab.CIDR.Contains(a.Next()); a = a.Next() { // the last is the broadcast
		if !taken[a] {
			return netip.PrefixFrom(a, lab.CIDR.Bits()), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w %s (%d machines)", ErrLabFull, lab.CIDR, len(others))
}

// link makes the veth pair of m: HostVeth on the bridge, up; eth0 in the
// namespace with m's address, up, and lo up.
func link(lab Lab, m Machine) error {
	br, err := netlink.LinkByName(lab.Bridge)
	if err != nil {
		return fmt.Errorf("finding the lab bridge %s: %w", lab.Bridge, err)
	}
	ns, err := netns.GetFromPath(m.Netns)
	if err != nil {
		return fmt.Errorf("opening %s: %w", m.Netns, err)
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: m.HostVeth, MasterIndex: br.Attrs().Index},
		PeerName:      m.Interface,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("making the veth pair %s (host) - %s (node): %w", m.HostVeth, m.Interface, err)
	}
	host, err := netlink.LinkByName(m.HostVeth)
	if err == nil {
		err = netlink.LinkSetUp(host)
	}
	if err != nil {
		return fmt.Errorf("setting %s up: %w", m.HostVeth, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("opening a netlink socket in %s: %w", m.Netns, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("setting lo up in the machine: %w", err)
	}
	eth, err := h.LinkByName(m.Interface)
	if err != nil {
		return fmt.Errorf("finding %s in the machine: %w", m.Interface, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: m.IP().AsSlice(), Mask: net.CIDRMask(m.Address.Bits(), 32)}}
	if err := h.AddrAdd(eth, a); err != nil {
		return fmt.Errorf("giving %s the address %s: %w", m.Interface, m.Address, err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("setting %s up in the machine: %w", m.Interface, err)
	}
	return nil
}

func delLink(name string) error {
	l, err := netlink.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking for %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("removing the veth %s: %w", name, err)
	}
	return nil
}

// Leaving is what Leave removed.
type Leaving struct {
	Machine Machine
	// Stopped are the pids of the processes that ran in the machine.
	Stopped []int
	// LabDown: it was the last machine, and the lab network went with it.
	LabDown bool
}

// Leave removes node's machine: it stops what still runs in it (SIGTERM,
// then SIGKILL after grace), removes the veth pair (with eth0 and its
// route), unmounts and removes the namespace and the machine's directory.
// The last machine to leave takes the lab network with it (Down). A node
// that never joined is ErrNotJoined.
func Leave(ctx context.Context, l statedir.Layout, node string, grace time.Duration) (*Leaving, error) {
	n := l.Node(node)
	m, err := Load(n)
	if errors.Is(err, ErrNotJoined) {
		if _, serr := os.Lstat(n.MachineNetns()); serr != nil {
			return nil, err
		}
		// a join cut short before its record: remove what is there
		m = Machine{Node: node, Netns: n.MachineNetns(), HostVeth: VethName(l, node)}
	} else if err != nil {
		return nil, err
	}
	unlock, err := lock(l)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res := &Leaving{Machine: m}
	var errs []error
	if pids, err := Stop(ctx, m.Netns, grace); err != nil {
		errs = append(errs, err)
	} else {
		res.Stopped = pids
	}
	if err := delLink(m.HostVeth); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetns(m.Netns); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(n.MachineDir()); err != nil {
		errs = append(errs, fmt.Errorf("removing the machine's directory: %w", err))
	}
	left, err := Joined(l)
	if err != nil {
		errs = append(errs, err)
	} else if len(left) == 0 {
		if lab, err := LoadLab(l); err == nil {
			if err := Down(ctx, lab); err != nil {
				errs = append(errs, err)
			} else {
				res.LabDown = true
			}
		}
	}
	return res, errors.Join(errs...)
}

// Processes are the pids of the processes in the network namespace
// pinned at netnsPath: those whose /proc/PID/ns/net is it.
func Processes(netnsPath string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(netnsPath, &want); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the network namespace %s: %w", netnsPath, err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue // gone, or a kernel thread
		}
		if st.Dev == want.Dev && st.Ino == want.Ino {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Stop stops the processes in the network namespace at netnsPath: SIGTERM,
// then SIGKILL to those still there after grace. It returns their pids.
func Stop(ctx context.Context, netnsPath string, grace time.Duration) ([]int, error) {
	pids, err := Processes(netnsPath)
	if err != nil || len(pids) == 0 {
		return nil, err
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for {
		left, err := Processes(netnsPath)
		if err != nil {
			return pids, err
		}
		if len(left) == 0 {
			return pids, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
			return pids, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
