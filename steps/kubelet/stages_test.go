package kubelet_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

// walkByHand runs a pod's stages one at a time, each chosen by NextStage,
// as a learner does with the --next commands.
func walkByHand(t *testing.T, c *cluster, name string) []kubelet.StageName {
	t.Helper()
	ctx := context.Background()
	var walked []kubelet.StageName
	for i := 0; i < 12; i++ {
		p := c.get(t, name)
		st, err := c.kubelet.Observe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		s := kubelet.NextStage(p, st)
		if !s.Name.Actionable() {
			return walked
		}
		walked = append(walked, s.Name)
		switch s.Name {
		case kubelet.StageSandbox:
			_, err = c.kubelet.SandboxStage(ctx, p)
		case kubelet.StagePull:
			_, err = c.kubelet.PullStage(ctx, p, s.Container)
		case kubelet.StageCreate:
			_, err = c.kubelet.CreateStage(ctx, p, s.Container)
		case kubelet.StageStart:
			_, err = c.kubelet.StartStage(ctx, p, s.Container)
		default:
			t.Fatalf("unexpected stage %s", s.Name)
		}
		if err != nil {
			t.Fatalf("stage %s: %v", s.Name, err)
		}
	}
	t.Fatalf("pod %s: no end to its stages: %v", name, walked)
	return nil
}

