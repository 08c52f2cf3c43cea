package qos

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func resources(req, lim map[corev1.ResourceName]string) corev1.ResourceRequirements {
	list := func(m map[corev1.ResourceName]string) corev1.ResourceList {
		if m == nil {
			return nil
		}
		l := corev1.ResourceList{}
		for k, v := range m {
			l[k] = resource.MustParse(v)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(req), Limits: list(lim)}
}

func pod(rs ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{}
	for _, r := range rs {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: r})
	}
	return p
}

type rl = map[corev1.ResourceName]string

func TestCompute(t *testing.T) {
	cpuMem := rl{"cpu": "500m", "memory": "64Mi"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"nothing asked", pod(resources(nil, nil)), corev1.PodQOSBestEffort},
		{"only a non-QoS resource", pod(resources(rl{"ephemeral-storage": "1Gi"}, nil)), corev1.PodQOSBestEffort},
		{"a zero request", pod(resources(rl{"cpu": "0"}, nil)), corev1.PodQOSBestEffort},
		{"a cpu request", pod(resources(rl{"cpu": "100m"}, nil)), corev1.PodQOSBurstable},
		{"limits equal requests", pod(resources(cpuMem, cpuMem)), corev1.PodQOSGuaranteed},
		// as ComputePodQOS: the API server defaults requests to the limits
		// before it computes the class, so a stored pod has them
		{"limits only, before defaulting", pod(resources(nil, cpuMem)), corev1.PodQOSBurstable},
		{"a memory limit missing", pod(resources(cpuMem, rl{"cpu": "500m"})), corev1.PodQOSBurstable},
		{"requests below limits", pod(resources(rl{"cpu": "100m", "memory": "64Mi"}, cpuMem)), corev1.PodQOSBurstable},
		{"one container guaranteed, one best effort", pod(resources(cpuMem, cpuMem), resources(nil, nil)), corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(tt.pod); got != tt.want {
				t.Errorf("Compute = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestOf_PrefersTheStoredClass(t *testing.T) {
	p := pod(resources(nil, nil))
	p.Status.QOSClass = corev1.PodQOSBurstable
	if got := Of(p); got != corev1.PodQOSBurstable {
		t.Errorf("Of = %s, want the stored Burstable", got)
	}
	p.Status.QOSClass = ""
	if got := Of(p); got != corev1.PodQOSBestEffort {
		t.Errorf("Of = %s, want BestEffort computed", got)
	}
}
