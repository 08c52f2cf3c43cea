package trace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
)

// Errors Pod, Deployment and ParseTarget return.
var (
	// ErrNeverCreated: the object is neither in the store nor in its watch
	// log. (With a compacted log, an object created and deleted before the
	// compacted revision is gone without a trace too: the error says so.)
	ErrNeverCreated = errors.New("never created")
	// ErrUnsupportedKind: podlab traces pods and Deployments only.
	ErrUnsupportedKind = errors.New("podlab trace follows pods and deployments")
)

// Stages the timeline names. Events keep their reason as their stage
// (Scheduled, SuccessfulCreate, Pulling, Pulled, Created, Started, Killing,
// BackOff, Failed, ...); the writes of the object itself are named here.
const (
	// StageCreated: the API server stored the object (the watch log's ADDED).
	StageCreated = "created"
	// StageBound: the scheduler's binding set spec.nodeName.
	StageBound = "bound"
	// StageUnschedulable: the scheduler set PodScheduled=False.
	StageUnschedulable = "unschedulable"
	// StageSandbox: the kubelet's status after RunPodSandbox
	// (PodReadyToStartContainers True).
	StageSandbox = "sandbox"
	// StageRunning: the kubelet wrote status.phase Running.
	StageRunning = "Running"
	// StageStatus: another status write (a container's state, its imageID,
	// a condition).
	StageStatus = "status"
	// StageDeleteRequested: a delete set deletionTimestamp (graceful).
	StageDeleteRequested = "delete requested"
	// StageDeleted: the object left the store (the watch log's DELETED).
	StageDeleted = "deleted"
	// StageUpdated: a write of metadata or spec (labels, owners).
	StageUpdated = "updated"
)

// The event reasons the timeline places on the runtime's side.
const (
	ReasonScheduled        = "Scheduled"
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonPulling          = "Pulling"
	ReasonPulled           = "Pulled"
	ReasonCreated          = "Created"
	ReasonStarted          = "Started"
	ReasonKilling          = "Killing"
)

// Participant is one lifeline of the sequence diagram: who asked for a
// write, or who did a stage.
type Participant string

// The participants, in the order a diagram shows them.
const (
	User              Participant = "User"
	APIServer         Participant = "API server"
	Store             Participant = "Store (etcd)"
	ControllerManager Participant = "Controller-manager"
	Scheduler         Participant = "Scheduler"
	Kubelet           Participant = "Kubelet"
	Runtime           Participant = "Runtime"
	Runc              Participant = "runc"
)

// Participants lists every participant, in diagram order.
func Participants() []Participant {
	return []Participant{User, APIServer, Store, ControllerManager, Scheduler, Kubelet, Runtime, Runc}
}

// Entry is one stage: one write to the store.
type Entry struct {
	// T is the time since the create (T=0); Time the wall clock.
	T    time.Duration
	Time time.Time
	// Estimated: the write carried no precise time, and Time was placed
	// between the timed writes around it (see the package doc).
	Estimated bool
	// Revision is the store revision of the write; 0 when the compacted
	// watch log no longer holds it.
	Revision int64
	// Resource is what the revision wrote: "pods", "events", "replicasets",
	// "deployments".
	Resource string
	// Component did the stage: kube-apiserver, default-scheduler,
	// kubelet/node-1, replicaset-controller, deployment-controller.
	Component string
	// Actor is whose request it was, for the diagram: User (or
	// Controller-manager) for a create, Scheduler for a binding, Kubelet
	// for a status.
	Actor  Participant
	Stage  string
	Detail string
	// Short says what a status write changed in a few words
	// ("app imageID", "phase Running, Ready=True"), for a diagram.
	Short string
	// Object is the object the entry is about: "pod/web",
	// "replicaset/web-6d9f7c8b4", "deployment/web".
	Object string
}

