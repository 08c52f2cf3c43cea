package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// ErrNotSettled is returned by Once when its last pass still changed
// something: the controllers were not done (raise the pass limit, or look
// for two actors undoing each other's work).
var ErrNotSettled = errors.New("the controllers were still changing objects after the last pass")

// User is the identity kube-controller-manager acts as; RBAC's bootstrap
// policy binds the ClusterRole system:kube-controller-manager to it.
const User = "system:kube-controller-manager"

// The logger names kube-controller-manager gives its controllers (the
// controller names of cmd/kube-controller-manager/names).
const (
	deploymentControllerName = "deployment-controller"
	replicaSetControllerName = "replicaset-controller"
	garbageCollectorName     = "garbage-collector-controller"
)

// watched lists the resources the controllers watch, in the order a pass
// lists them: nodes (for the taint-eviction and node IPAM controllers),
// then owners before what they own.
func (m *Manager) watched() []string {
	return []string{"nodes", "deployments", "replicasets", "pods"}
}

// Manager is podlab's kube-controller-manager: the Deployment controller,
// the ReplicaSet controller, the garbage collector and the taint-eviction
// controller, sharing informers on nodes, deployments, replicasets and pods, each with its work queue, acting
// through the API server as one user.
type Manager struct {
	client    apiserver.Interface
	log       *klog.Writer
	now       func() time.Time
	maxPasses int
	ipam      *NodeIPAM // nil: no node IPAM controller
	nodes     NodeLifecycleConfig
}

// Option configures a Manager.
type Option func(*Manager)

// WithClock sets the clock for timestamps in conditions, expectations and
// durations (tests use a fixed one). The log's clock is the klog.Writer's.
func WithClock(now func() time.Time) Option { return func(m *Manager) { m.now = now } }

// WithNodeLifecycle sets the node lifecycle controller's periods (default
// DefaultNodeLifecycleConfig).
func WithNodeLifecycle(cfg NodeLifecycleConfig) Option { return func(m *Manager) { m.nodes = cfg } }

// WithMaxPasses bounds Once (default 30 passes).
func WithMaxPasses(n int) Option { return func(m *Manager) { m.maxPasses = n } }

