package netagent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/netagent"
	"github.com/podlab/podlab/steps/pki"
)

// newNetns makes a network namespace bind-mounted at dir/name (as podlab
// node join pins a node's), unmounted when the test ends, and a netlink
// handle in it. The test's threads never stay in it.
func newNetns(t *testing.T, dir, name string) (string, *netlink.Handle) {
	t.Helper()
	path := filepath.Join(dir, name)
	return path, testenv.PinnedNetns(t, path)
}

// machine is one node's network namespace on the lab's layer-2 network.
type machine struct {
	path string
	h    *netlink.Handle
	ip   net.IP
}

// lab makes a "lan" namespace holding a bridge, and n machines, each
// joined to the bridge by a veth, with 192.168.77.(i+1)/24 on its eth0:
// nothing touches the host's own network namespace.
func lab(t *testing.T, n int) []machine {
	t.Helper()
	testenv.RequireRoot(t)
	dir := t.TempDir()
	_, lan := newNetns(t, dir, "lan")
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := lan.LinkAdd(br); err != nil {
		t.Fatalf("bridge: %v", err)
	}
	if err := lan.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	var ms []machine
	for i := range n {
		path, h := newNetns(t, dir, fmt.Sprintf("node-%d", i+1))
		ns, err := netns.GetFromPath(path)
		if err != nil {
			t.Fatal(err)
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("veth-%d", i+1), MasterIndex: br.Index}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
		err = lan.LinkAdd(veth)
		ns.Close()
		if err != nil {
			t.Fatalf("veth of node-%d: %v", i+1, err)
		}
		if err := lan.LinkSetUp(veth); err != nil {
			t.Fatal(err)
		}
		eth0, err := h.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		ip := net.IPv4(192, 168, 77, byte(i+1))
		if err := h.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(24, 32)}}); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(eth0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, machine{path: path, h: h, ip: ip})
	}
	return ms
}

// routes lists the routes of proto in m's main table, as "DST via GW".
func routes(t *testing.T, m machine, proto netlink.RouteProtocol) []string {
	t.Helper()
	rs, err := m.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: proto, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Dst.String()+" via "+r.Gw.String())
	}
	slices.Sort(out)
	return out
}

// waitRoutes waits until m's agent routes are want.
func waitRoutes(t *testing.T, ctx context.Context, m machine, want []string, log fmt.Stringer) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = routes(t, m, netagent.RouteProtocol)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("the agent's routes are %q, want %q; its log:\n%s", got, want, log)
	}
}

