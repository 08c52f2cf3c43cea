package controllers

// The node lifecycle controller (kubernetes/pkg/controller/nodelifecycle,
// v1.37): it watches each node's two signs of life, the Lease its kubelet
// renews every 10 seconds in kube-node-lease and the Ready condition's
// lastHeartbeatTime, and when neither has moved for the node monitor grace
// period it speaks for the silent kubelet:
//
//   - the node's Ready, MemoryPressure, DiskPressure and PIDPressure
//     conditions become Unknown (NodeStatusUnknown, "Kubelet stopped posting
//     node status."): nobody knows;
//   - the node is tainted node.kubernetes.io/unreachable:NoExecute (a node
//     whose kubelet says Ready=False gets node.kubernetes.io/not-ready
//     instead), with the time it was added: the taint-eviction controller
//     deletes the pods that do not tolerate it, once their toleration runs
//     out (DefaultTolerationSeconds gives every pod 300 s);
//   - the pods bound to it get Ready=False, so that Services stop sending
//     them traffic (MarkPodsNotReady).
//
// When the kubelet comes back, renews its Lease and posts Ready=True, the
// taints are removed. The controller compares what it observed with its own
// clock: "renewTime moved since I last looked" resets the node's probe
// time to now, so clocks that differ between machines do not matter.
//
// Simplified from kube: no zones and no disruption modes (kube stops
// tainting when a whole zone goes dark, assuming the network failed, not
// the nodes), no rate-limited taint queue (kube taints at most 0.1 nodes a
// second per zone), and the informers are this controller's own.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// The node lifecycle controller's defaults, kube-controller-manager v1.37's
// (--node-monitor-grace-period was 40s until v1.32).
const (
	DefaultNodeMonitorGracePeriod = 50 * time.Second // --node-monitor-grace-period
	DefaultNodeMonitorPeriod      = 5 * time.Second  // --node-monitor-period
	DefaultNodeStartupGracePeriod = 60 * time.Second // --node-startup-grace-period
)

const (
	nodeLifecycleControllerName = "node-lifecycle-controller"
	// nodeControllerComponent is the source.component of its Events.
	nodeControllerComponent = "node-controller"
	// nodeHealthUpdateRetry is how often a failed status update is retried
	// in one pass, on a fresh copy of the node.
	nodeHealthUpdateRetry = 5
)

// ErrNodeMonitorPeriod is returned for a grace or monitor period that is
// not positive: a controller that cannot wait cannot tell silence from life.
var ErrNodeMonitorPeriod = errors.New("node monitor periods must be more than 0")

// The taints the controller puts on nodes, mutually exclusive as the
// Ready condition's values are.
var (
	unreachableTaint = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	notReadyTaint    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
)

// NodeLifecycleConfig is the node lifecycle controller's part of
// kube-controller-manager's flags.
type NodeLifecycleConfig struct {
	// MonitorGracePeriod: how long a running node may be silent (no Lease
	// renewal, no status) before it is marked Unknown.
	MonitorGracePeriod time.Duration
	// MonitorPeriod: how often the nodes are looked at.
	MonitorPeriod time.Duration
	// StartupGracePeriod: the same for a node that never posted a status.
	StartupGracePeriod time.Duration
}

// DefaultNodeLifecycleConfig is kube-controller-manager's defaults.
func DefaultNodeLifecycleConfig() NodeLifecycleConfig {
	return NodeLifecycleConfig{MonitorGracePeriod: DefaultNodeMonitorGracePeriod,
		MonitorPeriod: DefaultNodeMonitorPeriod, StartupGracePeriod: DefaultNodeStartupGracePeriod}
}

// Validate refuses periods that are not positive, naming the flag.
func (c NodeLifecycleConfig) Validate() error {
	for _, p := range []struct {
		flag string
		d    time.Duration
		def  time.Duration
	}{
		{"--node-monitor-grace-period", c.MonitorGracePeriod, DefaultNodeMonitorGracePeriod},
		{"--node-monitor-period", c.MonitorPeriod, DefaultNodeMonitorPeriod},
		{"--node-startup-grace-period", c.StartupGracePeriod, DefaultNodeStartupGracePeriod},
	} {
		if p.d <= 0 {
			return fmt.Errorf("%s %s: %w (the default is %s; a kubelet renews its Lease every 10s, so give it a few renewals)", p.flag, p.d, ErrNodeMonitorPeriod, p.def)
		}
	}
	return nil
}

