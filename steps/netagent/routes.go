package netagent

import (
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Route is one route the agent keeps: the pods of Node, at Dst, through
// Via (the node's InternalIP).
type Route struct {
	Node string
	Dst  *net.IPNet
	Via  net.IP
}

func (r Route) String() string { return fmt.Sprintf("%s via %s (node %s)", r.Dst, r.Via, r.Node) }

// Skip is a node (or one of its podCIDRs) that gets no route, and why
// (wrapping ErrNoPodCIDR, ErrNoInternalIP, ErrBadPodCIDR or ErrNotOurs).
type Skip struct {
	Node   string
	Reason error
}

// Desired is the routing table the agent of node self wants: one route
// per podCIDR of every other node, through that node's InternalIP of the
// same family, sorted by destination. Nodes that cannot be routed to are
// in skipped, with the reason.
func Desired(self string, nodes []*corev1.Node) (routes []Route, skipped []Skip) {
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		if len(cidrs) == 0 {
			skipped = append(skipped, Skip{Node: n.Name, Reason: ErrNoPodCIDR})
			continue
		}
		for _, c := range cidrs {
			_, dst, err := net.ParseCIDR(c)
			if err != nil {
				skipped = append(skipped, Skip{Node: n.Name, Reason: fmt.Errorf("%w: %q", ErrBadPodCIDR, c)})
				continue
			}
			via := internalIP(n, dst.IP.To4() != nil)
			if via == nil {
				skipped = append(skipped, Skip{Node: n.Name, Reason: fmt.Errorf("%w for podCIDR %s", ErrNoInternalIP, dst)})
				continue
			}
			routes = append(routes, Route{Node: n.Name, Dst: dst, Via: via})
		}
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].Dst.String() < routes[j].Dst.String() })
	return routes, skipped
}

// internalIP is n's first InternalIP of the family (IPv4 when v4), or nil.
func internalIP(n *corev1.Node, v4 bool) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip := net.ParseIP(a.Address)
		if ip != nil && (ip.To4() != nil) == v4 {
			return ip
		}
	}
	return nil
}
