package controllers

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The helpers of k8s.io/kubernetes/pkg/controller/deployment/util, on
// apps/v1 types: the arithmetic of rolling updates, the revision and
// replicas annotations, the conditions.

// The reasons of a Deployment's conditions.
const (
	reasonReplicaSetUpdated   = "ReplicaSetUpdated"
	reasonFailedRSCreate      = "ReplicaSetCreateError"
	reasonNewReplicaSet       = "NewReplicaSetCreated"
	reasonFoundNewRS          = "FoundNewReplicaSet"
	reasonNewRSAvailable      = "NewReplicaSetAvailable"
	reasonTimedOut            = "ProgressDeadlineExceeded"
	reasonPaused              = "DeploymentPaused"
	reasonResumed             = "DeploymentResumed"
	reasonMinimumAvailable    = "MinimumReplicasAvailable"
	reasonMinimumUnavailable  = "MinimumReplicasUnavailable"
	maxRevisionHistoryInChars = 2000
)

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// resolveFenceposts turns maxSurge and maxUnavailable into numbers of pods
// for desired replicas: surge rounds up, unavailable rounds down, and when
// both come out 0, one pod may be unavailable (or the rollout could never
// move).
func resolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	surge, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, zero), int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, zero), int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

// maxSurge is how many pods above spec.replicas a rolling update may run.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	surge, _, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return surge
}

// maxUnavailable is how many of spec.replicas may be unavailable during a
// rolling update.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil || *d.Spec.Replicas == 0 {
		return 0
	}
	_, unavailable, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return min(unavailable, *d.Spec.Replicas)
}

// newRSNewReplicas is NewRSNewReplicas: how big the new ReplicaSet may be
// now. Rolling: as big as the surge allows (all ReplicaSets together at
// most replicas+maxSurge), never above replicas. Recreate: replicas.
func newRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		surge, err := intstr.GetScaledValueFromIntOrPercent(d.Spec.Strategy.RollingUpdate.MaxSurge, int(*d.Spec.Replicas), true)
		if err != nil {
			return 0, err
		}
		current := replicaCount(allRSs)
		maxTotal := *d.Spec.Replicas + int32(surge)
		if current >= maxTotal {
			return *newRS.Spec.Replicas, nil
		}
		up := min(maxTotal-current, *d.Spec.Replicas-*newRS.Spec.Replicas)
		return *newRS.Spec.Replicas + up, nil
	case appsv1.RecreateDeploymentStrategyType:
		return *d.Spec.Replicas, nil
	}
	return 0, fmt.Errorf("deployment type %v isn't supported", d.Spec.Strategy.Type)
}

// replicaCount sums spec.replicas (what the ReplicaSets should have).
func replicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += *rs.Spec.Replicas
		}
	}
	return n
}

// actualReplicaCount sums status.replicas (the pods they have).
func actualReplicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.Replicas
		}
	}
	return n
}

func readyReplicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.ReadyReplicas
		}
	}
	return n
}

func availableReplicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.AvailableReplicas
		}
	}
	return n
}

// activeReplicaSets drops nil and empty (0 replicas) ReplicaSets.
func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && *rs.Spec.Replicas > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// byCreation sorts ReplicaSets oldest first, by name when created in the
// same second.
func byCreation(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool { return createdBefore(rss[i], rss[j]) })
}

func createdBefore(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// equalIgnoreHash compares two pod templates, ignoring the
// pod-template-hash label: how the Deployment controller finds the
// ReplicaSet of its current template.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, PodTemplateHashLabel)
	delete(b.Labels, PodTemplateHashLabel)
	return equality.Semantic.DeepEqual(a, b)
}

// findNewReplicaSet is the oldest ReplicaSet whose template is the
// Deployment's.
func findNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	byCreation(rsList)
	for _, rs := range rsList {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOldReplicaSets is every other ReplicaSet of the Deployment.
func findOldReplicaSets(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	newRS := findNewReplicaSet(d, rsList)
	var old []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if newRS == nil || rs.UID != newRS.UID {
			old = append(old, rs)
		}
	}
	return old
}

// revision reads an object's deployment.kubernetes.io/revision (0 if none).
func revision(o metav1.Object) (int64, error) {
	v, ok := o.GetAnnotations()[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if v, err := revision(rs); err == nil && v > m {
			m = v
		}
	}
	return m
}

