package controllers

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// burstReplicas caps the pods one sync creates or deletes
// (replicaset.BurstReplicas).
const burstReplicas = 500

var replicaSetKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// replicaSetController is kube-controller-manager's ReplicaSet controller
// (pkg/controller/replicaset): it keeps spec.replicas pods matching each
// ReplicaSet's selector alive, creating pods from the template and
// deleting the surplus, and reports what it sees in the status.
type replicaSetController struct {
	r   *run
	log klog.Logger
	q   *queue
	exp *expectations
	rec *apiserver.Recorder
}

func newReplicaSetController(r *run) *replicaSetController {
	return &replicaSetController{
		r: r, q: newQueue(r.singlePass), exp: newExpectations(r.m.now),
		log: r.m.log.Logger(replicaSetControllerName),
		rec: apiserver.NewRecorder(r.m.client, replicaSetControllerName, ""),
	}
}

func (rsc *replicaSetController) queue() *queue { return rsc.q }

// The event handlers.

func (rsc *replicaSetController) addRS(rs *appsv1.ReplicaSet) {
	rsc.log.V(4).Info(at("replica_set.go", 389), "Adding", "replicaSet", klog.KObj(rs))
	rsc.q.Add(keyOf(rs))
}

func (rsc *replicaSetController) updateRS(old, cur *appsv1.ReplicaSet) {
	if old.UID != cur.UID {
		rsc.deleteRS(old)
	}
	if *old.Spec.Replicas != *cur.Spec.Replicas {
		rsc.log.V(4).Info(at("replica_set.go", 424), "replicaSet updated. Desired pod count change.", "replicaSet", klog.KObj(old),
			"oldReplicas", *old.Spec.Replicas, "newReplicas", *cur.Spec.Replicas)
	}
	rsc.q.Add(keyOf(cur))
}

func (rsc *replicaSetController) deleteRS(rs *appsv1.ReplicaSet) {
	rsc.log.V(4).Info(at("replica_set.go", 450), "Deleting", "replicaSet", klog.KObj(rs))
	rsc.exp.Delete(keyOf(rs))
	rsc.q.Add(keyOf(rs))
}

func (rsc *replicaSetController) addPod(pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		rsc.deletePod(pod, "k8s.io/kubernetes/pkg/controller/replicaset.(*ReplicaSetController).addPod")
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if rs := rsc.resolveControllerRef(pod.Namespace, ref); rs != nil {
			// kube logs "Pod created" here with the whole pod as detail=.
			rsc.exp.CreationObserved(keyOf(rs))
			rsc.q.Add(keyOf(rs))
		}
		return
	}
	for _, rs := range rsc.replicaSetsSelecting(pod) {
		rsc.q.Add(keyOf(rs))
	}
}

func (rsc *replicaSetController) updatePod(old, cur *corev1.Pod) {
	labelsChanged := !labels.Equals(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// Graceful deletion: the pod is going; do not wait for the kubelet
		// to remove it before replacing it.
		const caller = "k8s.io/kubernetes/pkg/controller/replicaset.(*ReplicaSetController).updatePod"
		rsc.deletePod(cur, caller)
		if labelsChanged {
			rsc.deletePod(old, caller)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if rs := rsc.resolveControllerRef(old.Namespace, oldRef); rs != nil {
			rsc.q.Add(keyOf(rs))
		}
	}
	if curRef != nil {
		rs := rsc.resolveControllerRef(cur.Namespace, curRef)
		if rs == nil {
			return
		}
		rsc.q.Add(keyOf(rs))
		if !isPodReady(old) && isPodReady(cur) && rs.Spec.MinReadySeconds > 0 {
			// Available only minReadySeconds after Ready: look again then.
			rsc.log.V(2).Info(at("replica_set.go", 559), "pod will be enqueued after a while for availability check",
				"duration", rs.Spec.MinReadySeconds, "kind", "ReplicaSet", "pod", klog.KObj(old))
			rsc.q.AddAfter(keyOf(rs), time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, rs := range rsc.replicaSetsSelecting(cur) {
			rsc.q.Add(keyOf(rs))
		}
	}
}

// deletePod counts a deletion as observed. caller is the handler that saw
// it, which kube logs as delete_by (utilruntime.GetCaller()).
func (rsc *replicaSetController) deletePod(pod *corev1.Pod, caller string) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	rs := rsc.resolveControllerRef(pod.Namespace, ref)
	if rs == nil {
		return
	}
	rsc.log.V(4).Info(at("replica_set.go", 615), "Pod deleted", "delete_by", caller, "deletion_timestamp", pod.DeletionTimestamp, "pod", klog.KObj(pod))
	rsc.exp.DeletionObserved(keyOf(rs), keyOf(pod))
	rsc.q.Add(keyOf(rs))
}

func (rsc *replicaSetController) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	if ref.Kind != replicaSetKind.Kind {
		return nil
	}
	rs := rsc.r.replicaSet(namespace, ref.Name)
	if rs == nil || rs.UID != ref.UID {
		return nil
	}
	return rs
}

func (rsc *replicaSetController) replicaSetsSelecting(pod *corev1.Pod) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rsc.r.replicaSets(pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, rs)
		}
	}
	return out
}

