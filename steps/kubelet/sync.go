package kubelet

// The sync loop: an informer on the pods bound to this node, one worker per
// pod (the kubelet's pod workers), each running syncPod when its pod
// changes, and on every poll tick, when the PLEG would relist: that is
// when exits are seen and back-offs end.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
)

// maxSteps bounds the stages one syncPod runs for one container.
const maxSteps = 12

// Run registers the node, cleans up what pods deleted while the kubelet
// was down left behind, then syncs the pods bound to the node until ctx
// ends, posting the node's status every Heartbeat and renewing its Lease
// every quarter of NodeLeaseDuration. It returns nil when ctx ends.
func (k *Kubelet) Run(ctx context.Context) error {
	res, err := k.Register(ctx)
	k.notifyNode(res, err)
	if err != nil {
		return err
	}
	inf := k.informer()
	if err := inf.Sync(ctx, nil); err != nil {
		return err
	}
	if err := k.cleanupOrphans(ctx, podsOf(inf.List())); err != nil {
		k.notify(Report{Stage: Stage{Name: StageRemove}, Err: err})
	}
	w := &podWorkers{k: k, ctx: ctx, workers: map[types.UID]*podWorker{}}
	defer w.wait()

	errc := make(chan error, 1)
	go func() {
		errc <- inf.Run(ctx, func(ev apiserver.WatchEvent) {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				w.update(pod, ev.Type == apiserver.Deleted)
			}
		})
	}()
	poll := time.NewTicker(k.cfg.Poll)
	defer poll.Stop()
	beat := time.NewTicker(k.cfg.Heartbeat)
	defer beat.Stop()
	k.notifyLease(k.RenewLease(ctx))
	renew := time.NewTicker(k.leaseRenewInterval())
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-beat.C:
			k.notifyNode(k.Heartbeat(ctx))
		case <-renew.C:
			k.notifyLease(k.RenewLease(ctx))
		case <-poll.C:
			for _, pod := range podsOf(inf.List()) {
				w.update(pod, false)
			}
		}
	}
}

// SyncOnce registers the node, cleans up leftovers of deleted pods, syncs
// every pod bound to the node once, then watches the containers it
// started for Settle and reports what became of them: what `podlab kubelet
// --once` does.
func (k *Kubelet) SyncOnce(ctx context.Context) error {
	res, err := k.Register(ctx)
	k.notifyNode(res, err)
	if err != nil {
		return err
	}
	inf := k.informer()
	if err := inf.Sync(ctx, nil); err != nil {
		return err
	}
	pods := podsOf(inf.List())
	var errs []error
	if err := k.cleanupOrphans(ctx, pods); err != nil {
		errs = append(errs, err)
	}
	for _, pod := range pods {
		if err := k.SyncPod(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	// Watch what was started for a moment: an app that exits at once is
	// reported, as the PLEG's next relist would. A container restarted
	// here gets its own moment too (the deadline moves on after each
	// exit seen); restarts after the first wait out a back-off longer
	// than Settle, so this ends.
	deadline := time.Now().Add(k.cfg.Settle)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(min(100*time.Millisecond, k.cfg.Settle))
		for _, pod := range pods {
			if !k.exitedSince(ctx, pod) {
				continue
			}
			fresh, err := k.fresh(ctx, pod)
			if err != nil || fresh == nil {
				continue
			}
			if err := k.SyncPod(ctx, fresh); err != nil {
				errs = append(errs, err)
			}
			deadline = time.Now().Add(k.cfg.Settle)
		}
	}
	return errors.Join(errs...)
}

// exitedSince reports whether a container of pod exited and the status has
// not said so yet.
func (k *Kubelet) exitedSince(ctx context.Context, pod *corev1.Pod) bool {
	obj, err := k.client.Get(ctx, "pods", pod.Namespace, pod.Name)
	if err != nil {
		return false
	}
	cur := obj.(*corev1.Pod)
	st, err := k.Observe(ctx, cur)
	if err != nil {
		return false
	}
	for _, c := range st.Containers {
		l := c.Latest()
		if l == nil || l.State != RunExited {
			continue
		}
		cs := containerStatus(cur, c.Name)
		if cs == nil || !isRun(cs.ContainerID, l.ID) || cs.State.Running != nil {
			return true
		}
	}
	return false
}

func (k *Kubelet) informer() *apiserver.Informer {
	return apiserver.NewInformer(k.client, "pods", "", apiserver.ListOptions{FieldSelector: "spec.nodeName=" + k.node})
}

func podsOf(objs []apiserver.Object) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// podGone reports whether err, from reading one of the node's pods by
// name, says the pod is gone: 404, or 403 from the Node authorizer, which
// relates a node only to the pods bound to it, and so answers a read of a
// pod deleted meanwhile with "no relationship found between node ... and
// this object", as kube-apiserver does (the kubelet's status manager then
// skips the pod).
func podGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
}

