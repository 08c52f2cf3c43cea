package kubelet

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The kubelet's back-offs (pkg/kubelet: flowcontrol.NewBackOff(10s, 300s)
// for image pulls, and 10s doubling to 5 minutes between restarts of a
// crashing container).
const (
	DefaultImageBackOff    = 10 * time.Second
	DefaultMaxImageBackOff = 300 * time.Second
	DefaultCrashBackOff    = 10 * time.Second
	DefaultMaxCrashBackOff = 300 * time.Second
	// DefaultSyncBackOff is the pod workers' backOffPeriod
	// (pkg/kubelet/kubelet.go): a failed sync is tried again after it,
	// jittered by syncBackOffJitter (workerBackOffPeriodJitterFactor).
	DefaultSyncBackOff = 10 * time.Second
	syncBackOffJitter  = 0.5
)

// syncRetryAt is when a pod whose sync failed at now is synced again, as
// the kubelet's podWorkers.completeWork requeues it:
// wait.Jitter(backOffPeriod, 0.5) later, between 1 and 1.5 backOffPeriods.
func (k *Kubelet) syncRetryAt(now time.Time) time.Time {
	return now.Add(wait.Jitter(k.cfg.SyncBackOff, syncBackOffJitter))
}

// podChanged says whether pod differs from the version last synced in what
// the kubelet's pod config source compares (podsDifferSemantically): a
// status written meanwhile (often the kubelet's own) is no change.
func podChanged(last, pod *corev1.Pod) bool {
	if last == nil {
		return true
	}
	return !equality.Semantic.DeepEqual(last.Spec, pod.Spec) ||
		!equality.Semantic.DeepEqual(last.Labels, pod.Labels) ||
		!equality.Semantic.DeepEqual(last.Annotations, pod.Annotations) ||
		!equality.Semantic.DeepEqual(last.DeletionTimestamp, pod.DeletionTimestamp) ||
		!equality.Semantic.DeepEqual(last.DeletionGracePeriodSeconds, pod.DeletionGracePeriodSeconds)
}

// crashDelay is the wait before the restart that follows the exit of the
// run with restartCount n: none after the first run's exit, then the base,
// doubling, up to the maximum. It is derived from the restart count alone,
// so any process can compute it (the kubelet keeps it in memory, keyed the
// same way).
func (k *Kubelet) crashDelay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := k.cfg.CrashBackOff
	for i := 1; i < n && d < k.cfg.MaxCrashBackOff; i++ {
		d *= 2
	}
	return min(d, k.cfg.MaxCrashBackOff)
}

// failures remembers the failed stages of containers, as client-go's
// flowcontrol.Backoff: each failure doubles the delay before the next try,
// from base up to max; a success forgets them.
type failures struct {
	base, max time.Duration
	mu        sync.Mutex
	entries   map[string]failure
}

type failure struct {
	stage  StageName
	reason string // the waiting reason it gave: ErrImagePull, CreateContainerConfigError, ...
	err    string
	delay  time.Duration
	until  time.Time
}

func newFailures(base, max time.Duration) *failures {
	return &failures{base: base, max: max, entries: map[string]failure{}}
}

// fail records a failure at now and returns the delay before the next try.
func (b *failures) fail(key string, now time.Time, stage StageName, reason, err string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		e.delay = b.base
	} else {
		e.delay = min(e.delay*2, b.max)
	}
	e.stage, e.reason, e.err, e.until = stage, reason, err, now.Add(e.delay)
	b.entries[key] = e
	return e.delay
}

func (b *failures) get(key string) (failure, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	return e, ok
}

// reset forgets the failures (a success).
func (b *failures) reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// failureKey is the key of a container's back-off, as the kubelet's image
// back-off: the pod, the container and the image.
func failureKey(pod *corev1.Pod, container, image string) string {
	return string(pod.UID) + "/" + container + "/" + image
}
