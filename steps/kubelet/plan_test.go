package kubelet_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/kubelet"
)

// TestNextStage: the stage model, on node states written by hand (no
// root, no runtime): pull, then create (the runtime unpacks and writes the
// spec inside CreateContainer), then start.
func TestNextStage(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	pod := func(policy corev1.PullPolicy, restart corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("u1")},
			Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: restart,
				Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25", ImagePullPolicy: policy}}},
		}
	}
	state := func(cs kubelet.ContainerState) *kubelet.PodState {
		cs.Name, cs.Image, cs.Ref = "web", "nginx:1.25", "docker.io/library/nginx:1.25"
		if cs.Policy == "" {
			cs.Policy = corev1.PullIfNotPresent
		}
		return &kubelet.PodState{Now: now, Sandbox: kubelet.Sandbox{Ready: true}, Containers: []kubelet.ContainerState{cs}}
	}
	exited := func(n, code int, ago time.Duration) kubelet.Run {
		return kubelet.Run{ID: "k8s_web_web_default_u1_" + string(rune('0'+n)), RestartCount: n, State: kubelet.RunExited,
			Exit: &kubelet.Exit{Code: code, ExitedAt: now.Add(-ago)}}
	}
	deleting := pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	succeeded := pod(corev1.PullIfNotPresent, corev1.RestartPolicyNever)
	succeeded.Status.Phase = corev1.PodSucceeded
	checked := pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways)
	checked.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", ImageID: "docker.io/library/nginx@sha256:x",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: kubelet.ReasonContainerCreating}}}}
	alwaysPulled := pod(corev1.PullAlways, corev1.RestartPolicyAlways)
	alwaysPulled.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", ImageID: "docker.io/library/nginx@sha256:x",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: kubelet.ReasonContainerCreating}}}}

	tests := []struct {
		name    string
		pod     *corev1.Pod
		st      *kubelet.PodState
		want    kubelet.StageName
		restart int
	}{
		{"no sandbox", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			&kubelet.PodState{Now: now, Containers: []kubelet.ContainerState{{Name: "web"}}}, kubelet.StageSandbox, 0},
		{"image missing", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways), state(kubelet.ContainerState{}), kubelet.StagePull, 0},
		{"IfNotPresent and stored, not checked for this run", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Present: true}), kubelet.StagePull, 0},
		{"IfNotPresent, checked for this run (the status says)", checked,
			state(kubelet.ContainerState{Present: true}), kubelet.StageCreate, 0},
		{"Always and stored, not pulled for this run", pod(corev1.PullAlways, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Policy: corev1.PullAlways, Present: true}), kubelet.StagePull, 0},
		{"Always, pulled for this run (the status says)", alwaysPulled,
			state(kubelet.ContainerState{Policy: corev1.PullAlways, Present: true}), kubelet.StageCreate, 0},
		{"Never and missing", pod(corev1.PullNever, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Policy: corev1.PullNever}), kubelet.StagePull, 0},
		{"unknown policy", pod("Sometimes", corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Policy: "Sometimes", Present: true}), kubelet.StagePull, 0},
		{"created", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Present: true, Runs: []kubelet.Run{{ID: "x", State: kubelet.RunCreated}}}), kubelet.StageStart, 0},
		{"running", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Present: true, Runs: []kubelet.Run{{ID: "x", State: kubelet.RunRunning}}}), kubelet.StageRunning, 0},
		{"exited, Always, no back-off after the first run: the image is checked again", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Present: true, Runs: []kubelet.Run{exited(0, 1, time.Second)}}), kubelet.StagePull, 1},
		{"exited, in CrashLoopBackOff", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{Present: true, Runs: []kubelet.Run{exited(1, 1, time.Second)},
				CrashBackOffUntil: now.Add(9 * time.Second)}), kubelet.StageBackOff, 1},
		{"exited 0, OnFailure: done", pod(corev1.PullIfNotPresent, corev1.RestartPolicyOnFailure),
			state(kubelet.ContainerState{Present: true, Runs: []kubelet.Run{exited(0, 0, time.Second)}}), kubelet.StageExited, 0},
		{"exited 1, Never: done", pod(corev1.PullIfNotPresent, corev1.RestartPolicyNever),
			state(kubelet.ContainerState{Present: true, Runs: []kubelet.Run{exited(0, 1, time.Second)}}), kubelet.StageExited, 0},
		{"pull failed, in ImagePullBackOff", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{FailedStage: kubelet.StagePull, BackOffUntil: now.Add(time.Second)}), kubelet.StageBackOff, 0},
		{"pull back-off over", pod(corev1.PullIfNotPresent, corev1.RestartPolicyAlways),
			state(kubelet.ContainerState{FailedStage: kubelet.StagePull, BackOffUntil: now.Add(-time.Second)}), kubelet.StagePull, 0},
		{"being deleted, running", deleting,
			state(kubelet.ContainerState{Runs: []kubelet.Run{{ID: "x", State: kubelet.RunRunning}}}), kubelet.StageKill, 0},
		{"being deleted, stopped", deleting,
			state(kubelet.ContainerState{Runs: []kubelet.Run{exited(0, 143, time.Second)}}), kubelet.StageRemove, 0},
		{"succeeded", succeeded, state(kubelet.ContainerState{Runs: []kubelet.Run{exited(0, 0, time.Second)}}), kubelet.StageDone, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := kubelet.NextStage(tt.pod, tt.st)
			if s.Name == "unpack" || s.Name == "spec" {
				t.Fatalf("NextStage %s: the kubelet has no such stage", s.Name)
			}
			if s.Name != tt.want || s.RestartCount != tt.restart {
				t.Errorf("NextStage: %s (restart %d): %s; want %s (restart %d)", s.Name, s.RestartCount, s.Why, tt.want, tt.restart)
			}
			if s.Why == "" {
				t.Errorf("stage %s says not why", s.Name)
			}
			if s.Name == kubelet.StageBackOff && (s.Until.IsZero() || s.Reason == "") {
				t.Errorf("a back-off without its end or reason: %+v", s)
			}
		})
	}
}

// TestParseStage: unpack and spec are no kubelet stages any more: the
// error says the runtime does them inside CreateContainer and names the
// by-hand commands and --stage create.
func TestParseStage(t *testing.T) {
	for _, name := range []string{"sandbox", "pull", "create", "start", "kill", "remove"} {
		if s, err := kubelet.ParseStage(name); err != nil || string(s) != name {
			t.Errorf("ParseStage(%q) = %q, %v", name, s, err)
		}
	}
	for _, name := range []string{"unpack", "spec"} {
		_, err := kubelet.ParseStage(name)
		if !errors.Is(err, kubelet.ErrNoStage) {
			t.Fatalf("ParseStage(%q): %v, want ErrNoStage", name, err)
		}
		for _, want := range []string{"no stage", "CreateContainer", "--stage create", "podlab unpack", "podlab spec"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ParseStage(%q): %q does not say %q", name, err, want)
			}
		}
	}
	if _, err := kubelet.ParseStage("run"); !errors.Is(err, kubelet.ErrNoStage) || !strings.Contains(err.Error(), "sandbox, pull, create, start, kill and remove") {
		t.Errorf("ParseStage(run): %v", err)
	}
}
