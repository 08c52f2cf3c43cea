// Package netagent is podlab's network agent: flannel's host-gw backend,
// by hand.
//
// A pod on node-1 reaches a pod on node-2 by its IP only if node-1 knows
// where node-2's pods are. The controller-manager's node IPAM gives each
// node a block of the cluster CIDR (spec.podCIDR, 10.244.1.0/24 ...), and
// each node's bridge holds its own block; what is missing is a route on
// every node, to every other node's block, through that node's address:
//
//	10.244.2.0/24 via 192.168.77.3 proto 117    # node-2's pods, through node-2
//	10.244.3.0/24 via 192.168.77.4 proto 117    # node-3's pods, through node-3
//
// That is flannel's host-gw backend: no tunnel, no encapsulation, only the
// kernel's routing table, which works when the nodes share one layer-2
// network (the lab bridge). One agent runs per node (flanneld is a
// DaemonSet), acts as its own identity (kubeconfigs/network-agent.kubeconfig,
// bound to the ClusterRole network-agent: get, list and watch nodes, as
// flannel's ServiceAccount is), watches the Nodes with an informer, and
// after every change makes the node's routing table hold exactly one route
// per other node:
//
//   - the route's destination is the other node's spec.podCIDRs (or
//     spec.podCIDR), its gateway that node's InternalIP of the same family;
//   - a node without a podCIDR or without an InternalIP gets no route (yet):
//     the agent says so, and adds it when the node has both;
//   - the routes of nodes that were deleted, or whose podCIDR or address
//     changed, are removed or replaced;
//   - only the agent's own routes are touched: it marks each with the route
//     protocol RouteProtocol (`ip route show proto 117` lists them), and a
//     route to the same destination that is not marked is left alone, with a
//     log line. The mark is podlab's, not flannel's: flannel's host-gw
//     (pkg/backend/hostgw) adds routes with no protocol and knows its own
//     from the subnet leases it keeps; a restarted podlab agent finds its
//     own in the kernel's table instead.
//
// A node's kubelet credentials may not do this: the Node authorizer lets
// system:node:NAME read its own Node only. Hence the agent's own identity.
//
// The routes go into the node's network namespace (its "machine", a bind
// mount that podlab node join makes), programmed through a netlink socket
// opened in that namespace (netlink.NewHandleAt): the agent's own threads
// never enter it.
package netagent