func apiNode(name, cidr, ip string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if cidr != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

// server is a real API server in a temporary state directory, an admin
// client, and a client acting as the network agent's user, as its client
// certificate makes it.
func server(t *testing.T, ctx context.Context) (admin, agent apiserver.Interface, srv *apiserver.Server) {
	t.Helper()
	dir := t.TempDir()
	if _, err := apiserver.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	admin, err = srv.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	return admin, srv.ClientFor(authn.User{Name: pki.NetworkAgentUser}, "x509"), srv
}

// TestAgent_Routes: three machines on a bridge, Nodes in a real API
// server; node-1's agent, in node-1's namespace, routes to node-2's and
// node-3's podCIDRs through their addresses; a pod address of node-2 is
// reached through the route; the routes follow the Nodes (a new address,
// a deleted node, a node with no podCIDR or no InternalIP, a podCIDR that
// is not a CIDR), put back a route deleted by hand, and leave every route
// the agent did not make alone.
func TestAgent_Routes(t *testing.T) {
	ms := lab(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, agentClient, _ := server(t, ctx)
	for i, m := range ms {
		name := fmt.Sprintf("node-%d", i+1)
		if _, err := admin.Create(ctx, apiNode(name, fmt.Sprintf("10.244.%d.0/24", i+1), m.ip.String())); err != nil {
			t.Fatal(err)
		}
	}
	// A route node-1's administrator made, to where node-9's pods will be:
	// not the agent's.
	_, static, _ := net.ParseCIDR("10.244.9.0/24")
	if err := ms[0].h.RouteAdd(&netlink.Route{Dst: static, Gw: ms[1].ip, Protocol: unix.RTPROT_STATIC}); err != nil {
		t.Fatal(err)
	}

	log := &testenv.SyncBuffer{}
	a, err := netagent.New(netagent.Config{Client: agentClient, Node: "node-1", Netns: ms[0].path, Log: log, Resync: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	waitRoutes(t, ctx, ms[0], []string{"10.244.2.0/24 via 192.168.77.2", "10.244.3.0/24 via 192.168.77.3"}, log)
	if !strings.Contains(log.String(), "route add 10.244.2.0/24 via 192.168.77.2 (node node-2)") {
		t.Errorf("the log does not say it added node-2's route:\n%s", log)
	}

	// Through the route: a pod address of node-2 (on its lo, as a pod's
	// would be behind its bridge) answers node-1.
	reach(t, ms[0], ms[1], "10.244.2.7")

	// node-3 gets another address: its route is replaced.
	n3, err := admin.Get(ctx, "nodes", "", "node-3")
	if err != nil {
		t.Fatal(err)
	}
	n3.(*corev1.Node).Status.Addresses[0].Address = "192.168.77.33"
	if _, err := admin.UpdateStatus(ctx, n3); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, ctx, ms[0], []string{"10.244.2.0/24 via 192.168.77.2", "10.244.3.0/24 via 192.168.77.33"}, log)

	// node-2 is deleted: its route goes.
	if _, err := admin.Delete(ctx, "nodes", "", "node-2", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, ctx, ms[0], []string{"10.244.3.0/24 via 192.168.77.33"}, log)

	// Bad nodes get no route, and a line saying why; node-9's destination
	// is held by the static route, which stays as it was.
	for _, n := range []*corev1.Node{
		apiNode("no-cidr", "", "192.168.77.5"),
		apiNode("no-ip", "10.244.6.0/24", ""),
		apiNode("node-9", "10.244.9.0/24", "192.168.77.3"),
	} {
		if _, err := admin.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		"node no-cidr: no route: no spec.podCIDR",
		"node no-ip: no route: no InternalIP for podCIDR 10.244.6.0/24",
		"node node-9: no route: a route the agent did not make holds the destination: 10.244.9.0/24 (protocol static): leaving it",
	} {
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(log.String(), want), nil
		}); err != nil {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	if got := strings.Count(log.String(), "node no-cidr: no route"); got != 1 {
		t.Errorf("the skipped node was logged %d times, want once (not at every pass):\n%s", got, log)
	}
	// no-cidr gets its podCIDR: routed.
	nc, err := admin.Get(ctx, "nodes", "", "no-cidr")
	if err != nil {
		t.Fatal(err)
	}
	nc.(*corev1.Node).Spec.PodCIDR = "10.244.5.0/24"
	nc.(*corev1.Node).Spec.PodCIDRs = []string{"10.244.5.0/24"}
	if _, err := admin.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, ctx, ms[0], []string{"10.244.3.0/24 via 192.168.77.33", "10.244.5.0/24 via 192.168.77.5"}, log)

	// A route of the agent deleted by hand is put back at the next resync.
	_, dst, _ := net.ParseCIDR("10.244.3.0/24")
	if err := ms[0].h.RouteDel(&netlink.Route{Dst: dst, Gw: net.ParseIP("192.168.77.33"), Protocol: netagent.RouteProtocol}); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, ctx, ms[0], []string{"10.244.3.0/24 via 192.168.77.33", "10.244.5.0/24 via 192.168.77.5"}, log)

	if got := routes(t, ms[0], unix.RTPROT_STATIC); !slices.Equal(got, []string{"10.244.9.0/24 via 192.168.77.2"}) {
		t.Errorf("the static route: %q, want it untouched", got)
	}
	// node-2 and node-3 have no agent: the test's agent touched node-1's
	// namespace only.
	for _, m := range ms[1:] {
		if got := routes(t, m, netagent.RouteProtocol); len(got) != 0 {
			t.Errorf("routes in another namespace: %q", got)
		}
	}
}

// reach listens on addr:port in to's namespace (addr on its lo) and
// dials it from from's namespace.
// TestAgent_UnknownNode: an agent whose own Node does not exist (a typo,
// or a kubelet not registered yet) changes no route: Sync says why, with
// ErrUnknownNode; Run says it once, not at every resync, and routes as
// soon as the Node is registered.
func TestAgent_UnknownNode(t *testing.T) {
	ms := lab(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, agentClient, _ := server(t, ctx)
	if _, err := admin.Create(ctx, apiNode("node-2", "10.244.2.0/24", ms[1].ip.String())); err != nil {
		t.Fatal(err)
	}
	log := &testenv.SyncBuffer{}
	a, err := netagent.New(netagent.Config{Client: agentClient, Node: "node-1", Netns: ms[0].path, Log: log, Resync: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := `the agent's node does not exist: no Node is named "node-1" (kubectl get nodes lists them): check --node, or start its kubelet first (podlab kubelet --node node-1)`
	if _, err := a.Sync(ctx); !errors.Is(err, netagent.ErrUnknownNode) || !strings.Contains(err.Error(), want) {
		t.Errorf("Sync = %v, want ErrUnknownNode saying %q", err, want)
	}
	if got := routes(t, ms[0], netagent.RouteProtocol); len(got) != 0 {
		t.Errorf("routes made for an unknown node: %q", got)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	time.Sleep(500 * time.Millisecond) // five resyncs
	if got := routes(t, ms[0], netagent.RouteProtocol); len(got) != 0 {
		t.Errorf("routes made by Run for an unknown node: %q", got)
	}
	if n := strings.Count(log.String(), want); n != 1 {
		t.Errorf("Run said %d times that the node does not exist, want once:\n%s", n, log)
	}
	if _, err := admin.Create(ctx, apiNode("node-1", "10.244.1.0/24", ms[0].ip.String())); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, ctx, ms[0], []string{"10.244.2.0/24 via 192.168.77.2"}, log)
}

func reach(t *testing.T, from, to machine, addr string) {
	t.Helper()
	lo, err := to.h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := to.h.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(addr), Mask: net.CIDRMask(32, 32)}}); err != nil {
		t.Fatal(err)
	}
	// node-2 answers node-1 through its eth0 (same subnet): no route needed back.
	var ln net.Listener
	inNetns(t, to.path, func() { ln, err = net.Listen("tcp", net.JoinHostPort(addr, "0")) })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("node-2's pod"))
			c.Close()
		}
	}()
	var got []byte
	inNetns(t, from.path, func() {
		var c net.Conn
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err == nil {
			got = make([]byte, 64)
			n, _ := c.Read(got)
			got = got[:n]
			c.Close()
		}
	})
	if err != nil || string(got) != "node-2's pod" {
		t.Fatalf("node-1 dialing %s: %v, read %q", ln.Addr(), err, got)
	}
}

