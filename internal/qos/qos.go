// Package qos computes a pod's Quality of Service class, as Kubernetes'
// pkg/apis/core/v1/helper/qos does for both the API server (which stores it
// in status.qosClass on create) and the kubelet (which picks the pod's
// cgroup tier and its containers' OOM score from it). One function, so the
// API server, the kubelet and kubectl describe never disagree.
package qos

import (
	corev1 "k8s.io/api/core/v1"
)

// Of is the pod's class as the kubelet reads it (v1qos.GetPodQOS):
// status.qosClass when the API server set it, else computed.
func Of(p *corev1.Pod) corev1.PodQOSClass {
	if p.Status.QOSClass != "" {
		return p.Status.QOSClass
	}
	return Compute(p)
}

// Compute computes the pod's Quality of Service class the way the API
// server does when it stores status.qosClass:
//
//   - BestEffort: no container requests or limits any cpu or memory.
//   - Guaranteed: every container has cpu and memory limits, and the
//     requests equal the limits.
//   - Burstable: everything else.
func Compute(p *corev1.Pod) corev1.PodQOSClass {
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	guaranteed := true
	collect := func(r corev1.ResourceRequirements) {
		for name, q := range r.Requests {
			if isQOSResource(name) && q.Sign() > 0 {
				addResources(requests, corev1.ResourceList{name: q})
			}
		}
		found := 0
		for name, q := range r.Limits {
			if isQOSResource(name) && q.Sign() > 0 {
				found++
				addResources(limits, corev1.ResourceList{name: q})
			}
		}
		if found != 2 {
			guaranteed = false
		}
	}
	if p.Spec.Resources != nil {
		collect(*p.Spec.Resources)
	} else {
		for _, c := range p.Spec.Containers {
			collect(c.Resources)
		}
		for _, c := range p.Spec.InitContainers {
			collect(c.Resources)
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func isQOSResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory
}

// addResources adds each quantity of add into sum.
func addResources(sum, add corev1.ResourceList) {
	for name, q := range add {
		s := sum[name]
		s.Add(q)
		sum[name] = s
	}
}
