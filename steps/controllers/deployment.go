package controllers

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// deploymentMaxRetries is how often a failing Deployment is retried before
// it is dropped from the queue (until its next change).
const deploymentMaxRetries = 15

var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// deploymentController is kube-controller-manager's Deployment controller
// (pkg/controller/deployment): for each Deployment it makes sure a
// ReplicaSet with the Deployment's current pod template exists, and sizes
// it and the older ReplicaSets by the Deployment's strategy.
type deploymentController struct {
	r   *run
	log klog.Logger
	q   *queue
	rec *apiserver.Recorder
}

func newDeploymentController(r *run) *deploymentController {
	return &deploymentController{
		r: r, q: newQueue(r.singlePass),
		log: r.m.log.Logger(deploymentControllerName),
		rec: apiserver.NewRecorder(r.m.client, deploymentControllerName, ""),
	}
}

func (dc *deploymentController) queue() *queue { return dc.q }

func (dc *deploymentController) enqueue(d *appsv1.Deployment) { dc.q.Add(keyOf(d)) }

// The event handlers: every change that may matter to a Deployment queues
// its key.

func (dc *deploymentController) addDeployment(d *appsv1.Deployment) {
	dc.log.V(4).Info(at("deployment_controller.go", 203), "Adding deployment", "deployment", klog.KObj(d))
	dc.enqueue(d)
}

func (dc *deploymentController) updateDeployment(old, cur *appsv1.Deployment) {
	dc.log.V(4).Info(at("deployment_controller.go", 210), "Updating deployment", "deployment", klog.KObj(old))
	dc.enqueue(cur)
}

func (dc *deploymentController) deleteDeployment(d *appsv1.Deployment) {
	dc.log.V(4).Info(at("deployment_controller.go", 228), "Deleting deployment", "deployment", klog.KObj(d))
	dc.enqueue(d)
}

func (dc *deploymentController) addReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.DeletionTimestamp != nil {
		dc.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := dc.resolveControllerRef(rs.Namespace, ref); d != nil {
			dc.log.V(4).Info(at("deployment_controller.go", 248), "ReplicaSet added", "replicaSet", klog.KObj(rs))
			dc.enqueue(d)
		}
		return
	}
	ds := dc.deploymentsSelecting(rs.Namespace, rs.Labels)
	if len(ds) == 0 {
		return
	}
	dc.log.V(4).Info(at("deployment_controller.go", 259), "Orphan ReplicaSet added", "replicaSet", klog.KObj(rs))
	for _, d := range ds {
		dc.enqueue(d)
	}
}

func (dc *deploymentController) updateReplicaSet(old, cur *appsv1.ReplicaSet) {
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if d := dc.resolveControllerRef(old.Namespace, oldRef); d != nil {
			dc.enqueue(d)
		}
	}
	if curRef != nil {
		if d := dc.resolveControllerRef(cur.Namespace, curRef); d != nil {
			dc.log.V(4).Info(at("deployment_controller.go", 313), "ReplicaSet updated", "replicaSet", klog.KObj(cur))
			dc.enqueue(d)
		}
		return
	}
	if refChanged || !labels.Equals(cur.Labels, old.Labels) {
		ds := dc.deploymentsSelecting(cur.Namespace, cur.Labels)
		if len(ds) == 0 {
			return
		}
		dc.log.V(4).Info(at("deployment_controller.go", 326), "Orphan ReplicaSet updated", "replicaSet", klog.KObj(cur))
		for _, d := range ds {
			dc.enqueue(d)
		}
	}
}

func (dc *deploymentController) deleteReplicaSet(rs *appsv1.ReplicaSet) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return
	}
	if d := dc.resolveControllerRef(rs.Namespace, ref); d != nil {
		dc.log.V(4).Info(at("deployment_controller.go", 365), "ReplicaSet deleted", "replicaSet", klog.KObj(rs))
		dc.enqueue(d)
	}
}

// deletePod wakes a Recreate Deployment when the last of its pods is gone:
// only then may it create the new ReplicaSet.
func (dc *deploymentController) deletePod(pod *corev1.Pod) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs := dc.r.replicaSet(pod.Namespace, ref.Name)
	if rs == nil || rs.UID != ref.UID {
		return
	}
	rsRef := metav1.GetControllerOfNoCopy(rs)
	if rsRef == nil {
		return
	}
	d := dc.resolveControllerRef(rs.Namespace, rsRef)
	if d == nil {
		return
	}
	dc.log.V(4).Info(at("deployment_controller.go", 393), "Pod deleted", "pod", klog.KObj(pod))
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return
	}
	owned := map[types.UID]bool{}
	for _, rs := range dc.r.replicaSets(d.Namespace) {
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID {
			owned[rs.UID] = true
		}
	}
	for _, p := range dc.r.pods(d.Namespace) {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && owned[ref.UID] {
			return
		}
	}
	dc.enqueue(d)
}