// nodeHealth is what the controller last observed of a node, and when (its
// own clock).
type nodeHealth struct {
	ready          *corev1.NodeCondition // the Ready condition last seen
	probeTimestamp time.Time             // when a sign of life was last seen
	lease          *coordinationv1.Lease // the Lease last seen
}

// NodeLifecycleController marks silent nodes Unknown and taints them; see
// the top of this file.
type NodeLifecycleController struct {
	client apiserver.Interface
	cfg    NodeLifecycleConfig
	w      *klog.Writer
	log    klog.Logger
	rec    *apiserver.Recorder
	now    func() time.Time

	nodes, leases, pods *apiserver.Informer

	// Only the monitoring goroutine touches these.
	health map[string]*nodeHealth
	known  map[string]bool
	retry  map[string]bool // nodes whose pods still need MarkPodsNotReady
}

// NewNodeLifecycleController returns the controller acting through client
// (the controller-manager's), logging to log, with now as its clock.
func NewNodeLifecycleController(client apiserver.Interface, log *klog.Writer, cfg NodeLifecycleConfig, now func() time.Time) (*NodeLifecycleController, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &NodeLifecycleController{
		client: client, cfg: cfg, w: log, log: log.Logger(nodeLifecycleControllerName), now: now,
		rec:    apiserver.NewRecorder(client, nodeControllerComponent, ""),
		nodes:  apiserver.NewInformer(client, "nodes", "", apiserver.ListOptions{}),
		leases: apiserver.NewInformer(client, "leases", corev1.NamespaceNodeLease, apiserver.ListOptions{}),
		pods:   apiserver.NewInformer(client, "pods", "", apiserver.ListOptions{}),
		health: map[string]*nodeHealth{}, known: map[string]bool{}, retry: map[string]bool{},
	}, nil
}