// fresh re-reads pod from the API server; nil when it is gone (or replaced
// by another pod of the same name).
func (k *Kubelet) fresh(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	obj, err := k.client.Get(ctx, "pods", pod.Namespace, pod.Name)
	if podGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if obj.GetUID() != pod.UID {
		return nil, nil
	}
	return obj.(*corev1.Pod), nil
}

// SyncPod brings pod on the node one step closer to what its spec asks, as
// the kubelet's syncPod: a pod being deleted is killed and removed; else
// the sandbox is made, then each container goes through its stages until it
// runs, waits out a back-off, or a stage fails; finally the status is
// reported. Every stage is one of the exported stage methods, and each goes
// to Config.OnStage. A container's failed stage is the pod's state (its
// status says it, with a back-off), not an error of SyncPod's.
func (k *Kubelet) SyncPod(ctx context.Context, pod *corev1.Pod) error {
	if err := k.checkNode(pod); err != nil {
		return err
	}
	var errs []error
	if pod.DeletionTimestamp != nil {
		// The pod may be gone already (removed by an earlier sync whose
		// Deleted event is still on its way): its leftovers, if any, go
		// when that event arrives.
		pod, err := k.fresh(ctx, pod)
		if err != nil || pod == nil {
			return err
		}
		for i := 0; i < 3 && pod != nil; i++ {
			st, err := k.Observe(ctx, pod)
			if err != nil {
				return err
			}
			s := NextStage(pod, st)
			res, err := k.RunStage(ctx, pod, s.Name, "")
			k.notifyStage(pod, s, res, err, durationOf(res))
			if err != nil || s.Name == StageRemove {
				return err
			}
			if pod, err = k.fresh(ctx, pod); err != nil {
				return err
			}
		}
		return nil
	}
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		if msg := k.sysctls.Admit(pod); msg != "" {
			return k.reject(ctx, pod, ReasonSysctlForbidden, msg)
		}
		k.warnUnsupported(ctx, pod)
	}
	st, err := k.Observe(ctx, pod)
	if err != nil {
		return err
	}
	if s := NextStage(pod, st); s.Name == StageDone {
		return nil
	}
	if !st.Sandbox.Ready {
		res, err := k.RunStage(ctx, pod, StageSandbox, "")
		k.notifyStage(pod, Stage{Name: StageSandbox}, res, err, durationOf(res))
		if err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.Containers {
		for step := 0; step < maxSteps; step++ {
			if pod, err = k.fresh(ctx, pod); err != nil || pod == nil {
				return err
			}
			if st, err = k.Observe(ctx, pod); err != nil {
				return err
			}
			cs := st.Container(c.Name)
			s := nextForContainer(pod, st, cs)
			if s.Name == StageBackOff {
				k.announceBackOff(ctx, pod, s)
				break
			}
			if !s.Name.Actionable() || pod.DeletionTimestamp != nil {
				break
			}
			res, err := k.RunStage(ctx, pod, s.Name, s.Container)
			k.notifyStage(pod, s, res, err, durationOf(res))
			if err != nil {
				// Recorded in the status and events, with a back-off: the
				// pod's state, not the kubelet's failure.
				break
			}
		}
	}
	if pod, err = k.fresh(ctx, pod); err != nil || pod == nil {
		return errors.Join(append(errs, err)...)
	}
	var rec Recording
	errs = append(errs, k.report(ctx, pod, &rec, nil))
	return errors.Join(errs...)
}

// RunStage runs one stage of pod by its method (container only matters for
// the container stages): what `podlab kubelet --pod P --stage S` runs.
func (k *Kubelet) RunStage(ctx context.Context, pod *corev1.Pod, stage StageName, container string) (any, error) {
	switch stage {
	case StageSandbox:
		return nilIfNil(k.SandboxStage(ctx, pod))
	case StagePull:
		return nilIfNil(k.PullStage(ctx, pod, container))
	case StageCreate:
		return nilIfNil(k.CreateStage(ctx, pod, container))
	case StageStart:
		return nilIfNil(k.StartStage(ctx, pod, container))
	case StageKill:
		return nilIfNil(k.KillStage(ctx, pod))
	case StageRemove:
		return nilIfNil(k.RemoveStage(ctx, pod))
	}
	_, err := ParseStage(string(stage))
	return nil, err
}

