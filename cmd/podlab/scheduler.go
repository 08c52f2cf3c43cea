package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/scheduler"
)

var schedulerCommand = &cli.Command{
	Name:      "scheduler",
	Usage:     "run kube-scheduler: give each pod with no node a node, and bind it there (steps 4 and 5)",
	ArgsUsage: "[--once]",
	Description: `After "podlab run web", the API server has stored a pod with no node
(spec.nodeName empty): nothing runs it yet. kube-scheduler is the component
that fixes that (step 4): it watches the API server, like every other
component, for pods with no node and for the nodes, and keeps a cache of
what the pods already on each node request.

For each pending pod it runs a scheduling cycle, printed here as a table:

  filter     every node goes through the filter plugins in order, and
             drops out at its first failure: NodeUnschedulable (cordoned),
             NodeName, TaintToleration (a NoSchedule taint the pod does not
             tolerate), NodeAffinity (nodeSelector, required affinity),
             NodeResourcesFit (requests against allocatable minus what the
             node's pods request; the pod count)
  score      the nodes left get 0-100 from each score plugin: LeastAllocated
             (the emptier the better), BalancedAllocation (cpu and memory
             used alike), ImageLocality (images already there),
             TaintToleration (fewer PreferNoSchedule taints),
             PodTopologySpread (fewer pods of the same ReplicaSet on the
             node and in its zone: kube's default spreading, hostname
             maxSkew 3, zone maxSkew 5; "skip" for a pod nothing selects)
  weigh      each score times its plugin's weight (TaintToleration 3,
             PodTopologySpread 2, the others 1), added up into TOTAL
  select     the highest TOTAL wins; equal totals are drawn at random

Then it writes the decision back (step 5): a Binding (the pods/binding
subresource) naming the node. The API server stores spec.nodeName and the
condition PodScheduled=True in etcd; the scheduler records the event
"Successfully assigned default/web to node-1". The kubelet of that node
will see the pod in its own watch (step 6).

When no node fits, the pod gets PodScheduled=False, reason Unschedulable,
and a FailedScheduling event, with kube-scheduler's message:
  0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {gpu: true}.
It is tried again when a node is added or changes, after a back-off of 1s
doubling to 10s; not in a loop.

A node whose Ready condition is not True (a node from "podlab node add"
before its kubelet runs) counts as tainted node.kubernetes.io/unreachable
(or not-ready):NoSchedule: in Kubernetes the node lifecycle controller adds
that taint; podlab has no such controller, so the scheduler assumes it,
and says so under the table.

The scheduler acts as the user system:kube-scheduler, whose RBAC role lets
it read pods and nodes, create pods/binding, update pods/status and write
events, and nothing else. It is a client of "podlab apiserver" (lesson 02),
over HTTPS with the certificate of its kubeconfig (--kubeconfig, default
<state-dir>/kubeconfigs/kube-scheduler.kubeconfig), and never opens the
store. --once fails at once when no API server answers; running, it waits
for it with client-go's back-off, saying so once, and resumes its watches
when the API server comes back. It runs until Ctrl-C; --once schedules every pod
pending now, once, and exits (0 even if some stay unschedulable).

Its requests go out at most 50 a second after a burst of 100
(--kube-api-qps, --kube-api-burst: kube-scheduler's defaults). client-go's
own limit, 5 a second, would hold it back: each pod is a binding and an
event, so 50 pods would take 20 s.

Look at the result with: podlab get pods -o wide, podlab describe pod web,
podlab get events.`,
	Flags: append([]cli.Flag{
		&cli.BoolFlag{Name: "once", Usage: "schedule every pod pending now, once each, then exit"},
		kubeconfigFlag("kube-scheduler"),
	}, kubeAPIRateFlags(50, 100)...),
	Action: func(c *cli.Context) error {
		client, err := componentClient(c, "kube-scheduler", !c.Bool("once"))
		if err != nil {
			return err
		}
		w := c.App.Writer
		sched := scheduler.New(client,
			scheduler.WithReport(func(d scheduler.Decision) { printDecision(w, d, c.Bool("once")) }),
			scheduler.WithWarnings(func(err error) { fmt.Fprintf(w, "warning: %v\n", err) }))
		if c.Bool("once") {
			sum, err := sched.Once(c.Context)
			if sum == (scheduler.Summary{}) && err == nil {
				fmt.Fprintln(w, "no pod is waiting for a node")
			}
			fmt.Fprintf(w, "scheduled once: %d bound, %d unschedulable, %d bound by someone else first, %d failed\n",
				sum.Bound, sum.Unschedulable, sum.Conflicts, sum.Failed)
			return err
		}
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		fmt.Fprintln(w, "kube-scheduler (as system:kube-scheduler): watching pods with no node, the nodes, and the ReplicaSets whose pods it spreads. Ctrl-C stops it.")
		return sched.Run(ctx)
	},
}

// printDecision prints one pod's cycle: the table, then what became of it.
func printDecision(w io.Writer, d scheduler.Decision, once bool) {
	key := d.Pod.Namespace + "/" + d.Pod.Name
	req := d.Result.Requests.String()
	if scoring := d.Result.ScoringRequests.String(); scoring != req {
		req += " (the scores count " + scoring + ": 100m cpu and 200Mi memory for a container that states none)"
	}
	fmt.Fprintf(w, "\npod %s (attempt %d): requests %s\n", key, d.Attempt, req)
	if len(d.Result.Nodes) > 0 {
		d.Result.WriteTable(w)
	}
	r := d.Result
	switch {
	case d.Bound():
		how := fmt.Sprintf("the highest TOTAL, %d", totalOf(r))
		switch {
		case !r.Scored:
			how = "the only node that passed every filter, so nothing to score"
		case r.Ties > 1:
			how += fmt.Sprintf(", shared by %d nodes: drawn at random", r.Ties)
		}
		fmt.Fprintf(w, "bound %s to %s (%s)\n", key, r.Node, how)
		fmt.Fprintf(w, "  the API server stored spec.nodeName=%s and PodScheduled=True; event Scheduled: Successfully assigned %s to %s\n", r.Node, key, r.Node)
	case d.Conflict:
		fmt.Fprintf(w, "%s was not bound: %v: someone else was first, nothing to do\n", key, d.Err)
	case d.Unschedulable():
		fmt.Fprintf(w, "%s is unschedulable: %v\n", key, d.Err)
		fmt.Fprintf(w, "  condition PodScheduled=False (reason Unschedulable) and a FailedScheduling event recorded\n")
		if once {
			fmt.Fprintf(w, "  --once does not try again: run podlab scheduler to wait for a node that fits\n")
		} else {
			fmt.Fprintf(w, "  tried again when a node is added or changes (or a pod leaves one), not before %v\n", d.Retry)
		}
	default:
		fmt.Fprintf(w, "%s: %v\n", key, d.Err)
		if !once {
			fmt.Fprintf(w, "  tried again in %v\n", d.Retry)
		}
	}
}

// totalOf is the chosen node's TOTAL.
func totalOf(r scheduler.Result) int64 {
	for _, n := range r.Nodes {
		if n.Name == r.Node {
			return n.Total
		}
	}
	return 0
}
