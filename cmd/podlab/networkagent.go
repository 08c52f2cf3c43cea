package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/netagent"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// newNetworkAgentCommand is `podlab network-agent`: flannel's host-gw
// backend, one agent per node.
func newNetworkAgentCommand() *cli.Command {
	return &cli.Command{
		Name:      "network-agent",
		Usage:     "route a node to the other nodes' pods, as flannel's host-gw backend does",
		ArgsUsage: "--node NAME [--netns PATH] [--once]",
		Description: `Each node holds its own block of pod addresses (spec.podCIDR, given by
the controller-manager's node IPAM: podlab controller-manager
--allocate-node-cidrs), and its bridge reaches the pods of that block. A
pod on node-1 reaches a pod on node-2 only if node-1 has a route to
node-2's block. Flannel's host-gw backend makes exactly those routes, one
per other node, through that node's own address, with no tunnel:

  10.244.2.0/24 via 192.168.77.3 proto 117    node-2's pods, through node-2

This command is that agent. Run one per node (flanneld is a DaemonSet):
it watches the Nodes through the API server and, after every change (and
every 10 s, to put back a route someone deleted), makes the node's routing
table hold one route per other node: spec.podCIDR via its InternalIP. A
deleted node's route goes; a changed podCIDR or address is replaced. A node
without a podCIDR or an InternalIP gets no route yet, and a line saying why.
Only the agent's own routes are touched: it marks them with the route
protocol 117 (ip route show proto 117 lists them), and leaves any other
route alone. The mark is podlab's, not flannel's: flannel's host-gw adds
routes with no protocol and remembers its own from the leases. Until a Node of its own name exists (a typo in --node, or
its kubelet has not registered it yet) it changes no route and says so;
with --once it fails, as flanneld does not start without its Node.

The routes go into the node's network namespace (its "machine", which
podlab node join makes at <state-dir>/nodes/NAME/machine/net), through a
netlink socket opened in it; for a node that never joined, the agent works
in its own network namespace; --netns PATH names another.

It acts as the user network-agent (kubeconfigs/network-agent.kubeconfig,
which podlab init writes), whose ClusterRole network-agent may get, list
and watch nodes, and nothing else: a kubelet's own credentials would not
do, since the Node authorizer lets system:node:NAME read only its own
Node. Flannel's ServiceAccount has the same rights.

Look at the result with: ip -n NETNS route show proto 117 (for a netns
podlab made: nsenter --net=<state-dir>/nodes/NAME/machine/net ip route).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node", Usage: "the node this agent runs on (its own podCIDR is not routed)", Required: true},
			&cli.StringFlag{Name: "netns", Usage: "the network namespace to program, a bind-mounted path (default: the node's machine, <state-dir>/nodes/NAME/machine/net, if it joined; else the current one)"},
			&cli.BoolFlag{Name: "once", Usage: "reconcile the routes once, then exit"},
			kubeconfigFlag(pki.NetworkAgentUser),
		},
		Action: func(c *cli.Context) error {
			node := c.String("node")
			if err := pki.CheckNodeName(node); err != nil {
				return err
			}
			netns, err := agentNetns(c, node)
			if err != nil {
				return err
			}
			if err := netagent.CheckNetns(netns); err != nil {
				return err
			}
			client, err := componentClient(c, pki.NetworkAgentUser, !c.Bool("once"))
			if err != nil {
				return err
			}
			a, err := netagent.New(netagent.Config{Client: client, Node: node, Netns: netns, Log: c.App.Writer})
			if err != nil {
				return err
			}
			defer a.Close()
			where := netns
			if where == "" {
				where = "this process's network namespace (the node never joined: podlab node join " + node + ")"
			}
			if c.Bool("once") {
				fmt.Fprintf(c.App.Writer, "network-agent %s, once: routes in %s\n", node, where)
				res, err := a.Sync(c.Context)
				if res != nil {
					fmt.Fprintf(c.App.Writer, "%d route(s) to other nodes' pods, %d change(s)\n", len(res.Routes), len(res.Changes))
				}
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(c.App.Writer, "network-agent %s (as %s): routes in %s; watching the nodes. Ctrl-C stops it (the routes stay).\n", node, pki.NetworkAgentUser, where)
			return a.Run(ctx)
		},
	}
}

// agentNetns is the namespace the agent of node programs: --netns, else
// the node's machine if it joined, else "" (the current one).
func agentNetns(c *cli.Context, node string) (string, error) {
	if p := c.String("netns"); p != "" {
		return p, nil
	}
	dir, err := stateDir(c)
	if err != nil {
		return "", err
	}
	p := statedir.Layout{Dir: dir}.Node(node).MachineNetns()
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", nil
}
