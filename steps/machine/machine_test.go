package machine_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/statedir"
)

func TestCheckCIDR_Bad(t *testing.T) {
	for _, tc := range []struct{ name, cidr, want string }{
		{"not a CIDR", "lab", "want a network such as"},
		{"IPv6", "fd00::/64", "not IPv4"},
		{"too wide", "10.0.0.0/8", "/16 to /28"},
		{"too narrow", "10.1.2.0/30", "/16 to /28"},
		{"host bits", "10.1.2.3/24", "the network is 10.1.2.0/24"},
		{"public", "8.8.8.0/24", "not in a private range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := machine.CheckCIDR(tc.cidr)
			if !errors.Is(err, machine.ErrBadCIDR) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckCIDR(%q) = %v, want ErrBadCIDR saying %q", tc.cidr, err, tc.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	a, b := statedir.Layout{Dir: "/tmp/a"}, statedir.Layout{Dir: "/tmp/b"}
	for _, n := range []string{machine.BridgeName(a), machine.VethName(a, "node-1"), machine.VethName(a, strings.Repeat("n", 63))} {
		if len(n) > 15 {
			t.Errorf("link name %q is longer than IFNAMSIZ-1 (15)", n)
		}
	}
	if machine.BridgeName(a) == machine.BridgeName(b) || machine.VethName(a, "node-1") == machine.VethName(b, "node-1") || machine.VethName(a, "node-1") == machine.VethName(a, "node-2") {
		t.Error("two state directories or two nodes share a link name")
	}
}

func TestEnsureLab(t *testing.T) {
	testenv.RequireRoot(t)
	l := statedir.Layout{Dir: t.TempDir()}
	if _, err := machine.LoadLab(l); !errors.Is(err, machine.ErrNoLab) {
		t.Fatalf("LoadLab before any choice: %v, want ErrNoLab", err)
	}
	lab, made, err := machine.EnsureLab(l, "")
	if err != nil || !made {
		t.Fatalf("EnsureLab: %v (made %v)", err, made)
	}
	if !machine.DefaultRange.Contains(lab.CIDR.Addr()) || lab.CIDR.Bits() != 24 || lab.Gateway != lab.CIDR.Addr().Next() || lab.Bridge != machine.BridgeName(l) {
		t.Errorf("lab %+v: want a /24 of %s, gateway .1, bridge %s", lab, machine.DefaultRange, machine.BridgeName(l))
	}
	again, made, err := machine.EnsureLab(l, "")
	if err != nil || made || again != lab {
		t.Errorf("EnsureLab again: %+v %v %v, want the recorded %+v", again, made, err, lab)
	}
	if _, _, err := machine.EnsureLab(l, "192.168.250.0/24"); !errors.Is(err, machine.ErrLabMismatch) {
		t.Errorf("EnsureLab with another CIDR: %v, want ErrLabMismatch", err)
	}
	// the host's own network is taken
	route := hostRoute(t)
	if _, _, err := machine.EnsureLab(statedir.Layout{Dir: t.TempDir()}, route); route != "" && !errors.Is(err, machine.ErrOverlap) {
		t.Errorf("EnsureLab(%s, a network of the host): %v, want ErrOverlap", route, err)
	}
}

// hostRoute is a private network the host has a route to, or "".
func hostRoute(t *testing.T) string {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP.IsPrivate() {
			if ones, _ := r.Dst.Mask.Size(); ones >= 16 && ones <= 28 {
				return r.Dst.String()
			}
		}
	}
	t.Log("the host has no private route of /16 to /28 to overlap")
	return ""
}

// snapshot is what of a state directory's lab is on the host: links,
// iptables chains and rules naming it or its bridge, mounts under it.
func snapshot(t *testing.T, l statedir.Layout) []string {
	t.Helper()
	var out []string
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range links {
		n := k.Attrs().Name
		if n == machine.BridgeName(l) || n == machine.VethName(l, "node-1") || n == machine.VethName(l, "node-2") {
			out = append(out, "link "+n)
		}
	}
	rules, err := exec.Command("iptables", "-S").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range strings.Split(string(rules), "\n") {
		if strings.Contains(r, l.Dir) || strings.Contains(r, machine.BridgeName(l)) {
			out = append(out, "rule "+r)
		}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(l.Dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		out = append(out, "mount "+m.Mountpoint)
	}
	return out
}

// TestJoin_TwoMachines: two machines on the lab network reach each other
// and the gateway, each in its own namespace; they leave nothing behind.
func TestJoin_TwoMachines(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	l := statedir.Layout{Dir: t.TempDir()}
	lab, _, err := machine.EnsureLab(l, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Down(ctx, lab) })
	if s := snapshot(t, l); len(s) != 0 {
		t.Fatalf("before: %v", s)
	}
	j1, err := machine.Join(ctx, l, lab, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if !j1.Lab.Bridge || !j1.Lab.Rule {
		t.Errorf("the first join made %+v of the lab network, want the bridge and the rule", j1.Lab)
	}
	j2, err := machine.Join(ctx, l, lab, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	if j2.Lab.Bridge || j2.Lab.Rule {
		t.Errorf("the second join made %+v, want nothing new", j2.Lab)
	}
	if j1.Machine.IP() == j2.Machine.IP() || !lab.CIDR.Contains(j1.Machine.IP()) || j1.Machine.IP() == lab.Gateway {
		t.Fatalf("addresses %s, %s on %s", j1.Machine.IP(), j2.Machine.IP(), lab.CIDR)
	}
	// another state directory may not take a network the host now has
	if _, _, err := machine.EnsureLab(statedir.Layout{Dir: t.TempDir()}, lab.CIDR.String()); !errors.Is(err, machine.ErrOverlap) {
		t.Errorf("EnsureLab(%s) of another state directory while the bridge has it: %v, want ErrOverlap", lab.CIDR, err)
	}
	if _, err := machine.Join(ctx, l, lab, "node-1"); !errors.Is(err, machine.ErrJoined) {
		t.Errorf("a second join of node-1: %v, want ErrJoined", err)
	}
	if in, err := machine.Inside(j1.Machine.Netns); err != nil || in {
		t.Errorf("the test is inside node-1's machine? %v %v", in, err)
	}
	// node-2 listens on its address; node-1 dials it across the bridge.
	var ln net.Listener
	if err := machine.Do(j2.Machine.Netns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(j2.Machine.IP().String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "hello from node-2")
			c.Close()
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := machine.Dial(dctx, j1.Machine.Netns, ln.Addr().String())
	if err != nil {
		t.Fatalf("node-1 dialing node-2 at %s: %v", ln.Addr(), err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	ln.Close()
	if string(b) != "hello from node-2" {
		t.Errorf("read %q", b)
	}
	// the host reaches nothing but its own gateway from a machine: no route out
	if _, err := machine.Dial(dctx, j1.Machine.Netns, "192.0.2.1:80"); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("dialing outside the lab from node-1: %v, want network unreachable", err)
	}
	// a process started in the machine is in its namespace
	var cmd *exec.Cmd
	if err := machine.Do(j1.Machine.Netns, func() error {
		cmd = exec.Command("sleep", "60")
		return cmd.Start()
	}); err != nil {
		t.Fatal(err)
	}
	same, err := machine.SameNetns("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/net", j1.Machine.Netns)
	if err != nil || !same {
		t.Errorf("a process started with Do is not in the machine: %v %v", same, err)
	}
	go cmd.Wait()

	left, err := machine.Leave(ctx, l, "node-1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Stopped) != 1 || left.Stopped[0] != cmd.Process.Pid || left.LabDown {
		t.Errorf("leave of node-1: %+v, want sleep (%d) stopped, the lab kept for node-2", left, cmd.Process.Pid)
	}
	if _, err := machine.Leave(ctx, l, "node-1", time.Second); !errors.Is(err, machine.ErrNotJoined) {
		t.Errorf("a second leave: %v, want ErrNotJoined", err)
	}
	if left, err := machine.Leave(ctx, l, "node-2", time.Second); err != nil || !left.LabDown {
		t.Fatalf("leave of the last machine: %+v %v, want the lab down", left, err)
	}
	if s := snapshot(t, l); len(s) != 0 {
		t.Errorf("after both left: %v", s)
	}
	if _, err := os.Stat(l.Node("node-1").MachineDir()); !os.IsNotExist(err) {
		t.Errorf("the machine's directory is left: %v", err)
	}
}

// TestJoin_RollsBack: a join that fails half-way (the veth's name is
// taken) removes what it made: the namespace, its mount, the machine's
// directory, and the bridge and rule it made for it.
func TestJoin_RollsBack(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	l := statedir.Layout{Dir: t.TempDir()}
	lab, _, err := machine.EnsureLab(l, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Down(ctx, lab) })
	squatter := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: machine.VethName(l, "node-1")}}
	if err := netlink.LinkAdd(squatter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.LinkDel(squatter) })
	if _, err := machine.Join(ctx, l, lab, "node-1"); err == nil {
		t.Fatal("join with its veth's name taken succeeded")
	}
	if s := snapshot(t, l); !slices.Equal(s, []string{"link " + squatter.Name}) {
		t.Errorf("after a failed join: %v, want only the squatter's link", s)
	}
	if _, err := os.Stat(l.Node("node-1").MachineDir()); !os.IsNotExist(err) {
		t.Errorf("the machine's directory is left: %v", err)
	}
}

// TestJoin_ForwardPolicyDrop: on a host whose FORWARD policy is DROP (as
// Docker leaves it), with bridge-nf-call-iptables=1, frames bridged between
// two machines go through the host's FORWARD chain: the lab's ACCEPT rule
// is what lets node-1 reach node-2. Run in a network namespace of its own,
// whose FORWARD policy the test may change.
func TestJoin_ForwardPolicyDrop(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()
	if err := os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("1"), 0); err != nil {
		t.Fatalf("bridged traffic through iptables: %v", err)
	}
	if out, err := exec.Command("iptables", "-P", "FORWARD", "DROP").CombinedOutput(); err != nil {
		t.Fatalf("iptables -P FORWARD DROP: %v: %s", err, out)
	}
	l := statedir.Layout{Dir: t.TempDir()}
	lab, _, err := machine.EnsureLab(l, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Down(ctx, lab) })
	var nodes []*machine.Joining
	for _, name := range []string{"node-1", "node-2"} {
		j, err := machine.Join(ctx, l, lab, name)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, j)
		t.Cleanup(func() { machine.Leave(ctx, l, name, time.Second) })
	}
	var ln net.Listener
	if err := machine.Do(nodes[1].Machine.Netns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(nodes[1].Machine.IP().String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func() error {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := machine.Dial(dctx, nodes[0].Machine.Netns, ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Errorf("node-1 to node-2 with FORWARD DROP and the lab's rule: %v", err)
	}
	// without the jump to the lab's chain, the policy drops them: the
	// lab's rules are what matters
	rule := []string{"-D", "FORWARD", "-m", "comment", "--comment", lab.Comment, "-j", machine.ForwardChain(lab)}
	if out, err := exec.Command("iptables", rule...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %v: %v: %s", rule, err, out)
	}
	if err := dial(); err == nil {
		t.Errorf("node-1 reached node-2 with FORWARD DROP and no rule: is bridged traffic filtered at all?")
	}
}

// TestLabs_IsolatedByRules: two labs on one host (two state directories),
// and root in lab A's machine adds a route to lab B's network (and root
// in lab B's machine one back): lab B's gateway, where lab B's API server
// listens, and lab B's machine stay out of lab A's reach, dropped by the
// labs' rules rather than for want of a route. Lab A's machine still
// reaches its own gateway, and the host's processes reach both labs. Run
// in a network namespace of its own, where IP forwarding is on (as on a
// host with a CNI bridge) without changing the host's.
func TestLabs_IsolatedByRules(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"} {
		if err := os.WriteFile(f, []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	type side struct {
		l   statedir.Layout
		lab machine.Lab
		m   machine.Machine
		// gw and node are listeners on the lab's gateway (in the host's
		// namespace) and on its machine's address (inside it)
		gw, node net.Listener
	}
	var labs []*side
	for _, cidr := range []string{"172.31.250.0/24", "172.31.251.0/24"} {
		s := &side{l: statedir.Layout{Dir: t.TempDir()}}
		var err error
		if s.lab, _, err = machine.EnsureLab(s.l, cidr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { machine.Down(ctx, s.lab) })
		j, err := machine.Join(ctx, s.l, s.lab, "node-1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { machine.Leave(ctx, s.l, "node-1", time.Second) })
		s.m = j.Machine
		if s.gw, err = net.Listen("tcp", net.JoinHostPort(s.lab.Gateway.String(), "0")); err != nil {
			t.Fatal(err)
		}
		if err := machine.Do(s.m.Netns, func() error {
			var err error
			s.node, err = net.Listen("tcp", net.JoinHostPort(s.m.IP().String(), "0"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, ln := range []net.Listener{s.gw, s.node} {
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
		labs = append(labs, s)
	}
	a, b := labs[0], labs[1]
	route := func(from, to *side) {
		ns, err := netns.GetFromPath(from.m.Netns)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		dst := &net.IPNet{IP: to.lab.CIDR.Addr().AsSlice(), Mask: net.CIDRMask(to.lab.CIDR.Bits(), 32)}
		if err := h.RouteAdd(&netlink.Route{Dst: dst, Gw: from.lab.Gateway.AsSlice()}); err != nil {
			t.Fatalf("ip route add %s via %s in %s: %v", dst, from.lab.Gateway, from.m.Netns, err)
		}
	}
	route(a, b)
	route(b, a)
	dial := func(netnsPath string, ln net.Listener) error {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var c net.Conn
		var err error
		if netnsPath == "" {
			c, err = (&net.Dialer{}).DialContext(dctx, "tcp", ln.Addr().String())
		} else {
			c, err = machine.Dial(dctx, netnsPath, ln.Addr().String())
		}
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name  string
		from  string // a machine's namespace, "" for the host
		to    net.Listener
		reach bool
	}{
		{"lab A's machine to lab A's gateway", a.m.Netns, a.gw, true},
		{"lab B's machine to lab B's gateway", b.m.Netns, b.gw, true},
		{"lab A's machine to lab B's gateway (lab B's API server)", a.m.Netns, b.gw, false},
		{"lab A's machine to lab B's machine", a.m.Netns, b.node, false},
		{"lab B's machine to lab A's gateway", b.m.Netns, a.gw, false},
		{"the host to lab A's machine", "", a.node, true},
		{"the host to lab B's machine", "", b.node, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dial(tc.from, tc.to)
			if tc.reach && err != nil {
				t.Errorf("dialing %s: %v, want it reached", tc.to.Addr(), err)
			}
			if !tc.reach && err == nil {
				t.Errorf("dialing %s: connected, want it dropped by the labs' rules", tc.to.Addr())
			}
		})
	}
	for _, s := range labs {
		if _, err := machine.Leave(ctx, s.l, "node-1", time.Second); err != nil {
			t.Fatal(err)
		}
		if snap := snapshot(t, s.l); len(snap) != 0 {
			t.Errorf("after the last machine of %s left: %v", s.lab.CIDR, snap)
		}
	}
}