// New returns a controller-manager acting through client (a client for
// User) and logging to log in klog's format.
func New(client apiserver.Interface, log *klog.Writer, opts ...Option) *Manager {
	m := &Manager{client: client, log: log, now: time.Now, maxPasses: 30, nodes: DefaultNodeLifecycleConfig()}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Report is what one Once did.
type Report struct {
	Passes  int  // list-and-sync passes made
	Settled bool // the last pass changed nothing
	// Writes counts the successful creates, updates and deletes the
	// controllers made through the API server (events not counted).
	Writes             int
	ReplicaSetsCreated []string // namespace/name
	ScalingEvents      []string // "Scaled up replica set web-7d4b9c8f6 from 0 to 3"
	PodsCreated        []string
	PodsDeleted        []string
	PodsEvicted        []string // pods the taint-eviction controller deleted: namespace/name
	Collected          []string // objects the garbage collector deleted: "replicasets default/web-7d4b9c8f6"
	NodeCIDRs          []string // CIDRs the node IPAM controller gave: "node-1 10.244.0.0/24"
}

// run is the state of one Run or one Once: one process's worth of caches,
// queues and expectations.
type run struct {
	m          *Manager
	singlePass bool
	client     apiserver.Interface // counts writes
	writes     atomic.Int64
	informers  map[string]*apiserver.Informer

	mu    sync.Mutex
	last  map[string]map[string]apiserver.Object // resource -> namespace/name -> last object handled
	byUID map[types.UID]apiserver.Object
	rep   Report
	errs  map[string]error // failed syncs in this pass, by controller and key

	dc   *deploymentController
	rsc  *replicaSetController
	gc   *garbageCollector
	tec  *taintEvictionController
	ipam *nodeIPAMController // nil unless WithNodeIPAM
}

func (m *Manager) newRun(singlePass bool) *run {
	r := &run{m: m, singlePass: singlePass, informers: map[string]*apiserver.Informer{},
		last: map[string]map[string]apiserver.Object{}, byUID: map[types.UID]apiserver.Object{}, errs: map[string]error{}}
	r.client = &countingClient{Interface: m.client, writes: &r.writes}
	for _, res := range m.watched() {
		r.informers[res] = apiserver.NewInformer(m.client, res, "", apiserver.ListOptions{})
		r.last[res] = map[string]apiserver.Object{}
	}
	r.dc = newDeploymentController(r)
	r.rsc = newReplicaSetController(r)
	r.gc = newGarbageCollector(r)
	r.tec = newTaintEvictionController(r)
	if m.ipam != nil {
		r.ipam = newNodeIPAMController(r, *m.ipam)
	}
	return r
}

// Once is `kube-controller-manager` for one pass at a time, until nothing
// changes: list deployments, replicasets and pods (the informers' list),
// hand every new or changed object to the controllers' event handlers, let
// each controller sync every key its queue holds, and repeat, since what one
// controller wrote (a ReplicaSet) is what the next one acts on (its pods).
// It stops when a pass wrote nothing, after at most the pass limit.
func (m *Manager) Once(ctx context.Context) (*Report, error) {
	r := m.newRun(true)
	r.starting()
	idle := 0
	for pass := 1; ; pass++ {
		if pass > m.maxPasses {
			return r.report(false), fmt.Errorf("%w (%d passes)", ErrNotSettled, m.maxPasses)
		}
		before := r.writes.Load()
		r.mu.Lock()
		clear(r.errs)
		r.mu.Unlock()
		for _, res := range m.watched() {
			if err := r.informers[res].Sync(ctx, r.dispatch(res)); err != nil {
				return r.report(false), err
			}
		}
		if pass == 1 {
			r.synced()
		}
		for _, c := range r.controllers() {
			c.queue().Resume()
		}
		if err := r.drain(ctx); err != nil {
			return r.report(false), err
		}
		r.mu.Lock()
		r.rep.Passes = pass
		failed := r.failures()
		r.mu.Unlock()
		if r.writes.Load() != before {
			idle = 0
			continue
		}
		if failed == nil {
			return r.report(true), nil
		}
		// Nothing was written but some syncs failed: a conflict with another
		// writer heals on the next pass, which lists the fresh objects. Give
		// up after three such passes.
		if idle++; idle == 3 {
			return r.report(false), failed
		}
	}
}

// Run runs the controllers until ctx ends: informers list, then watch;
// their events fill the work queues; one worker per controller syncs what
// its queue holds. The node lifecycle controller, which acts on time
// rather than on events, runs beside them (Once leaves it out).
func (m *Manager) Run(ctx context.Context) error {
	nlc, err := NewNodeLifecycleController(m.client, m.log, m.nodes, m.now)
	if err != nil {
		return err
	}
	r := m.newRun(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.starting()
	m.log.Logger("").V(1).Info(at("controllermanager.go", 764), "Controller starting...", "controller", nodeLifecycleControllerName)
	informerErr := make(chan error, len(m.watched())+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := nlc.Run(ctx); err != nil {
			informerErr <- err
		}
	}()
	for _, res := range m.watched() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.informers[res].Run(ctx, r.dispatch(res)); err != nil {
				informerErr <- err
			}
		}()
	}
	err = r.waitForCaches(ctx, informerErr)
	if err == nil {
		r.synced()
		for _, c := range r.controllers() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.worker(ctx, c)
			}()
		}
		select {
		case <-ctx.Done():
		case err = <-informerErr:
		}
	}
	cancel()
	for _, c := range r.controllers() {
		c.queue().ShutDown()
	}
	wg.Wait()
	r.stopping()
	return err
}

// waitForCaches is cache.WaitForCacheSync: poll until every informer has
// listed once.
func (r *run) waitForCaches(ctx context.Context, informerErr <-chan error) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		synced := true
		for _, inf := range r.informers {
			synced = synced && inf.ResourceVersion() != ""
		}
		if synced {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-informerErr:
			return err
		case <-t.C:
		}
	}
}

// controller is what the run drives: a queue and a sync of one key.
type controller interface {
	queue() *queue
	sync(ctx context.Context, key string) error
	handleErr(ctx context.Context, key string, err error)
}

