package controllers

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/internal/klog"
)

// rolloutRolling is the RollingUpdate strategy, one step per sync: grow the
// new ReplicaSet as far as maxSurge allows; if it could not grow, shrink
// the old ones as far as maxUnavailable allows, counting only pods that
// are available (Ready). Each step waits for the pods of the previous one
// to become available, so the rollout moves at the pace of readiness.
func (dc *deploymentController) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := dc.allReplicaSets(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledUp, err := dc.reconcileNewReplicaSet(ctx, allRSs, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return dc.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	scaledDown, err := dc.reconcileOldReplicaSets(ctx, allRSs, activeReplicaSets(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return dc.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if deploymentComplete(d, &d.Status) {
		if err := dc.cleanup(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return dc.syncRolloutStatus(ctx, allRSs, newRS, d)
}

func (dc *deploymentController) reconcileNewReplicaSet(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if *newRS.Spec.Replicas == *d.Spec.Replicas {
		return false, nil
	}
	if *newRS.Spec.Replicas > *d.Spec.Replicas {
		scaled, _, err := dc.scaleAndRecord(ctx, newRS, *d.Spec.Replicas, d)
		return scaled, err
	}
	n, err := newRSNewReplicas(d, allRSs, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := dc.scaleAndRecord(ctx, newRS, n, d)
	return scaled, err
}

// reconcileOldReplicaSets scales old ReplicaSets down by at most
//
//	maxScaledDown = all pods - (replicas - maxUnavailable) - unavailable pods of the new ReplicaSet
//
// first removing old pods that are not available anyway (they cost no
// availability), then available ones while more than replicas-maxUnavailable
// pods are available.
func (dc *deploymentController) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if replicaCount(oldRSs) == 0 {
		return false, nil
	}
	allPods := replicaCount(allRSs)
	dc.log.V(4).Info(at("rolling.go", 94), "New replica set", "replicaSet", klog.KObj(newRS), "availableReplicas", newRS.Status.AvailableReplicas)
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	newUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := allPods - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	oldRSs, cleaned, err := dc.cleanupUnhealthyReplicas(ctx, oldRSs, d, maxScaledDown)
	if err != nil {
		return false, nil // as Kubernetes: retried on the next sync
	}
	dc.log.V(4).Info(at("rolling.go", 140), "Cleaned up unhealthy replicas from old RSes", "count", cleaned)
	allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaled, err := dc.scaleDownOldReplicaSetsForRollingUpdate(ctx, allRSs, oldRSs, d)
	if err != nil {
		return false, nil
	}
	dc.log.V(4).Info(at("rolling.go", 148), "Scaled down old RSes", "deployment", klog.KObj(d), "count", scaled)
	return cleaned+scaled > 0, nil
}

func (dc *deploymentController) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, maxCleanup int32) ([]*appsv1.ReplicaSet, int32, error) {
	byCreation(oldRSs)
	var total int32
	for i, rs := range oldRSs {
		if total >= maxCleanup {
			break
		}
		if *rs.Spec.Replicas == 0 {
			continue
		}
		dc.log.V(4).Info(at("rolling.go", 170), "Found available pods in old RS", "replicaSet", klog.KObj(rs), "availableReplicas", rs.Status.AvailableReplicas)
		if *rs.Spec.Replicas == rs.Status.AvailableReplicas {
			continue
		}
		down := min(maxCleanup-total, *rs.Spec.Replicas-rs.Status.AvailableReplicas)
		n := *rs.Spec.Replicas - down
		if n > *rs.Spec.Replicas {
			return nil, 0, fmt.Errorf("when cleaning up unhealthy replicas, got invalid request to scale down %s/%s %d -> %d", rs.Namespace, rs.Name, *rs.Spec.Replicas, n)
		}
		_, updated, err := dc.scaleAndRecord(ctx, rs, n, d)
		if err != nil {
			return nil, total, err
		}
		total += down
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

func (dc *deploymentController) scaleDownOldReplicaSetsForRollingUpdate(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	available := availableReplicaCount(allRSs)
	if available <= minAvailable {
		return 0, nil
	}
	dc.log.V(4).Info(at("rolling.go", 205), "Found available pods in deployment, scaling down old RSes", "deployment", klog.KObj(d), "availableReplicas", available)
	byCreation(oldRSs)
	var total int32
	want := available - minAvailable
	for _, rs := range oldRSs {
		if total >= want {
			break
		}
		if *rs.Spec.Replicas == 0 {
			continue
		}
		down := min(*rs.Spec.Replicas, want-total)
		if _, _, err := dc.scaleAndRecord(ctx, rs, *rs.Spec.Replicas-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// rolloutRecreate is the Recreate strategy: scale every old ReplicaSet to
// 0, wait until none of their pods is left (not even terminating), then
// create the new ReplicaSet at full size. There is a moment with no pod at
// all: the price of never running two versions at once.
func (dc *deploymentController) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) error {
	newRS, oldRSs, err := dc.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledDown := false
	for _, rs := range activeReplicaSets(oldRSs) {
		scaled, _, err := dc.scaleAndRecord(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return dc.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if oldPodsRunning(newRS, oldRSs, podMap) {
		return dc.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if newRS == nil {
		if newRS, oldRSs, err = dc.allReplicaSets(ctx, d, rsList, true); err != nil {
			return err
		}
		allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	}
	if _, _, err := dc.scaleAndRecord(ctx, newRS, *d.Spec.Replicas, d); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := dc.cleanup(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return dc.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// oldPodsRunning: an old ReplicaSet still reports pods, or a pod of one is
// neither Succeeded nor Failed (terminating pods count).
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if actualReplicaCount(oldRSs) > 0 {
		return true
	}
	for uid, pods := range podMap {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				return true
			}
		}
	}
	return false
}

// syncStatusOnly: a Deployment being deleted only gets its status.
func (dc *deploymentController) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := dc.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return dc.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// syncDeploymentStatus writes the status computed from the ReplicaSets,
// if it changed.
func (dc *deploymentController) syncDeploymentStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	s := dc.calculateStatus(allRSs, newRS, d)
	if reflect.DeepEqual(d.Status, s) {
		return nil
	}
	d.Status = s
	return dc.updateStatus(ctx, d)
}

// calculateStatus sums the ReplicaSets' counts (replicas, updatedReplicas
// from the new one, readyReplicas, availableReplicas) and sets the
// Available condition: at least replicas-maxUnavailable pods available.
func (dc *deploymentController) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := availableReplicaCount(allRSs)
	unavailable := max(replicaCount(allRSs)-available, 0)
	s := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            actualReplicaCount(allRSs),
		UpdatedReplicas:     actualReplicaCount([]*appsv1.ReplicaSet{newRS}),
		ReadyReplicas:       readyReplicaCount(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	s.Conditions = append(s.Conditions, d.Status.Conditions...)
	now := dc.r.m.now()
	if available >= *d.Spec.Replicas-maxUnavailable(d) {
		setDeploymentCondition(&s, newDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable, "Deployment has minimum availability.", now))
	} else {
		setDeploymentCondition(&s, newDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable, "Deployment does not have minimum availability.", now))
	}
	return s
}

// syncRolloutStatus is calculateStatus plus the Progressing condition:
// NewReplicaSetAvailable when the rollout is complete, ReplicaSetUpdated
// while it moves, ProgressDeadlineExceeded when it has not moved for
// progressDeadlineSeconds.
func (dc *deploymentController) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	s := dc.calculateStatus(allRSs, newRS, d)
	if d.Spec.ProgressDeadlineSeconds == nil {
		removeDeploymentCondition(&s, appsv1.DeploymentProgressing)
	}
	now := dc.r.m.now()
	cur := deploymentCondition(d.Status, appsv1.DeploymentProgressing)
	complete := s.Replicas == s.UpdatedReplicas && cur != nil && cur.Reason == reasonNewRSAvailable
	if d.Spec.ProgressDeadlineSeconds != nil && !complete {
		name := func(format string) string {
			if newRS != nil {
				return fmt.Sprintf("ReplicaSet %q "+format, newRS.Name)
			}
			return fmt.Sprintf("Deployment %q "+format, d.Name)
		}
		switch {
		case deploymentComplete(d, &s):
			setDeploymentCondition(&s, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, name("has successfully progressed."), now))
		case deploymentProgressing(d, &s):
			c := newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonReplicaSetUpdated, name("is progressing."), now)
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeDeploymentCondition(&s, appsv1.DeploymentProgressing)
			}
			setDeploymentCondition(&s, c)
		case deploymentTimedOut(d, &s, now):
			setDeploymentCondition(&s, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut, name("has timed out progressing."), now))
		}
	}
	if f := replicaFailure(allRSs, newRS); f != nil {
		setDeploymentCondition(&s, *f)
	} else {
		removeDeploymentCondition(&s, appsv1.DeploymentReplicaFailure)
	}
	if reflect.DeepEqual(d.Status, s) {
		dc.requeueStuckDeployment(d, s)
		return nil
	}
	d.Status = s
	return dc.updateStatus(ctx, d)
}

// replicaFailure copies a ReplicaSet's ReplicaFailure condition (pods it
// could not create, a quota for instance) to the Deployment, the new
// ReplicaSet's first.
func replicaFailure(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	for _, rs := range append([]*appsv1.ReplicaSet{newRS}, allRSs...) {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return &appsv1.DeploymentCondition{
					Type: appsv1.DeploymentConditionType(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message,
					LastTransitionTime: c.LastTransitionTime, LastUpdateTime: c.LastTransitionTime,
				}
			}
		}
	}
	return nil
}

// requeueStuckDeployment checks a rollout that made no progress again when
// its progress deadline passes.
func (dc *deploymentController) requeueStuckDeployment(d *appsv1.Deployment, s appsv1.DeploymentStatus) {
	cur := deploymentCondition(d.Status, appsv1.DeploymentProgressing)
	if d.Spec.ProgressDeadlineSeconds == nil || cur == nil || deploymentComplete(d, &s) || cur.Reason == reasonTimedOut {
		return
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(dc.r.m.now())
	if after < time.Second {
		dc.log.V(4).Info(at("progress.go", 191), "Queueing up deployment for a progress check now", "deployment", klog.KObj(d))
		dc.q.AddRateLimited(keyOf(d))
		return
	}
	dc.log.V(4).Info(at("progress.go", 195), "Queueing up deployment for a progress check", "deployment", klog.KObj(d), "queueAfter", int(after.Seconds()))
	dc.q.AddAfter(keyOf(d), after+time.Second)
}