// comparable strips what differs between two pods that went the same way:
// names, uids, times, container IDs.
func comparable(p *corev1.Pod) string {
	s := p.Status.DeepCopy()
	s.StartTime = nil
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		if id, err := kubelet.ParseContainerID(cs.ContainerID); err == nil {
			cs.ContainerID = id.Type + "://ID" // the runtime's id, random
		}
		if r := cs.State.Running; r != nil {
			r.StartedAt = metav1.Time{}
		}
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

// TestStages_ByHandEqualsSyncLoop: the stage methods called one by one, as
// NextStage says, end in the same status as the sync loop.
func TestStages_ByHandEqualsSyncLoop(t *testing.T) {
	c := newCluster(t)
	c.create(t, helloPod(t, "byhand"))
	c.create(t, helloPod(t, "loop"))

	walked := walkByHand(t, c, "byhand")
	want := []kubelet.StageName{kubelet.StageSandbox, kubelet.StagePull, kubelet.StageCreate, kubelet.StageStart}
	if strings.Join(stageNames(walked), " ") != strings.Join(stageNames(want), " ") {
		t.Errorf("walked %v, want %v", walked, want)
	}
	loop := c.syncUntil(t, "loop", 10*time.Second, "Running", running)
	byHand := c.get(t, "byhand")
	if a, b := comparable(byHand), comparable(loop); a != b {
		t.Errorf("by hand:\n%s\nsync loop:\n%s", a, b)
	}
	// The sync loop finds nothing to do for the pod walked by hand.
	st, err := c.kubelet.Observe(context.Background(), byHand)
	if err != nil {
		t.Fatal(err)
	}
	if s := kubelet.NextStage(byHand, st); s.Name != kubelet.StageRunning {
		t.Errorf("after the walk, next stage %s (%s), want running", s.Name, s.Why)
	}
}

func stageNames(s []kubelet.StageName) []string {
	out := make([]string, len(s))
	for i, n := range s {
		out[i] = string(n)
	}
	return out
}

// TestStages_BadInputs: each must fail with a clear error, and what the
// kubelet records says why.
func TestStages_BadInputs(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()

	tests := []struct {
		name    string
		pod     func(*corev1.Pod) // changes the stored pod
		tweak   func(*corev1.Pod) // changes the pod handed to the stage only
		run     func(*corev1.Pod) error
		want    error
		waiting string // the container's waiting reason after, if any
	}{
		{
			name:  "unknown imagePullPolicy",
			tweak: func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.PullStage(ctx, p, "web")
				return err
			},
			want: kubelet.ErrUnknownPullPolicy, waiting: kubelet.ReasonErrImagePull,
		},
		{
			name: "Never and no image",
			pod:  func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = corev1.PullNever },
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.PullStage(ctx, p, "web")
				return err
			},
			want: kubelet.ErrImageNeverPull, waiting: kubelet.ReasonErrImageNeverPull,
		},
		{
			name:  "another node's pod",
			tweak: func(p *corev1.Pod) { p.Spec.NodeName = "node-2" },
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.PullStage(ctx, p, "")
				return err
			},
			want: kubelet.ErrNotOnThisNode,
		},
		{
			name: "no such container",
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.PullStage(ctx, p, "db")
				return err
			},
			want: kubelet.ErrNoSuchContainer,
		},
		{
			name: "start before create",
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.StartStage(ctx, p, "")
				return err
			},
			want: kubelet.ErrOutOfOrder,
		},
		{
			name: "create without a sandbox",
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.CreateStage(ctx, p, "")
				return err
			},
			want: kubelet.ErrNoSandbox,
		},
		{
			name: "kill a pod not being deleted",
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.KillStage(ctx, p)
				return err
			},
			want: kubelet.ErrOutOfOrder,
		},
		{
			name: "remove a pod not being deleted",
			run: func(p *corev1.Pod) error {
				_, err := c.kubelet.RemoveStage(ctx, p)
				return err
			},
			want: kubelet.ErrOutOfOrder,
		},
		{
			name: "privileged",
			pod: func(p *corev1.Pod) {
				yes := true
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
			},
			run:  func(p *corev1.Pod) error { return createAfterPull(t, c, p) },
			want: kubelet.ErrPrivileged, waiting: kubelet.ReasonCreateConfigError,
		},
		{
			name: "runAsNonRoot as root",
			pod: func(p *corev1.Pod) {
				yes, root := true, int64(0)
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: &root}
			},
			run:  func(p *corev1.Pod) error { return createAfterPull(t, c, p) },
			want: kubelet.ErrRunAsNonRoot, waiting: kubelet.ReasonCreateConfigError,
		},
		{
			name: "an unsupported volume",
			pod: func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
			},
			run:  func(p *corev1.Pod) error { return createAfterPull(t, c, p) },
			want: kubelet.ErrUnsupported, waiting: kubelet.ReasonCreateConfigError,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := helloPod(t, "bad-"+string(rune('a'+i)))
			if tt.pod != nil {
				tt.pod(p)
			}
			p = c.create(t, p)
			if tt.tweak != nil {
				tt.tweak(p)
			}
			err := tt.run(p)
			wantErr(t, err, tt.want)
			if tt.waiting == "" {
				return
			}
			got := c.get(t, p.Name)
			if len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Waiting == nil ||
				got.Status.ContainerStatuses[0].State.Waiting.Reason != tt.waiting {
				t.Fatalf("status after the failure:\n%s\nwant waiting %s", statusText(got), tt.waiting)
			}
			if msg := got.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, tt.want.Error()) {
				t.Errorf("waiting message %q does not say %q", msg, tt.want)
			}
			if !hasEvent(c.events(t, got), "Warning ") {
				t.Errorf("no Warning event: %q", c.events(t, got))
			}
		})
	}
}

