package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// newNodeJoinCommand is `podlab node join`: a node becomes a machine of
// its own on the lab network.
func newNodeJoinCommand() *cli.Command {
	return &cli.Command{
		Name:      "join",
		Usage:     "make a node a machine of its own: a network namespace on the lab network, reaching the API server over it",
		ArgsUsage: "NAME",
		Description: `In a real cluster each node is a host on a network: its own network stack
and address, and the API server somewhere across the network. kubeadm join
makes a host a node; podlab node join makes a node a host:

  machine    a network namespace of its own, pinned by a bind mount at
             <state-dir>/nodes/NAME/machine/net, with lo up
  eth0       one end of a veth pair, inside it, with the node's own address
             on the lab network (the first free one; recorded in
             <state-dir>/nodes/NAME/machine/address.json)
  veth       the other end, pv<hex> in the host's namespace, on the lab bridge
  bridge     plab<hex>, the lab network's switch, with the gateway (.1): the
             host, where podlab apiserver listens too (made by the first
             join)
  rules      two iptables chains of the lab's own, plab<hex>-fwd (from
             FORWARD) and plab<hex>-in (from INPUT): what the bridge
             forwards between its nodes is accepted (the host's bridges
             pass through netfilter), what would be routed out of the lab
             or into it is dropped, and the host itself takes from the
             bridge only the lab network's own traffic: a route that root
             in a node adds to another lab's network leads nowhere

A machine has no default route: only the lab network and loopback. The
lab network is the one podlab init chose (--lab-cidr, PODLAB_LAB_CIDR, or a
private /24 derived from the state directory).

A node whose kubelet runs now, on the host, is refused: stop the kubelet,
join, then start it again (it then runs inside the machine).

The API server must be running: the join checks from inside the machine
that it answers at https://GATEWAY:PORT with a certificate that names the
gateway (podlab init puts it there), and fails, having removed all it made,
if not. Then the node gets its identity: system:node:NAME in the token
file, its client certificate with a kubeconfig that names the API server at
the gateway (kubeconfigs/NAME.kubeconfig), and its serving certificate with
its lab address in the SANs (pki/kubelet-NAME.crt).

Its kubelet (podlab kubelet --node NAME) then runs inside the machine:
it registers the Node with InternalIP = its lab address, and serves its
API there, where the API server sends kubectl logs and exec.

Join starts nothing: it prints the commands that make the node useful, to
run each in a shell of its own, as a machine's init system would start them:
its kubelet (podlab kubelet --node NAME), and its network agent (podlab
network-agent --node NAME), which routes to the other nodes' pod CIDRs.
Pods get IPs from their node's spec.podCIDR, which the controller-manager
sets only when run with --allocate-node-cidrs --cluster-cidr 10.244.0.0/16.

podlab node leave NAME drains the node and removes the machine.`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("podlab node join needs one name: podlab node join node-2")
			}
			name := c.Args().First()
			if err := machine.CheckNodeName(name); err != nil {
				return err
			}
			if err := pki.CheckNodeName(name); err != nil {
				return err
			}
			dir, err := stateDir(c)
			if err != nil {
				return err
			}
			return joinNode(c.Context, c.App.Writer, statedir.Layout{Dir: dir}, name, func(ctx context.Context) error {
				s, err := openAPI(c, false)
				if err != nil {
					return err
				}
				defer s.Close()
				return checkNoKubeletRuns(ctx, s.client, name)
			})
		},
	}
}