// nilIfNil turns a nil *T result into a nil interface.
func nilIfNil[T any](res *T, err error) (any, error) {
	if res == nil {
		return nil, err
	}
	return res, err
}

// Pod reads a pod from the API server.
func (k *Kubelet) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	obj, err := k.client.Get(ctx, "pods", namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

// announceBackOff records a back-off as the kubelet does, once per
// back-off: ImagePullBackOff as the container's waiting reason with Events
// BackOff and Failed; CrashLoopBackOff (which the status shows by itself)
// with the Warning BackOff event.
func (k *Kubelet) announceBackOff(ctx context.Context, pod *corev1.Pod, s Stage) {
	key := string(pod.UID) + "/" + s.Container
	k.mu.Lock()
	seen := k.announced[key].Equal(s.Until)
	k.announced[key] = s.Until
	k.mu.Unlock()
	if seen {
		return
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == s.Container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return
	}
	res := &Recording{}
	var err error
	switch s.Reason {
	case ReasonImagePullBackOff:
		f, _ := k.failures.get(failureKey(pod, c.Name, c.Image))
		k.event(ctx, pod, res, corev1.EventTypeNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.Image))
		k.event(ctx, pod, res, corev1.EventTypeWarning, "Failed", "Error: "+ReasonImagePullBackOff)
		msg := fmt.Sprintf("Back-off pulling image %q: %s: %s", c.Image, f.reason, f.err)
		err = k.report(ctx, pod, res, map[string]*override{c.Name: waiting(ReasonImagePullBackOff, msg)})
	case ReasonCrashLoopBackOff:
		k.event(ctx, pod, res, corev1.EventTypeWarning, "BackOff",
			fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podDesc(pod)))
		err = k.report(ctx, pod, res, nil)
	default:
		return
	}
	k.notify(Report{Pod: pod, Stage: s, Result: res, Err: err, BackOff: true})
}

// Pods lists the pods bound to the node.
func (k *Kubelet) Pods(ctx context.Context) ([]*corev1.Pod, error) {
	l, err := k.client.List(ctx, "pods", "", apiserver.ListOptions{FieldSelector: "spec.nodeName=" + k.node})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", k.node, err)
	}
	return podsOf(l.Items), nil
}

// CleanupOrphans removes what pods the API server no longer has left on
// the node: the runtime's sandboxes and containers labelled with their
// uid (over CRI), and the kubelet's own pod directories, cgroups and user
// namespace claims (the kubelet's HandlePodCleanups). Run and SyncOnce do it when they start.
func (k *Kubelet) CleanupOrphans(ctx context.Context) error {
	pods, err := k.Pods(ctx)
	if err != nil {
		return err
	}
	return k.cleanupOrphans(ctx, pods)
}