// createAfterPull walks a pod to its create stage, whose error it returns:
// what the kubelet refuses of the PodSpec it finds while it makes the
// ContainerConfig, before CreateContainer.
func createAfterPull(t *testing.T, c *cluster, p *corev1.Pod) error {
	t.Helper()
	ctx := context.Background()
	if _, err := c.kubelet.SandboxStage(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubelet.PullStage(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	_, err := c.kubelet.CreateStage(ctx, c.get(t, p.Name), "")
	return err
}

// createAfterPullOf is createAfterPull with p, as given, handed to every
// stage (a PodSpec the API server would not have let through).
func createAfterPullOf(t *testing.T, c *cluster, p *corev1.Pod) error {
	t.Helper()
	ctx := context.Background()
	if _, err := c.kubelet.SandboxStage(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubelet.PullStage(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	cur := c.get(t, p.Name)
	cur.Spec = p.Spec
	_, err := c.kubelet.CreateStage(ctx, cur, "")
	return err
}

// TestKubelet_ImagePullBackOff: a missing image is ErrImagePull, then
// ImagePullBackOff, each retry after a longer back-off.
func TestKubelet_ImagePullBackOff(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.Now = clock })
	missing := helloPod(t, "missing")
	missing.Spec.Containers[0].Image = reg.host + "/podlab/missing:1.0"
	pod := c.create(t, missing)

	p := c.sync(t, "missing")
	w := p.Status.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != kubelet.ReasonErrImagePull || !strings.Contains(w.Message, "missing") {
		t.Fatalf("after the first pull:\n%s", statusText(p))
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", p.Status.Phase)
	}
	var delays []time.Duration
	for i := 0; i < 4; i++ {
		st, err := c.kubelet.Observe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		s := kubelet.NextStage(p, st)
		if s.Name != kubelet.StageBackOff || s.Reason != kubelet.ReasonImagePullBackOff {
			t.Fatalf("next stage %s %s (%s), want a back-off", s.Name, s.Reason, s.Why)
		}
		delays = append(delays, s.Until.Sub(now))
		p = c.sync(t, "missing") // in the back-off: reported, nothing pulled
		if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != kubelet.ReasonImagePullBackOff ||
			!strings.HasPrefix(w.Message, `Back-off pulling image "`+missing.Spec.Containers[0].Image+`"`) {
			t.Fatalf("in the back-off:\n%s", statusText(p))
		}
		now = s.Until.Add(time.Millisecond) // the back-off ends: the next sync pulls again, and fails
		p = c.sync(t, "missing")
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] <= delays[i-1] && delays[i] < time.Second {
			t.Errorf("back-offs %v do not grow", delays)
		}
	}
	if delays[0] != 100*time.Millisecond || delays[1] != 200*time.Millisecond {
		t.Errorf("back-offs %v, want 100ms, 200ms, ...", delays)
	}
	ev := c.events(t, pod)
	for _, want := range []string{"Warning Failed: Failed to pull image", "Warning Failed: Error: ErrImagePull",
		`Normal BackOff: Back-off pulling image "` + missing.Spec.Containers[0].Image + `"`, "Warning Failed: Error: ImagePullBackOff"} {
		if !hasEvent(ev, want) {
			t.Errorf("no event %q in %q", want, ev)
		}
	}
}

// TestKubelet_CrashLoopBackOff: a command that exits 1, restartPolicy
// Always: restarts, CrashLoopBackOff with growing back-offs, lastState
// terminated with exitCode 1.
//
// The kubelet's clock is the test's: it moves past a back-off only after a
// sync has reported it, so every back-off is seen however slow the machine
// (with the wall clock, a sync slower than 200ms skipped the 200ms one).
func TestKubelet_CrashLoopBackOff(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.Now = clock })
	pod := c.create(t, helloPod(t, "crash", "--no-such-flag"))
	sawBackOff := map[string]bool{}
	p := c.syncUntil(t, "crash", 30*time.Second, "restarted 3 times", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		if len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == kubelet.ReasonCrashLoopBackOff {
			sawBackOff[cs[0].State.Waiting.Message] = true
			st, err := c.kubelet.Observe(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if s := kubelet.NextStage(p, st); s.Name == kubelet.StageBackOff {
				mu.Lock()
				now = s.Until.Add(time.Millisecond) // the back-off ends: the next sync restarts
				mu.Unlock()
			}
		}
		return len(cs) == 1 && cs[0].RestartCount >= 3
	})
	cs := p.Status.ContainerStatuses[0]
	last := cs.LastTerminationState.Terminated
	if last == nil || last.ExitCode != 1 || last.Reason != "Error" || last.FinishedAt.IsZero() {
		t.Errorf("lastState: %+v", cs.LastTerminationState)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running (restartPolicy Always keeps restarting)", p.Status.Phase)
	}
	for _, want := range []string{"back-off 200ms restarting failed container=web pod=crash_default(", "back-off 400ms restarting failed container=web"} {
		found := false
		for m := range sawBackOff {
			found = found || strings.HasPrefix(m, want)
		}
		if !found {
			t.Errorf("no CrashLoopBackOff %q among %v", want, sawBackOff)
		}
	}
	if !hasEvent(c.events(t, pod), "Warning BackOff: Back-off restarting failed container web in pod crash_default("+string(pod.UID)+")") {
		t.Errorf("no BackOff event: %q", c.events(t, pod))
	}
	// The kubelet keeps the latest run and the one before, for logs --previous.
	st, err := c.kubelet.Observe(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Container("web").Runs); n > 2 {
		t.Errorf("%d runs kept, want at most 2", n)
	}
	var out strings.Builder
	if _, err := kubelet.Logs(context.Background(), c.dir, p, &out, kubelet.LogsOptions{Previous: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "flag provided but not defined: -no-such-flag") {
		t.Errorf("logs --previous:\n%s", out.String())
	}
}