// Span is how long one named stretch of the chain took: from the first
// From stage to the first To stage after it.
type Span struct {
	Name     string
	From, To string
	Took     time.Duration
	// Estimated: one end's time was placed (see Entry.Estimated).
	Estimated bool
}

// PodSummary is what one pod reached, and when.
type PodSummary struct {
	Name string
	UID  types.UID
	Node string
	// Created, Running and Deleted are the pod's entries of those stages,
	// nil when it did not reach them (or the log no longer holds them).
	Created, Running, Deleted *Entry
}

// Timeline is a pod's (or a Deployment's pods') writes, in revision order.
type Timeline struct {
	// Kind is "Pod" or "Deployment".
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
	// Start is T=0: the create.
	Start   time.Time
	Entries []Entry
	// Pods are the pods traced: one for a pod, a Deployment's all.
	Pods []PodSummary
	// Spans are the stretches of a pod's chain (scheduling, pull, ...).
	Spans []Span
	// Revision is the store's revision when the trace read it.
	Revision int64
	// CompleteAfter: the watch log holds every write after this revision.
	// It is 1 (everything but the store's first write, which is no pod)
	// unless the log was compacted.
	CompleteAfter int64
	// Compacted: the log was compacted; writes up to CompleteAfter are
	// missing.
	Compacted bool
}

// Option tunes a trace.
type Option func(*options)

type options struct {
	timeout time.Duration
	idle    time.Duration
}

// WithTimeout bounds the whole trace (10s by default).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithIdle is how long a watch of the log may stay silent before the log
// counts as read to its end (500ms by default). A watch never ends on its
// own: it replays the log, then waits for new writes.
func WithIdle(d time.Duration) Option { return func(o *options) { o.idle = d } }