// joinNode makes node a machine (machine.Join), checks the API server
// answers from inside it, and gives the node its identity; on a failure it
// removes the machine again. preflight runs for a node that has not
// joined, once the API server is known to serve, before anything is made.
func joinNode(ctx context.Context, w io.Writer, l statedir.Layout, node string, preflight func(context.Context) error) (err error) {
	lab, err := machine.LoadLab(l)
	if err != nil {
		return err
	}
	claim, serving, err := rest.Serving(l.APIServerLock())
	if err != nil {
		return err
	}
	if !serving || claim.URL == "" {
		return fmt.Errorf("joining node %s: no podlab apiserver serves %s: a node's kubelet needs one; start it (podlab apiserver &), then join", node, l.Dir)
	}
	u, err := url.Parse(claim.URL)
	if err != nil {
		return fmt.Errorf("the API server's URL %q: %w", claim.URL, err)
	}
	if _, err := machine.Load(l.Node(node)); errors.Is(err, machine.ErrNotJoined) {
		// (a node that joined is refused by machine.Join, saying so)
		if err := preflight(ctx); err != nil {
			return err
		}
	}
	j, err := machine.Join(ctx, l, lab, node)
	if err != nil {
		return fmt.Errorf("joining node %s: %w", node, err)
	}
	defer func() {
		if err != nil {
			if _, lerr := machine.Leave(context.WithoutCancel(ctx), l, node, time.Second); lerr != nil {
				err = errors.Join(err, fmt.Errorf("removing the machine again: %w", lerr))
			}
		}
	}()
	m := j.Machine
	apiAddr := net.JoinHostPort(lab.Gateway.String(), u.Port())
	if err := checkAPIServerFrom(ctx, l, m, apiAddr); err != nil {
		return err
	}
	if _, err := apiserver.AddNodeUser(l.Dir, node); err != nil {
		return fmt.Errorf("adding the kubelet's identity: %w", err)
	}
	pr, err := pki.IssueNode(pki.Options{Layout: l, Server: claim.URL}, joinedNode(m, lab))
	if err != nil {
		return fmt.Errorf("issuing the kubelet's certificates: %w", err)
	}
	made := func(b bool) string {
		if b {
			return "made"
		}
		return "kept"
	}
	fmt.Fprintf(w, "node %s is a machine of its own:\n", node)
	fmt.Fprintf(w, "  machine  network namespace %s (a bind mount pins it), lo up, no default route\n", m.Netns)
	fmt.Fprintf(w, "  eth0     %s inside it: its address on the lab network %s\n", m.Address, lab.CIDR)
	fmt.Fprintf(w, "  veth     %s in the host's namespace, eth0's peer, on the bridge\n", m.HostVeth)
	fmt.Fprintf(w, "  bridge   %s (%s), gateway %s\n", lab.Bridge, made(j.Lab.Bridge), lab.Gateway)
	fmt.Fprintf(w, "  rules    %s (FORWARD) and %s (INPUT) accept only the lab network's own traffic; jumps %s: %s\n", machine.ForwardChain(lab), machine.InputChain(lab), made(j.Lab.Rule), machine.RuleSpec(lab))
	fmt.Fprintf(w, "The API server answers at https://%s from inside it (TLS verified against ca.crt).\n", apiAddr)
	for _, it := range append(pr.Certificates, pr.Kubeconfigs...) {
		fmt.Fprintf(w, "%s %s: %s%s\n", it.Action, it.Files[0], it.Purpose, because(it))
	}
	fmt.Fprintf(w, "Its kubelet acts as system:node:%s and runs inside the machine, InternalIP %s.\n", node, m.IP())
	nextSteps(w, node)
	return nil
}

// nextSteps tells the learner what a joined node still needs, and which
// process gives it: podlab starts none of them itself.
func nextSteps(w io.Writer, node string) {
	fmt.Fprintf(w, `Next, each in a shell of its own:
  podlab kubelet --node %[1]s
      the node's kubelet, inside the machine: it registers Node %[1]s and runs its pods
  podlab network-agent --node %[1]s
      routes in the machine to the other nodes' pod CIDRs (flannel host-gw): without it,
      %[1]s's pods reach only the pods of %[1]s
Pods get IPs only once Node %[1]s has a spec.podCIDR, which the controller-manager's node IPAM
sets when it runs as (else they have loopback only):
  podlab controller-manager --allocate-node-cidrs --cluster-cidr 10.244.0.0/16
`, node)
}

// checkAPIServerFrom connects to the API server at addr from inside m and
// verifies its certificate against the cluster CA, for the gateway's
// address: what the kubelet will do.
func checkAPIServerFrom(ctx context.Context, l statedir.Layout, m machine.Machine, addr string) error {
	cas, err := pki.ClientCAs(l)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := machine.Dial(dctx, m.Netns, addr)
	if err != nil {
		return fmt.Errorf("the API server does not answer at %s from inside node %s's machine: %w (restart podlab apiserver: one started before podlab init chose the lab network does not listen there)", addr, m.Node, err)
	}
	defer conn.Close()
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(conn, &tls.Config{RootCAs: cas, ServerName: host, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(dctx); err != nil {
		return fmt.Errorf("the API server at %s, from inside node %s's machine: %w (its certificate must name the lab gateway: run podlab init again, then restart podlab apiserver)", addr, m.Node, err)
	}
	return nil
}

// checkNoKubeletRuns refuses to join a node whose kubelet runs now outside
// a machine (in the host's network namespace), as kubeadm join's preflight
// refuses a host whose kubelet port is in use: the join would change that
// kubelet's certificates and kubeconfig under it, and a second kubelet of
// the node would start in the machine. It dials the kubelet API at the
// addresses and port the Node publishes; a stopped kubelet does not
// answer. A Node not registered yet, or one that publishes no port, passes.
func checkNoKubeletRuns(ctx context.Context, client apiserver.Interface, node string) error {
	o, err := client.Get(ctx, "nodes", "", node)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("joining node %s: reading its Node: %w", node, err)
	}
	n, ok := o.(*corev1.Node)
	if !ok || n.Status.DaemonEndpoints.KubeletEndpoint.Port <= 0 {
		return nil
	}
	port := strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port))
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		addr := net.JoinHostPort(a.Address, port)
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		conn.Close()
		return fmt.Errorf("joining node %s: its kubelet runs now, outside a machine (its API answers at %s, as Node %s publishes): stop it (Ctrl-C), join, then start it again: podlab kubelet --node %s then runs inside the machine", node, addr, node, node)
	}
	return nil
}
