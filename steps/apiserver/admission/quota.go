package admission

import (
	"fmt"
	"github.com/podlab/podlab/internal/qos"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ResourceQuota: a ResourceQuota caps what a namespace may consume in total
// (spec.hard): how many pods, how much cpu and memory they request or may
// use at most. Its status says what is allowed (status.hard) and what is in
// use (status.used). On every pod create, kube-apiserver's ResourceQuota
// plugin adds the new pod's usage to status.used and refuses the pod when
// that would go over status.hard; the quota controller recomputes
// status.used from the pods in the background, to catch up with deletions.
//
// podlab computes status.used from the namespace's pods on every create
// (the controller's job and the plugin's at once) and hands back the
// updated quotas, to be written in the same transaction as the pod.

// podQuotaResources are the resource names a quota can track for pods
// (plus the hugepages-<size> families).
var podQuotaResources = []corev1.ResourceName{
	"count/pods", corev1.ResourcePods,
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
}

// mustSpecify are the resources a pod's every container must set when a
// quota tracks them ("a mistake, but ..." says kube's source: it dates from
// before QoS classes, and is kept for compatibility).
var mustSpecify = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
}

// ResourceQuota is kube-apiserver's ResourceQuota admission plugin for a pod
// create. existing are the pods already in the namespace; a pod with the
// same name as p is ignored (so the check can be run again on a retry).
// For each quota that applies to p (its scopes match and it tracks some pod
// resource), every container must set the cpu and memory requests and
// limits the quota tracks, and the namespace's usage plus the pod's must
// stay within spec.hard.
//
// updated holds every quota, in order, with status.hard = spec.hard and
// status.used recomputed from existing plus, where it applies, p. Writing
// them in the pod's transaction keeps the quota exact under concurrent
// creates. On a rejection updated is nil and the error is a 403 Forbidden
// with kube-apiserver's texts:
//
//	exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1
//	failed quota: compute: must specify limits.cpu for: web; requests.cpu for: web
func ResourceQuota(p *corev1.Pod, quotas []corev1.ResourceQuota, existing []corev1.Pod) (updated []corev1.ResourceQuota, notes []string, err error) {
	now := time.Now()
	usage := podUsage(p, now)
	var negative []string
	for _, name := range sortedNames(usage) {
		if q := usage[name]; q.Sign() < 0 {
			negative = append(negative, string(name))
		}
	}
	if len(negative) > 0 {
		return nil, nil, apierrors.NewForbidden(podsResource, p.Name,
			fmt.Errorf("quota usage is negative for resource(s): %s", strings.Join(negative, ",")))
	}

	// First every applicable quota's constraints, then the usage: the same
	// order as kube-apiserver, so the same quota is named in the error.
	tracked := make([][]corev1.ResourceName, len(quotas))
	for i := range quotas {
		q := &quotas[i]
		names := trackedPodResources(quotaHard(q))
		match, err := podMatchesQuotaScopes(q, p)
		if err != nil {
			return nil, nil, fmt.Errorf("matching quota %s: %w", q.Name, err)
		}
		if len(names) == 0 || !match {
			continue
		}
		if err := quotaConstraints(names, p); err != nil {
			return nil, nil, apierrors.NewForbidden(podsResource, p.Name, fmt.Errorf("failed quota: %s: %v", q.Name, err))
		}
		tracked[i] = names
	}

	updated = make([]corev1.ResourceQuota, len(quotas))
	for i := range quotas {
		q := quotas[i].DeepCopy()
		hard := quotaHard(q)
		used := quotaUsage(q, existing, p.Name, now)
		q.Status.Hard = hard.DeepCopy()
		status := corev1.ResourceList{}
		for name, v := range quotas[i].Status.Used {
			if _, known := hard[name]; known {
				status[name] = v.DeepCopy() // counted by someone else (services, configmaps, ...)
			}
		}
		for name, v := range used {
			status[name] = v
		}
		q.Status.Used = status
		updated[i] = *q

		names := tracked[i]
		if names == nil {
			notes = append(notes, fmt.Sprintf("quota %q: does not apply to this pod (%s)", q.Name, whyNotApplies(q)))
			continue
		}
		requested := corev1.ResourceList{}
		addPodUsage(requested, names, p, now)
		if len(requested) == 0 {
			notes = append(notes, fmt.Sprintf("quota %q: this pod uses none of what it tracks", q.Name))
			continue
		}
		newUsed := used.DeepCopy()
		addResources(newUsed, requested)
		var exceeded []corev1.ResourceName
		for _, name := range sortedNames(requested) {
			if h, v := hard[name], newUsed[name]; v.Cmp(h) > 0 {
				exceeded = append(exceeded, name)
			}
		}
		if len(exceeded) > 0 {
			return nil, notes, apierrors.NewForbidden(podsResource, p.Name,
				fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s", q.Name,
					prettyPrint(requested, exceeded), prettyPrint(used, exceeded), prettyPrint(hard, exceeded)))
		}
		var parts []string
		for _, name := range sortedNames(requested) {
			v, h := newUsed[name], hard[name]
			parts = append(parts, fmt.Sprintf("%s %s of %s", name, v.String(), h.String()))
			status[name] = v
		}
		notes = append(notes, fmt.Sprintf("quota %q: %s used after this pod", q.Name, strings.Join(parts, ", ")))
	}
	return updated, notes, nil
}