// inNetns runs fn on a thread inside the namespace at path, then puts the
// thread back (sockets fn opens stay in the namespace).
func inNetns(t *testing.T, path string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(err) // a thread left in another namespace would poison the process
		}
	}()
	fn()
}

// The agent's identity may read every Node; a node's kubelet may not list
// them (the Node authorizer), which is why the agent has its own.
func TestAgent_Identity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, agent, srv := server(t, ctx)
	for _, n := range []string{"node-1", "node-2"} {
		if _, err := admin.Create(ctx, apiNode(n, "", "")); err != nil {
			t.Fatal(err)
		}
	}
	l, err := agent.List(ctx, "nodes", "", apiserver.ListOptions{})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("the agent listing nodes: %v (%d items)", err, len(l.Items))
	}
	if _, err := agent.Update(ctx, l.Items[0]); !apierrors.IsForbidden(err) {
		t.Errorf("the agent updating a node: %v, want Forbidden", err)
	}
	kubelet := srv.ClientFor(apiserver.NodeUser("node-1"), "x509")
	if _, err := kubelet.Get(ctx, "nodes", "", "node-2"); !apierrors.IsForbidden(err) {
		t.Errorf("node-1's kubelet reading node-2: %v, want Forbidden", err)
	}
}

func TestNew_BadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  netagent.Config
		want string
	}{
		{"no node", netagent.Config{}, "no node name"},
		{"a netns that does not exist", netagent.Config{Node: "node-1", Netns: "/nonexistent/net"}, "opening the network namespace /nonexistent/net"},
		{"a netns that is not a namespace", netagent.Config{Node: "node-1", Netns: "/etc/hostname"}, "opening a netlink socket in the network namespace /etc/hostname"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := netagent.New(tt.cfg)
			if err == nil {
				a.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
		})
	}
}
