package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/netagent"
	"github.com/podlab/podlab/steps/statedir"
)

// testNetns makes a network namespace bind-mounted at dir/net, with a
// link lab0 holding addr (CIDR): a node's machine on the lab
// network, as far as routing goes. The host's namespace is not touched.
func testNetns(t *testing.T, dir, addr string) (string, *netlink.Handle) {
	t.Helper()
	path := filepath.Join(dir, "net")
	h := testenv.PinnedNetns(t, path)
	ip, ipnet, err := net.ParseCIDR(addr)
	if err != nil {
		t.Fatal(err)
	}
	// a veth pair, both ends here: a link with a carrier, as the node's
	// veth to the lab bridge is
	lab := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lab0"}, PeerName: "lab0-peer"}
	if err := h.LinkAdd(lab); err != nil {
		t.Fatal(err)
	}
	peer, err := h.LinkByName("lab0-peer")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(lab, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: ipnet.Mask}}); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lab); err != nil {
		t.Fatal(err)
	}
	return path, h
}

const agentNodes = `apiVersion: v1
kind: Node
metadata: {name: node-1}
spec: {podCIDR: 10.244.1.0/24, podCIDRs: [10.244.1.0/24]}
status: {addresses: [{type: InternalIP, address: 192.168.77.1}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-2}
spec: {podCIDR: 10.244.2.0/24, podCIDRs: [10.244.2.0/24]}
status: {addresses: [{type: InternalIP, address: 192.168.77.2}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-3}
status: {addresses: [{type: InternalIP, address: 192.168.77.3}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-4}
spec: {podCIDR: 10.244.4.0/24, podCIDRs: [10.244.4.0/24]}
status: {addresses: [{type: InternalIP, address: 10.99.0.4}]}
`

// podlab network-agent --once, as its own user (network-agent.kubeconfig,
// which podlab init wrote), programs a node's namespace: node-2's route,
// node-3 skipped (no podCIDR), node-4's gateway off the lab network an
// error with the hint; a second run changes nothing.
func TestNetworkAgent_Once(t *testing.T) {
	state := testenv.StateDir(t)
	serveAPI(t, state)
	path, h := testNetns(t, t.TempDir(), "192.168.77.1/24")
	l := statedir.Layout{Dir: state}
	if _, err := os.Stat(l.Kubeconfig("network-agent")); err != nil {
		t.Fatalf("podlab init wrote no kubeconfig for the network agent: %v", err)
	}
	f := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(f, []byte(agentNodes), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlWith(testenv.Kubectl(t), l.Kubeconfig("admin"), "create", "-f", f); err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}

	// a node that does not exist: refused, no route made
	if _, _, err := podlab(t, state, "network-agent", "--node", "node-7", "--netns", path, "--once"); !errors.Is(err, netagent.ErrUnknownNode) ||
		!strings.Contains(err.Error(), `no Node is named "node-7" (kubectl get nodes lists them): check --node, or start its kubelet first (podlab kubelet --node node-7)`) {
		t.Errorf("network-agent --node node-7 (no such node): %v, want ErrUnknownNode with what to do", err)
	}
	if rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: 117, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE); err != nil || len(rs) != 0 {
		t.Errorf("routes after the agent of a node that does not exist: %v %v, want none", rs, err)
	}

	out, errOut, err := podlab(t, state, "network-agent", "--node", "node-1", "--netns", path, "--once")
	if err == nil || !strings.Contains(err.Error(), "route 10.244.4.0/24 via 10.99.0.4 (node node-4): network is unreachable (host-gw needs every node on one layer-2 network") {
		t.Errorf("the error: %v, want node-4's unreachable gateway, with the hint", err)
	}
	for _, want := range []string{
		"network-agent node-1, once: routes in " + path,
		"route add 10.244.2.0/24 via 192.168.77.2 (node node-2)",
		"node node-3: no route: no spec.podCIDR",
		"2 route(s) to other nodes' pods, 1 change(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s%s", want, out, errOut)
		}
	}
	rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: 117, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Dst.String() != "10.244.2.0/24" || rs[0].Gw.String() != "192.168.77.2" {
		t.Errorf("routes with protocol 117 in the namespace: %v, want 10.244.2.0/24 via 192.168.77.2", rs)
	}

	// node-4 leaves: nothing fails, nothing changes.
	if out, err := kubectlWith(testenv.Kubectl(t), l.Kubeconfig("admin"), "delete", "node", "node-4"); err != nil {
		t.Fatalf("kubectl delete node: %v\n%s", err, out)
	}
	out = mustPodlab(t, state, "network-agent", "--node", "node-1", "--netns", path, "--once")
	if !strings.Contains(out, "1 route(s) to other nodes' pods, 0 change(s)") {
		t.Errorf("a second run:\n%s", out)
	}
}

func TestNetworkAgent_BadInput(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no node", []string{"network-agent", "--once"}, `Required flag "node" not set`},
		{"a node name that is not a DNS name", []string{"network-agent", "--node", "Node_1", "--once"}, `"Node_1"`},
		{"a netns that does not exist", []string{"network-agent", "--node", "node-1", "--netns", "/nonexistent/net", "--once"},
			"opening the network namespace /nonexistent/net"},
		{"a netns that is a plain file", []string{"network-agent", "--node", "node-1", "--netns", "/etc/hostname", "--once"},
			"opening a netlink socket in the network namespace /etc/hostname"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := podlab(t, state, tt.args...)
			if err == nil {
				t.Fatalf("no error:\n%s", out)
			}
			if !strings.Contains(err.Error()+errOut, tt.want) {
				t.Errorf("error %v (%s), want it to say %q", err, errOut, tt.want)
			}
		})
	}
}
