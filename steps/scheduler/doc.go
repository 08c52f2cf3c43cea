// Package scheduler is kube-scheduler: steps 4 and 5 of the chain. It finds
// pods the API server has stored with no node, decides which node each
// goes to, and writes that decision back through the API server.
//
// # Watching (step 4)
//
// The scheduler is a client of the API server like any other: it lists and
// watches pods and nodes (apiserver.Informer) and keeps a cache: the nodes,
// and what the pods already bound to each request (pods that have finished
// count for nothing). A pod with spec.nodeName empty and
// spec.schedulerName default-scheduler (the API server's default) goes into
// the scheduling queue; pods being deleted, pods that name another
// scheduler and pods with scheduling gates do not.
//
// # The scheduling cycle
//
// The queue hands out one pod at a time, highest spec.priority first, then
// oldest. For each, on a snapshot of the cache:
//
//  1. Filter. Every filter plugin runs on every node, in the profile's
//     order, and a node's first failing filter rules it out (the others do
//     not run there). podlab has kube-scheduler's NodeUnschedulable
//     (cordoned nodes), NodeName, TaintToleration (NoSchedule and NoExecute
//     taints the pod does not tolerate), NodeAffinity (nodeSelector and
//     required node affinity), NodePorts (a hostPort another pod on the
//     node holds) and NodeResourcesFit (the pod's requests
//     against the node's allocatable resources minus what its pods
//     request, and the pod count). Each gives kube-scheduler's reason
//     word for word: "Insufficient cpu", "node(s) had untolerated taint
//     {gpu: true}".
//  2. Score. If more than one node passed, each score plugin rates each of
//     them: NodeResourcesFit (LeastAllocated: the emptier, the better),
//     NodeResourcesBalancedAllocation (cpu and memory used in the same
//     proportion), ImageLocality (the pod's images already there),
//     TaintToleration (fewer PreferNoSchedule taints not tolerated) and
//     PodTopologySpread (fewer pods of the same ReplicaSet on the node and
//     in its zone: kube-scheduler's system default spreading, which needs
//     the ReplicaSets, so the scheduler watches them too).
//  3. Normalize. A plugin whose raw scores are not 0-100 rescales them over
//     all the feasible nodes (TaintToleration: 100 for the fewest taints,
//     0 for the most).
//  4. Weigh. Each score is multiplied by its plugin's weight in the profile
//     (kube-scheduler's defaults: TaintToleration 3, PodTopologySpread 2,
//     the others 1) and the
//     products are added up into the node's total.
//  5. Select. The node with the highest total wins; between equal totals
//     the choice is random (reservoir sampling, as selectHost does), so
//     identical nodes share the pods.
//
// Schedule (and Profile.Schedule) is that cycle as a pure function, and
// Result.WriteTable prints its table: nodes by plugins, with the total.
//
// # Binding (step 5)
//
// The scheduler writes its decision with the pods/binding subresource: a
// Binding object naming the pod (and its uid) and the target node. The API
// server sets spec.nodeName and the condition PodScheduled=True; the
// scheduler records the event "Successfully assigned default/web to
// node-1" (reason Scheduled). As kube-scheduler does, it first "assumes"
// the pod on its node in its cache, then binds in a goroutine of its own
// while the next cycle runs; a failed binding is forgotten and the pod
// tried again. A binding that finds the pod already bound (or gone) is not
// an error: someone was first.
//
// # When no node fits
//
// The pod gets the condition PodScheduled=False, reason Unschedulable, with
// kube-scheduler's message, and a FailedScheduling warning event:
//
//	0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {gpu: true}.
//
// It then waits in the queue, not in a loop: it is tried again when a
// cluster event could make it fit (a node added, or changed in its
// allocatable resources, labels, taints, conditions or schedulability; a
// pod leaving a node), but never before its back-off runs out (1s after
// the first attempt, doubling up to 10s), and after 5 minutes anyway.
//
// # Where podlab differs from kube-scheduler
//
//   - Nodes whose Ready condition is not True: Kubernetes' node lifecycle
//     controller taints them (node.kubernetes.io/not-ready or unreachable,
//     NoSchedule) and the scheduler only sees the taint. podlab runs no such
//     controller, so the scheduler assumes those taints itself
//     (ImpliedTaints) and says so under the table. A node added with
//     `podlab node add` has Ready Unknown until its kubelet runs.
//   - The message stops after its first sentence. kube-scheduler appends
//     what its PostFilter plugins said ("preemption: 0/3 nodes are
//     available: 3 Preemption is not helpful for scheduling."); podlab does
//     not preempt, and does not pretend to.
//   - Only the plugins above: no volumes, pod topology spread,
//     inter-pod affinity, preferred node affinity scores or dynamic
//     resources. Every node is filtered (kube-scheduler stops after enough
//     feasible nodes in clusters over 100 nodes).
//   - The queue's retry rules are simplified: any of the events above
//     moves every unschedulable pod (kube-scheduler asks each plugin that
//     rejected the pod whether the event could help it).
package scheduler
