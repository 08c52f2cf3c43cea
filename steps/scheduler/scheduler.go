package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

// Decision is what the scheduler did with one pod in one attempt, reported
// once the attempt is over (after the binding, for a pod that got a node).
type Decision struct {
	Pod     *corev1.Pod
	Result  Result
	Attempt int
	// Err is nil when the pod was bound to Result.Node. When no node fits
	// it is a *FitError or ErrNoNodesAvailable (see Unschedulable);
	// otherwise the binding failed.
	Err error
	// Conflict: the binding found the pod already bound (another
	// scheduler, or someone with the binding permission, was first) or
	// gone. Not an error: the informer brings the pod's new state.
	Conflict bool
	// Retry is, for a pod that stays in the queue, the back-off before its
	// next attempt. An unschedulable pod waits for a cluster event too (a
	// node added or changed, a pod leaving a node), or 5 minutes.
	Retry time.Duration
}

// Bound reports whether the pod was bound to Result.Node.
func (d Decision) Bound() bool { return d.Err == nil }

// Unschedulable reports whether no node could take the pod.
func (d Decision) Unschedulable() bool {
	var fit *FitError
	return errors.As(d.Err, &fit) || errors.Is(d.Err, ErrNoNodesAvailable)
}

// WithReport calls fn with every Decision, one call at a time, as each
// attempt ends.
func WithReport(fn func(Decision)) Option { return func(o *options) { o.report = fn } }

// WithWarnings calls fn with every write that failed without changing a
// pod's fate: an Event, a PodScheduled=False condition. (kube-scheduler
// logs them.)
func WithWarnings(fn func(error)) Option { return func(o *options) { o.warn = fn } }

// Summary counts the decisions of a Once pass.
type Summary struct {
	Bound, Unschedulable, Conflicts, Failed int
}

// Scheduler is kube-scheduler: it watches pods and nodes (and ReplicaSets,
// for PodTopologySpread) through the API server, queues every pod with no node that asks for the default
// scheduler, and for each runs a scheduling cycle (Profile.Schedule on a
// snapshot of its cache), then binds the pod to the chosen node through
// the pods/binding subresource, in a goroutine of its own while the next
// cycle runs, and records a Scheduled event. A pod no node can take gets
// the condition PodScheduled=False (reason Unschedulable, kube-scheduler's
// message) and a FailedScheduling event, and waits in the queue.
type Scheduler struct {
	client apiserver.Interface
	events *eventWriter
	opts   options
	cache  *cache
	queue  *queue
	binds  sync.WaitGroup

	reportMu sync.Mutex
	summary  Summary
	errs     []error
}

// New returns a scheduler that acts through client (the API server as
// system:kube-scheduler).
func New(client apiserver.Interface, opts ...Option) *Scheduler {
	o := buildOptions(opts)
	return &Scheduler{
		client: client,
		events: newEventWriter(apiserver.NewRecorder(client, SchedulerName, ""), o.warn),
		opts:   o,
		cache:  newCache(),
		queue:  newQueue(o.backoff[0], o.backoff[1]),
	}
}

// informers watch what the scheduler reads: nodes, pods, and the
// ReplicaSets whose selectors PodTopologySpread spreads their pods by.
type informers struct {
	nodes, pods, replicaSets *apiserver.Informer
}

func (s *Scheduler) informers() informers {
	return informers{
		nodes:       apiserver.NewInformer(s.client, "nodes", "", apiserver.ListOptions{}),
		pods:        apiserver.NewInformer(s.client, "pods", "", apiserver.ListOptions{}),
		replicaSets: apiserver.NewInformer(s.client, "replicasets", "", apiserver.ListOptions{}),
	}
}

// sync lists nodes, then pods, into the cache and the queue: what
// kube-scheduler waits for (its informers' caches synced) before its first
// cycle, so that no pod is placed before the pods already on the nodes are
// counted.
func (s *Scheduler) sync(ctx context.Context, inf informers) error {
	if err := inf.nodes.Sync(ctx, s.onNode); err != nil {
		return err
	}
	if err := inf.replicaSets.Sync(ctx, s.onReplicaSet); err != nil {
		return err
	}
	return inf.pods.Sync(ctx, s.onPod)
}