// QuotaUsage is what the quota controller would put in status.used for the
// pod resources quota tracks: the sum over the pods that count for it (in
// its namespace, matching its scopes, and for all but count/pods not in a
// terminal phase), with a 0 for each tracked resource nothing uses. Hard
// limits on other things (services, configmaps, ...) are not in the result.
func QuotaUsage(quota corev1.ResourceQuota, pods []corev1.Pod) corev1.ResourceList {
	return quotaUsage(&quota, pods, "", time.Now())
}

// quotaUsage is QuotaUsage ignoring the pod named skip.
func quotaUsage(quota *corev1.ResourceQuota, pods []corev1.Pod, skip string, now time.Time) corev1.ResourceList {
	names := trackedPodResources(quotaHard(quota))
	used := corev1.ResourceList{}
	for _, name := range names {
		used[name] = zeroQuantity()
	}
	if len(names) == 0 {
		return used
	}
	for i := range pods {
		p := &pods[i]
		if p.Name == skip && skip != "" {
			continue
		}
		if quota.Namespace != "" && p.Namespace != "" && p.Namespace != quota.Namespace {
			continue
		}
		if match, err := podMatchesQuotaScopes(quota, p); err != nil || !match {
			continue
		}
		addPodUsage(used, names, p, now)
	}
	return used
}

// quotaHard is the quota's spec.hard, or its status.hard when a client
// stored only a status.
func quotaHard(q *corev1.ResourceQuota) corev1.ResourceList {
	if len(q.Spec.Hard) > 0 {
		return q.Spec.Hard
	}
	return q.Status.Hard
}

// trackedPodResources returns, sorted, the names in hard that pods consume.
func trackedPodResources(hard corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for _, name := range sortedNames(hard) {
		if slices.Contains(podQuotaResources, name) || isHugePages(name) || strings.HasPrefix(string(name), "requests.hugepages-") {
			names = append(names, name)
		}
	}
	return names
}

// podUsage is what one pod consumes of quota (PodUsageFunc): always one
// count/pods, and its compute resources and one "pods" unless it is done
// (Succeeded or Failed) or stuck deleting past its grace period.
func podUsage(p *corev1.Pod, now time.Time) corev1.ResourceList {
	usage := corev1.ResourceList{"count/pods": *resource.NewQuantity(1, resource.DecimalSI)}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return usage
	}
	if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil &&
		now.After(p.DeletionTimestamp.Add(time.Duration(*p.DeletionGracePeriodSeconds)*time.Second)) {
		return usage
	}
	addResources(usage, computeUsage(PodRequests(p), PodLimits(p)))
	return usage
}

