package kubectl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podTemplate is kubectl's "Pod Template:" section of a workload.
func (d *describer) podTemplate(t *corev1.PodTemplateSpec) {
	d.write(0, "Pod Template:\n")
	d.labels("  Labels", t.Labels)
	if len(t.Annotations) > 0 {
		d.annotations("  Annotations", t.Annotations)
	}
	if t.Spec.ServiceAccountName != "" {
		d.write(1, "Service Account:\t%s\n", t.Spec.ServiceAccountName)
	}
	if len(t.Spec.InitContainers) > 0 {
		d.containers("Init Containers", t.Spec.InitContainers, nil, nil, "  ")
	}
	d.containers("Containers", t.Spec.Containers, nil, nil, "  ")
	d.volumes(t.Spec.Volumes, "  ")
	if t.Spec.PriorityClassName != "" {
		d.write(1, "Priority Class Name:\t%s\n", t.Spec.PriorityClassName)
	}
	d.labels("  Node-Selectors", t.Spec.NodeSelector)
	d.tolerations("  Tolerations", t.Spec.Tolerations)
}

// deployment is kubectl describe deployment: replicas, the rollout strategy,
// the pod template, and which ReplicaSet is new and which are old.
func (d *describer) deployment(dep *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) {
	d.write(0, "Name:\t%s\n", dep.Name)
	d.write(0, "Namespace:\t%s\n", dep.Namespace)
	d.write(0, "CreationTimestamp:\t%s\n", rfc1123(dep.CreationTimestamp))
	d.labels("Labels", dep.Labels)
	d.annotations("Annotations", dep.Annotations)
	selector := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err == nil {
		selector = s.String()
	}
	d.write(0, "Selector:\t%s\n", selector)
	d.write(0, "Replicas:\t%d desired | %d updated | %d total | %d available | %d unavailable\n",
		deref(dep.Spec.Replicas), dep.Status.UpdatedReplicas, dep.Status.Replicas, dep.Status.AvailableReplicas, dep.Status.UnavailableReplicas)
	d.write(0, "StrategyType:\t%s\n", dep.Spec.Strategy.Type)
	d.write(0, "MinReadySeconds:\t%d\n", dep.Spec.MinReadySeconds)
	if ru := dep.Spec.Strategy.RollingUpdate; ru != nil {
		d.write(0, "RollingUpdateStrategy:\t%s max unavailable, %s max surge\n", ru.MaxUnavailable.String(), ru.MaxSurge.String())
	}
	d.podTemplate(&dep.Spec.Template)
	d.workloadConditions(len(dep.Status.Conditions), func(i int) (string, string, string) {
		c := dep.Status.Conditions[i]
		return string(c.Type), string(c.Status), c.Reason
	})
	oldRSs, newRS := splitReplicaSets(dep, replicaSets)
	if len(oldRSs) > 0 || newRS != nil {
		var newRSs []*appsv1.ReplicaSet
		if newRS != nil {
			newRSs = append(newRSs, newRS)
		}
		d.write(0, "OldReplicaSets:\t%s\n", replicaSetList(oldRSs))
		d.write(0, "NewReplicaSet:\t%s\n", replicaSetList(newRSs))
	}
}

func (d *describer) workloadConditions(n int, cond func(int) (typ, status, reason string)) {
	if n == 0 {
		return
	}
	d.write(0, "Conditions:\n  Type\tStatus\tReason\n")
	d.write(1, "----\t------\t------\n")
	for i := range n {
		t, s, r := cond(i)
		d.write(1, "%v \t%v\t%v\n", t, s, r)
	}
}

// splitReplicaSets finds a Deployment's ReplicaSets (those it controls) and
// tells the new one, whose pod template is the Deployment's (but for the
// pod-template-hash label), from the old ones, as the deployment controller
// does.
func splitReplicaSets(dep *appsv1.Deployment, all []*appsv1.ReplicaSet) (old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	var owned []*appsv1.ReplicaSet
	for _, rs := range all {
		if rs != nil && metav1.IsControlledBy(rs, dep) {
			owned = append(owned, rs)
		}
	}
	sort.SliceStable(owned, func(i, j int) bool {
		return owned[i].CreationTimestamp.Before(&owned[j].CreationTimestamp)
	})
	for _, rs := range owned {
		if newRS == nil && sameTemplate(&rs.Spec.Template, &dep.Spec.Template) {
			newRS = rs
			continue
		}
		old = append(old, rs)
	}
	return old, newRS
}