func (r *run) controllers() []controller {
	cs := []controller{r.dc, r.rsc, r.gc, r.tec}
	if r.ipam != nil {
		cs = append(cs, r.ipam)
	}
	return cs
}

// worker is processNextWorkItem in a loop.
func (r *run) worker(ctx context.Context, c controller) {
	for {
		key, ok := c.queue().Get()
		if !ok {
			return
		}
		c.handleErr(ctx, key, c.sync(ctx, key))
		c.queue().Done(key)
	}
}

// drain syncs every queued key of every controller, Deployment controller
// first, until the queues are empty.
func (r *run) drain(ctx context.Context) error {
	for {
		worked := false
		for _, c := range r.controllers() {
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				key, ok := c.queue().TryGet()
				if !ok {
					break
				}
				c.handleErr(ctx, key, c.sync(ctx, key))
				c.queue().Done(key)
				worked = true
			}
		}
		if !worked {
			return nil
		}
	}
}

// failed records a failed sync for the end of a single pass.
func (r *run) failed(what, key string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.errs, what+" "+key)
		return
	}
	r.errs[what+" "+key] = err
}

// failures joins the failed syncs of the pass (r.mu held).
func (r *run) failures() error {
	if len(r.errs) == 0 {
		return nil
	}
	keys := make([]string, 0, len(r.errs))
	for k := range r.errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = fmt.Errorf("syncing %s: %w", k, r.errs[k])
	}
	return errors.Join(errs...)
}

func (r *run) report(settled bool) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.rep
	rep.Settled = settled
	rep.Writes = int(r.writes.Load())
	return &rep
}

func (r *run) record(f func(*Report)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.rep)
}

// dispatch turns an informer's events into the controllers' add, update
// and delete handlers, as client-go's shared informer does. A relisted
// object whose resourceVersion did not change is not an update.
func (r *run) dispatch(resource string) func(apiserver.WatchEvent) {
	return func(ev apiserver.WatchEvent) {
		obj := ev.Object
		key := obj.GetNamespace() + "/" + obj.GetName()
		r.mu.Lock()
		old, seen := r.last[resource][key]
		if ev.Type == apiserver.Deleted {
			delete(r.last[resource], key)
			delete(r.byUID, obj.GetUID())
		} else {
			if seen && old.GetUID() != obj.GetUID() {
				delete(r.byUID, old.GetUID())
			}
			r.last[resource][key] = obj
			r.byUID[obj.GetUID()] = obj
		}
		r.mu.Unlock()
		switch {
		case ev.Type == apiserver.Deleted:
			r.onDelete(resource, obj)
		case !seen:
			r.onAdd(resource, obj)
		case old.GetResourceVersion() != obj.GetResourceVersion():
			r.onUpdate(resource, old, obj)
		}
	}
}

func (r *run) onAdd(resource string, obj apiserver.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		r.dc.addDeployment(o)
	case *appsv1.ReplicaSet:
		r.dc.addReplicaSet(o)
		r.rsc.addRS(o)
	case *corev1.Pod:
		r.rsc.addPod(o)
		r.tec.updatePod(nil, o)
	case *corev1.Node:
		r.tec.updateNode(nil, o)
		if r.ipam != nil {
			r.ipam.nodeChanged(o)
		}
	}
	r.gc.observe(resource, obj)
}

func (r *run) onUpdate(resource string, old, cur apiserver.Object) {
	switch o := cur.(type) {
	case *appsv1.Deployment:
		r.dc.updateDeployment(old.(*appsv1.Deployment), o)
	case *appsv1.ReplicaSet:
		r.dc.updateReplicaSet(old.(*appsv1.ReplicaSet), o)
		r.rsc.updateRS(old.(*appsv1.ReplicaSet), o)
	case *corev1.Pod:
		r.rsc.updatePod(old.(*corev1.Pod), o)
		r.tec.updatePod(old.(*corev1.Pod), o)
	case *corev1.Node:
		r.tec.updateNode(old.(*corev1.Node), o)
		if r.ipam != nil {
			r.ipam.nodeChanged(o)
		}
	}
	r.gc.observe(resource, cur)
}