// resolveControllerRef finds the Deployment a controller reference names,
// by name, then checks the uid (a Deployment deleted and created again
// under the same name is another Deployment).
func (dc *deploymentController) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref.Kind != deploymentKind.Kind {
		return nil
	}
	d := dc.r.deployment(namespace, ref.Name)
	if d == nil || d.UID != ref.UID {
		return nil
	}
	return d
}

func (dc *deploymentController) deploymentsSelecting(namespace string, l map[string]string) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, d := range dc.r.deployments(namespace) {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(l)) {
			out = append(out, d)
		}
	}
	return out
}

// handleErr retries a failed sync with back-off, up to
// deploymentMaxRetries times.
func (dc *deploymentController) handleErr(_ context.Context, key string, err error) {
	ns, name := splitKey(key)
	dc.r.failed("deployment", key, err)
	if err == nil || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		dc.q.Forget(key)
		return
	}
	if dc.q.NumRequeues(key) < deploymentMaxRetries {
		dc.log.V(2).Info(at("deployment_controller.go", 511), "Error syncing deployment", "deployment", klog.KRef(ns, name), "err", err)
		dc.q.AddRateLimited(key)
		return
	}
	dc.r.handleError(at("deployment_controller.go", 516), err)
	dc.log.V(2).Info(at("deployment_controller.go", 517), "Dropping deployment out of the queue", "deployment", klog.KRef(ns, name), "err", err)
	dc.q.Forget(key)
}

// sync is syncDeployment: the whole reconciliation of one Deployment, from
// the cache, acting through the API server.
func (dc *deploymentController) sync(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	start := dc.r.m.now()
	dc.log.V(4).Info(at("deployment_controller.go", 583), "Started syncing deployment", "deployment", klog.KRef(ns, name), "startTime", start)
	defer func() {
		dc.log.V(4).Info(at("deployment_controller.go", 585), "Finished syncing deployment", "deployment", klog.KRef(ns, name), "duration", dc.r.m.now().Sub(start))
	}()
	cached := dc.r.deployment(ns, name)
	if cached == nil {
		dc.log.V(2).Info(at("deployment_controller.go", 590), "Deployment has been deleted", "deployment", klog.KRef(ns, name))
		return nil
	}
	d := cached.DeepCopy() // never change the cache
	if s := d.Spec.Selector; s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0 {
		dc.r.event(ctx, dc.rec, dc.log, d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err := dc.r.client.UpdateStatus(ctx, d)
			return err
		}
		return nil
	}
	rsList, err := dc.replicaSetsFor(ctx, d)
	if err != nil {
		return err
	}
	podMap := dc.podMapFor(d, rsList)
	if d.DeletionTimestamp != nil {
		return dc.syncStatusOnly(ctx, d, rsList)
	}
	if err := dc.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return dc.syncScale(ctx, d, rsList)
	}
	scaling, err := dc.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return dc.syncScale(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return dc.rolloutRecreate(ctx, d, rsList, podMap)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return dc.rolloutRolling(ctx, d, rsList)
	}
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// replicaSetsFor is getReplicaSetsForDeployment: the ReplicaSets the
// Deployment controls, after adopting orphans its selector matches and
// releasing those it no longer matches.
func (dc *deploymentController) replicaSetsFor(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has invalid label selector: %w", d.Namespace, d.Name, err)
	}
	var candidates []apiserver.Object
	for _, rs := range dc.r.replicaSets(d.Namespace) {
		candidates = append(candidates, rs)
	}
	claimed, err := claim(ctx, dc.r.client, d, deploymentKind, sel, candidates)
	out := make([]*appsv1.ReplicaSet, len(claimed))
	for i, o := range claimed {
		out[i] = o.(*appsv1.ReplicaSet)
	}
	return out, err
}

// podMapFor groups the Deployment's pods by the uid of their ReplicaSet.
// Terminating and finished pods count: Recreate waits for them.
func (dc *deploymentController) podMapFor(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) map[types.UID][]*corev1.Pod {
	podMap := make(map[types.UID][]*corev1.Pod, len(rsList))
	for _, rs := range rsList {
		podMap[rs.UID] = nil
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return podMap
	}
	for _, p := range dc.r.pods(d.Namespace) {
		if !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			if _, ok := podMap[ref.UID]; ok {
				podMap[ref.UID] = append(podMap[ref.UID], p)
			}
		}
	}
	return podMap
}