func sameTemplate(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

func replicaSetList(rss []*appsv1.ReplicaSet) string {
	if len(rss) == 0 {
		return "<none>"
	}
	s := make([]string, len(rss))
	for i, rs := range rss {
		s[i] = fmt.Sprintf("%s (%d/%d replicas created)", rs.Name, rs.Status.Replicas, deref(rs.Spec.Replicas))
	}
	return strings.Join(s, ", ")
}

// replicaSet is kubectl describe replicaset: its owner, replicas, the phases
// of the pods it controls and its pod template.
func (d *describer) replicaSet(rs *appsv1.ReplicaSet, cfg describeConfig) {
	d.write(0, "Name:\t%s\n", rs.Name)
	d.write(0, "Namespace:\t%s\n", rs.Namespace)
	d.write(0, "Selector:\t%s\n", metav1.FormatLabelSelector(rs.Spec.Selector))
	d.labels("Labels", rs.Labels)
	d.annotations("Annotations", rs.Annotations)
	if c := controlledBy(rs); c != "" {
		d.write(0, "Controlled By:\t%s\n", c)
	}
	d.write(0, "Replicas:\t%d current / %d desired\n", rs.Status.Replicas, deref(rs.Spec.Replicas))
	if cfg.podsGiven {
		var running, waiting, succeeded, failed int
		for _, p := range cfg.pods {
			if p == nil || !metav1.IsControlledBy(p, rs) {
				continue
			}
			switch p.Status.Phase {
			case corev1.PodRunning:
				running++
			case corev1.PodPending:
				waiting++
			case corev1.PodSucceeded:
				succeeded++
			case corev1.PodFailed:
				failed++
			}
		}
		d.write(0, "Pods Status:\t%d Running / %d Waiting / %d Succeeded / %d Failed\n", running, waiting, succeeded, failed)
	} else {
		d.write(0, "Pods Status:\t<pods not listed>\n")
	}
	d.podTemplate(&rs.Spec.Template)
	d.workloadConditions(len(rs.Status.Conditions), func(i int) (string, string, string) {
		c := rs.Status.Conditions[i]
		return string(c.Type), string(c.Status), c.Reason
	})
}

// namespace is kubectl describe namespace, with the quotas and limit ranges
// when the caller gave them.
func (d *describer) namespace(ns *corev1.Namespace, cfg describeConfig) {
	d.write(0, "Name:\t%s\n", ns.Name)
	d.labels("Labels", ns.Labels)
	d.annotations("Annotations", ns.Annotations)
	d.write(0, "Status:\t%s\n", ns.Status.Phase)
	if len(ns.Status.Conditions) > 0 {
		d.write(0, "Conditions:\n")
		d.write(1, "Type\tStatus\tLastTransitionTime\tReason\tMessage\n")
		d.write(1, "----\t------\t------------------\t------\t-------\n")
		for _, c := range ns.Status.Conditions {
			d.write(1, "%v\t%v\t%s\t%v\t%v\n", c.Type, c.Status, rfc1123(c.LastTransitionTime), c.Reason, c.Message)
		}
	}
	if cfg.quotasGiven {
		d.write(0, "\n")
		if len(cfg.quotas) == 0 {
			d.write(0, "No resource quota.\n")
		} else {
			quotas := append([]*corev1.ResourceQuota(nil), cfg.quotas...)
			sort.Slice(quotas, func(i, j int) bool { return quotas[i].Name < quotas[j].Name })
			d.write(0, "Resource Quotas\n")
			for _, q := range quotas {
				d.write(1, "Name:\t%s\n", q.Name)
				d.write(1, "Resource\tUsed\tHard\n")
				d.write(1, "--------\t---\t---\n")
				for _, n := range sortedResourceNames(q.Status.Hard) {
					hard, used := q.Status.Hard[n], q.Status.Used[n]
					d.write(1, "%s\t%s\t%s\n", n, used.String(), hard.String())
				}
			}
		}
	}
	if cfg.limitRangesGiven {
		d.write(0, "\n")
		if len(cfg.limitRanges) == 0 {
			d.write(0, "No LimitRange resource.\n")
		} else {
			d.write(0, "Resource Limits\n Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n")
			d.write(0, " ----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
			for _, l := range cfg.limitRanges {
				d.limitRangeSpec(l.Spec, " ")
			}
		}
	}
}

// limitRangeSpec writes one row per limit type and resource ("-" where a
// value is not set).
func (d *describer) limitRangeSpec(spec corev1.LimitRangeSpec, prefix string) {
	for _, item := range spec.Limits {
		lists := []corev1.ResourceList{item.Min, item.Max, item.DefaultRequest, item.Default, item.MaxLimitRequestRatio}
		names := corev1.ResourceList{}
		for _, l := range lists {
			for n, q := range l {
				names[n] = q
			}
		}
		for _, n := range sortedResourceNames(names) {
			values := make([]any, 0, len(lists))
			for _, l := range lists {
				v := "-"
				if q, ok := l[n]; ok {
					v = q.String()
				}
				values = append(values, v)
			}
			d.write(0, "%s%s\t%v\t%v\t%v\t%v\t%v\t%v\n", append([]any{prefix, item.Type, n}, values...)...)
		}
	}
}

// quota is kubectl describe resourcequota: used and hard per resource.
func (d *describer) quota(q *corev1.ResourceQuota) {
	d.write(0, "Name:\t%s\n", q.Name)
	d.write(0, "Namespace:\t%s\n", q.Namespace)
	if len(q.Spec.Scopes) > 0 {
		scopes := make([]string, len(q.Spec.Scopes))
		for i, s := range q.Spec.Scopes {
			scopes[i] = string(s)
		}
		sort.Strings(scopes)
		d.write(0, "Scopes:\t%s\n", strings.Join(scopes, ", "))
	}
	d.write(0, "Resource\tUsed\tHard\n")
	d.write(0, "--------\t----\t----\n")
	for _, n := range sortedResourceNames(q.Status.Hard) {
		hard, used := q.Status.Hard[n], q.Status.Used[n]
		if hard.Format != used.Format {
			used = *resource.NewQuantity(used.Value(), hard.Format)
		}
		d.write(0, "%v\t%v\t%v\n", n, used.String(), hard.String())
	}
}

// role is kubectl's PolicyRule table: the rules broken down to one
// resource each, the verbs of a resource merged back, sorted.
func (d *describer) role(name string, labels, annotations map[string]string, rules []rbacv1.PolicyRule) {
	d.write(0, "Name:\t%s\n", name)
	d.labels("Labels", labels)
	d.annotations("Annotations", annotations)
	d.write(0, "PolicyRule:\n")
	d.write(1, "Resources\tNon-Resource URLs\tResource Names\tVerbs\n")
	d.write(1, "---------\t-----------------\t--------------\t-----\n")
	for _, r := range compactRules(rules) {
		d.write(1, "%s\t%v\t%v\t%v\n", combineResourceGroup(r.Resources, r.APIGroups), r.NonResourceURLs, r.ResourceNames, r.Verbs)
	}
}

// compactRules is kubectl's BreakdownRule + CompactRules + sort.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct{ group, resource, name string }
	var out []rbacv1.PolicyRule
	merged := map[simple]int{} // index in out
	for _, rule := range rules {
		var parts []rbacv1.PolicyRule
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, v := range rule.Verbs {
					if len(rule.ResourceNames) == 0 {
						parts = append(parts, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: []string{v}})
					}
					for _, n := range rule.ResourceNames {
						parts = append(parts, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: []string{v}, ResourceNames: []string{n}})
					}
				}
			}
		}
		for _, u := range rule.NonResourceURLs {
			for _, v := range rule.Verbs {
				out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
			}
		}
		for _, p := range parts {
			key := simple{p.APIGroups[0], p.Resources[0], ""}
			if len(p.ResourceNames) > 0 {
				key.name = "/" + p.ResourceNames[0]
			}
			i, ok := merged[key]
			if !ok {
				merged[key] = len(out)
				out = append(out, p)
				continue
			}
			if !slices.Contains(out[i].Verbs, p.Verbs[0]) {
				out[i].Verbs = append(out[i].Verbs, p.Verbs[0])
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// combineResourceGroup is "deployments.apps", "pods", "pods/log".
func combineResourceGroup(resources, groups []string) string {
	if len(resources) == 0 {
		return ""
	}
	res, sub, hasSub := strings.Cut(resources[0], "/")
	if len(groups) > 0 && groups[0] != "" {
		res += "." + groups[0]
	}
	if hasSub {
		res += "/" + sub
	}
	return res
}

// binding is kubectl describe rolebinding (and clusterrolebinding): the role
// it grants and to whom.
func (d *describer) binding(name string, labels, annotations map[string]string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
	d.write(0, "Name:\t%s\n", name)
	d.labels("Labels", labels)
	d.annotations("Annotations", annotations)
	d.write(0, "Role:\n")
	d.write(1, "Kind:\t%s\n", ref.Kind)
	d.write(1, "Name:\t%s\n", ref.Name)
	d.write(0, "Subjects:\n")
	d.write(1, "Kind\tName\tNamespace\n")
	d.write(1, "----\t----\t---------\n")
	for _, s := range subjects {
		d.write(1, "%s\t%s\t%s\n", s.Kind, s.Name, s.Namespace)
	}
}