// handleErr: processNextWorkItem's error path, retried with back-off for
// ever (the ReplicaSet controller never drops a key).
func (rsc *replicaSetController) handleErr(_ context.Context, key string, err error) {
	rsc.r.failed("replicaset", key, err)
	if err == nil {
		rsc.q.Forget(key)
		return
	}
	rsc.r.handleError(at("replica_set.go", 640), fmt.Errorf("sync %q failed with %w", key, err))
	rsc.q.AddRateLimited(key)
}

// sync is syncReplicaSet: count the ReplicaSet's active pods (adopting
// orphans its selector matches), create or delete the difference unless
// earlier creates and deletes were not seen yet, and write the status.
func (rsc *replicaSetController) sync(ctx context.Context, key string) error {
	start := rsc.r.m.now()
	defer func() {
		rsc.log.V(4).Info(at("replica_set.go", 759), "Finished syncing", "kind", "ReplicaSet", "key", key, "duration", rsc.r.m.now().Sub(start))
	}()
	ns, name := splitKey(key)
	cached := rsc.r.replicaSet(ns, name)
	if cached == nil {
		rsc.log.V(4).Info(at("replica_set.go", 780), "deleted", "kind", "ReplicaSet", "key", key)
		rsc.exp.Delete(key)
		return nil
	}
	needsSync := rsc.exp.Satisfied(key)
	sel, err := metav1.LabelSelectorAsSelector(cached.Spec.Selector)
	if err != nil {
		rsc.r.handleError(at("replica_set.go", 792), fmt.Errorf("error converting pod selector to selector for rs %v/%v: %w", ns, name, err))
		return nil
	}
	var active []apiserver.Object
	for _, p := range rsc.r.pods(ns) {
		if isPodActive(p) {
			active = append(active, p)
		}
	}
	claimed, err := claim(ctx, rsc.r.client, cached, replicaSetKind, sel, active)
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, len(claimed))
	for i, o := range claimed {
		pods[i] = o.(*corev1.Pod)
	}
	var manageErr error
	if needsSync && cached.DeletionTimestamp == nil {
		manageErr = rsc.manageReplicas(ctx, pods, cached)
	}
	rs := cached.DeepCopy()
	status := rsc.calculateStatus(rs, pods, manageErr)
	updated, err := rsc.updateStatus(ctx, rs, status)
	if err != nil {
		return err
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == *updated.Spec.Replicas && updated.Status.AvailableReplicas != *updated.Spec.Replicas {
		rsc.q.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// manageReplicas creates or deletes the difference between spec.replicas
// and the active pods.
func (rsc *replicaSetController) manageReplicas(ctx context.Context, pods []*corev1.Pod, rs *appsv1.ReplicaSet) error {
	diff := len(pods) - int(*rs.Spec.Replicas)
	key := keyOf(rs)
	switch {
	case diff < 0:
		n := min(-diff, burstReplicas)
		rsc.exp.ExpectCreations(key, n)
		rsc.log.V(2).Info(at("replica_set.go", 668), "Too few replicas", "replicaSet", klog.KObj(rs), "need", *rs.Spec.Replicas, "creating", n)
		// kube creates in batches of 1, 2, 4 ... (slow start) and stops at
		// the first failed batch; podlab creates one at a time and stops at
		// the first failure.
		created := 0
		var err error
		for created < n {
			if err = rsc.createPod(ctx, rs); err != nil {
				break
			}
			created++
		}
		if skipped := n - created; skipped > 0 {
			rsc.log.V(2).Info(at("replica_set.go", 693), "Slow-start failure. Skipping creation of pods, decrementing expectations",
				"podsSkipped", skipped, "kind", "ReplicaSet", "replicaSet", klog.KObj(rs))
			for range skipped {
				rsc.exp.CreationObserved(key)
			}
		}
		return err
	case diff > 0:
		n := min(diff, burstReplicas)
		rsc.log.V(2).Info(at("replica_set.go", 704), "Too many replicas", "replicaSet", klog.KObj(rs), "need", *rs.Spec.Replicas, "deleting", n)
		doomed := podsToDelete(pods, rsc.relatedPods(rs), n, rsc.r.m.now())
		keys := make([]string, len(doomed))
		for i, p := range doomed {
			keys[i] = keyOf(p)
		}
		rsc.exp.ExpectDeletions(key, keys)
		var first error
		for _, p := range doomed {
			if err := rsc.deletePodOf(ctx, rs, p); err != nil {
				rsc.exp.DeletionObserved(key, keyOf(p))
				if !apierrors.IsNotFound(err) {
					rsc.log.V(2).Info(at("replica_set.go", 731), "Failed to delete pod, decremented expectations", "pod", keyOf(p), "kind", "ReplicaSet", "replicaSet", klog.KObj(rs))
					if first == nil {
						first = err
					}
				}
			}
		}
		return first
	}
	return nil
}

// createPod is RealPodControl.CreatePods: a pod from the template, named
// by the API server from generateName "<rs-name>-" (5 random characters
// follow), with the template's labels (pod-template-hash among them) and a
// controller reference to the ReplicaSet.
func (rsc *replicaSetController) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod := podFromTemplate(rs)
	out, err := rsc.r.client.Create(ctx, pod)
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // every create fails while the namespace goes away
		}
		rsc.r.event(ctx, rsc.rec, rsc.log, rs.DeepCopy(), corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Error creating: %v", err))
		return err
	}
	rsc.log.V(4).Info(at("controller_utils.go", 613), "Controller created pod", "controller", rs.Name, "pod", klog.KObj(out))
	rsc.r.record(func(rep *Report) { rep.PodsCreated = append(rep.PodsCreated, keyOf(out)) })
	rsc.r.event(ctx, rsc.rec, rsc.log, rs.DeepCopy(), corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+out.GetName())
	return nil
}