// TestKubelet_AlwaysPullsEveryRestart: imagePullPolicy Always pulls for
// every container the kubelet starts, restarts included.
func TestKubelet_AlwaysPullsEveryRestart(t *testing.T) {
	c := newCluster(t)
	p := helloPod(t, "always", "--no-such-flag")
	p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	pod := c.create(t, p)
	c.syncUntil(t, "always", 20*time.Second, "restarted twice", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	l, err := c.admin.List(context.Background(), "events", "default", apiserver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pulls := int32(0)
	for _, o := range l.Items {
		if e := o.(*corev1.Event); e.InvolvedObject.UID == pod.UID && e.Reason == "Pulling" {
			pulls += e.Count
		}
	}
	if pulls < 3 {
		t.Errorf("%d pulls for 3 runs with imagePullPolicy Always", pulls)
	}
}

// TestKubelet_RestartPolicies: how a pod ends with each policy.
func TestKubelet_RestartPolicies(t *testing.T) {
	c := newCluster(t)
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		args   []string
		phase  corev1.PodPhase
		code   int32
		reason string
	}{
		{"never-fails", corev1.RestartPolicyNever, []string{"--no-such-flag"}, corev1.PodFailed, 1, "Error"},
		{"never-succeeds", corev1.RestartPolicyNever, []string{"--once"}, corev1.PodSucceeded, 0, "Completed"},
		{"onfailure-succeeds", corev1.RestartPolicyOnFailure, []string{"--once"}, corev1.PodSucceeded, 0, "Completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := helloPod(t, tt.name, tt.args...)
			p.Spec.RestartPolicy = tt.policy
			c.create(t, p)
			got := c.syncUntil(t, tt.name, 15*time.Second, string(tt.phase), func(p *corev1.Pod) bool {
				return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			})
			if got.Status.Phase != tt.phase {
				t.Fatalf("phase %s, want %s\n%s", got.Status.Phase, tt.phase, statusText(got))
			}
			term := got.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.ExitCode != tt.code || term.Reason != tt.reason || got.Status.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("container: %s", statusText(got))
			}
			st, err := c.kubelet.Observe(context.Background(), got)
			if err != nil {
				t.Fatal(err)
			}
			if s := kubelet.NextStage(got, st); s.Name != kubelet.StageDone {
				t.Errorf("next stage of a finished pod: %s (%s)", s.Name, s.Why)
			}
			for _, cd := range got.Status.Conditions {
				if cd.Type == corev1.PodReady && (cd.Status != corev1.ConditionFalse || cd.Reason != "PodCompleted") {
					t.Errorf("Ready condition of a finished pod: %+v", cd)
				}
			}
			// -f of a container that exited ends by itself.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out strings.Builder
			if _, err := kubelet.Logs(ctx, c.dir, got, &out, kubelet.LogsOptions{Follow: true}); err != nil || ctx.Err() != nil {
				t.Errorf("logs -f of an exited container: %v, %v", err, ctx.Err())
			}
		})
	}
}