// Once schedules every pod pending now, once each, waits for the
// bindings and the events, and returns what happened. Unschedulable pods
// are not an error (they get their condition and event); failed bindings
// are.
func (s *Scheduler) Once(ctx context.Context) (Summary, error) {
	if err := s.sync(ctx, s.informers()); err != nil {
		return Summary{}, err
	}
	go s.events.run(context.WithoutCancel(ctx))
	defer s.events.close()
	for {
		if err := ctx.Err(); err != nil {
			s.binds.Wait()
			return s.summary, err
		}
		p := s.queue.popNow()
		if p == nil {
			break
		}
		s.scheduleOne(ctx, p, true)
	}
	s.binds.Wait()
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	return s.summary, errors.Join(s.errs...)
}

// Run schedules until ctx ends: it lists, then watches nodes, ReplicaSets and pods,
// and runs a cycle for each pod the queue hands out. In-flight bindings
// and pending events are written before it returns. It fails if a watch
// fails. A Scheduler runs once: Run or Once.
func (s *Scheduler) Run(ctx context.Context) error {
	inf := s.informers()
	if err := s.sync(ctx, inf); err != nil {
		return err
	}
	go s.events.run(context.WithoutCancel(ctx))
	defer s.events.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		errOnce sync.Once
		runErr  error
		wg      sync.WaitGroup
	)
	watch := func(inf *apiserver.Informer, fn func(apiserver.WatchEvent)) {
		defer wg.Done()
		// Run lists again before it watches (the Informer has no other
		// way to start): the handlers take the same objects twice.
		if err := inf.Run(ctx, fn); err != nil {
			errOnce.Do(func() { runErr = err })
			cancel()
		}
	}
	wg.Add(3)
	go watch(inf.nodes, s.onNode)
	go watch(inf.replicaSets, s.onReplicaSet)
	go watch(inf.pods, s.onPod)
	for {
		p := s.queue.pop(ctx)
		if p == nil {
			break
		}
		s.scheduleOne(ctx, p, false)
	}
	cancel()
	wg.Wait()
	s.binds.Wait()
	return runErr
}

// onNode is the node informer's handler.
func (s *Scheduler) onNode(ev apiserver.WatchEvent) {
	node, ok := ev.Object.(*corev1.Node)
	if !ok {
		return
	}
	if ev.Type == apiserver.Deleted {
		s.cache.removeNode(node.Name)
		return
	}
	if s.cache.setNode(node) {
		s.queue.moveAll()
	}
}

// onReplicaSet is the ReplicaSet informer's handler.
func (s *Scheduler) onReplicaSet(ev apiserver.WatchEvent) {
	if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok {
		s.cache.setReplicaSet(rs, ev.Type == apiserver.Deleted)
	}
}

// onPod is the pod informer's handler: bound pods feed the cache, pods
// that need a node the queue.
func (s *Scheduler) onPod(ev apiserver.WatchEvent) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	switch {
	case ev.Type == apiserver.Deleted:
		s.queue.remove(key)
		if s.cache.removePod(key) {
			s.queue.moveAll() // its node has room again
		}
	case pod.Spec.NodeName != "":
		s.queue.remove(key)
		if Terminated(pod) {
			if s.cache.removePod(key) {
				s.queue.moveAll()
			}
			return
		}
		s.cache.addPod(key, pod)
	case s.cache.isAssumed(key):
		// Our binding of it is on its way: this is an older state.
	case !ourPod(pod):
		s.queue.remove(key)
	default:
		s.queue.add(pod)
	}
}