// Sync lists nodes, leases and pods into the controller's caches, as Run's
// informers do before the first pass (tests drive passes with Monitor).
func (nc *NodeLifecycleController) Sync(ctx context.Context) error {
	for _, inf := range nc.informers() {
		if err := inf.Sync(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func (nc *NodeLifecycleController) informers() []*apiserver.Informer {
	return []*apiserver.Informer{nc.leases, nc.nodes, nc.pods}
}

// Run watches nodes, leases and pods and looks at every node each
// MonitorPeriod until ctx ends.
func (nc *NodeLifecycleController) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	var wg sync.WaitGroup
	for _, inf := range nc.informers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := inf.Run(ctx, nil); err != nil {
				errc <- err
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	nc.log.Info(at("node_lifecycle_controller.go", 459), "Starting node controller")
	defer nc.log.Info(at("node_lifecycle_controller.go", 464), "Shutting down node controller")
	tick := time.NewTicker(nc.cfg.MonitorPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case <-tick.C:
		}
		synced := true
		for _, inf := range nc.informers() {
			synced = synced && inf.ResourceVersion() != ""
		}
		if !synced {
			continue
		}
		if err := nc.Monitor(ctx); err != nil {
			nc.log.Error(at("node_lifecycle_controller.go", 508), err, "Error monitoring node health")
		}
	}
}

// Monitor is one pass of monitorNodeHealth over every node in the cache.
func (nc *NodeLifecycleController) Monitor(ctx context.Context) error {
	seen := map[string]bool{}
	for _, o := range nc.nodes.List() {
		if err := ctx.Err(); err != nil {
			return err
		}
		node := o.(*corev1.Node).DeepCopy()
		seen[node.Name] = true
		if !nc.known[node.Name] {
			nc.log.V(1).Info(at("node_lifecycle_controller.go", 696), "Controller observed a new Node", "node", klog.KRef("", node.Name))
			nc.event(ctx, node, corev1.EventTypeNormal, "RegisteredNode", fmt.Sprintf("Registered Node %v in Controller", node.Name))
			nc.known[node.Name] = true
			if _, err := nc.swapTaints(ctx, node.Name, nil, unreachableTaint, notReadyTaint); err != nil {
				nc.log.Error(at("node_lifecycle_controller.go", 1314), err, "Failed to remove unreachable taint from node", "node", klog.KObj(node))
			}
		}
		nc.monitorNode(ctx, node)
	}
	for name := range nc.known {
		if !seen[name] {
			nc.log.V(1).Info(at("node_lifecycle_controller.go", 704), "Controller observed a Node deletion", "node", klog.KRef("", name))
			delete(nc.known, name)
			delete(nc.health, name)
			delete(nc.retry, name)
		}
	}
	return nil
}

// monitorNode updates one node's health, taints and pods.
func (nc *NodeLifecycleController) monitorNode(ctx context.Context, node *corev1.Node) {
	var observed corev1.NodeCondition
	var current *corev1.NodeCondition
	for try := 0; ; try++ {
		var err error
		observed, current, err = nc.tryUpdateNodeHealth(ctx, node)
		if err == nil {
			break
		}
		if try == nodeHealthUpdateRetry {
			nc.log.Error(at("node_lifecycle_controller.go", 741), err, "Update health of Node from Controller error, Skipping - no pods will be evicted", "node", klog.KObj(node))
			return
		}
		obj, getErr := nc.client.Get(ctx, "nodes", "", node.Name)
		if getErr != nil {
			nc.log.Error(at("node_lifecycle_controller.go", 736), nil, "Failed while getting a Node to retry updating node health. Probably Node was deleted", "node", klog.KRef("", node.Name))
			return
		}
		node = obj.(*corev1.Node)
	}
	if current == nil {
		return
	}
	nc.processTaintBaseEviction(ctx, node, current)
	switch {
	case current.Status != corev1.ConditionTrue && observed.Status == corev1.ConditionTrue:
		nc.log.V(2).Info(at("controller_utils.go", 186), "Recording status change event message for node", "status", "NodeNotReady", "node", node.Name)
		nc.event(ctx, node, corev1.EventTypeNormal, "NodeNotReady", fmt.Sprintf("Node %s status is now: %s", node.Name, "NodeNotReady"))
		fallthrough
	case nc.retry[node.Name] && observed.Status != corev1.ConditionTrue:
		if err := nc.markPodsNotReady(ctx, node.Name); err != nil {
			nc.w.Logger("UnhandledError").Error(at("node_lifecycle_controller.go", 774), err, "Unable to mark all pods NotReady on node; queuing for retry", "node", node.Name)
			nc.retry[node.Name] = true
			return
		}
	}
	delete(nc.retry, node.Name)
}

// tryUpdateNodeHealth is kube's: it returns the Ready condition as observed
// and as it is now, after marking the node's conditions Unknown when the
// node has been silent for longer than its grace period.
func (nc *NodeLifecycleController) tryUpdateNodeHealth(ctx context.Context, node *corev1.Node) (corev1.NodeCondition, *corev1.NodeCondition, error) {
	now := nc.now()
	h := nc.health[node.Name]
	var observed corev1.NodeCondition
	grace := nc.cfg.MonitorGracePeriod
	current := nodeCondition(&node.Status, corev1.NodeReady)
	if current == nil {
		// The kubelet never posted a status: count from the Node's creation.
		observed = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: node.CreationTimestamp}
		grace = nc.cfg.StartupGracePeriod
		if h == nil {
			h = &nodeHealth{probeTimestamp: node.CreationTimestamp.Time}
		}
	} else {
		observed = *current
	}
	switch {
	case h == nil:
		nc.log.Info(at("node_lifecycle_controller.go", 910), "Missing timestamp for Node. Assuming now as a timestamp", "node", klog.KObj(node))
		h = &nodeHealth{ready: current.DeepCopy(), probeTimestamp: now}
	case h.ready == nil && current != nil:
		nc.log.V(1).Info(at("node_lifecycle_controller.go", 917), "Creating timestamp entry for newly observed Node", "node", klog.KObj(node))
		h = &nodeHealth{ready: current.DeepCopy(), probeTimestamp: now, lease: h.lease}
	case h.ready != nil && current != nil && !h.ready.LastHeartbeatTime.Equal(&current.LastHeartbeatTime):
		nc.log.V(3).Info(at("node_lifecycle_controller.go", 944), "Node ReadyCondition updated. Updating timestamp", "node", klog.KObj(node))
		h = &nodeHealth{ready: current.DeepCopy(), probeTimestamp: now, lease: h.lease}
	}
	nc.health[node.Name] = h
	// Always update the probe time if the node's Lease was renewed.
	if o, ok := nc.leases.Get(corev1.NamespaceNodeLease, node.Name); ok {
		lease := o.(*coordinationv1.Lease)
		if lease.Spec.RenewTime != nil && (h.lease == nil || h.lease.Spec.RenewTime == nil || h.lease.Spec.RenewTime.Before(lease.Spec.RenewTime)) {
			h.lease, h.probeTimestamp = lease, now
		}
	}
	if !now.After(h.probeTimestamp.Add(grace)) {
		return observed, current, nil
	}

	// Neither the Ready condition nor the Lease moved for longer than the
	// grace period: nobody knows how the node is.
	nowTime := metav1.NewTime(now)
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		c := nodeCondition(&node.Status, t)
		if c == nil {
			nc.log.V(2).Info(at("node_lifecycle_controller.go", 1008), "Condition of node was never updated by kubelet", "nodeConditionType", t, "node", klog.KObj(node))
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: nowTime})
			continue
		}
		nc.log.V(2).Info(at("node_lifecycle_controller.go", 1018), "Node hasn't been updated", "node", klog.KObj(node),
			"duration", now.Sub(h.probeTimestamp), "nodeConditionType", t, "currentCondition", conditionText(c))
		if c.Status != corev1.ConditionUnknown {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", nowTime
		}
	}
	current = nodeCondition(&node.Status, corev1.NodeReady)
	if current.Status == observed.Status && current.Reason == observed.Reason {
		return observed, current, nil
	}
	updated, err := nc.client.UpdateStatus(ctx, node)
	if err != nil {
		nc.log.Error(at("node_lifecycle_controller.go", 1033), err, "Error updating node", "node", klog.KObj(node))
		return observed, current, err
	}
	h.ready = nodeCondition(&updated.(*corev1.Node).Status, corev1.NodeReady).DeepCopy()
	return observed, current, nil
}