func podFromTemplate(rs *appsv1.ReplicaSet) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	prefix := rs.Name + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		prefix = rs.Name
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, replicaSetKind)},
		},
		Spec: t.Spec,
	}
}

// deletePodOf is RealPodControl.DeletePod. A pod bound to a node is only
// marked (deletionTimestamp) by the API server; its kubelet finishes it.
func (rsc *replicaSetController) deletePodOf(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	rsc.log.V(2).Info(at("controller_utils.go", 625), "Deleting pod", "controller", rs.Name, "pod", klog.KObj(pod))
	if _, err := rsc.r.client.Delete(ctx, "pods", pod.Namespace, pod.Name, apiserver.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			rsc.log.V(4).Info(at("controller_utils.go", 628), "Pod has already been deleted.", "pod", klog.KObj(pod))
			return err
		}
		rsc.r.event(ctx, rsc.rec, rsc.log, rs.DeepCopy(), corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("Error deleting: %v", err))
		return fmt.Errorf("unable to delete pods: %w", err)
	}
	rsc.r.record(func(rep *Report) { rep.PodsDeleted = append(rep.PodsDeleted, keyOf(pod)) })
	rsc.r.event(ctx, rsc.rec, rsc.log, rs.DeepCopy(), corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+pod.Name)
	return nil
}

