package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/controllers"
)

var controllerManagerCommand = &cli.Command{
	Name:      "controller-manager",
	Usage:     "run kube-controller-manager: Deployments make ReplicaSets, ReplicaSets make pods (steps 4 and 5 of a Deployment); silent nodes are marked Unknown",
	ArgsUsage: "[--once] [--verbosity N] [--node-monitor-grace-period 50s]",
	Description: `"podlab create deployment web --image nginx:1.25 --replicas 3" only stores a
Deployment: the API server says "created", and no pod exists yet. Steps 4
and 5 of the Deployment chain belong to kube-controller-manager, which
watches the API server and writes the results back to it.

It runs controllers, each the same loop (the controller pattern):
  watch     an informer lists nodes, deployments, replicasets and pods once, then
            watches them; every change puts a key (default/web) in a queue
  compare   a worker reads the object from the informer's copy: what its
            spec asks for against what exists
  act       it closes the gap through the API server, as the user
            system:kube-controller-manager (RBAC checks every write),
            over HTTPS with the certificate of its kubeconfig
            (--kubeconfig, default <state-dir>/kubeconfigs/
            kube-controller-manager.kubeconfig): it never opens the store
  repeat    a write that loses a race (409 Conflict) is retried later with
            the fresh object; a missed event does no harm, since each sync
            looks at the whole state

The Deployment controller makes a ReplicaSet named web-<pod-template-hash>:
the hash of the pod template (FNV-1a over its go-spew dump, as Kubernetes
computes it, so the name matches a real cluster's), also put as the label
pod-template-hash on the ReplicaSet, its selector and its pods. The
ReplicaSet carries an owner reference to the Deployment (controller: true)
and the annotations deployment.kubernetes.io/revision, desired-replicas and
max-replicas. Changing the template makes a new ReplicaSet: a rolling update
grows it and shrinks the old one step by step, within maxSurge extra pods
and maxUnavailable missing Ready pods (Recreate: all old pods go first).

The ReplicaSet controller creates the pods from the template (names
web-<hash>-<5 random characters>, made by the API server from
generateName), and deletes the surplus, cheapest first: unscheduled,
pending, not Ready, newest. The garbage collector deletes what has lost
its owner: delete the Deployment, and its ReplicaSets go, then their pods.

With --allocate-node-cidrs it also runs the node IPAM controller (kube's
range allocator): every Node without spec.podCIDR gets the next free
block of --cluster-cidr (default 10.244.0.0/16), of --node-cidr-mask-size
bits (default 24: 10.244.0.0/24, 10.244.1.0/24, ...), in spec.podCIDR and
spec.podCIDRs. Each node's pods take their addresses from its block (the
CNI plugin's host-local IPAM reads it), so no two nodes hand out the same
pod IP. The allocator keeps no state of its own: on start it reads the
blocks the nodes already have, so a restart gives no block twice. When the
cluster CIDR is full, the node gets the event CIDRNotAvailable and the
error is logged and retried.

The node lifecycle controller (not with --once: it acts on time, not on
events) watches each node's signs of life: the Lease its kubelet renews
every 10 seconds in kube-node-lease, and the Ready condition's
lastHeartbeatTime. A node silent for longer than --node-monitor-grace-period
(50s, kube's default since v1.32; the lab may set it short) gets Ready,
MemoryPressure, DiskPressure and PIDPressure Unknown ("Kubelet stopped
posting node status."), the taint node.kubernetes.io/unreachable:NoExecute,
and its pods Ready=False. When its kubelet comes back, the taint goes. It
looks every --node-monitor-period (5s); a node that never posted a status
gets --node-startup-grace-period (60s).

The taint-eviction controller empties nodes tainted NoExecute
("kubectl taint node node-2 example.com/maintenance=:NoExecute", or
node.kubernetes.io/unreachable, which the node lifecycle controller sets on a
silent node): a pod there that does not tolerate the taint is deleted at
once, one that tolerates it for tolerationSeconds when that time has passed
since the taint's timeAdded (every pod tolerates not-ready and unreachable
for 300 s, from the API server's DefaultTolerationSeconds admission), one
that tolerates it forever stays. Each deletion is the event
TaintManagerEviction "Marking for deletion Pod default/web-...". Its
ReplicaSet then makes a new pod, which the scheduler keeps off the tainted
node. (--once deletes only what is due; a deletion that waits needs the
controller-manager running.)

The log is klog's, the format of every Kubernetes component, as
kube-controller-manager -v=4 prints it:
  I0528 08:01:29.555150   12345 deployment_controller.go:203] "Adding deployment" logger="deployment-controller" deployment="default/web"
  severity, month+day, time, process id, then the Kubernetes source file and
  line that logs this message (kube-controller-manager v1.37.2's; podlab
  reproduces it), the message, and key=value pairs. --verbosity N prints the
  messages of level N or less, as kube-controller-manager's -v: 0 the
  controllers starting and their caches synced, 2 the decisions (too few or
  too many replicas, deleting an orphan), 3 the events, 4 every object seen
  and every sync.

--once lists everything, lets each controller handle it, and repeats while
something changed (what the Deployment controller writes is work for the
ReplicaSet controller), then exits; it fails at once when no API server
answers ("podlab apiserver &", lesson 02). Without it, it runs until
Ctrl-C, waiting for the API server with client-go's back-off, saying so
once, whenever it does not answer.
Its requests go out at most 20 a second after a burst of 30
(--kube-api-qps, --kube-api-burst: kube-controller-manager's defaults;
client-go's own, 5 a second, would make a Deployment of 50 pods take 20 s).

The pods it creates wait for a node: run "podlab scheduler" next.`,
	Flags: append([]cli.Flag{
		&cli.BoolFlag{Name: "once", Usage: "sync everything until nothing changes, then exit"},
		&cli.IntFlag{Name: "verbosity", Value: 4, Usage: "klog verbosity, kube-controller-manager's --v (0: starts and cache syncs, 2: also the decisions, 3: also the events, 4: also every object seen and every sync)"},
		&cli.BoolFlag{Name: "allocate-node-cidrs", Usage: "run the node IPAM controller: give each node a spec.podCIDR from --cluster-cidr"},
		&cli.StringFlag{Name: "cluster-cidr", Value: controllers.DefaultClusterCIDR, Usage: "the pod network, cut into one block per node (with --allocate-node-cidrs)"},
		&cli.IntFlag{Name: "node-cidr-mask-size", Value: controllers.DefaultNodeCIDRMaskSize, Usage: "the prefix length of each node's block (with --allocate-node-cidrs)"},
		&cli.DurationFlag{Name: "node-monitor-grace-period", Value: controllers.DefaultNodeMonitorGracePeriod, Usage: "how long a node may be silent (no Lease renewal, no status) before it is marked Unknown and tainted"},
		&cli.DurationFlag{Name: "node-monitor-period", Value: controllers.DefaultNodeMonitorPeriod, Usage: "how often the node lifecycle controller looks at the nodes"},
		&cli.DurationFlag{Name: "node-startup-grace-period", Value: controllers.DefaultNodeStartupGracePeriod, Usage: "the grace period of a node that never posted a status"},
		kubeconfigFlag("kube-controller-manager"),
	}, kubeAPIRateFlags(20, 30)...),
	Action: func(c *cli.Context) error {
		nodes := controllers.NodeLifecycleConfig{MonitorGracePeriod: c.Duration("node-monitor-grace-period"),
			MonitorPeriod: c.Duration("node-monitor-period"), StartupGracePeriod: c.Duration("node-startup-grace-period")}
		if err := nodes.Validate(); err != nil {
			return err
		}
		opts := []controllers.Option{controllers.WithNodeLifecycle(nodes)}
		ipam := c.Bool("allocate-node-cidrs")
		if ipam {
			cfg, err := controllers.ParseNodeIPAM(c.String("cluster-cidr"), c.Int("node-cidr-mask-size"))
			if err != nil {
				return err
			}
			opts = append(opts, controllers.WithNodeIPAM(cfg))
		} else if c.IsSet("cluster-cidr") || c.IsSet("node-cidr-mask-size") {
			return fmt.Errorf("--cluster-cidr and --node-cidr-mask-size are for the node IPAM controller: add --allocate-node-cidrs")
		}
		client, err := componentClient(c, "kube-controller-manager", !c.Bool("once"))
		if err != nil {
			return err
		}
		w := c.App.Writer
		m := controllers.New(client, klog.New(w, klog.WithVerbosity(c.Int("verbosity"))), opts...)
		if c.Bool("once") {
			rep, err := m.Once(c.Context)
			printControllerReport(w, rep)
			return err
		}
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		watching := "deployments, replicasets and pods, and the nodes' health (grace period " + nodes.MonitorGracePeriod.String() + ")"
		if ipam {
			watching += ", and the nodes' pod CIDRs"
		}
		fmt.Fprintf(w, "kube-controller-manager (as system:kube-controller-manager): watching %s. Ctrl-C stops it.\n", watching)
		return m.Run(ctx)
	},
}

// printControllerReport sums up a --once run in Kubernetes terms.
func printControllerReport(w io.Writer, rep *controllers.Report) {
	if rep == nil {
		return
	}
	state := "settled: nothing left to do"
	if !rep.Settled {
		state = "not settled"
	}
	fmt.Fprintf(w, "\ncontroller-manager --once: %s, %s through the API server, %s\n", count(rep.Passes, "pass"), count(rep.Writes, "write"), state)
	list := func(what string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(w, "  %-20s %s\n", what, strings.Join(items, ", "))
		}
	}
	list("replicasets created", rep.ReplicaSetsCreated)
	for _, e := range rep.ScalingEvents {
		fmt.Fprintf(w, "  %-20s %s\n", "ScalingReplicaSet", e)
	}
	list("pods created", rep.PodsCreated)
	list("pods deleted", rep.PodsDeleted)
	list("garbage collected", rep.Collected)
	list("node CIDRs", rep.NodeCIDRs)
	list("pods evicted", rep.PodsEvicted)
	if len(rep.PodsCreated) > 0 {
		fmt.Fprintln(w, "the new pods have no node yet: podlab scheduler --once; see them with podlab get replicasets, podlab get pods, podlab describe deployment")
	}
}
