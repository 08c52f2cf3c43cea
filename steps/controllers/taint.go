package controllers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubeklog "k8s.io/klog/v2"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// taintEvictionControllerName is the name kube-controller-manager gives
// the taint-eviction controller (its logger, and its events' source).
const taintEvictionControllerName = "taint-eviction-controller"

// Event reason and messages of the taint-eviction controller, as
// kube-controller-manager writes them.
const (
	reasonTaintManagerEviction = "TaintManagerEviction"
	msgMarkingForDeletion      = "Marking for deletion Pod %s"
	msgCancellingDeletion      = "Cancelling deletion of Pod %s"
)

// taintEvictionController is kube-controller-manager's taint-eviction
// controller (pkg/controller/tainteviction): a node with NoExecute taints
// keeps only the pods that tolerate every one of them. A pod bound there
// that does not tolerate one is deleted at once; one whose tolerations have
// tolerationSeconds (the 300 s the DefaultTolerationSeconds admission
// plugin gives every pod for not-ready and unreachable) is deleted when the
// shortest of them has passed; one that tolerates the taints without a
// time limit stays. A taint removed before the time is up cancels the
// deletion. Deletion is a graceful delete through the API server (the
// kubelet stops the containers), announced by the event
// TaintManagerEviction "Marking for deletion Pod NS/NAME".
//
// Where it differs from kube: its queue is keyed by pod and its sync looks
// at the whole state each time (a timer re-queues the pod when its time is
// up, and the sync checks again), rather than kube's node and pod update
// queues feeding a timed-worker queue. The clock starts at the earliest
// timeAdded of the node's NoExecute taints (kubectl taint and the node
// lifecycle controller set it); kube starts it when the controller first
// sees the taint, which is the same moment unless the controller-manager
// restarted in between (then kube waits the whole time again). A taint
// without timeAdded starts the clock when this controller first sees it.
// The DisruptionTarget pod condition kube writes before deleting is not
// written. The file:line of its klog lines are k8s.io/kubernetes v1.37.2's,
// as the other controllers'; the error of a failed deletion podlab retries
// (taint_eviction.go:130) is podlab's own, where kube retries inside
// deletePodHandler and logs nothing.
type taintEvictionController struct {
	r   *run
	log klog.Logger
	rec *apiserver.Recorder
	q   *queue

	mu sync.Mutex
	// scheduled: pods whose deletion waits for a toleration to run out,
	// by key, with the time the clock started (for taints without
	// timeAdded) and the time they are due.
	scheduled map[string]scheduledEviction
}

type scheduledEviction struct{ start, due time.Time }

func newTaintEvictionController(r *run) *taintEvictionController {
	return &taintEvictionController{
		r:         r,
		log:       r.m.log.Logger(taintEvictionControllerName),
		rec:       apiserver.NewRecorder(r.m.client, taintEvictionControllerName, ""), // events are not counted as writes
		q:         newQueue(r.singlePass),
		scheduled: map[string]scheduledEviction{},
	}
}

func (tc *taintEvictionController) queue() *queue { return tc.q }

// noExecuteTaints is getNoExecuteTaints.
func noExecuteTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// updateNode is NodeUpdated: a node whose NoExecute taints changed queues
// every pod bound to it.
func (tc *taintEvictionController) updateNode(old, cur *corev1.Node) {
	var oldTaints, curTaints []corev1.Taint
	name := ""
	if old != nil {
		name, oldTaints = old.Name, noExecuteTaints(old.Spec.Taints)
	}
	if cur != nil {
		name, curTaints = cur.Name, noExecuteTaints(cur.Spec.Taints)
	}
	if old != nil && cur != nil && equality.Semantic.DeepEqual(oldTaints, curTaints) {
		return
	}
	for _, o := range tc.r.informers["pods"].List() {
		if p := o.(*corev1.Pod); p.Spec.NodeName == name {
			tc.q.Add(keyOf(p))
		}
	}
}

// updatePod is PodUpdated: a new pod on a node, or one whose node or
// tolerations changed, is queued.
func (tc *taintEvictionController) updatePod(old, cur *corev1.Pod) {
	if cur.Spec.NodeName == "" {
		return
	}
	if old != nil && old.Spec.NodeName == cur.Spec.NodeName && equality.Semantic.DeepEqual(old.Spec.Tolerations, cur.Spec.Tolerations) {
		return
	}
	tc.q.Add(keyOf(cur))
}

// deletePod forgets a pod's scheduled deletion.
func (tc *taintEvictionController) deletePod(p *corev1.Pod) { tc.q.Add(keyOf(p)) }

func (tc *taintEvictionController) handleErr(_ context.Context, key string, err error) {
	tc.r.failed("taint-eviction controller", key, err)
	if err == nil {
		tc.q.Forget(key)
		return
	}
	tc.r.handleError(at("taint_eviction.go", 130), fmt.Errorf("deleting pod %s for a NoExecute taint: %w", key, err))
	tc.q.AddRateLimited(key)
}