// relatedPods are the pods of every ReplicaSet with the same owner (the
// other ReplicaSets of a Deployment): deletion prefers pods doubled up on a
// node with them.
func (rsc *replicaSetController) relatedPods(rs *appsv1.ReplicaSet) []*corev1.Pod {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []*corev1.Pod
	for _, other := range rsc.r.replicaSets(rs.Namespace) {
		oref := metav1.GetControllerOfNoCopy(other)
		if oref == nil || oref.UID != ref.UID {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(other.Spec.Selector)
		if err != nil {
			continue
		}
		for _, p := range rsc.r.pods(rs.Namespace) {
			if sel.Matches(labels.Set(p.Labels)) && !seen[string(p.UID)] {
				seen[string(p.UID)] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// calculateStatus counts the pods: all active ones (replicas), those whose
// labels carry the whole template's (fullyLabeledReplicas), the Ready ones,
// and the available ones (Ready for minReadySeconds). A failed create or
// delete sets the ReplicaFailure condition.
func (rsc *replicaSetController) calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error) appsv1.ReplicaSetStatus {
	s := *rs.Status.DeepCopy()
	tmpl := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var full, ready, available int32
	now := rsc.r.m.now()
	for _, p := range pods {
		if tmpl.Matches(labels.Set(p.Labels)) {
			full++
		}
		if isPodReady(p) {
			ready++
			if isPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}
	failure := -1
	for i, c := range s.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			failure = i
		}
	}
	switch {
	case manageErr != nil && failure < 0:
		reason := ""
		if diff := len(pods) - int(*rs.Spec.Replicas); diff < 0 {
			reason = "FailedCreate"
		} else if diff > 0 {
			reason = "FailedDelete"
		}
		s.Conditions = append(s.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now),
			Reason: reason, Message: manageErr.Error(),
		})
	case manageErr == nil && failure >= 0:
		s.Conditions = append(s.Conditions[:failure:failure], s.Conditions[failure+1:]...)
		if len(s.Conditions) == 0 {
			s.Conditions = nil
		}
	}
	s.Replicas = int32(len(pods))
	s.FullyLabeledReplicas = full
	s.ReadyReplicas = ready
	s.AvailableReplicas = available
	return s
}

// updateStatus is updateReplicaSetStatus: write the status unless it is
// what is stored; on a failure, read the ReplicaSet again and retry once
// (then the key is retried with back-off).
func (rsc *replicaSetController) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, s appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	if rs.Status.Replicas == s.Replicas && rs.Status.FullyLabeledReplicas == s.FullyLabeledReplicas &&
		rs.Status.ReadyReplicas == s.ReadyReplicas && rs.Status.AvailableReplicas == s.AvailableReplicas &&
		rs.Generation == rs.Status.ObservedGeneration && reflect.DeepEqual(rs.Status.Conditions, s.Conditions) {
		return rs, nil
	}
	s.ObservedGeneration = rs.Generation
	for i := 0; ; i++ {
		rsc.log.V(4).Info(at("replica_set_utils.go", 68), fmt.Sprintf("Updating status for ReplicaSet: %s/%s, ", rs.Namespace, rs.Name)+
			fmt.Sprintf("replicas %d->%d (need %d), ", rs.Status.Replicas, s.Replicas, *rs.Spec.Replicas)+
			fmt.Sprintf("fullyLabeledReplicas %d->%d, ", rs.Status.FullyLabeledReplicas, s.FullyLabeledReplicas)+
			fmt.Sprintf("readyReplicas %d->%d, ", rs.Status.ReadyReplicas, s.ReadyReplicas)+
			fmt.Sprintf("availableReplicas %d->%d, ", rs.Status.AvailableReplicas, s.AvailableReplicas)+
			fmt.Sprintf("sequence No: %v->%v", rs.Status.ObservedGeneration, s.ObservedGeneration))
		rs.Status = s
		out, err := rsc.r.client.UpdateStatus(ctx, rs)
		if err == nil {
			return out.(*appsv1.ReplicaSet), nil
		}
		if i >= 1 { // statusUpdateRetries
			return nil, err
		}
		fresh, getErr := rsc.r.client.Get(ctx, "replicasets", rs.Namespace, rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		rs = fresh.(*appsv1.ReplicaSet)
	}
}

// Pods as the controllers judge them (k8s.io/kubernetes/pkg/api/v1/pod and
// pkg/controller).

// isPodActive: neither finished nor being deleted.
func isPodActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

func podReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// isPodReady: the kubelet reports the Ready condition True.
func isPodReady(p *corev1.Pod) bool {
	c := podReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// isPodAvailable: Ready for at least minReadySeconds.
func isPodAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	if !isPodReady(p) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	c := podReadyCondition(p)
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

// podsToDelete picks n pods, the cheapest to lose first
// (controller.ActivePodsWithRanks): unscheduled before scheduled, Pending
// before Unknown before Running, not Ready before Ready, lower
// controller.kubernetes.io/pod-deletion-cost first, pods doubled up on a
// node with more of their Deployment's pods first, Ready for less time
// first, more container restarts (then sidecar restarts) first, newer
// first; times compare in powers of two of their age
// (LogarithmicScaleDown), ties by uid.
func podsToDelete(pods, related []*corev1.Pod, n int, now time.Time) []*corev1.Pod {
	if n >= len(pods) {
		return pods
	}
	onNode := map[string]int{}
	for _, p := range related {
		if isPodActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranked := make([]*corev1.Pod, len(pods))
	copy(ranked, pods)
	sort.SliceStable(ranked, func(i, j int) bool {
		return deleteFirst(ranked[i], ranked[j], onNode[ranked[i].Spec.NodeName], onNode[ranked[j].Spec.NodeName], now)
	})
	return ranked[:n]
}

// phaseOrdinal orders phases for deletion: Pending, then Unknown, then
// Running (others count as Pending).
func phaseOrdinal(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 0
}

func deleteFirst(a, b *corev1.Pod, rankA, rankB int, now time.Time) bool {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrdinal(a.Status.Phase), phaseOrdinal(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if isPodReady(a) != isPodReady(b) {
		return !isPodReady(a)
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if rankA != rankB {
		return rankA > rankB
	}
	if isPodReady(a) && isPodReady(b) {
		ta, tb := podReadyCondition(a).LastTransitionTime, podReadyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			if ta.IsZero() || tb.IsZero() {
				return afterOrZero(ta, tb)
			}
			if d := logRank(ta.Time, now) - logRank(tb.Time, now); d != 0 {
				return d < 0
			}
			return a.UID < b.UID
		}
	}
	ra, sa := maxRestarts(a)
	rb, sb := maxRestarts(b)
	if ra != rb {
		return ra > rb
	}
	if sa != sb {
		return sa > sb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.IsZero() || b.CreationTimestamp.IsZero() {
			return afterOrZero(a.CreationTimestamp, b.CreationTimestamp)
		}
		if d := logRank(a.CreationTimestamp.Time, now) - logRank(b.CreationTimestamp.Time, now); d != 0 {
			return d < 0
		}
		return a.UID < b.UID
	}
	return false
}

func afterOrZero(a, b metav1.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b.Time)
}

// logRank is the base-2 logarithm of an age, -1 for no age.
func logRank(t, now time.Time) int64 {
	d := now.Sub(t)
	if d <= 0 {
		return -1
	}
	return int64(math.Log2(float64(d)))
}

// maxRestarts is the most restarts of the pod's containers, then of its
// sidecars (init containers with restartPolicy Always), as kube's
// maxContainerRestarts.
func maxRestarts(p *corev1.Pod) (regular, sidecar int32) {
	for _, c := range p.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return regular, sidecar
}

// deletionCost reads controller.kubernetes.io/pod-deletion-cost (0 when
// absent or not an int32).
func deletionCost(p *corev1.Pod) int32 {
	v, ok := p.Annotations[corev1.PodDeletionCost]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}