func (k *Kubelet) cleanupOrphans(ctx context.Context, pods []*corev1.Pod) error {
	known := map[types.UID]bool{}
	for _, p := range pods {
		known[p.UID] = true
	}
	// What the runtime has, by the pod uid label the kubelet put on it;
	// then the kubelet's own pod directories (the runtime's, named by
	// sandbox id, hold none of the kubelet's files).
	found, err := k.cri.listAll(ctx)
	if err != nil {
		return err
	}
	ents, _ := os.ReadDir(k.layout.PodsDir())
	for _, e := range ents {
		if uid := types.UID(e.Name()); k.kubeletPodDir(uid) {
			found[uid] = true
		}
	}
	logs, _ := os.ReadDir(k.layout.PodLogsDir()) // NAMESPACE_NAME_UID
	for _, e := range logs {
		if f := strings.Split(e.Name(), "_"); len(f) == 3 && f[2] != "" {
			found[types.UID(f[2])] = true
		}
	}
	var errs []error
	for uid := range found {
		if err := ctx.Err(); err != nil {
			return err
		}
		if known[uid] {
			continue
		}
		res, err := k.removeLeftovers(ctx, uid)
		k.notify(Report{Stage: Stage{Name: StageRemove, Why: "the pod was deleted while the kubelet was away"},
			Result: res, Err: err, Took: durationOf(res), Leftovers: true})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (k *Kubelet) notify(r Report) {
	if k.cfg.OnStage != nil {
		k.cfg.OnStage(r)
	}
}

func (k *Kubelet) notifyStage(pod *corev1.Pod, s Stage, res any, err error, took time.Duration) {
	if s.Container == "" {
		s.Container = containerOf(res)
	}
	k.notify(Report{Pod: pod, Stage: s, Result: res, Err: err, Took: took})
}

func (k *Kubelet) notifyNode(res *NodeResult, err error) {
	if k.cfg.OnNode != nil {
		k.cfg.OnNode(res, err)
	}
}

func containerOf(res any) string {
	switch r := res.(type) {
	case *PullResult:
		return r.Container
	case *CreateResult:
		return r.Container
	case *StartResult:
		return r.Container
	}
	return ""
}

// durationOf is a stage result's Took: every *XResult of a stage has one.
func durationOf(res any) time.Duration {
	v := reflect.ValueOf(res)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	f := v.Elem().FieldByName("Took")
	if !f.IsValid() {
		return 0
	}
	took, _ := f.Interface().(time.Duration)
	return took
}

// podWorkers runs one goroutine per pod, so that a slow pod (a pull, a
// grace period) holds up no other.
type podWorkers struct {
	k       *Kubelet
	ctx     context.Context
	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup
}

type podWorker struct {
	kick    chan struct{}
	mu      sync.Mutex
	pod     *corev1.Pod
	removed bool

	// the run goroutine's own: the version last synced, and, after a
	// failed sync, when to try again (kicks before then are let pass
	// unless the pod changed)
	synced  *corev1.Pod
	retryAt time.Time
}

// update hands a pod's latest version to its worker and wakes it.
func (w *podWorkers) update(pod *corev1.Pod, removed bool) {
	w.mu.Lock()
	pw, ok := w.workers[pod.UID]
	if !ok {
		if removed && !w.k.podLeftovers(w.ctx, pod.UID) {
			w.mu.Unlock()
			return
		}
		pw = &podWorker{kick: make(chan struct{}, 1)}
		w.workers[pod.UID] = pw
		w.wg.Go(func() { w.run(pod.UID, pw) })
	}
	w.mu.Unlock()
	pw.mu.Lock()
	pw.pod, pw.removed = pod, pw.removed || removed
	pw.mu.Unlock()
	select {
	case pw.kick <- struct{}{}:
	default:
	}
}

func (w *podWorkers) run(uid types.UID, pw *podWorker) {
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-pw.kick:
		}
		pw.mu.Lock()
		pod, removed := pw.pod, pw.removed
		pw.mu.Unlock()
		if removed {
			// The pod object is gone (deleted by the kubelet, forced, or
			// a finished pod): whatever is left of it goes too.
			if w.k.podLeftovers(w.ctx, uid) {
				res, err := w.k.removeLeftovers(w.ctx, uid)
				w.k.notify(Report{Pod: pod, Stage: Stage{Name: StageRemove, Why: "the pod object was deleted"},
					Result: res, Err: err, Took: durationOf(res), Leftovers: true})
			}
			w.mu.Lock()
			delete(w.workers, uid)
			w.mu.Unlock()
			w.k.mu.Lock()
			delete(w.k.warned, uid)
			w.k.mu.Unlock()
			return
		}
		if !pw.retryAt.IsZero() && w.k.now().Before(pw.retryAt) && !podChanged(pw.synced, pod) {
			continue // a failed sync backs off: the poll's kicks wait
		}
		err := w.k.SyncPod(w.ctx, pod)
		pw.synced, pw.retryAt = pod, time.Time{}
		if err != nil && w.ctx.Err() == nil {
			pw.retryAt = w.k.syncRetryAt(w.k.now())
			w.k.notify(Report{Pod: pod, Stage: Stage{Name: "sync", Until: pw.retryAt,
				Why: fmt.Sprintf("the sync failed: the pod worker tries again in %s", pw.retryAt.Sub(w.k.now()).Round(time.Second))}, Err: err})
		}
	}
}

func (w *podWorkers) wait() { w.wg.Wait() }

// podLeftovers reports whether anything of the pod with uid is on the
// node: the runtime's sandboxes or containers, or the kubelet's pod
// directory.
func (k *Kubelet) podLeftovers(ctx context.Context, uid types.UID) bool {
	if ps, err := k.cri.podStatus(ctx, uid); err != nil || len(ps.Sandboxes) > 0 || len(ps.Containers) > 0 {
		return true // a runtime that does not answer may still have them
	}
	return k.kubeletPodDir(uid)
}
