package admission

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

func TestDefaultTolerationSeconds(t *testing.T) {
	notReady := func(s int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(s)}
	}
	unreachable := func(s int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(s)}
	}
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	everything := corev1.Toleration{Operator: corev1.TolerationOpExists}
	allNoExecute := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	forever := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists}
	notReadyNoSchedule := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

	for _, tc := range []struct {
		name  string
		ts    TolerationSeconds
		in    []corev1.Toleration
		want  []corev1.Toleration
		notes []string
	}{
		{"none: both added, kube's 300s", DefaultTolerations(), nil,
			[]corev1.Toleration{notReady(300), unreachable(300)},
			[]string{"added toleration node.kubernetes.io/not-ready:NoExecute for 300s", "added toleration node.kubernetes.io/unreachable:NoExecute for 300s"}},
		{"the lab's shorter values", TolerationSeconds{NotReady: 20, Unreachable: 2}, nil,
			[]corev1.Toleration{notReady(20), unreachable(2)},
			[]string{"added toleration node.kubernetes.io/not-ready:NoExecute for 20s", "added toleration node.kubernetes.io/unreachable:NoExecute for 2s"}},
		{"0 seconds is allowed", TolerationSeconds{}, nil, []corev1.Toleration{notReady(0), unreachable(0)},
			[]string{"added toleration node.kubernetes.io/not-ready:NoExecute for 0s", "added toleration node.kubernetes.io/unreachable:NoExecute for 0s"}},
		{"other tolerations are kept, defaults appended", DefaultTolerations(), []corev1.Toleration{gpu},
			[]corev1.Toleration{gpu, notReady(300), unreachable(300)},
			[]string{"added toleration node.kubernetes.io/not-ready:NoExecute for 300s", "added toleration node.kubernetes.io/unreachable:NoExecute for 300s"}},
		{"an own unreachable toleration (forever) is kept, only not-ready added", DefaultTolerations(), []corev1.Toleration{forever},
			[]corev1.Toleration{forever, notReady(300)},
			[]string{"added toleration node.kubernetes.io/not-ready:NoExecute for 300s"}},
		{"a NoSchedule toleration of not-ready does not count", DefaultTolerations(), []corev1.Toleration{notReadyNoSchedule},
			[]corev1.Toleration{notReadyNoSchedule, notReady(300), unreachable(300)},
			[]string{"added toleration node.kubernetes.io/not-ready:NoExecute for 300s", "added toleration node.kubernetes.io/unreachable:NoExecute for 300s"}},
		{"tolerating everything: nothing added", DefaultTolerations(), []corev1.Toleration{everything}, []corev1.Toleration{everything}, nil},
		{"tolerating every NoExecute taint: nothing added", DefaultTolerations(), []corev1.Toleration{allNoExecute}, []corev1.Toleration{allNoExecute}, nil},
		{"already defaulted: idempotent", DefaultTolerations(), []corev1.Toleration{notReady(300), unreachable(300)}, []corev1.Toleration{notReady(300), unreachable(300)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("web", ctr("web", "nginx"))
			p.Spec.Tolerations = tc.in
			notes := DefaultTolerationSeconds(p, tc.ts)
			if !apiequality.Semantic.DeepEqual(p.Spec.Tolerations, tc.want) {
				t.Errorf("tolerations:\n got %+v\nwant %+v", p.Spec.Tolerations, tc.want)
			}
			if !slices.Equal(notes, tc.notes) {
				t.Errorf("notes:\n got %q\nwant %q", notes, tc.notes)
			}
		})
	}
}

func TestTolerationSeconds_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   TolerationSeconds
		want string // "" for valid
	}{
		{"defaults", DefaultTolerations(), ""},
		{"zero", TolerationSeconds{}, ""},
		{"negative not-ready", TolerationSeconds{NotReady: -1, Unreachable: 300},
			"--default-not-ready-toleration-seconds=-1: toleration seconds must be 0 or more (0 evicts at once)"},
		{"negative unreachable", TolerationSeconds{NotReady: 300, Unreachable: -5},
			"--default-unreachable-toleration-seconds=-5: toleration seconds must be 0 or more (0 evicts at once)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ts.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrNegativeTolerationSeconds) {
				t.Fatalf("Validate = %v, want %q wrapping ErrNegativeTolerationSeconds", err, tc.want)
			}
		})
	}
}
