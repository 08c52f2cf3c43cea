package admission

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// This file is the pod resource arithmetic shared by LimitRanger (type Pod),
// ResourceQuota and the QoS class, as k8s.io/component-helpers/resource and
// pkg/apis/core/v1/helper/qos compute it.

// PodRequests is what the scheduler and quota count as the pod's requests:
// the sum over its containers, raised to the largest init container (which
// runs alone, before them), sidecars (init containers with restartPolicy
// Always) counted as running alongside, plus the pod overhead. Pod-level
// spec.resources, when set, replace the sum for the resources they name.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	return podResources(p, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests },
		func(r *corev1.ResourceRequirements) corev1.ResourceList { return r.Requests })
}

// PodLimits is PodRequests for limits. A container without a limit adds
// nothing, so a pod's limit sum is only meaningful when every container
// sets one.
func PodLimits(p *corev1.Pod) corev1.ResourceList {
	return podResources(p, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Limits },
		func(r *corev1.ResourceRequirements) corev1.ResourceList { return r.Limits })
}

func podResources(p *corev1.Pod, of func(corev1.ResourceRequirements) corev1.ResourceList, podLevel func(*corev1.ResourceRequirements) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		addResources(total, of(c.Resources))
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for _, c := range p.Spec.InitContainers {
		r := of(c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addResources(total, r)
			addResources(sidecars, r)
			maxResources(initMax, sidecars)
			continue
		}
		running := corev1.ResourceList{}
		addResources(running, r)
		addResources(running, sidecars)
		maxResources(initMax, running)
	}
	maxResources(total, initMax)
	if p.Spec.Resources != nil {
		for name, q := range podLevel(p.Spec.Resources) {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory || isHugePages(name) {
				total[name] = q.DeepCopy()
			}
		}
	}
	addResources(total, p.Spec.Overhead)
	return total
}

// podQuantity is PodRequests (limits false) or PodLimits (limits true) for
// one resource, without building maps.
func podQuantity(p *corev1.Pod, name corev1.ResourceName, limits bool) resource.Quantity {
	of := func(r *corev1.ResourceRequirements) (resource.Quantity, bool) {
		list := r.Requests
		if limits {
			list = r.Limits
		}
		q, ok := list[name]
		return q, ok
	}
	var total resource.Quantity
	if q, ok := podLevelQuantity(p, name, of); ok {
		total = q
	} else {
		for i := range p.Spec.Containers {
			if q, ok := of(&p.Spec.Containers[i].Resources); ok {
				total.Add(q)
			}
		}
		var sidecars, initMax resource.Quantity
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			q, _ := of(&c.Resources)
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				total.Add(q)
				sidecars.Add(q)
				if sidecars.Cmp(initMax) > 0 {
					initMax = sidecars.DeepCopy()
				}
				continue
			}
			running := q.DeepCopy()
			running.Add(sidecars)
			if running.Cmp(initMax) > 0 {
				initMax = running
			}
		}
		if initMax.Cmp(total) > 0 {
			total = initMax
		}
	}
	if q, ok := p.Spec.Overhead[name]; ok {
		total.Add(q)
	}
	return total
}

func podLevelQuantity(p *corev1.Pod, name corev1.ResourceName, of func(*corev1.ResourceRequirements) (resource.Quantity, bool)) (resource.Quantity, bool) {
	if p.Spec.Resources == nil || !(name == corev1.ResourceCPU || name == corev1.ResourceMemory || isHugePages(name)) {
		return resource.Quantity{}, false
	}
	q, ok := of(p.Spec.Resources)
	return q.DeepCopy(), ok
}

// addResources adds add into list, key by key.
func addResources(list, add corev1.ResourceList) {
	for name, q := range add {
		if have, ok := list[name]; ok {
			have.Add(q)
			list[name] = have
		} else {
			list[name] = q.DeepCopy()
		}
	}
}

// maxResources raises each key of list to at least the value in other.
func maxResources(list, other corev1.ResourceList) {
	for name, q := range other {
		if have, ok := list[name]; !ok || q.Cmp(have) > 0 {
			list[name] = q.DeepCopy()
		}
	}
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// zeroQuantity is a fresh "0", formatted the way quota status prints it.
func zeroQuantity() resource.Quantity {
	return resource.Quantity{Format: resource.DecimalSI}
}

// sortedNames returns the keys of a resource map in order, so that notes and
// errors come out the same on every run.
func sortedNames[M ~map[corev1.ResourceName]V, V any](m M) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