// checkPausedConditions records pausing and resuming in the Progressing
// condition, so a long pause is not taken for a stuck rollout.
func (dc *deploymentController) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if d.Spec.ProgressDeadlineSeconds == nil {
		return nil
	}
	cond := deploymentCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == reasonTimedOut {
		return nil
	}
	pausedCond := cond != nil && cond.Reason == reasonPaused
	now := dc.r.m.now()
	switch {
	case d.Spec.Paused && !pausedCond:
		setDeploymentCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused", now))
	case !d.Spec.Paused && pausedCond:
		setDeploymentCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonResumed, "Deployment is resumed", now))
	default:
		return nil
	}
	return dc.updateStatus(ctx, d)
}

// updateStatus writes d's status (the status subresource) and keeps d's
// resourceVersion current, so that the next write of this sync does not
// conflict with this one.
func (dc *deploymentController) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	out, err := dc.r.client.UpdateStatus(ctx, d)
	if err != nil {
		return err
	}
	d.ResourceVersion = out.GetResourceVersion()
	return nil
}

// updateRevision writes the Deployment's revision annotation. Kubernetes
// writes it with the status (the Deployment status strategy keeps changed
// annotations); podlab's status subresource keeps all metadata, so it is an
// update of the Deployment itself, which leaves spec and generation alone.
func (dc *deploymentController) updateRevision(ctx context.Context, d *appsv1.Deployment) error {
	out, err := dc.r.client.Update(ctx, d)
	if err != nil {
		return err
	}
	d.ResourceVersion = out.GetResourceVersion()
	return nil
}

// allReplicaSets is getAllReplicaSetsAndSyncRevision: the new ReplicaSet
// (created when asked and missing) and the old ones.
func (dc *deploymentController) allReplicaSets(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	old := findOldReplicaSets(d, rsList)
	newRS, err := dc.newReplicaSet(ctx, d, rsList, old, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, old, nil
}

// newReplicaSet is getNewReplicaSet. An existing new ReplicaSet gets the
// next revision number and the Deployment's annotations; a missing one is
// created, named NAME-<pod-template-hash>, owned by the Deployment, with
// as many replicas as the strategy allows now.
func (dc *deploymentController) newReplicaSet(ctx context.Context, d *appsv1.Deployment, rsList, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	newRevision := strconv.FormatInt(maxRevision(oldRSs)+1, 10)
	now := dc.r.m.now()
	if existing != nil {
		rsCopy := existing.DeepCopy()
		annotationsChanged := dc.setNewReplicaSetAnnotations(d, rsCopy, newRevision, true)
		if annotationsChanged || rsCopy.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rsCopy.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			out, err := dc.r.client.Update(ctx, rsCopy)
			if err != nil {
				return nil, err
			}
			return out.(*appsv1.ReplicaSet), nil
		}
		if setDeploymentRevision(d, rsCopy.Annotations[RevisionAnnotation]) {
			if err := dc.updateRevision(ctx, d); err != nil {
				return nil, err
			}
		}
		if d.Spec.ProgressDeadlineSeconds != nil && deploymentCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			setDeploymentCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", rsCopy.Name), now))
			if err := dc.updateStatus(ctx, d); err != nil {
				return nil, err
			}
		}
		return rsCopy, nil
	}
	if !create {
		return nil, nil
	}

	template := d.Spec.Template.DeepCopy()
	hash := ComputeHash(template, d.Status.CollisionCount)
	template.Labels = withLabel(d.Spec.Template.Labels, PodTemplateHashLabel, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, PodTemplateHashLabel, hash)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, deploymentKind)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        *template,
		},
	}
	replicas, err := newRSNewReplicas(d, append(append([]*appsv1.ReplicaSet(nil), oldRSs...), rs), rs)
	if err != nil {
		return nil, err
	}
	*rs.Spec.Replicas = replicas
	dc.setNewReplicaSetAnnotations(d, rs, newRevision, false)

	alreadyExists := false
	var created *appsv1.ReplicaSet
	out, err := dc.r.client.Create(ctx, rs)
	switch {
	case err == nil:
		created = out.(*appsv1.ReplicaSet)
		dc.r.record(func(rep *Report) { rep.ReplicaSetsCreated = append(rep.ReplicaSetsCreated, keyOf(created)) })
	case apierrors.IsAlreadyExists(err):
		// A slow cache, or a hash collision: the name is taken.
		alreadyExists = true
		cur, getErr := dc.r.client.Get(ctx, "replicasets", rs.Namespace, rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		curRS := cur.(*appsv1.ReplicaSet)
		if ref := metav1.GetControllerOfNoCopy(curRS); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &curRS.Spec.Template) {
			created = curRS
			break
		}
		// Another template has this hash: count the collision, which
		// changes the hash, and try again on the next sync.
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		before := *d.Status.CollisionCount
		*d.Status.CollisionCount++
		if dErr := dc.updateStatus(ctx, d); dErr == nil {
			dc.log.V(2).Info(at("sync.go", 266), "Found a hash collision for deployment - bumping collisionCount to resolve it",
				"deployment", klog.KObj(d), "oldCollisionCount", before, "newCollisionCount", *d.Status.CollisionCount)
		}
		return nil, err
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	default:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if d.Spec.ProgressDeadlineSeconds != nil {
			setDeploymentCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonFailedRSCreate, msg, now))
			_ = dc.updateStatus(ctx, d) // the error below is the one to report
		}
		dc.r.event(ctx, dc.rec, dc.log, d, corev1.EventTypeWarning, reasonFailedRSCreate, msg)
		return nil, err
	}
	if !alreadyExists && replicas > 0 {
		msg := fmt.Sprintf("Scaled up replica set %s from 0 to %d", created.Name, replicas)
		dc.r.record(func(rep *Report) { rep.ScalingEvents = append(rep.ScalingEvents, msg) })
		dc.r.event(ctx, dc.rec, dc.log, d, corev1.EventTypeNormal, "ScalingReplicaSet", msg)
	}
	if setDeploymentRevision(d, newRevision) {
		if err := dc.updateRevision(ctx, d); err != nil {
			return created, err
		}
	}
	if !alreadyExists && d.Spec.ProgressDeadlineSeconds != nil {
		setDeploymentCondition(&d.Status, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewReplicaSet,
			fmt.Sprintf("Created new replica set %q", created.Name), now))
		if err := dc.updateStatus(ctx, d); err != nil {
			return created, err
		}
	}
	return created, nil
}