// setDeploymentRevision sets the Deployment's revision annotation and says
// whether it changed.
func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[RevisionAnnotation] == rev {
		return false
	}
	d.Annotations[RevisionAnnotation] = rev
	return true
}

// skipCopyAnnotation: annotations a ReplicaSet does not inherit from its
// Deployment.
func skipCopyAnnotation(key string) bool {
	switch key {
	case corev1.LastAppliedConfigAnnotation, RevisionAnnotation, RevisionHistoryAnnotation,
		DesiredReplicasAnnotation, MaxReplicasAnnotation, appsv1.DeprecatedRollbackTo:
		return true
	}
	return false
}

func copyDeploymentAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if cur, ok := rs.Annotations[k]; skipCopyAnnotation(k) || (ok && cur == v) {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setReplicasAnnotations writes desired-replicas and max-replicas: what the
// Deployment asked for when it last sized this ReplicaSet, which
// proportional scaling reads back.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	if s := strconv.Itoa(int(desired)); rs.Annotations[DesiredReplicasAnnotation] != s {
		rs.Annotations[DesiredReplicasAnnotation] = s
		changed = true
	}
	if s := strconv.Itoa(int(maxReplicas)); rs.Annotations[MaxReplicasAnnotation] != s {
		rs.Annotations[MaxReplicasAnnotation] = s
		changed = true
	}
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

// int32Annotation reads a non-negative int32 annotation.
func int32Annotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// findActiveOrLatest: the one ReplicaSet with replicas, or the newest one
// when none has any; nil when several have replicas.
func findActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	sort.SliceStable(oldRSs, func(i, j int) bool { return createdBefore(oldRSs[j], oldRSs[i]) })
	all := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS))
	switch len(all) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return oldRSs[0]
	case 1:
		return all[0]
	}
	return nil
}

// isSaturated: the ReplicaSet has all the Deployment's replicas, available.
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return false
	}
	return *rs.Spec.Replicas == *d.Spec.Replicas && int32(desired) == *d.Spec.Replicas && rs.Status.AvailableReplicas == *d.Spec.Replicas
}

// replicaSetProportion is GetReplicaSetProportion: the share of a scaling
// of the whole Deployment that falls to one ReplicaSet.
func replicaSetProportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || *rs.Spec.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

func replicaSetFraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if *d.Spec.Replicas == 0 {
		return -*rs.Spec.Replicas
	}
	maxReplicas := *d.Spec.Replicas + maxSurge(d)
	before, ok := int32Annotation(rs, MaxReplicasAnnotation)
	if !ok || before == 0 {
		before = d.Status.Replicas
		if before == 0 {
			return 0
		}
	}
	size := float64(*rs.Spec.Replicas*maxReplicas) / float64(before)
	return int32(math.Round(size)) - *rs.Spec.Replicas
}

// deploymentComplete: every replica updated, available, and this
// generation observed.
func deploymentComplete(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	return s.UpdatedReplicas == *d.Spec.Replicas && s.Replicas == *d.Spec.Replicas &&
		s.AvailableReplicas == *d.Spec.Replicas && s.ObservedGeneration >= d.Generation
}

// deploymentProgressing: the new status is a step forward from the old.
func deploymentProgressing(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	old := d.Status
	return s.UpdatedReplicas > old.UpdatedReplicas ||
		s.Replicas-s.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		s.ReadyReplicas > old.ReadyReplicas ||
		s.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: no progress for progressDeadlineSeconds.
func deploymentTimedOut(d *appsv1.Deployment, s *appsv1.DeploymentStatus, now time.Time) bool {
	if d.Spec.ProgressDeadlineSeconds == nil {
		return false
	}
	c := deploymentCondition(*s, appsv1.DeploymentProgressing)
	switch {
	case c == nil || c.Reason == reasonNewRSAvailable:
		return false
	case c.Reason == reasonTimedOut:
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

func newDeploymentCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: status, LastUpdateTime: ts, LastTransitionTime: ts, Reason: reason, Message: message}
}

func deploymentCondition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setDeploymentCondition replaces the condition of c's type, unless status
// and reason are the same; lastTransitionTime moves only when the status
// changes.
func setDeploymentCondition(s *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := deploymentCondition(*s, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeDeploymentCondition(s, c.Type)
	s.Conditions = append(s.Conditions, c)
}

func removeDeploymentCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}
