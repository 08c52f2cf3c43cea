package admission

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds
// are kube-apiserver's defaults for --default-not-ready-toleration-seconds
// and --default-unreachable-toleration-seconds: five minutes.
const (
	DefaultNotReadyTolerationSeconds    = 300
	DefaultUnreachableTolerationSeconds = 300
)

// ErrNegativeTolerationSeconds is returned by TolerationSeconds.Validate
// for a negative number of seconds.
var ErrNegativeTolerationSeconds = errors.New("toleration seconds must be 0 or more")

// TolerationSeconds configures the DefaultTolerationSeconds admission
// plugin: how long a pod stays bound to a node tainted not-ready or
// unreachable (NoExecute) before the taint-eviction controller deletes it.
type TolerationSeconds struct {
	NotReady    int64
	Unreachable int64
}

// DefaultTolerations is kube-apiserver's configuration: 300 s for both.
func DefaultTolerations() TolerationSeconds {
	return TolerationSeconds{NotReady: DefaultNotReadyTolerationSeconds, Unreachable: DefaultUnreachableTolerationSeconds}
}

// Validate refuses a negative number of seconds. (kube-apiserver takes any
// int64; a negative toleration would evict at once, which is 0 said
// wrongly, so podlab asks for 0.)
func (t TolerationSeconds) Validate() error {
	if t.NotReady < 0 {
		return fmt.Errorf("--default-not-ready-toleration-seconds=%d: %w (0 evicts at once)", t.NotReady, ErrNegativeTolerationSeconds)
	}
	if t.Unreachable < 0 {
		return fmt.Errorf("--default-unreachable-toleration-seconds=%d: %w (0 evicts at once)", t.Unreachable, ErrNegativeTolerationSeconds)
	}
	return nil
}

// DefaultTolerationSeconds is kube-apiserver's admission plugin of that name
// (plugin/pkg/admission/defaulttolerationseconds), run on pod creates and
// updates: a pod that does not already tolerate the NoExecute taints
// node.kubernetes.io/not-ready and node.kubernetes.io/unreachable (a
// toleration with that key or no key, and effect NoExecute or none) gets
//
//	key: node.kubernetes.io/not-ready    operator: Exists  effect: NoExecute  tolerationSeconds: 300
//	key: node.kubernetes.io/unreachable  operator: Exists  effect: NoExecute  tolerationSeconds: 300
//
// so that when the node lifecycle controller taints its node, the
// taint-eviction controller deletes it after that long, not at once. It
// returns one note per toleration added.
func DefaultTolerationSeconds(p *corev1.Pod, ts TolerationSeconds) []string {
	notReady, unreachable := false, false
	for _, t := range p.Spec.Tolerations {
		noExecute := t.Effect == corev1.TaintEffectNoExecute || t.Effect == ""
		if noExecute && (t.Key == corev1.TaintNodeNotReady || t.Key == "") {
			notReady = true
		}
		if noExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == "") {
			unreachable = true
		}
	}
	var notes []string
	add := func(key string, seconds int64) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{
			Key:               key,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr(seconds),
		})
		notes = append(notes, fmt.Sprintf("added toleration %s:NoExecute for %ds", key, seconds))
	}
	if !notReady {
		add(corev1.TaintNodeNotReady, ts.NotReady)
	}
	if !unreachable {
		add(corev1.TaintNodeUnreachable, ts.Unreachable)
	}
	return notes
}