// setNewReplicaSetAnnotations is SetNewReplicaSetAnnotations: the
// Deployment's own annotations, the revision (never lowered; a ReplicaSet
// that gets a newer one keeps its old ones in revision-history, which is
// how a rollback shows), and, for a ReplicaSet about to be created,
// desired-replicas and max-replicas.
func (dc *deploymentController) setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	changed := copyDeploymentAnnotations(d, rs)
	oldRevision, had := rs.Annotations[RevisionAnnotation]
	oldInt, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			dc.log.Info(at("deployment_util.go", 248), "Updating replica set revision OldRevision not int", "err", err)
			return false
		}
		oldInt = 0
	}
	newInt, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		dc.log.Info(at("deployment_util.go", 256), "Updating replica set revision NewRevision not int", "err", err)
		return false
	}
	if oldInt < newInt {
		rs.Annotations[RevisionAnnotation] = newRevision
		changed = true
		dc.log.V(4).Info(at("deployment_util.go", 262), "Updating replica set revision", "replicaSet", klog.KObj(rs), "newRevision", newRevision)
	}
	if had && oldInt < newInt {
		history := rs.Annotations[RevisionHistoryAnnotation]
		if history == "" {
			rs.Annotations[RevisionHistoryAnnotation] = oldRevision
		} else {
			revs := append(strings.Split(history, ","), oldRevision)
			for len(strings.Join(revs, ",")) > maxRevisionHistoryInChars && len(revs) > 1 {
				revs = revs[1:]
			}
			rs.Annotations[RevisionHistoryAnnotation] = strings.Join(revs, ",")
		}
	}
	if !exists && setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)) {
		changed = true
	}
	return changed
}

// isScalingEvent: spec.replicas changed since the active ReplicaSets were
// last sized (their desired-replicas annotation says otherwise).
func (dc *deploymentController) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := dc.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range activeReplicaSets(append(oldRSs, newRS)) {
		if desired, ok := int32Annotation(rs, DesiredReplicasAnnotation); ok && desired != *d.Spec.Replicas {
			return true, nil
		}
	}
	return false, nil
}

