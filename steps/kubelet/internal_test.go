package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/kubelet/subpath"
	"github.com/podlab/podlab/steps/statedir"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"PORT": "8080", "HOST": "web"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct{ in, want string }{
		{"$(HOST):$(PORT)", "web:8080"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(PORT)", "$(PORT)"},
		{"$$", "$"},
		{"a$b", "a$b"},
		{"$(PORT", "$(PORT"},
		{"end$", "end$"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := expand(tt.in, lookup); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCrashDelay(t *testing.T) {
	k := &Kubelet{cfg: Config{CrashBackOff: 10 * time.Second, MaxCrashBackOff: 300 * time.Second}}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for n, w := range want {
		if got := k.crashDelay(n); got != w {
			t.Errorf("crashDelay(%d) = %s, want %s", n, got, w)
		}
	}
}

func TestFailures_Doubling(t *testing.T) {
	f := newFailures(10*time.Second, 300*time.Second)
	now := time.Now()
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, f.fail("k", now, StagePull, ReasonErrImagePull, "boom"))
	}
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", got, want)
		}
	}
	f.reset("k")
	if _, ok := f.get("k"); ok {
		t.Errorf("reset kept the failure")
	}
}

func TestPodPhase(t *testing.T) {
	run := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	wait := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}}
	term := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	crash := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	tests := []struct {
		name     string
		policy   corev1.RestartPolicy
		statuses []corev1.ContainerStatus
		want     corev1.PodPhase
	}{
		{"creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{wait}, corev1.PodPending},
		{"one runs, one creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{run, wait}, corev1.PodPending},
		{"running", corev1.RestartPolicyAlways, []corev1.ContainerStatus{run}, corev1.PodRunning},
		{"crash looping", corev1.RestartPolicyAlways, []corev1.ContainerStatus{crash}, corev1.PodRunning},
		{"Never, exited 0", corev1.RestartPolicyNever, []corev1.ContainerStatus{term(0)}, corev1.PodSucceeded},
		{"Never, one failed", corev1.RestartPolicyNever, []corev1.ContainerStatus{term(0), term(2)}, corev1.PodFailed},
		{"Never, one failed, one runs", corev1.RestartPolicyNever, []corev1.ContainerStatus{run, term(2)}, corev1.PodRunning},
		{"OnFailure, exited 0", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{term(0)}, corev1.PodSucceeded},
		{"OnFailure, restarting", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{crash}, corev1.PodRunning},
		{"Always, exited 0", corev1.RestartPolicyAlways, []corev1.ContainerStatus{term(0)}, corev1.PodRunning},
	}
	for _, tt := range tests {
		p := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tt.policy}}
		if got := podPhase(p, tt.statuses); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestDeletedPhase(t *testing.T) {
	run := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	wait := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}}
	term := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	tests := []struct {
		name     string
		statuses []corev1.ContainerStatus
		want     corev1.PodPhase
	}{
		{"still running", []corev1.ContainerStatus{run, term(0)}, corev1.PodRunning},
		{"stopped cleanly", []corev1.ContainerStatus{term(0), term(0)}, corev1.PodSucceeded},
		{"killed", []corev1.ContainerStatus{term(0), term(137)}, corev1.PodFailed},
		{"never ran", []corev1.ContainerStatus{wait}, corev1.PodFailed},
	}
	for _, tt := range tests {
		if got := deletedPhase(corev1.PodRunning, tt.statuses); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestVolumeMounts_SubPathRefused: the kubelet's own checks, whatever the
// API server let through (its validation refuses absolute and ".."
// subPaths first): the error is a *SubPathError and the pod's status gets
// the kubelet's text.
func TestVolumeMounts_SubPathRefused(t *testing.T) {
	k := &Kubelet{layout: Layout{Node: statedir.Node{Dir: t.TempDir()}}}
	vol := t.TempDir()
	if err := os.Symlink("/", filepath.Join(vol, "evil")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, subPath, message string
		want                   error
	}{
		{"absolute", "/etc", "error SubPath `/etc` must not be an absolute path", subpath.ErrAbsolute},
		{"..", "../etc", "unable to provision SubPath `../etc`: must not contain '..'", subpath.ErrBacksteps},
		{".. inside", "a/../../etc", "unable to provision SubPath `a/../../etc`: must not contain '..'", subpath.ErrBacksteps},
		{"a symlink to /", "evil", `failed to prepare subPath for volumeMount "v" of container "c"`, subpath.ErrEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}}
			pod.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: vol}}}}
			c := &corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data", SubPath: tt.subPath}}}
			ms, err := k.volumeMounts(pod, c)
			if err == nil {
				t.Fatalf("subPath %q accepted: %+v", tt.subPath, ms)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if got := statusMessage(err); got != tt.message {
				t.Errorf("status message %q, want %q", got, tt.message)
			}
			if !strings.Contains(err.Error(), tt.subPath) {
				t.Errorf("the error does not say which subPath: %v", err)
			}
		})
	}
}

// A failed sync is tried again after the kubelet's backOffPeriod (10s),
// jittered by up to half of it (podWorkers.completeWork).
func TestSyncRetryAt(t *testing.T) {
	k := &Kubelet{cfg: Config{SyncBackOff: DefaultSyncBackOff}}
	now := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	for range 200 {
		if d := k.syncRetryAt(now).Sub(now); d < 10*time.Second || d >= 15*time.Second {
			t.Fatalf("retry after %s, want [10s, 15s)", d)
		}
	}
}

// What ends a pod worker's back-off at once: a change the kubelet's pod
// config source passes on (podsDifferSemantically), never a status.
func TestPodChanged(t *testing.T) {
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}, ResourceVersion: "5"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	now := metav1.Now()
	grace := int64(0)
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{"nothing", func(p *corev1.Pod) {}, false},
		{"status only (the kubelet's own write)", func(p *corev1.Pod) {
			p.ResourceVersion = "6"
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}, false},
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:2" }, true},
		{"label", func(p *corev1.Pod) { p.Labels["tier"] = "front" }, true},
		{"annotation", func(p *corev1.Pod) { p.Annotations = map[string]string{"a": "b"} }, true},
		{"deletion", func(p *corev1.Pod) { p.DeletionTimestamp = &now; p.DeletionGracePeriodSeconds = &grace }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base.DeepCopy()
			tc.change(p)
			if got := podChanged(base, p); got != tc.want {
				t.Errorf("podChanged = %v, want %v", got, tc.want)
			}
		})
	}
	if !podChanged(nil, base) {
		t.Error("a pod never synced is a change")
	}
}
