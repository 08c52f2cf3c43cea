package admission

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func quota(name string, hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) corev1.ResourceQuota {
	return corev1.ResourceQuota{ObjectMeta: meta(name), Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}}
}

// sized is a defaulted one-container pod with equal requests and limits.
func sized(name, cpu, memory string) *corev1.Pod {
	r := rl("cpu="+cpu, "memory="+memory)
	return defaultedPod(name, withResources(ctr("web", "nginx"), r, r))
}

func pods(ps ...*corev1.Pod) []corev1.Pod {
	out := make([]corev1.Pod, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

func withPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

func TestResourceQuota_Pass(t *testing.T) {
	q := quota("compute", rl("pods=3", "requests.cpu=1", "requests.memory=1Gi", "limits.cpu=2", "limits.memory=2Gi"))
	existing := pods(sized("a", "300m", "256Mi"), sized("b", "100m", "128Mi"))

	updated, notes, err := ResourceQuota(sized("web", "200m", "256Mi"), []corev1.ResourceQuota{q}, existing)
	if err != nil {
		t.Fatalf("ResourceQuota: %v", err)
	}
	wantUsed := rl("pods=3", "requests.cpu=600m", "requests.memory=640Mi", "limits.cpu=600m", "limits.memory=640Mi")
	if got := updated[0].Status.Used; !apiequality.Semantic.DeepEqual(got, wantUsed) {
		t.Errorf("status.used = %v, want %v", got, wantUsed)
	}
	if got := updated[0].Status.Hard; !apiequality.Semantic.DeepEqual(got, q.Spec.Hard) {
		t.Errorf("status.hard = %v, want spec.hard %v", got, q.Spec.Hard)
	}
	want := `quota "compute": limits.cpu 600m of 2, limits.memory 640Mi of 2Gi, pods 3 of 3, requests.cpu 600m of 1, requests.memory 640Mi of 1Gi used after this pod`
	if !slices.Equal(notes, []string{want}) {
		t.Errorf("notes = %q, want [%q]", notes, want)
	}
	if q.Status.Used != nil {
		t.Errorf("the caller's quota was modified: %v", q.Status.Used)
	}
}

func TestResourceQuota_Exceeded(t *testing.T) {
	existing := pods(sized("a", "500m", "512Mi"), sized("b", "300m", "256Mi"))
	for _, tc := range []struct {
		name string
		hard corev1.ResourceList
		want string
	}{
		{"pods", rl("pods=2"), `pods "web" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`},
		{"count/pods", rl("count/pods=2"), `pods "web" is forbidden: exceeded quota: q, requested: count/pods=1, used: count/pods=2, limited: count/pods=2`},
		{"requests.cpu", rl("requests.cpu=1"), `pods "web" is forbidden: exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1`},
		{"requests.memory", rl("requests.memory=1Gi"), `pods "web" is forbidden: exceeded quota: q, requested: requests.memory=512Mi, used: requests.memory=768Mi, limited: requests.memory=1Gi`},
		{"limits.cpu", rl("limits.cpu=1"), `pods "web" is forbidden: exceeded quota: q, requested: limits.cpu=500m, used: limits.cpu=800m, limited: limits.cpu=1`},
		{"limits.memory", rl("limits.memory=1Gi"), `pods "web" is forbidden: exceeded quota: q, requested: limits.memory=512Mi, used: limits.memory=768Mi, limited: limits.memory=1Gi`},
		{"cpu", rl("cpu=1"), `pods "web" is forbidden: exceeded quota: q, requested: cpu=500m, used: cpu=800m, limited: cpu=1`},
		{"memory", rl("memory=1Gi"), `pods "web" is forbidden: exceeded quota: q, requested: memory=512Mi, used: memory=768Mi, limited: memory=1Gi`},
		{"two at once, one fits", rl("requests.cpu=1", "requests.memory=4Gi", "limits.cpu=1"),
			`pods "web" is forbidden: exceeded quota: q, requested: limits.cpu=500m,requests.cpu=500m, used: limits.cpu=800m,requests.cpu=800m, limited: limits.cpu=1,requests.cpu=1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated, _, err := ResourceQuota(sized("web", "500m", "512Mi"), []corev1.ResourceQuota{quota("q", tc.hard)}, existing)
			if !apierrors.IsForbidden(err) {
				t.Fatalf("ResourceQuota = %v, want a 403 Forbidden", err)
			}
			wantErrText(t, err, tc.want)
			if updated != nil {
				t.Errorf("a rejected pod returned updated quotas %v", updated)
			}
		})
	}
}

func TestResourceQuota_MustSpecify(t *testing.T) {
	p := defaultedPod("web",
		withResources(ctr("web", "nginx"), rl("memory=64Mi"), rl("memory=64Mi")),
		ctr("log", "busybox"))
	for _, tc := range []struct {
		name string
		hard corev1.ResourceList
		want string
	}{
		{"cpu requests and limits", rl("requests.cpu=1", "limits.cpu=1"),
			`pods "web" is forbidden: failed quota: compute: must specify limits.cpu for: log,web; requests.cpu for: log,web`},
		{"memory, one container missing", rl("requests.memory=1Gi"),
			`pods "web" is forbidden: failed quota: compute: must specify requests.memory for: log`},
		{"plain cpu", rl("cpu=1", "pods=5"),
			`pods "web" is forbidden: failed quota: compute: must specify cpu for: log,web`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ResourceQuota(p, []corev1.ResourceQuota{quota("compute", tc.hard)}, nil)
			wantErrText(t, err, tc.want)
		})
	}
	// A quota on pods alone asks nothing of the containers.
	if _, _, err := ResourceQuota(p, []corev1.ResourceQuota{quota("count", rl("pods=5"))}, nil); err != nil {
		t.Errorf("pods-only quota: %v", err)
	}
}

func TestResourceQuota_WhatCounts(t *testing.T) {
	hard := rl("pods=2", "count/pods=10", "requests.cpu=1")
	for _, tc := range []struct {
		name     string
		existing []corev1.Pod
		wantUsed corev1.ResourceList // after admitting web (500m)
	}{
		{"running pods count", pods(sized("a", "250m", "64Mi")),
			rl("pods=2", "count/pods=2", "requests.cpu=750m")},
		{"succeeded and failed pods free pods and cpu, not count/pods", pods(
			withPhase(sized("a", "500m", "64Mi"), corev1.PodSucceeded),
			withPhase(sized("b", "500m", "64Mi"), corev1.PodFailed),
			withPhase(sized("c", "250m", "64Mi"), corev1.PodRunning)),
			rl("pods=2", "count/pods=4", "requests.cpu=750m")},
		{"a pod of the same name is the one being admitted", pods(sized("web", "500m", "64Mi"), sized("a", "250m", "64Mi")),
			rl("pods=2", "count/pods=2", "requests.cpu=750m")},
		{"pods of other namespaces do not count", func() []corev1.Pod {
			o := sized("a", "900m", "64Mi")
			o.Namespace = "other"
			return pods(o)
		}(), rl("pods=1", "count/pods=1", "requests.cpu=500m")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated, _, err := ResourceQuota(sized("web", "500m", "64Mi"), []corev1.ResourceQuota{quota("q", hard)}, tc.existing)
			if err != nil {
				t.Fatalf("ResourceQuota: %v", err)
			}
			if got := updated[0].Status.Used; !apiequality.Semantic.DeepEqual(got, tc.wantUsed) {
				t.Errorf("status.used = %v, want %v", got, tc.wantUsed)
			}
		})
	}
}

func TestResourceQuota_Scopes(t *testing.T) {
	bestEffort := defaultedPod("be", ctr("web", "nginx"))
	burstable := sized("bu", "100m", "64Mi")
	quotas := []corev1.ResourceQuota{
		quota("be", rl("pods=1"), corev1.ResourceQuotaScopeBestEffort),
		quota("not-be", rl("pods=5"), corev1.ResourceQuotaScopeNotBestEffort),
		quota("services", rl("services=2")),
	}
	quotas[2].Status.Used = rl("services=1") // counted by someone else; kept

	updated, notes, err := ResourceQuota(burstable, quotas, pods(bestEffort))
	if err != nil {
		t.Fatalf("ResourceQuota: %v", err)
	}
	for i, want := range []corev1.ResourceList{rl("pods=1"), rl("pods=1"), rl("services=1")} {
		if got := updated[i].Status.Used; !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("quota %s status.used = %v, want %v", updated[i].Name, got, want)
		}
	}
	wantNotes := []string{
		`quota "be": does not apply to this pod (pod is not in its scopes BestEffort)`,
		`quota "not-be": pods 1 of 5 used after this pod`,
		`quota "services": does not apply to this pod (it tracks no pod resources)`,
	}
	if !slices.Equal(notes, wantNotes) {
		t.Errorf("notes:\n got: %q\nwant: %q", notes, wantNotes)
	}
	// A second BestEffort pod is over the BestEffort quota.
	_, _, err = ResourceQuota(defaultedPod("be2", ctr("web", "nginx")), quotas, pods(bestEffort))
	wantErrText(t, err, `pods "be2" is forbidden: exceeded quota: be, requested: pods=1, used: pods=1, limited: pods=1`)
}

// Creating pods one after another, feeding each call's updated quotas and
// the admitted pod into the next, as the API server does in its
// transactions, admits exactly as many as the quota allows.
func TestResourceQuota_Sequential(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hard     corev1.ResourceList
		cpu, mem string
		want     int
	}{
		{"pods", rl("pods=4"), "100m", "64Mi", 4},
		{"requests.cpu in thirds", rl("requests.cpu=1"), "333m", "64Mi", 3},
		{"requests.cpu exact fit", rl("requests.cpu=1"), "250m", "64Mi", 4},
		{"memory", rl("requests.memory=1Gi", "limits.memory=1Gi"), "10m", "200Mi", 5},
		{"the tightest of several", rl("pods=10", "limits.cpu=2", "requests.memory=1Gi"), "300m", "100Mi", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quotas := []corev1.ResourceQuota{quota("q", tc.hard)}
			var existing []corev1.Pod
			admitted := 0
			for i := 0; i < 20; i++ {
				p := sized(fmt.Sprintf("web-%d", i), tc.cpu, tc.mem)
				updated, _, err := ResourceQuota(p, quotas, existing)
				if err != nil {
					if !apierrors.IsForbidden(err) {
						t.Fatalf("pod %d: %v, want Forbidden", i, err)
					}
					break
				}
				quotas = updated
				existing = append(existing, *p)
				admitted++
			}
			if admitted != tc.want {
				t.Errorf("admitted %d pods, want %d; final status.used %v", admitted, tc.want, quotas[0].Status.Used)
			}
			if got := QuotaUsage(quotas[0], existing); !apiequality.Semantic.DeepEqual(got, quotas[0].Status.Used) {
				t.Errorf("QuotaUsage = %v, but the last updated status.used is %v", got, quotas[0].Status.Used)
			}
		})
	}
}

func TestQuotaUsage(t *testing.T) {
	q := quota("q", rl("pods=10", "requests.cpu=4", "limits.memory=4Gi", "services=3"))
	got := QuotaUsage(q, pods(sized("a", "1", "1Gi"), sized("b", "500m", "512Mi"), withPhase(sized("c", "2", "2Gi"), corev1.PodFailed)))
	want := rl("pods=2", "requests.cpu=1500m", "limits.memory=1536Mi")
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("QuotaUsage = %v, want %v (services is not a pod resource)", got, want)
	}
	if empty := QuotaUsage(q, nil); !apiequality.Semantic.DeepEqual(empty, rl("pods=0", "requests.cpu=0", "limits.memory=0")) {
		t.Errorf("QuotaUsage of no pods = %v, want zeros", empty)
	}
}

func TestResourceQuota_BadInputs(t *testing.T) {
	negative := defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=-1"), nil))
	_, _, err := ResourceQuota(negative, []corev1.ResourceQuota{quota("q", rl("requests.cpu=1"))}, nil)
	wantErrText(t, err, `pods "web" is forbidden: quota usage is negative for resource(s): cpu,requests.cpu`)

	badScope := quota("q", rl("pods=1"))
	badScope.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: "Near", Values: []string{"high"}}}}
	_, _, err = ResourceQuota(sized("web", "1", "1Gi"), []corev1.ResourceQuota{badScope}, nil)
	wantErrContains(t, err, "matching quota q", `"Near" is not a valid scope selector operator`)
}

func TestResourceQuota_PriorityClassScope(t *testing.T) {
	high := quota("high", rl("pods=1"))
	high.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}
	p := sized("web", "1", "1Gi")
	p.Spec.PriorityClassName = "high"
	existing := sized("a", "1", "1Gi")
	existing.Spec.PriorityClassName = "high"
	if _, _, err := ResourceQuota(p, []corev1.ResourceQuota{high}, pods(existing)); err == nil {
		t.Errorf("second high-priority pod admitted past pods=1")
	}
	low := sized("low", "1", "1Gi")
	if _, _, err := ResourceQuota(low, []corev1.ResourceQuota{high}, pods(existing)); err != nil {
		t.Errorf("a pod without the class is not charged to the quota, got %v", err)
	}
}

// addPodUsage computes per resource what podUsage computes with maps; they
// must agree, including for init containers, sidecars, overhead and
// pod-level resources.
func TestAddPodUsage_MatchesPodUsage(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	names := trackedPodResources(rl("pods=1", "count/pods=1", "cpu=1", "memory=1", "requests.cpu=1", "requests.memory=1",
		"limits.cpu=1", "limits.memory=1", "requests.ephemeral-storage=1", "hugepages-2Mi=1", "requests.hugepages-2Mi=1"))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"two containers", defaultedPod("p", withResources(ctr("a", "x"), rl("cpu=100m", "memory=64Mi"), rl("cpu=1")),
			withResources(ctr("b", "x"), rl("cpu=250m", "ephemeral-storage=1Gi", "hugepages-2Mi=4Mi"), rl("memory=1Gi", "hugepages-2Mi=4Mi")))},
		{"a big init container", func() *corev1.Pod {
			p := defaultedPod("p", withResources(ctr("a", "x"), rl("cpu=100m"), rl("cpu=200m")))
			p.Spec.InitContainers = []corev1.Container{withResources(ctr("init", "x"), rl("cpu=2", "memory=1Gi"), rl("cpu=2"))}
			return p
		}()},
		{"a sidecar and overhead", func() *corev1.Pod {
			p := defaultedPod("p", withResources(ctr("a", "x"), rl("cpu=100m"), nil))
			side := withResources(ctr("side", "x"), rl("cpu=300m", "memory=32Mi"), rl("memory=64Mi"))
			side.RestartPolicy = &always
			p.Spec.InitContainers = []corev1.Container{withResources(ctr("init", "x"), rl("cpu=200m"), nil), side}
			p.Spec.Overhead = rl("cpu=50m", "memory=16Mi")
			return p
		}()},
		{"pod-level resources", func() *corev1.Pod {
			p := defaultedPod("p", withResources(ctr("a", "x"), rl("cpu=100m"), nil))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu=1", "memory=1Gi"), Limits: rl("memory=2Gi")}
			return p
		}()},
		{"a finished pod", withPhase(sized("p", "1", "1Gi"), corev1.PodSucceeded)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := corev1.ResourceList{}
			for name, q := range podUsage(tc.pod, time.Now()) {
				if slices.Contains(names, name) && !q.IsZero() {
					want[name] = q
				}
			}
			got := corev1.ResourceList{}
			addPodUsage(got, names, tc.pod, time.Now())
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("addPodUsage = %v\n   podUsage = %v", got, want)
			}
		})
	}
}