// processTaintBaseEviction taints a node that is not Ready (unreachable
// for Unknown, not-ready for False) and untaints a Ready one.
func (nc *NodeLifecycleController) processTaintBaseEviction(ctx context.Context, node *corev1.Node, ready *corev1.NodeCondition) {
	switch ready.Status {
	case corev1.ConditionFalse, corev1.ConditionUnknown:
		add, remove := notReadyTaint, unreachableTaint
		msg, line := "Node is NotReady. Adding it to the Taint queue", 808
		if ready.Status == corev1.ConditionUnknown {
			add, remove = unreachableTaint, notReadyTaint
			msg, line = "Node is unresponsive. Adding it to the Taint queue", 818
		}
		if hasTaint(node.Spec.Taints, add) && !hasTaint(node.Spec.Taints, remove) {
			return
		}
		nc.log.V(2).Info(at("node_lifecycle_controller.go", line), msg, "node", klog.KObj(node), "timeStamp", nc.now())
		if _, err := nc.swapTaints(ctx, node.Name, &add, remove); err != nil {
			nc.w.Logger("UnhandledError").Error(at("controller_utils.go", 203), fmt.Errorf("unable to taint %s unresponsive Node %q: %w", taintText(add), node.Name, err), "Unhandled Error")
			return
		}
		nc.log.V(4).Info(at("controller_utils.go", 211), "Added taint to node", "taint", taintText(add), "node", klog.KRef("", node.Name))
	case corev1.ConditionTrue:
		removed, err := nc.swapTaints(ctx, node.Name, nil, unreachableTaint, notReadyTaint)
		if err != nil {
			nc.log.Error(at("node_lifecycle_controller.go", 823), nil, "Failed to remove taints from node. Will retry in next iteration", "node", klog.KObj(node))
		}
		if removed {
			nc.log.V(2).Info(at("node_lifecycle_controller.go", 826), "Node is healthy again, removed all taints", "node", klog.KObj(node))
		}
	}
}