func (r *run) onDelete(resource string, obj apiserver.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		r.dc.deleteDeployment(o)
	case *appsv1.ReplicaSet:
		r.dc.deleteReplicaSet(o)
		r.rsc.deleteRS(o)
	case *corev1.Pod:
		r.dc.deletePod(o)
		r.rsc.deletePod(o, "k8s.io/client-go/tools/cache.ResourceEventHandlerFuncs.OnDelete")
		r.tec.deletePod(o)
	case *corev1.Node:
		r.tec.updateNode(o, nil)
		if r.ipam != nil {
			r.ipam.nodeDeleted(o)
		}
	}
	r.gc.ownerGone(obj)
}

// lookups over the informers' copies (shared: copy before changing).

func (r *run) deployment(namespace, name string) *appsv1.Deployment {
	o, ok := r.informers["deployments"].Get(namespace, name)
	if !ok {
		return nil
	}
	return o.(*appsv1.Deployment)
}

func (r *run) replicaSet(namespace, name string) *appsv1.ReplicaSet {
	o, ok := r.informers["replicasets"].Get(namespace, name)
	if !ok {
		return nil
	}
	return o.(*appsv1.ReplicaSet)
}

func (r *run) deployments(namespace string) []*appsv1.Deployment {
	return listOf[*appsv1.Deployment](r.informers["deployments"], namespace)
}

func (r *run) replicaSets(namespace string) []*appsv1.ReplicaSet {
	return listOf[*appsv1.ReplicaSet](r.informers["replicasets"], namespace)
}

func (r *run) pods(namespace string) []*corev1.Pod {
	return listOf[*corev1.Pod](r.informers["pods"], namespace)
}

func listOf[T apiserver.Object](inf *apiserver.Informer, namespace string) []T {
	var out []T
	for _, o := range inf.List() {
		if o.GetNamespace() == namespace {
			out = append(out, o.(T))
		}
	}
	return out
}

// object finds a watched object by uid.
func (r *run) object(uid types.UID) apiserver.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byUID[uid]
}

// dependents lists the watched objects that name uid among their owners.
func (r *run) dependents(uid types.UID) []apiserver.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []apiserver.Object
	for _, o := range r.byUID {
		for _, ref := range o.GetOwnerReferences() {
			if ref.UID == uid {
				out = append(out, o)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return keyOf(out[i]) < keyOf(out[j]) })
	return out
}

