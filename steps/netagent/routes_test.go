package netagent

import (
	"errors"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is a Node with podCIDRs (the first also as spec.podCIDR) and
// InternalIPs.
func node(name string, cidrs []string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func cidrs(c ...string) []string { return c }

func TestDesired(t *testing.T) {
	withHostname := node("node-4", cidrs("10.244.4.0/24"), "192.168.77.4")
	withHostname.Status.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-4"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.4"}}, withHostname.Status.Addresses...)
	onlyPodCIDR := node("node-5", nil, "192.168.77.5")
	onlyPodCIDR.Spec.PodCIDR = "10.244.5.0/24"
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{"no other node", []*corev1.Node{node("node-1", cidrs("10.244.1.0/24"), "192.168.77.1")}, nil},
		{"one route per other node, sorted, not to itself",
			[]*corev1.Node{
				node("node-3", cidrs("10.244.3.0/24"), "192.168.77.3"),
				node("node-1", cidrs("10.244.1.0/24"), "192.168.77.1"),
				node("node-2", cidrs("10.244.2.0/24"), "192.168.77.2"),
			},
			[]string{"10.244.2.0/24 via 192.168.77.2 (node node-2)", "10.244.3.0/24 via 192.168.77.3 (node node-3)"}},
		{"the InternalIP, not the hostname or the ExternalIP",
			[]*corev1.Node{withHostname},
			[]string{"10.244.4.0/24 via 192.168.77.4 (node node-4)"}},
		{"spec.podCIDR alone (no podCIDRs)",
			[]*corev1.Node{onlyPodCIDR},
			[]string{"10.244.5.0/24 via 192.168.77.5 (node node-5)"}},
		{"dual stack: each family through its own address",
			[]*corev1.Node{node("node-6", cidrs("10.244.6.0/24", "fd00:10:244:6::/64"), "fd00::6", "192.168.77.6")},
			[]string{"10.244.6.0/24 via 192.168.77.6 (node node-6)", "fd00:10:244:6::/64 via fd00::6 (node node-6)"}},
		{"a host address in the podCIDR is its network",
			[]*corev1.Node{node("node-7", cidrs("10.244.7.9/24"), "192.168.77.7")},
			[]string{"10.244.7.0/24 via 192.168.77.7 (node node-7)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routes, skipped := Desired("node-1", tt.nodes)
			if len(skipped) != 0 {
				t.Errorf("skipped %v", skipped)
			}
			var got []string
			for _, r := range routes {
				got = append(got, r.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("routes %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("route %d: %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// Nodes that cannot be routed to are skipped, each with its reason, and
// the others are routed all the same.
func TestDesired_BadNodes(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want error
	}{
		{"no podCIDR yet", node("node-2", nil, "192.168.77.2"), ErrNoPodCIDR},
		{"no InternalIP", node("node-2", cidrs("10.244.2.0/24")), ErrNoInternalIP},
		{"an InternalIP of the other family only", node("node-2", cidrs("10.244.2.0/24"), "fd00::2"), ErrNoInternalIP},
		{"an InternalIP that is not an address", node("node-2", cidrs("10.244.2.0/24"), "node-2.lab"), ErrNoInternalIP},
		{"a podCIDR that is not a CIDR", node("node-2", cidrs("10.244.2.0"), "192.168.77.2"), ErrBadPodCIDR},
		{"a podCIDR that is a word", node("node-2", cidrs("ten-two-four-four"), "192.168.77.2"), ErrBadPodCIDR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := node("node-3", cidrs("10.244.3.0/24"), "192.168.77.3")
			routes, skipped := Desired("node-1", []*corev1.Node{tt.node, good})
			if len(routes) != 1 || routes[0].Node != "node-3" || !routes[0].Via.Equal(net.ParseIP("192.168.77.3")) {
				t.Errorf("routes %v, want node-3's alone", routes)
			}
			if len(skipped) != 1 || skipped[0].Node != "node-2" || !errors.Is(skipped[0].Reason, tt.want) {
				t.Fatalf("skipped %v, want node-2 for %v", skipped, tt.want)
			}
		})
	}
}