// addPodUsage adds what p consumes of each of names to used: the same
// numbers as podUsage, computed per name without building maps, since it
// runs for every pod of the namespace on every create.
func addPodUsage(used corev1.ResourceList, names []corev1.ResourceName, p *corev1.Pod, now time.Time) {
	charged := !(p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	if charged && p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil &&
		now.After(p.DeletionTimestamp.Add(time.Duration(*p.DeletionGracePeriodSeconds)*time.Second)) {
		charged = false
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	for _, name := range names {
		var q resource.Quantity
		switch {
		case name == "count/pods":
			q = one
		case !charged:
			continue
		case name == corev1.ResourcePods:
			q = one
		default:
			base, limits := quotaResourceBase(name)
			q = podQuantity(p, base, limits)
		}
		if q.IsZero() {
			continue
		}
		v := used[name]
		v.Add(q)
		used[name] = v
	}
}

// quotaResourceBase maps a quota resource name to the container resource
// it counts and whether it counts limits: requests.cpu -> cpu, requests;
// limits.memory -> memory, limits; cpu -> cpu, requests.
func quotaResourceBase(name corev1.ResourceName) (corev1.ResourceName, bool) {
	s := string(name)
	if rest, ok := strings.CutPrefix(s, "limits."); ok {
		return corev1.ResourceName(rest), true
	}
	if rest, ok := strings.CutPrefix(s, "requests."); ok {
		return corev1.ResourceName(rest), false
	}
	return name, false
}

// computeUsage maps requests and limits to quota resource names (pods=1,
// cpu and requests.cpu from the cpu request, limits.cpu from its limit, ...).
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	u := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, r := range []struct{ res, plain, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[r.res]; ok {
			u[r.plain] = q.DeepCopy()
			u[r.req] = q.DeepCopy()
		}
		if q, ok := limits[r.res]; ok {
			u[r.lim] = q.DeepCopy()
		}
	}
	for name, q := range requests {
		if isHugePages(name) {
			u[name] = q.DeepCopy()
			u["requests."+name] = q.DeepCopy()
		}
	}
	return u
}

// quotaConstraints is the pod evaluator's Constraints: when a quota tracks
// cpu or memory requests or limits, every container must set them, so that
// the quota can count them. Pod-level resources lift the rule.
func quotaConstraints(tracked []corev1.ResourceName, p *corev1.Pod) error {
	if r := p.Spec.Resources; r != nil && (len(r.Requests) > 0 || len(r.Limits) > 0) {
		return nil
	}
	var required []corev1.ResourceName
	for _, name := range tracked {
		if slices.Contains(mustSpecify, name) {
			required = append(required, name)
		}
	}
	if len(required) == 0 {
		return nil
	}
	missing := map[corev1.ResourceName][]string{}
	check := func(c *corev1.Container) {
		u := computeUsage(c.Resources.Requests, c.Resources.Limits)
		for _, name := range required {
			if _, ok := u[name]; !ok && !slices.Contains(missing[name], c.Name) {
				missing[name] = append(missing[name], c.Name)
			}
		}
	}
	for i := range p.Spec.Containers {
		check(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		check(&p.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	var msgs []string
	for _, name := range sortedNames(missing) {
		containers := missing[name]
		slices.Sort(containers)
		msgs = append(msgs, fmt.Sprintf("%s for: %s", name, strings.Join(containers, ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

// prettyPrint formats the names of list as "a=1,b=2m", as kube's quota
// errors do.
func prettyPrint(list corev1.ResourceList, names []corev1.ResourceName) string {
	parts := make([]string, 0, len(names))
	for _, name := range names {
		q := list[name]
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	return strings.Join(parts, ",")
}

// quotaScopes returns the quota's scopes and scope selector as one list of
// requirements, as kube does.
func quotaScopes(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var reqs []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		reqs = append(reqs, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		reqs = append(reqs, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return reqs
}

// podMatchesQuotaScopes reports whether every scope of q selects p.
func podMatchesQuotaScopes(q *corev1.ResourceQuota, p *corev1.Pod) (bool, error) {
	for _, s := range quotaScopes(q) {
		ok, err := podMatchesScope(s, p)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func podMatchesScope(s corev1.ScopedResourceSelectorRequirement, p *corev1.Pod) (bool, error) {
	terminating := p.Spec.ActiveDeadlineSeconds != nil && *p.Spec.ActiveDeadlineSeconds >= 0
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating, nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating, nil
	case corev1.ResourceQuotaScopeBestEffort:
		return qos.Compute(p) == corev1.PodQOSBestEffort, nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return qos.Compute(p) != corev1.PodQOSBestEffort, nil
	case corev1.ResourceQuotaScopePriorityClass:
		if s.Operator == corev1.ScopeSelectorOpExists {
			return p.Spec.PriorityClassName != "", nil
		}
		op, ok := map[corev1.ScopeSelectorOperator]selection.Operator{
			corev1.ScopeSelectorOpIn: selection.In, corev1.ScopeSelectorOpNotIn: selection.NotIn,
			corev1.ScopeSelectorOpDoesNotExist: selection.DoesNotExist,
		}[s.Operator]
		if !ok {
			return false, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
		}
		req, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
		if err != nil {
			return false, err
		}
		set := labels.Set{}
		if p.Spec.PriorityClassName != "" {
			set[string(s.ScopeName)] = p.Spec.PriorityClassName
		}
		return labels.NewSelector().Add(*req).Matches(set), nil
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(p), nil
	}
	return false, nil
}

// crossNamespaceAffinity reports whether a pod (anti-)affinity term looks
// at other namespaces.
func crossNamespaceAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// whyNotApplies explains a quota that does not charge the pod.
func whyNotApplies(q *corev1.ResourceQuota) string {
	if len(trackedPodResources(quotaHard(q))) == 0 {
		return "it tracks no pod resources"
	}
	var scopes []string
	for _, s := range quotaScopes(q) {
		scopes = append(scopes, string(s.ScopeName))
	}
	return "pod is not in its scopes " + strings.Join(scopes, ",")
}