// ourPod reports whether a pod with no node is this scheduler's to place:
// it asks for the default scheduler, is not being deleted, has not finished
// and has no scheduling gates left.
func ourPod(p *corev1.Pod) bool {
	name := p.Spec.SchedulerName
	return (name == "" || name == SchedulerName) && p.DeletionTimestamp == nil &&
		!Terminated(p) && len(p.Spec.SchedulingGates) == 0
}

// scheduleOne is one scheduling cycle, and its binding started.
func (s *Scheduler) scheduleOne(ctx context.Context, q *queued, once bool) {
	pod := q.Pod
	key := pod.Namespace + "/" + pod.Name
	p := NewPodInfo(pod)
	res, err := s.opts.profile.Schedule(p, s.cache.snapshot(), s.opts.rand)
	d := Decision{Pod: pod, Result: res, Attempt: q.Attempts, Err: err}
	if err != nil {
		msg := err.Error()
		if werr := s.setUnschedulable(ctx, pod, msg); werr != nil {
			s.warn(fmt.Errorf("setting the PodScheduled condition of %s: %w", key, werr))
		}
		s.events.add(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
		o := unschedulable
		if once {
			o = dropped
		}
		d.Retry = s.queue.done(key, o)
		s.report(d)
		return
	}
	s.cache.assume(p, res.Node)
	s.binds.Add(1)
	go func() {
		defer s.binds.Done()
		s.bind(context.WithoutCancel(ctx), d, once)
	}()
}

// bind is the binding cycle: the pods/binding subresource, then the
// Scheduled event.
func (s *Scheduler) bind(ctx context.Context, d Decision, once bool) {
	pod, node := d.Pod, d.Result.Node
	key := pod.Namespace + "/" + pod.Name
	err := s.client.Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	})
	switch {
	case err == nil:
		s.queue.done(key, scheduled)
		s.events.add(pod, corev1.EventTypeNormal, "Scheduled",
			fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node))
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		s.cache.forget(key)
		s.queue.done(key, scheduled)
		d.Err, d.Conflict = err, true
	default:
		s.cache.forget(key)
		o := failed
		if once {
			o = dropped
		}
		d.Retry = s.queue.done(key, o)
		d.Err = fmt.Errorf("binding %s to node %s: %w", key, node, err)
	}
	s.report(d)
}

// setUnschedulable writes the condition PodScheduled=False, reason
// Unschedulable, with msg, unless the pod has it already (its
// lastTransitionTime moves only when the status does).
func (s *Scheduler) setUnschedulable(ctx context.Context, pod *corev1.Pod, msg string) error {
	for range 3 {
		var cur *corev1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == corev1.PodScheduled {
				cur = &pod.Status.Conditions[i]
			}
		}
		if cur != nil && cur.Status == corev1.ConditionFalse && cur.Reason == corev1.PodReasonUnschedulable && cur.Message == msg {
			return nil
		}
		cond := corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now(),
		}
		p := pod.DeepCopy()
		if cur != nil && cur.Status == corev1.ConditionFalse {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		replaced := false
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodScheduled {
				p.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			p.Status.Conditions = append(p.Status.Conditions, cond)
		}
		_, err := s.client.UpdateStatus(ctx, p)
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh, err := s.client.Get(ctx, "pods", pod.Namespace, pod.Name)
		if err != nil {
			return err
		}
		if pod = fresh.(*corev1.Pod); pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			return nil
		}
	}
	return fmt.Errorf("the pod kept changing under the update")
}

func (s *Scheduler) warn(err error) {
	if s.opts.warn != nil {
		s.reportMu.Lock()
		defer s.reportMu.Unlock()
		s.opts.warn(err)
	}
}

// report hands d to the caller's function and counts it.
func (s *Scheduler) report(d Decision) {
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	switch {
	case d.Bound():
		s.summary.Bound++
	case d.Conflict:
		s.summary.Conflicts++
	case d.Unschedulable():
		s.summary.Unschedulable++
	default:
		s.summary.Failed++
		s.errs = append(s.errs, d.Err)
	}
	if s.opts.report != nil {
		s.opts.report(d)
	}
}
