package admission

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkAdmitPod is the admission chain of one pod create, as the API
// server runs it inside its store transaction: defaults, validation,
// LimitRanger, ResourceQuota against 100 existing pods, PodSecurity
// (restricted).
func BenchmarkAdmitPod(b *testing.B) {
	psa := newPodSecurity(b)
	ns := labelled(enforceRestricted)
	ranges := []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{
		Default: rl("cpu=500m", "memory=256Mi"), DefaultRequest: rl("cpu=100m", "memory=128Mi"),
		Max: rl("cpu=2", "memory=1Gi")}))}
	quotas := []corev1.ResourceQuota{quota("compute", rl("pods=200", "requests.cpu=40", "requests.memory=64Gi", "limits.cpu=80", "limits.memory=128Gi"))}
	existing := make([]corev1.Pod, 100)
	for i := range existing {
		existing[i] = *sized(fmt.Sprintf("web-%d", i), "100m", "128Mi")
	}
	template := hardened()
	template.Spec = corev1.PodSpec{Containers: template.Spec.Containers, SecurityContext: template.Spec.SecurityContext}
	template.Status = corev1.PodStatus{}

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p := template.DeepCopy()
		DefaultPod(p)
		LimitRangerMutate(p, ranges)
		if err := Validate(p); err != nil {
			b.Fatal(err)
		}
		if _, err := LimitRangerValidate(p, ranges); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ResourceQuota(p, quotas, existing); err != nil {
			b.Fatal(err)
		}
		if _, err := psa.Admit(ns, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewPodSecurity is what building the evaluator costs, the reason
// it is built once.
func BenchmarkNewPodSecurity(b *testing.B) {
	for b.Loop() {
		if _, err := NewPodSecurity(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitPodStages times each stage of BenchmarkAdmitPod alone.
func BenchmarkAdmitPodStages(b *testing.B) {
	psa := newPodSecurity(b)
	ns := labelled(enforceRestricted)
	ranges := []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{
		Default: rl("cpu=500m", "memory=256Mi"), DefaultRequest: rl("cpu=100m", "memory=128Mi"), Max: rl("cpu=2", "memory=1Gi")}))}
	quotas := []corev1.ResourceQuota{quota("compute", rl("pods=200", "requests.cpu=40", "requests.memory=64Gi", "limits.cpu=80", "limits.memory=128Gi"))}
	existing := make([]corev1.Pod, 100)
	for i := range existing {
		existing[i] = *sized(fmt.Sprintf("web-%d", i), "100m", "128Mi")
	}
	raw := hardened()
	raw.Spec = corev1.PodSpec{Containers: raw.Spec.Containers, SecurityContext: raw.Spec.SecurityContext}
	raw.Status = corev1.PodStatus{}
	admitted := raw.DeepCopy()
	DefaultPod(admitted)
	LimitRangerMutate(admitted, ranges)

	b.Run("DefaultPod", func(b *testing.B) {
		for b.Loop() {
			DefaultPod(raw.DeepCopy())
		}
	})
	b.Run("LimitRanger", func(b *testing.B) {
		base := raw.DeepCopy()
		DefaultPod(base)
		for b.Loop() {
			if _, err := LimitRanger(base.DeepCopy(), ranges); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Validate", func(b *testing.B) {
		for b.Loop() {
			if err := Validate(admitted); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ResourceQuota/100pods", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := ResourceQuota(admitted, quotas, existing); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PodSecurity/restricted", func(b *testing.B) {
		for b.Loop() {
			if _, err := psa.Admit(ns, admitted); err != nil {
				b.Fatal(err)
			}
		}
	})
}