// syncScale is sync: a scaling event (or a paused Deployment) resizes the
// ReplicaSets without rolling anything out.
func (dc *deploymentController) syncScale(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := dc.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := dc.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := dc.cleanup(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return dc.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// scale resizes the ReplicaSets for a new spec.replicas. One active
// ReplicaSet takes it all; in the middle of a rolling update the change is
// shared between the ReplicaSets in proportion to their size, so a scale
// neither speeds up nor slows down the rollout.
func (dc *deploymentController) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if rs := findActiveOrLatest(newRS, oldRSs); rs != nil {
		if *rs.Spec.Replicas == *d.Spec.Replicas {
			return nil
		}
		_, _, err := dc.scaleAndRecord(ctx, rs, *d.Spec.Replicas, d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, old := range activeReplicaSets(oldRSs) {
			if _, _, err := dc.scaleAndRecord(ctx, old, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS))
	allowed := int32(0)
	if *d.Spec.Replicas > 0 {
		allowed = *d.Spec.Replicas + maxSurge(d)
	}
	toAdd := allowed - replicaCount(all)
	switch {
	case toAdd > 0: // bigger first, newer first among equals
		sort.SliceStable(all, func(i, j int) bool {
			if *all[i].Spec.Replicas == *all[j].Spec.Replicas {
				return createdBefore(all[j], all[i])
			}
			return *all[i].Spec.Replicas > *all[j].Spec.Replicas
		})
	case toAdd < 0: // bigger first, older first among equals
		sort.SliceStable(all, func(i, j int) bool {
			if *all[i].Spec.Replicas == *all[j].Spec.Replicas {
				return createdBefore(all[i], all[j])
			}
			return *all[i].Spec.Replicas > *all[j].Spec.Replicas
		})
	}
	added := int32(0)
	sizes := make(map[string]int32, len(all))
	for _, rs := range all {
		if toAdd != 0 {
			p := replicaSetProportion(rs, d, toAdd, added)
			sizes[rs.Name] = *rs.Spec.Replicas + p
			added += p
		} else {
			sizes[rs.Name] = *rs.Spec.Replicas
		}
	}
	for i, rs := range all {
		if i == 0 && toAdd != 0 { // leftovers go to the biggest
			sizes[rs.Name] = max(sizes[rs.Name]+toAdd-added, 0)
		}
		if _, _, err := dc.scaleReplicaSet(ctx, rs, sizes[rs.Name], d); err != nil {
			return err
		}
	}
	return nil
}

// scaleAndRecord scales rs to n unless it has n already.
func (dc *deploymentController) scaleAndRecord(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if *rs.Spec.Replicas == n {
		return false, rs, nil
	}
	return dc.scaleReplicaSet(ctx, rs, n, d)
}

// scaleReplicaSet writes rs's new size and replicas annotations and records
// the ScalingReplicaSet event kubectl describe shows.
func (dc *deploymentController) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	sizeChanged := *rs.Spec.Replicas != n
	maxReplicas := *d.Spec.Replicas + maxSurge(d)
	if !sizeChanged && !replicasAnnotationsNeedUpdate(rs, *d.Spec.Replicas, maxReplicas) {
		return false, rs, nil
	}
	was := *rs.Spec.Replicas
	rsCopy := rs.DeepCopy()
	*rsCopy.Spec.Replicas = n
	setReplicasAnnotations(rsCopy, *d.Spec.Replicas, maxReplicas)
	out, err := dc.r.client.Update(ctx, rsCopy)
	if err != nil {
		return false, rs, err
	}
	updated := out.(*appsv1.ReplicaSet)
	if !sizeChanged {
		return false, updated, nil
	}
	verb := "up"
	if n < was {
		verb = "down"
	}
	msg := fmt.Sprintf("Scaled %s replica set %s from %d to %d", verb, updated.Name, was, n)
	dc.r.record(func(rep *Report) { rep.ScalingEvents = append(rep.ScalingEvents, msg) })
	dc.r.event(ctx, dc.rec, dc.log, d, corev1.EventTypeNormal, "ScalingReplicaSet", msg)
	return true, updated, nil
}

// cleanup deletes the oldest empty ReplicaSets beyond
// spec.revisionHistoryLimit (the rest stay, for kubectl rollout undo).
func (dc *deploymentController) cleanup(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(cleanable, func(i, j int) bool {
		ri, err1 := revision(cleanable[i])
		rj, err2 := revision(cleanable[j])
		if err1 != nil || err2 != nil || ri == rj {
			return createdBefore(cleanable[i], cleanable[j])
		}
		return ri < rj
	})
	dc.log.V(4).Info(at("sync.go", 459), "Looking to cleanup old replica sets for deployment", "deployment", klog.KObj(d))
	for _, rs := range cleanable[:diff] {
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration || rs.DeletionTimestamp != nil {
			continue
		}
		dc.log.V(4).Info(at("sync.go", 467), "Trying to cleanup replica set for deployment", "replicaSet", klog.KObj(rs), "deployment", klog.KObj(d))
		if _, err := dc.r.client.Delete(ctx, "replicasets", rs.Namespace, rs.Name, apiserver.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func withLabel(l map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(l)+1)
	for k, v := range l {
		out[k] = v
	}
	out[key] = value
	return out
}