// swapTaints adds add (when not nil, with timeAdded now) and removes the
// taints remove from the node, reading it fresh and retrying on conflicts
// (AddOrUpdateTaintOnNode and RemoveTaintOffNode). It reports whether it
// changed the node.
func (nc *NodeLifecycleController) swapTaints(ctx context.Context, name string, add *corev1.Taint, remove ...corev1.Taint) (bool, error) {
	for try := 0; ; try++ {
		obj, err := nc.client.Get(ctx, "nodes", "", name)
		if err != nil {
			return false, err
		}
		node := obj.(*corev1.Node)
		var taints []corev1.Taint
		changed := false
		for _, t := range node.Spec.Taints {
			if hasTaint(remove, t) {
				changed = true
				continue
			}
			taints = append(taints, t)
		}
		if add != nil && !hasTaint(taints, *add) {
			t := *add
			t.TimeAdded = &metav1.Time{Time: nc.now().Truncate(time.Second)}
			taints = append(taints, t)
			changed = true
		}
		if !changed {
			return false, nil
		}
		node.Spec.Taints = taints
		_, err = nc.client.Update(ctx, node)
		if apierrors.IsConflict(err) && try < 5 {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("updating the taints of node %s: %w", name, err)
		}
		return true, nil
	}
}

// markPodsNotReady is MarkPodsNotReady: the Ready condition of every pod
// bound to the node becomes False, with a NodeNotReady Event.
func (nc *NodeLifecycleController) markPodsNotReady(ctx context.Context, node string) error {
	nc.log.V(2).Info(at("controller_utils.go", 123), "Update ready status of pods on node", "node", klog.KRef("", node))
	var errs []error
	for _, o := range nc.pods.List() {
		pod := o.(*corev1.Pod)
		if pod.Spec.NodeName != node {
			continue
		}
		pod = pod.DeepCopy()
		for i := range pod.Status.Conditions {
			c := &pod.Status.Conditions[i]
			if c.Type != corev1.PodReady || c.Status == corev1.ConditionFalse {
				continue
			}
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(nc.now())
			nc.log.V(2).Info(at("controller_utils.go", 144), "Updating ready status of pod to false", "pod", klog.KObj(pod))
			if _, err := nc.client.UpdateStatus(ctx, pod); err != nil {
				if apierrors.IsNotFound(err) {
					break
				}
				nc.log.Info(at("controller_utils.go", 151), "Failed to update status for pod", "pod", klog.KObj(pod), "err", err)
				errs = append(errs, err)
				break
			}
			nc.event(ctx, pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
			break
		}
	}
	return errors.Join(errs...)
}

// event records an Event and logs it as client-go's broadcaster does.
func (nc *NodeLifecycleController) event(ctx context.Context, obj apiserver.Object, eventType, reason, message string) {
	res, err := apiserver.ResourceOf(obj)
	if err != nil {
		return
	}
	nc.log.V(3).Info(at("event.go", 395), "Event occurred", "object", klog.KObj(obj), "fieldPath", "",
		"kind", res.Kind, "apiVersion", res.GroupVersion().String(), "type", eventType, "reason", reason, "message", message)
	if err := nc.rec.Event(ctx, obj, eventType, reason, message); err != nil {
		nc.log.Error(at("event.go", 365), err, "Server rejected event (will not retry!)", "event", klog.KObj(obj).String()+" "+reason)
	}
}

func nodeCondition(s *corev1.NodeStatus, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

func taintText(t corev1.Taint) string { return t.Key + ":" + string(t.Effect) }

func conditionText(c *corev1.NodeCondition) string {
	return fmt.Sprintf("%s=%s (%s), lastHeartbeatTime %s", c.Type, c.Status, c.Reason, c.LastHeartbeatTime.UTC().Format(time.RFC3339))
}