func newOptions(opts []Option) options {
	o := options{timeout: 10 * time.Second, idle: 500 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Target is what to trace: a pod or a Deployment, by name.
type Target struct {
	Kind string // "Pod" or "Deployment"
	Name string
}

// ParseTarget reads kubectl's ways of naming one object: "pod/web", "pod
// web", "deployment/web", "deploy web", or a bare "web", which is a pod.
func ParseTarget(args []string) (Target, error) {
	var kind, name string
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kind, name, _ = strings.Cut(args[0], "/")
	case len(args) == 1:
		kind, name = "pod", args[0]
	case len(args) == 2 && !strings.Contains(args[0], "/"):
		kind, name = args[0], args[1]
	case len(args) == 0:
		return Target{}, errors.New("trace what? name a pod: podlab trace pod/NAME (or deployment/NAME)")
	default:
		return Target{}, fmt.Errorf("trace one object, as pod/NAME or pod NAME, not %q", strings.Join(args, " "))
	}
	if name == "" || strings.Contains(name, "/") {
		return Target{}, fmt.Errorf("%q names no object: write %s/NAME", strings.Join(args, " "), kind)
	}
	res, err := apiserver.LookupResource(kind)
	if err != nil {
		return Target{}, err
	}
	switch res.Kind {
	case "Pod", "Deployment":
		return Target{Kind: res.Kind, Name: name}, nil
	}
	return Target{}, fmt.Errorf("trace %s/%s: %w (trace pod/NAME, or deployment/NAME for its pods)", res.Singular, name, ErrUnsupportedKind)
}

// Trace traces t: Pod or Deployment.
func Trace(ctx context.Context, c apiserver.Interface, namespace string, t Target, opts ...Option) (*Timeline, error) {
	switch t.Kind {
	case "Pod":
		return Pod(ctx, c, namespace, t.Name, opts...)
	case "Deployment":
		return Deployment(ctx, c, namespace, t.Name, opts...)
	}
	return nil, fmt.Errorf("trace %s %s: %w", t.Kind, t.Name, ErrUnsupportedKind)
}

// readByName lists the object resource namespace/name (the default
// namespace if none is given): what a trace starts from, with the list's
// revision, up to which it reads the watch log.
func readByName(ctx context.Context, c apiserver.Interface, resource, kind, namespace, name string) (string, *apiserver.List, int64, error) {
	if namespace == "" {
		namespace = apiserver.DefaultNamespace
	}
	list, err := c.List(ctx, resource, namespace, apiserver.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return namespace, nil, 0, fmt.Errorf("tracing %s %s/%s: reading it: %w", kind, namespace, name, forbiddenHint(err))
	}
	upTo, err := revisionOf(list.ResourceVersion)
	return namespace, list, upTo, err
}

// Pod reads the timeline of the pod namespace/name: the pod that exists
// now, or, if none does, the last one of that name in the watch log.
func Pod(ctx context.Context, c apiserver.Interface, namespace, name string, opts ...Option) (*Timeline, error) {
	o := newOptions(opts)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	namespace, list, upTo, err := readByName(ctx, c, "pods", "pod", namespace, name)
	if err != nil {
		return nil, err
	}
	var current *corev1.Pod
	if len(list.Items) > 0 {
		current = list.Items[0].(*corev1.Pod)
	}
	var podsDone func(apiserver.WatchEvent, int64) bool
	if current != nil {
		// The pod's log is whole once its current revision went by.
		rv, _ := revisionOf(current.ResourceVersion)
		podsDone = func(ev apiserver.WatchEvent, rev int64) bool {
			return ev.Object.GetUID() == current.UID && rev >= rv
		}
	}
	listed, newest, err := listEvents(ctx, c, namespace)
	if err != nil {
		return nil, fmt.Errorf("tracing pod %s/%s: %w", namespace, name, err)
	}
	// The pods log is read whole, without a field selector: with one, the
	// API server turns a write whose previous version it cannot read (the
	// log was compacted) into ADDED, as kube-apiserver's watch cache does.
	logs, err := readLogs(ctx, c, o, upTo,
		logRequest{resource: "pods", namespace: namespace, done: podsDone},
		eventsLog(namespace, newest))
	if err != nil {
		return nil, fmt.Errorf("tracing pod %s/%s: %w", namespace, name, err)
	}
	pods, events := logs[0], logs[1]

	uid := types.UID("")
	if current != nil {
		uid = current.UID
	} else {
		for _, ev := range pods.events {
			if ev.Object.GetName() == name {
				uid = ev.Object.GetUID() // the last pod of that name
			}
		}
	}
	if uid == "" {
		return nil, neverCreated("pod", namespace, name, pods)
	}
	b := &builder{}
	b.pod(versionsOf(pods.events, uid), current, eventOccurrences(events, listed), pods.compactedAt())
	tl := b.timeline("Pod", namespace, name, uid, upTo, pods, events)
	tl.fill()
	tl.Spans = spans(tl.Entries)
	return tl, nil
}

// neverCreated is the error for an object found nowhere.
func neverCreated(kind, namespace, name string, log *watchLog) error {
	where := fmt.Sprintf("not in the store, and not in its watch log (every write since revision %d)", log.after+1)
	if log.compacted {
		where = fmt.Sprintf("not in the store, and not in its watch log, which was compacted: it holds the writes after revision %d only", log.after)
	}
	return fmt.Errorf("%s %s/%s: %w: %s (podlab get %ss -n %s lists what exists)", kind, namespace, name, ErrNeverCreated, where, kind, namespace)
}

// revisionOf parses a resourceVersion.
func revisionOf(rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("resourceVersion %q is not a revision", rv)
	}
	return n, nil
}

// versionsOf picks one object's writes out of a log.
func versionsOf(log []apiserver.WatchEvent, uid types.UID) []apiserver.WatchEvent {
	var out []apiserver.WatchEvent
	for _, ev := range log {
		if ev.Object.GetUID() == uid {
			out = append(out, ev)
		}
	}
	return out
}

// forbiddenHint adds what to do when RBAC refused a read.
func forbiddenHint(err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w (trace reads pods and events, and watches them: run it as admin)", err)
	}
	return err
}