func keyOf(o apiserver.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func splitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

// starting prints what kube-controller-manager v1.37.2 prints as its
// controllers start (controllermanager.go, then each controller's Run, whose
// cache.WaitForNamedCacheSyncWithContext logs with the controller's logger).
func (r *run) starting() {
	bg := r.m.log.Logger("")
	for _, name := range []string{deploymentControllerName, replicaSetControllerName, garbageCollectorName, taintEvictionControllerName} {
		bg.V(1).Info(at("controllermanager.go", 764), "Controller starting...", "controller", name)
	}
	r.dc.log.Info(at("deployment_controller.go", 180), "Starting controller", "controller", "deployment")
	r.dc.log.Info(at("shared_informer.go", 524), "Waiting for caches to sync")
	r.rsc.log.Info(at("replica_set.go", 285), "Starting controller", "name", "replicaset")
	r.rsc.log.Info(at("shared_informer.go", 524), "Waiting for caches to sync")
	r.gc.log.Info(at("garbagecollector.go", 141), "Starting controller", "controller", "garbagecollector")
	r.gc.log.Info(at("shared_informer.go", 524), "Waiting for caches to sync")
	if r.ipam != nil {
		bg.V(1).Info(at("controllermanager.go", 764), "Controller starting...", "controller", nodeIPAMControllerName)
		r.ipam.log.Info(at("range_allocator.go", 177), "Sending events to api server")
		r.ipam.log.Info(at("range_allocator.go", 181), "Starting range CIDR allocator")
	}
	r.tec.log.Info(at("taint_eviction.go", 283), "Starting", "controller", taintEvictionControllerName)
	r.tec.log.Info(at("taint_eviction.go", 288), "Sending events to API server")
	r.tec.log.Info(at("shared_informer.go", 524), "Waiting for caches to sync")
}

func (r *run) synced() {
	r.dc.log.Info(at("shared_informer.go", 531), "Caches are synced")
	r.rsc.log.Info(at("shared_informer.go", 531), "Caches are synced")
	r.gc.log.Info(at("shared_informer.go", 531), "Caches are synced")
	r.gc.log.Info(at("garbagecollector.go", 166), "Garbage collector: all resource monitors have synced")
	r.gc.log.Info(at("garbagecollector.go", 169), "Proceeding to collect garbage")
	r.tec.log.Info(at("shared_informer.go", 531), "Caches are synced")
}

func (r *run) stopping() {
	r.dc.log.Info(at("deployment_controller.go", 184), "Shutting down controller", "controller", "deployment")
	r.rsc.log.Info(at("replica_set.go", 289), "Shutting down controller", "name", "replicaset")
	r.gc.log.Info(at("garbagecollector.go", 145), "Shutting down controller", "controller", "garbagecollector")
	if r.ipam != nil {
		r.ipam.log.Info(at("range_allocator.go", 185), "Shutting down range CIDR allocator")
	}
	r.tec.log.Info(at("taint_eviction.go", 293), "Shutting down controller", "controller", taintEvictionControllerName)
}

// at is the call site in kube-controller-manager v1.37.2 (k8s.io/kubernetes
// v1.37.2 and k8s.io/client-go v0.37.2) that logs the message podlab logs
// there. The chain's description quotes an older release's lines
// (deployment_controller.go:189 and :599, which are :203 and :583 in
// v1.37.2). podlab's own code is elsewhere; the numbers are a reproduction,
// so that a learner can open the Kubernetes file at the line a message
// comes from.
func at(file string, line int) klog.Source { return klog.Source{File: file, Line: line} }

// event records an Event through rec and prints it as client-go's event
// broadcaster does (StartStructuredLogging(3) in every controller's Run).
func (r *run) event(ctx context.Context, rec *apiserver.Recorder, log klog.Logger, obj apiserver.Object, eventType, reason, message string) {
	res, err := apiserver.ResourceOf(obj)
	if err != nil {
		return
	}
	log.V(3).Info(at("event.go", 395), "Event occurred", "object", klog.KObj(obj), "fieldPath", "",
		"kind", res.Kind, "apiVersion", res.GroupVersion().String(), "type", eventType, "reason", reason, "message", message)
	if err := rec.Event(ctx, obj, eventType, reason, message); err != nil {
		log.Error(at("event.go", 365), err, "Server rejected event (will not retry!)", "event", klog.KObj(obj).String()+" "+reason)
	}
}

// handleError is utilruntime.HandleError: an error no one returns to,
// logged under the logger UnhandledError at the caller's line.
func (r *run) handleError(src klog.Source, err error) {
	r.m.log.Logger("UnhandledError").Error(src, err, "Unhandled Error")
}

// countingClient counts the successful writes of the controllers, so that
// Once knows when a pass changed nothing.
type countingClient struct {
	apiserver.Interface
	writes *atomic.Int64
}

func (c *countingClient) count(err error) {
	if err == nil {
		c.writes.Add(1)
	}
}

func (c *countingClient) Create(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	out, err := c.Interface.Create(ctx, obj)
	c.count(err)
	return out, err
}

func (c *countingClient) Update(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	out, err := c.Interface.Update(ctx, obj)
	c.count(err)
	return out, err
}

func (c *countingClient) UpdateStatus(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	out, err := c.Interface.UpdateStatus(ctx, obj)
	c.count(err)
	return out, err
}

func (c *countingClient) Patch(ctx context.Context, resource, namespace, name string, pt types.PatchType, data []byte, opts apiserver.PatchOptions) (apiserver.Object, error) {
	out, err := c.Interface.Patch(ctx, resource, namespace, name, pt, data, opts)
	c.count(err)
	return out, err
}

func (c *countingClient) Delete(ctx context.Context, resource, namespace, name string, opts apiserver.DeleteOptions) (apiserver.Object, error) {
	out, err := c.Interface.Delete(ctx, resource, namespace, name, opts)
	if !apierrors.IsNotFound(err) {
		c.count(err)
	}
	return out, err
}