// minTolerationTime is getMinTolerationTime: the shortest tolerationSeconds
// of the tolerations used, 0 if one is 0 or less, -1 (forever) if none has
// a time limit.
func minTolerationTime(tolerations []corev1.Toleration) time.Duration {
	if len(tolerations) == 0 {
		return 0
	}
	least := int64(math.MaxInt64)
	for _, t := range tolerations {
		if t.TolerationSeconds == nil {
			continue
		}
		if *t.TolerationSeconds <= 0 {
			return 0
		}
		least = min(least, *t.TolerationSeconds)
	}
	if least == math.MaxInt64 {
		return -1
	}
	return time.Duration(least) * time.Second
}

// matchingTolerations is v1helper.GetMatchingTolerations: whether every
// taint is tolerated, and the tolerations that tolerate one.
func matchingTolerations(taints []corev1.Taint, tolerations []corev1.Toleration) (bool, []corev1.Toleration) {
	var used []corev1.Toleration
	for i := range taints {
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(kubeklog.Background(), &taints[i], false) {
				used = append(used, tolerations[j])
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false, nil
		}
	}
	return true, used
}

// sync is processPodOnNode for one pod, from the informers' state.
func (tc *taintEvictionController) sync(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	o, ok := tc.r.informers["pods"].Get(ns, name)
	if !ok {
		tc.log.V(4).Info(at("taint_eviction.go", 499), "Noticed pod deletion", "pod", klog.KRef(ns, name))
		tc.cancel(ctx, key, nil)
		return nil
	}
	pod := o.(*corev1.Pod)
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return nil
	}
	var taints []corev1.Taint
	if n, ok := tc.r.informers["nodes"].Get("", pod.Spec.NodeName); ok {
		taints = noExecuteTaints(n.(*corev1.Node).Spec.Taints)
	}
	if len(taints) == 0 {
		tc.cancel(ctx, key, pod)
		return nil
	}
	allTolerated, used := matchingTolerations(taints, pod.Spec.Tolerations)
	if !allTolerated {
		tc.log.V(2).Info(at("taint_eviction.go", 465), "Not all taints are tolerated after update for pod on node",
			"pod", key, "node", klog.KRef("", pod.Spec.NodeName))
		return tc.evict(ctx, key, pod)
	}
	wait := minTolerationTime(used)
	if wait < 0 {
		tc.log.V(4).Info(at("taint_eviction.go", 474), "Current tolerations for pod tolerate forever, cancelling any scheduled deletion", "pod", key)
		tc.cancel(ctx, key, pod)
		return nil
	}
	now := tc.r.m.now()
	start := tc.clockStart(key, taints, now)
	due := start.Add(wait)
	if !now.Before(due) {
		return tc.evict(ctx, key, pod)
	}
	tc.mu.Lock()
	tc.scheduled[key] = scheduledEviction{start: start, due: due}
	tc.mu.Unlock()
	tc.log.V(4).Info(at("timed_workers.go", 157), "Adding TimedWorkerQueue item and to be fired at firedTime", "item", key, "createTime", start, "firedTime", due)
	tc.q.AddAfter(key, due.Sub(now))
	return nil
}

// clockStart is when the toleration time of the pod started running: the
// earliest timeAdded of the taints, or when this controller first saw them.
func (tc *taintEvictionController) clockStart(key string, taints []corev1.Taint, now time.Time) time.Time {
	var start time.Time
	for _, t := range taints {
		if t.TimeAdded == nil {
			start = time.Time{}
			break
		}
		if start.IsZero() || t.TimeAdded.Time.Before(start) {
			start = t.TimeAdded.Time
		}
	}
	if !start.IsZero() && !start.After(now) {
		return start
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if s, ok := tc.scheduled[key]; ok {
		return s.start
	}
	return now
}

// cancel is cancelWorkWithEvent: a scheduled deletion is dropped, with the
// event kube records.
func (tc *taintEvictionController) cancel(ctx context.Context, key string, pod *corev1.Pod) {
	tc.mu.Lock()
	_, ok := tc.scheduled[key]
	delete(tc.scheduled, key)
	tc.mu.Unlock()
	if !ok {
		return
	}
	tc.log.V(4).Info(at("timed_workers.go", 196), "Cancelling TimedWorkerQueue item", "item", key, "time", tc.r.m.now())
	if pod != nil {
		tc.r.event(ctx, tc.rec, tc.log, pod, corev1.EventTypeNormal, reasonTaintManagerEviction, fmt.Sprintf(msgCancellingDeletion, key))
	}
}

// evict is deletePodHandler: the event, then a graceful delete.
func (tc *taintEvictionController) evict(ctx context.Context, key string, pod *corev1.Pod) error {
	tc.mu.Lock()
	delete(tc.scheduled, key)
	tc.mu.Unlock()
	tc.log.Info(at("taint_eviction.go", 111), "Deleting pod", "controller", taintEvictionControllerName, "pod", key)
	tc.r.event(ctx, tc.rec, tc.log, pod, corev1.EventTypeNormal, reasonTaintManagerEviction, fmt.Sprintf(msgMarkingForDeletion, key))
	_, err := tc.r.client.Delete(ctx, "pods", pod.Namespace, pod.Name, apiserver.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	tc.r.record(func(rep *Report) { rep.PodsEvicted = append(rep.PodsEvicted, key) })
	return nil
}
