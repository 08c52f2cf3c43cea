package up

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/controllers"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/registry"
	"github.com/podlab/podlab/steps/scheduler"
	"github.com/podlab/podlab/steps/statedir"
)

// Defaults of Options.
const (
	DefaultName  = "web"
	DefaultImage = "nginx"
)

// Options say what Up creates and with what.
type Options struct {
	// StateDir is podlab's state directory (required).
	StateDir string
	// Name is the pod's name, or the Deployment's (default web);
	// Namespace its namespace (default default).
	Name, Namespace string
	// Image is the container image (default nginx, that is
	// docker.io/library/nginx:latest, through the mirror).
	Image string
	// Deployment creates a Deployment of one replica instead of a bare
	// pod: the chain's 18 steps instead of 16.
	Deployment bool
	// Mirror is the registry docker.io images are pulled from. Empty: Up
	// serves ImagesDir itself, in-process, on 127.0.0.1 and a free port,
	// for as long as it runs.
	Mirror   string
	Insecure bool
	// ImagesDir is the OCI layout the in-process registry serves (default
	// <state>/demo-images, which `make images` builds).
	ImagesDir string
	// Runtime is the OCI runtime binary (runc); Shim the command that runs
	// runc.ShimMain (podlab runc shim). Both required.
	Runtime string
	Shim    []string
	// RuntimeCommand serves a node's container runtime, without its
	// --node (podlab --state-dir DIR runtime --runtime BIN): a node's
	// kubelet is a CRI client of the runtime on the node's socket, and when
	// nothing answers there Up starts one with it (--node NAME added, and
	// --registry-mirror and --insecure as Up pulls), which outlives Up as
	// containerd outlives a kubelet (podlab reset stops it). A runtime left
	// by an earlier Up pulls through that Up's registry, gone with it: Up
	// restarts it with its own (kubelet.RuntimeConnection.Mirror). Required.
	RuntimeCommand []string
	// Settle is how long the kubelet watches the started container before
	// it reports (default 1s: the PLEG's relist period); Timeout bounds
	// every wait for a component (default 60s); HTTPWait how long the app
	// gets to start listening (default 10s).
	Settle, Timeout, HTTPWait time.Duration
	// OnStep receives every step as it is done, and the notes before and
	// after the chain (Step.N 0).
	OnStep func(Step)
	// OnCommand receives every runc command line the kubelet's runtime runs.
	OnCommand func(argv []string)
}

func (o *Options) complete() error {
	if o.StateDir == "" {
		return errors.New("up: no state directory")
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	o.StateDir = abs
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Name, DefaultName)
	def(&o.Namespace, apiserver.DefaultNamespace)
	def(&o.Image, DefaultImage)
	def(&o.ImagesDir, registry.ImagesDir(o.StateDir))
	if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s (the pod's container is named after it)", o.Name, errs[0])
	}
	if o.Runtime == "" {
		return errors.New("up: no OCI runtime binary (runc) given")
	}
	if len(o.Shim) == 0 {
		return errors.New("up: no shim command given (podlab runc shim)")
	}
	if len(o.RuntimeCommand) == 0 {
		return errors.New("up: no command to start a node's runtime given (podlab runtime)")
	}
	if o.Settle <= 0 {
		o.Settle = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.HTTPWait <= 0 {
		o.HTTPWait = 10 * time.Second
	}
	return nil
}

// Result is what Up did and where everything is.
type Result struct {
	StateDir string
	// Initialized is true when Up made the control plane (podlab init).
	Initialized bool
	// Registry is the in-process registry Up ran (stopped when Up
	// returns); nil when Options.Mirror was given. Mirror is the URL
	// docker.io images came from.
	Registry *Registry
	Mirror   string
	// APIServer is the kube-apiserver the chain went through, over HTTPS:
	// Up's own, in-process (stopped when Up returns; its Requests are
	// every request it answered), or the podlab apiserver that serves the
	// state directory.
	APIServer *APIServer
	// Existing is true when the pod (or Deployment) existed already: Up
	// did nothing but report it.
	Existing bool
	// Deployment and ReplicaSet name the workload, with --deployment.
	Namespace              string
	Deployment, ReplicaSet string
	// Pod is the pod as the API server stores it at the end.
	Pod *corev1.Pod
	// Node is the node it runs on; Container its container, ContainerID the
	// runtime's, Bundle its bundle, LogPath its CRI log.
	Node, Container, ContainerID, Bundle, LogPath string
	// Logs is the container's log at the end, as kubectl logs shows it.
	Logs string
	// HTTP is the answer to a GET of the container's port from inside the
	// pod's network namespace (nil when the image exposes no port, with
	// HTTPErr when the request failed).
	HTTP    *HTTPAnswer
	HTTPErr error
	// Steps are the steps and notes, as they went to Options.OnStep.
	Steps []Step
	// Next are commands to try next.
	Next []string
}

// Up re-enacts the chain for real: it creates a pod (or a
// Deployment) through the API server as admin, and has the real
// components, in-process, each as its own identity, do the rest: the
// controller-manager (a Deployment), the scheduler, the node's kubelet
// through each runtime stage, until the container runs. Each step goes to
// Options.OnStep as it is done. The pod stays running; the registry, the
// scheduler and the controller-manager stop when Up returns.
func Up(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	u := &upRun{
		o:         opts,
		res:       &Result{StateDir: opts.StateDir, Namespace: opts.Namespace},
		kubelets:  map[string]*kubelet.Kubelet{},
		clients:   map[string]apiserver.Interface{},
		decisions: newDecisions(),
		cmLog:     &lockedBuffer{},
	}
	err := u.run(ctx)
	for _, c := range u.runtimes {
		c.Close()
	}
	return u.res, err
}

// upRun is one Up.
type upRun struct {
	o         Options
	res       *Result
	api       *APIServer
	admin     apiserver.Interface
	storePath string
	reg       *Registry
	kubelets  map[string]*kubelet.Kubelet
	clients   map[string]apiserver.Interface // the kubelets', by node
	runtimes  []*criremote.Client            // the kubelets' CRI clients
	decisions *decisions
	cmLog     *lockedBuffer
	startRV   string // the store's revision before step 1

	// stageHook, when set, receives every stage the kubelets run
	// (kubelet.Config.OnStage; see runPod).
	stageMu   sync.Mutex
	stageHook func(kubelet.Report)

	// capture, when set, receives the in-process API server's phases of
	// the gate (see create).
	phaseMu sync.Mutex
	capture func(request string, p apiserver.Phase)
}

// onStage hands a kubelet's stage to stageHook.
func (u *upRun) onStage(r kubelet.Report) {
	u.stageMu.Lock()
	h := u.stageHook
	u.stageMu.Unlock()
	if h != nil {
		h(r)
	}
}

func (u *upRun) setOnStage(h func(kubelet.Report)) {
	u.stageMu.Lock()
	u.stageHook = h
	u.stageMu.Unlock()
}

// onPhase hands a phase of the in-process API server's gate to capture.
func (u *upRun) onPhase(request string, p apiserver.Phase) {
	u.phaseMu.Lock()
	defer u.phaseMu.Unlock()
	if u.capture != nil {
		u.capture(request, p)
	}
}

func (u *upRun) emit(s Step) {
	u.res.Steps = append(u.res.Steps, s)
	if u.o.OnStep != nil {
		u.o.OnStep(s)
	}
}

// step emits the chain's step n (numbered as the chain at hand numbers it).
func (u *upRun) step(n int, component string, detail any, did ...string) {
	chain := Chain(u.o.Deployment)
	u.emit(Step{N: n, Of: len(chain), Sentence: chain[n-1], Component: component, Did: did, Detail: detail})
}

// podStep emits a step numbered as the bare pod's chain numbers it.
func (u *upRun) podStep(n int, component string, detail any, did ...string) {
	u.step(podStep(u.o.Deployment, n), component, detail, did...)
}

func (u *upRun) note(title, component string, did ...string) {
	u.emit(Step{Sentence: title, Component: component, Did: did})
}

// failed emits the bare pod's step n with what failed, and returns the error.
func (u *upRun) failed(n int, component string, did []string, err error) error {
	u.podStep(n, component, nil, append(did, "FAILED: "+err.Error())...)
	return fmt.Errorf("step %d: %w (the pod stays where it got to: podlab describe pod %s, podlab kubelet --next; podlab reset removes everything)",
		podStep(u.o.Deployment, n), err, u.podName())
}

func (u *upRun) podName() string {
	if u.res.Pod != nil {
		return u.res.Pod.Name
	}
	return u.o.Name
}

func (u *upRun) run(ctx context.Context) error {
	o := u.o
	ir, err := apiserver.Init(ctx, o.StateDir)
	if err != nil {
		return fmt.Errorf("initializing the control plane (podlab init): %w", err)
	}
	u.storePath = ir.StorePath
	if !ir.Existing {
		u.res.Initialized = true
		var users []string
		for _, e := range ir.Users {
			users = append(users, e.User.Name)
		}
		u.note("podlab init: the state directory had no control plane, so one was made", "podlab init",
			fmt.Sprintf("store (etcd's role) %s at revision %d: %d objects, the namespaces and the RBAC policy", ir.StorePath, ir.Revision, len(ir.Created)),
			fmt.Sprintf("token file %s: %s", ir.TokenPath, strings.Join(users, ", ")))
	}
	pr, err := ensurePKI(o.StateDir)
	if err != nil {
		return err
	}
	var made []string
	for _, it := range append(pr.Certificates, pr.Kubeconfigs...) {
		if it.Action == pki.Made {
			made = append(made, filepath.Base(it.Files[0]))
		}
	}
	if len(made) > 0 {
		u.note("podlab init: the lab's PKI, made", "podlab init",
			fmt.Sprintf("in %s and %s: %s", pr.PKIDir, pr.KubeconfigsDir, strings.Join(made, ", ")),
			"each component proves who it is with its client certificate, in its kubeconfig")
	}
	api, err := startAPIServer(ctx, o.StateDir, u.onPhase)
	if err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	defer api.stop() // last: the components stop before it
	u.api, u.res.APIServer = api, api
	if api.InProcess {
		u.note("kube-apiserver: serving the Kubernetes API in-process on "+api.URL+", for as long as podlab up runs", "kube-apiserver (podlab apiserver, in-process)",
			fmt.Sprintf("the only opener of the store %s; the serving certificate %s", ir.StorePath, statedir.Layout{Dir: o.StateDir}.PKICert("apiserver")),
			"every component below is its client over HTTPS, with its own kubeconfig from "+statedir.Layout{Dir: o.StateDir}.KubeconfigsDir())
	} else {
		u.note(fmt.Sprintf("kube-apiserver: podlab apiserver (pid %d) serves this state directory on %s", api.PID, api.URL), "kube-apiserver (podlab apiserver)",
			"every component below is its client over HTTPS, with its own kubeconfig; the gate's phases are in its log (podlab apiserver -v)")
	}
	if u.admin, err = api.clientAs(o.StateDir, "admin"); err != nil {
		return err
	}
	if done, err := u.existing(ctx); done || err != nil {
		return err
	}

	stopRegistry, err := u.registry(ctx)
	if err != nil {
		return err
	}
	defer stopRegistry()
	if _, err := u.kubeletFor(ctx, apiserver.HostNode); err != nil {
		return err
	}
	l, err := u.admin.List(ctx, "pods", o.Namespace, apiserver.ListOptions{})
	if err != nil {
		return err
	}
	u.startRV = l.ResourceVersion
	stopComponents, err := u.components(ctx)
	defer stopComponents() // what started stops, even after an error
	if err != nil {
		return err
	}

	var pod *corev1.Pod
	if o.Deployment {
		pod, err = u.deployment(ctx)
	} else {
		pod, err = u.barePod(ctx)
	}
	if err != nil {
		return err
	}
	u.res.Pod = pod
	if err := u.chain(ctx, pod); err != nil {
		return err
	}
	if o.Deployment {
		u.deploymentReady(ctx)
	}
	stopping := []string{"kube-scheduler"}
	if o.Deployment {
		stopping = append(stopping, "kube-controller-manager")
	}
	if u.api.InProcess {
		stopping = append(stopping, "the in-process kube-apiserver")
	}
	who := strings.Join(stopping[:len(stopping)-1], ", ")
	if who != "" {
		who += " and "
	}
	who += stopping[len(stopping)-1]
	if len(stopping) == 1 {
		who += " stops"
	} else {
		who += " stop"
	}
	u.requestsNote()
	did := []string{"podlab kubelet keeps it watched (restarts, deletion), podlab scheduler and podlab controller-manager keep placing and reconciling"}
	if u.api.InProcess {
		did = append(did, "podlab apiserver serves the store to kubectl and the components (--kubeconfig) again; until it runs, podlab's own commands open the store in-process")
	}
	u.note(who+" with podlab up, and nothing watches the pod from now on", "", did...)
	return nil
}

// requestsNote sums up what the in-process API server answered: every
// component reached the store only through it, over HTTPS.
func (u *upRun) requestsNote() {
	reqs := u.api.Requests()
	if len(reqs) == 0 {
		return
	}
	var users []string
	byUser := map[string]int{}
	var writes []string
	for _, r := range reqs {
		if byUser[r.User] == 0 {
			users = append(users, r.User)
		}
		byUser[r.User]++
		if r.Method != http.MethodGet {
			writes = append(writes, "  "+r.String())
		}
	}
	var counts []string
	for _, name := range users {
		counts = append(counts, fmt.Sprintf("%s %d", name, byUser[name]))
	}
	did := []string{"by client certificate: " + strings.Join(counts, ", "), "the writes, in order:"}
	if len(writes) > 12 {
		writes = append(writes[:12], fmt.Sprintf("  ... (%d more)", len(writes)-12))
	}
	u.note(fmt.Sprintf("kube-apiserver answered %d requests over HTTPS on %s: the only way anything reached the store", len(reqs), u.api.URL),
		"kube-apiserver (in-process)", append(did, writes...)...)
}

// registry starts the in-process registry the runtime pulls from (step
// 9), unless a mirror is given. stop stops it and says so.
func (u *upRun) registry(ctx context.Context) (stop func(), err error) {
	o := u.o
	u.res.Mirror = o.Mirror
	if o.Mirror != "" {
		u.note("the image registry: the mirror "+o.Mirror, "registry", "docker.io images are pulled from it (--registry-mirror, PODLAB_REGISTRY_MIRROR)")
		return func() {}, nil
	}
	reg, err := startRegistry(ctx, o.StateDir, o.ImagesDir)
	if err != nil {
		return nil, err
	}
	u.reg, u.res.Registry, u.res.Mirror = reg, reg, reg.URL
	did := []string{fmt.Sprintf("serving the OCI layout %s (blobs in %s)", reg.Images, reg.BlobDir)}
	for _, l := range reg.Loaded {
		did = append(did, fmt.Sprintf("  %s  %s", l.Ref, l.Digest))
	}
	did = append(did, fmt.Sprintf("docker.io images (nginx = docker.io/library/nginx:latest) are pulled from it, as from a mirror: PODLAB_REGISTRY_MIRROR=%s", reg.URL))
	u.note("the image registry: started in-process on "+reg.URL+", for as long as podlab up runs", "registry (podlab registry serve, in-process)", did...)
	return func() {
		reg.Stop()
		if ctx.Err() == nil {
			u.note("the in-process registry on "+reg.URL+" stopped", "registry",
				"pulls from now on (a new pod, a restart with imagePullPolicy Always) need a registry: podlab registry serve, with PODLAB_REGISTRY_MIRROR=http://127.0.0.1:5001")
		}
	}, nil
}

// components starts kube-scheduler and, for a Deployment,
// kube-controller-manager, in goroutines, each as its own user, watching
// until stop.
func (u *upRun) components(ctx context.Context) (stop func(), err error) {
	bg, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	schedClient, err := u.api.clientAs(u.o.StateDir, "kube-scheduler")
	if err != nil {
		return stop, err
	}
	sched := scheduler.New(schedClient, scheduler.WithReport(u.decisions.add), scheduler.WithWarnings(func(error) {}))
	wg.Go(func() { u.decisions.stop(sched.Run(bg)) })
	started := []string{"kube-scheduler (as system:kube-scheduler): lists, then watches, the pods and the nodes"}
	if u.o.Deployment {
		cmClient, err := u.api.clientAs(u.o.StateDir, "kube-controller-manager")
		if err != nil {
			return stop, err
		}
		m := controllers.New(cmClient, klog.New(u.cmLog, klog.WithVerbosity(4)))
		wg.Go(func() { m.Run(bg) })
		started = append(started, "kube-controller-manager (as "+controllers.User+"): lists, then watches, deployments, replicasets and pods")
	}
	u.note("the control plane's components: started in-process, each a client of kube-apiserver over HTTPS, watching", "podlab up", started...)
	return stop, nil
}

// existing reports the pod (or Deployment) if it exists already.
func (u *upRun) existing(ctx context.Context) (bool, error) {
	ns, name := u.o.Namespace, u.o.Name
	var did []string
	var pods []*corev1.Pod
	what := "pod"
	if u.o.Deployment {
		what = "deployment"
		obj, err := u.admin.Get(ctx, "deployments", ns, name)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		d := obj.(*appsv1.Deployment)
		did = append(did, fmt.Sprintf("deployment %s/%s (resourceVersion %s): %d replica(s) wanted, %d ready", ns, name, d.ResourceVersion, replicasOf(d), d.Status.ReadyReplicas))
		sel := metav1.FormatLabelSelector(d.Spec.Selector)
		l, err := u.admin.List(ctx, "pods", ns, apiserver.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		for _, o := range l.Items {
			pods = append(pods, o.(*corev1.Pod))
		}
		u.res.Deployment = name
	} else {
		obj, err := u.admin.Get(ctx, "pods", ns, name)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		pods = append(pods, obj.(*corev1.Pod))
	}
	for _, p := range pods {
		did = append(did, PodSummary(p))
	}
	u.res.Existing = true
	if len(pods) > 0 {
		u.res.Pod = pods[0]
		u.res.Node = pods[0].Spec.NodeName
	}
	u.res.Next = u.next(nil)
	did = append(did, fmt.Sprintf("nothing was done: run it again under another name (podlab up --name %s2), or start over (podlab reset, then podlab up)", name))
	u.note(fmt.Sprintf("%s %s/%s exists already", what, ns, name), "", did...)
	return true, nil
}

// PodSummary is one line about a pod's state: phase, node, containers.
func PodSummary(p *corev1.Pod) string {
	node := p.Spec.NodeName
	if node == "" {
		node = "no node"
	}
	var ctrs []string
	for _, c := range p.Status.ContainerStatuses {
		s := "unknown"
		switch {
		case c.State.Running != nil:
			s = "running since " + c.State.Running.StartedAt.UTC().Format(time.RFC3339)
		case c.State.Waiting != nil:
			s = "waiting (" + c.State.Waiting.Reason + ")"
		case c.State.Terminated != nil:
			s = fmt.Sprintf("terminated (%s, exit code %d)", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		}
		ctrs = append(ctrs, fmt.Sprintf("container %s %s, %d restarts, %s", c.Name, s, c.RestartCount, c.ContainerID))
	}
	line := fmt.Sprintf("pod %s/%s: %s on %s", p.Namespace, p.Name, p.Status.Phase, node)
	if p.DeletionTimestamp != nil {
		line += ", being deleted"
	}
	if len(ctrs) > 0 {
		line += "; " + strings.Join(ctrs, "; ")
	}
	return line
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// create POSTs obj to the API server as admin and returns the stored
// object with the gate's phases: the in-process server hands them over
// as it runs them (no one else POSTs as admin while up runs); a podlab
// apiserver logs them itself.
func (u *upRun) create(ctx context.Context, obj apiserver.Object) (apiserver.Object, []string, error) {
	var did []string
	if !u.api.InProcess {
		did = append(did, fmt.Sprintf("the gate ran in podlab apiserver (pid %d): its phases are in its log (podlab apiserver -v)", u.api.PID))
	}
	u.phaseMu.Lock()
	u.capture = func(request string, p apiserver.Phase) {
		if strings.HasPrefix(request, "POST ") && strings.HasSuffix(request, " (admin)") {
			did = append(did, p.Line())
		}
	}
	u.phaseMu.Unlock()
	created, err := u.admin.Create(ctx, obj)
	u.phaseMu.Lock()
	u.capture = nil
	u.phaseMu.Unlock()
	did = append(did, "the store is "+u.storePath)
	return created, did, err
}

const (
	compKubectl   = "kubectl (podlab up plays it), as the user admin"
	compGate      = "kube-apiserver: authentication, authorization (RBAC), admission, validation, then etcd (bbolt)"
	compAPIServer = "kube-apiserver"
)

// barePod is steps 1 to 3 of a bare pod.
func (u *upRun) barePod(ctx context.Context) (*corev1.Pod, error) {
	ns, name, image := u.o.Namespace, u.o.Name, u.o.Image
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"run": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
	}
	u.step(1, compKubectl, pod,
		fmt.Sprintf("kubectl run %s --image %s", name, image),
		fmt.Sprintf("POST %s/api/v1/namespaces/%s/pods, over HTTPS with admin's client certificate (%s)", u.api.URL, ns, statedir.Layout{Dir: u.o.StateDir}.Kubeconfig("admin")),
		fmt.Sprintf("the body: a Pod %s with one container %s, image %s, label run=%s; no node, no status", name, name, image, name))
	obj, did, err := u.create(ctx, pod)
	if err != nil {
		u.step(2, compGate, nil, append(did, "REFUSED: "+err.Error())...)
		return nil, fmt.Errorf("step 2: creating pod %s/%s: %w", ns, name, err)
	}
	u.step(2, compGate, nil, did...)
	created := obj.(*corev1.Pod)
	c := created.Spec.Containers[0]
	grace := int64(0)
	if created.Spec.TerminationGracePeriodSeconds != nil {
		grace = *created.Spec.TerminationGracePeriodSeconds
	}
	u.step(3, compAPIServer, created,
		fmt.Sprintf("201 Created: pod/%s, uid %s, resourceVersion %s (the store's revision of this write)", name, created.UID, created.ResourceVersion),
		fmt.Sprintf("phase %s and spec.nodeName empty: no node is chosen, nothing runs it yet", created.Status.Phase),
		fmt.Sprintf("the defaults it filled in: restartPolicy %s, imagePullPolicy %s, schedulerName %s, terminationGracePeriodSeconds %d",
			created.Spec.RestartPolicy, c.ImagePullPolicy, created.Spec.SchedulerName, grace))
	return created, nil
}

// deployment is steps 1 to 5 of a Deployment; it returns the pod its
// ReplicaSet created.
func (u *upRun) deployment(ctx context.Context) (*corev1.Pod, error) {
	ns, name, image := u.o.Namespace, u.o.Name, u.o.Image
	labels := map[string]string{"app": name}
	replicas := int32(1)
	ctr := containerName(image)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: ctr, Image: image}}},
			},
		},
	}
	u.step(1, compKubectl, d,
		fmt.Sprintf("kubectl create deployment %s --image %s", name, image),
		fmt.Sprintf("POST %s/apis/apps/v1/namespaces/%s/deployments, over HTTPS with admin's client certificate (%s)", u.api.URL, ns, statedir.Layout{Dir: u.o.StateDir}.Kubeconfig("admin")),
		fmt.Sprintf("the body: a Deployment %s: replicas 1, selector app=%s, a pod template with label app=%s and one container %s, image %s", name, name, name, ctr, image))
	obj, did, err := u.create(ctx, d)
	if err != nil {
		u.step(2, compGate, nil, append(did, "REFUSED: "+err.Error())...)
		return nil, fmt.Errorf("step 2: creating deployment %s/%s: %w", ns, name, err)
	}
	u.step(2, compGate, nil, did...)
	created := obj.(*appsv1.Deployment)
	u.res.Deployment = name
	u.step(3, compAPIServer, created,
		fmt.Sprintf("201 Created: deployment.apps/%s, uid %s, resourceVersion %s", name, created.UID, created.ResourceVersion),
		"no ReplicaSet and no pod exist yet: the Deployment is only a wish, stored in etcd")

	// Steps 4 and 5: what the controllers made, as a watch from the
	// Deployment's revision shows it.
	from := apiserver.ListOptions{ResourceVersion: created.ResourceVersion}
	comp := "kube-controller-manager (as " + controllers.User + "): the deployment and replicaset controllers"
	ev, err := u.waitEvent(ctx, u.admin, "replicasets", ns, from, "the Deployment's ReplicaSet", func(ev apiserver.WatchEvent) bool {
		return ev.Type == apiserver.Added && ownedBy(ev.Object, created.UID)
	})
	if err != nil {
		u.step(4, comp, nil, "FAILED: "+err.Error())
		return nil, err
	}
	rs := ev.Object.(*appsv1.ReplicaSet)
	ev, err = u.waitEvent(ctx, u.admin, "pods", ns, from, "the ReplicaSet's pod", func(ev apiserver.WatchEvent) bool {
		return ev.Type == apiserver.Added && ownedBy(ev.Object, rs.UID)
	})
	if err != nil {
		u.step(4, comp, nil, "FAILED: "+err.Error())
		return nil, err
	}
	pod := ev.Object.(*corev1.Pod)
	u.res.ReplicaSet = rs.Name
	rsReplicas := int32(0)
	if rs.Spec.Replicas != nil {
		rsReplicas = *rs.Spec.Replicas
	}
	did = []string{
		fmt.Sprintf("its informers list, then watch, deployments, replicasets and pods: the deployment controller was handed deployment %s/%s", ns, name),
		fmt.Sprintf("deployment controller: the pod template hashes to %s (label pod-template-hash); no ReplicaSet of %s has it, so it created ReplicaSet %s (replicas %d), owned by Deployment %s",
			rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], name, rs.Name, rsReplicas, name),
		fmt.Sprintf("replicaset controller: ReplicaSet %s wants %d pod(s) and has none, so it created pod %s, owned by ReplicaSet %s", rs.Name, rsReplicas, pod.Name, rs.Name),
	}
	if lines := u.controllerLog(ns, name); len(lines) > 0 {
		did = append(did, "its log (klog, as kube-controller-manager -v=4 prints it):")
		for _, l := range lines {
			did = append(did, "  "+l)
		}
	}
	u.step(4, comp, rs, did...)
	did = []string{
		fmt.Sprintf("POST replicasets: %s stored at revision %s", keyOf("replicasets", rs), rs.ResourceVersion),
		fmt.Sprintf("POST pods: %s stored at revision %s, phase Pending, no node", keyOf("pods", pod), pod.ResourceVersion),
	}
	if cur, err := u.revisedDeployment(ctx, ns, name); err == nil {
		did = append(did, fmt.Sprintf("PUT deployments: %s now at revision %s, annotation deployment.kubernetes.io/revision=%s",
			keyOf("deployments", cur), cur.ResourceVersion, cur.Annotations["deployment.kubernetes.io/revision"]))
	}
	did = append(did, "each write passed the same gate as the user's: authentication, RBAC (ClusterRole system:kube-controller-manager), admission, validation")
	u.step(5, "kube-controller-manager → kube-apiserver", pod, did...)
	return pod, nil
}

// revisedDeployment reads the Deployment once the deployment controller
// has written its revision annotation: the controller creates the
// ReplicaSet first and updates the Deployment after, so the pod can be seen
// before that write lands. It gives up after 5 s with what it read last.
func (u *upRun) revisedDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		obj, err := u.admin.Get(ctx, "deployments", ns, name)
		if err != nil {
			return nil, err
		}
		d := obj.(*appsv1.Deployment)
		if d.Annotations["deployment.kubernetes.io/revision"] != "" || time.Now().After(deadline) {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// controllerLog is what the controller-manager logged about the Deployment
// and what it owns, at most 8 lines.
func (u *upRun) controllerLog(ns, name string) []string {
	var out []string
	for _, l := range strings.Split(u.cmLog.String(), "\n") {
		if strings.Contains(l, `"`+ns+"/"+name+`"`) || strings.Contains(l, `"`+ns+"/"+name+"-") {
			out = append(out, l)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("... (%d more lines)", len(out)-8))
	}
	return out
}

func ownedBy(obj apiserver.Object, uid types.UID) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == uid && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// keyOf is an object's key in the store.
func keyOf(resource string, obj apiserver.Object) string {
	r, err := apiserver.LookupResource(resource)
	if err != nil {
		return resource + "/" + obj.GetNamespace() + "/" + obj.GetName()
	}
	return r.Key(obj.GetNamespace(), obj.GetName())
}

// containerName is what kubectl create deployment names the container: the
// image's last path element, without tag or digest.
func containerName(image string) string {
	n := path.Base(image)
	if i := strings.IndexAny(n, ":@"); i > 0 {
		n = n[:i]
	}
	return n
}

// waitEvent watches resource from opts.ResourceVersion until match says
// yes, for at most Options.Timeout.
func (u *upRun) waitEvent(ctx context.Context, c apiserver.Interface, resource, ns string, opts apiserver.ListOptions, what string, match func(apiserver.WatchEvent) bool) (apiserver.WatchEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, u.o.Timeout)
	defer cancel()
	w, err := c.Watch(ctx, resource, ns, opts)
	if err != nil {
		return apiserver.WatchEvent{}, fmt.Errorf("watching %s for %s: %w", resource, what, err)
	}
	for ev := range w.Events() {
		if match(ev) {
			return ev, nil
		}
	}
	if err := w.Err(); err != nil {
		return apiserver.WatchEvent{}, fmt.Errorf("watching %s for %s: %w", resource, what, err)
	}
	return apiserver.WatchEvent{}, fmt.Errorf("%w after %s waiting for %s (watching %s from revision %s)", ErrTimeout, u.o.Timeout, what, resource, opts.ResourceVersion)
}

// kubeletFor sets up node's kubelet, as system:node:NODE, and registers
// its Node.
func (u *upRun) kubeletFor(ctx context.Context, node string) (*kubelet.Kubelet, error) {
	if k, ok := u.kubelets[node]; ok {
		return k, nil
	}
	user := apiserver.NodeUser(node).Name
	client, err := u.api.clientAs(u.o.StateDir, node)
	if err != nil {
		return nil, fmt.Errorf("acting as the kubelet of node %s: %w (podlab init gives it its kubeconfig)", node, err)
	}
	l, err := statedir.New(u.o.StateDir)
	if err != nil {
		return nil, err
	}
	start := append(slices.Clone(u.o.RuntimeCommand), "--node", node)
	if u.res.Mirror != "" {
		start = append(start, "--registry-mirror", u.res.Mirror)
	}
	if u.o.Insecure {
		start = append(start, "--insecure")
	}
	// The runtime pulls for the kubelet: one left by an earlier up pulls
	// through that up's registry, gone with it, and is started again with
	// this one's (RuntimeConnection.Mirror).
	conn, err := kubelet.ConnectRuntime(ctx, kubelet.RuntimeConnection{Node: l.Node(node), Start: start, Mirror: u.res.Mirror})
	if err != nil {
		return nil, fmt.Errorf("connecting the kubelet of node %s to its runtime: %w", node, err)
	}
	u.runtimes = append(u.runtimes, conn.Client)
	switch {
	case conn.Started != nil && conn.Restarted != "":
		u.note(fmt.Sprintf("the kubelet of %s restarted its container runtime", node), "kubelet (as "+user+")",
			fmt.Sprintf("the runtime on %s %s: stopped, as containerd is restarted for a new registry config", conn.Client.RuntimeEndpoint, conn.Restarted),
			fmt.Sprintf("podlab runtime --node %s --registry-mirror %s runs now (pid %d), %s", node, u.res.Mirror, conn.Started.Pid, conn.Version),
			"its log: "+l.Node(node).RuntimeLog())
	case conn.Started != nil:
		u.note(fmt.Sprintf("the kubelet of %s started its container runtime", node), "kubelet (as "+user+")",
			fmt.Sprintf("nothing answered CRI on %s: podlab runtime --node %s runs now (pid %d), %s", conn.Client.RuntimeEndpoint, node, conn.Started.Pid, conn.Version),
			"its log: "+l.Node(node).RuntimeLog())
	}
	k, err := kubelet.New(kubelet.Config{
		Node: node, StateDir: u.o.StateDir, Client: client, CRI: conn.Client,
		OnStage: u.onStage,
	})
	if err != nil {
		return nil, err
	}
	nr, err := k.Register(ctx)
	if err != nil {
		return nil, fmt.Errorf("registering node %s: %w", node, err)
	}
	u.kubelets[node], u.clients[node] = k, client
	n := nr.Node
	how := "updated its Node"
	if nr.Created {
		how = "registered its Node (created)"
	}
	ready := ""
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
		}
	}
	cp := n.Status.Capacity
	u.note(fmt.Sprintf("the kubelet of %s %s", node, how), "kubelet (as "+user+")",
		fmt.Sprintf("Node %s: cpu %s, memory %s, pods %s; %s", node, cp.Cpu(), cp.Memory(), cp.Pods(), ready),
		"its runtime's files: "+k.Layout().Dir)
	return k, nil
}

// deploymentReady waits a moment for the controller-manager to see the
// pod Ready and count it in the Deployment's status.
func (u *upRun) deploymentReady(ctx context.Context) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		obj, err := u.admin.Get(ctx, "deployments", u.o.Namespace, u.o.Name)
		if err != nil {
			return
		}
		d := obj.(*appsv1.Deployment)
		if d.Status.ReadyReplicas >= replicasOf(d) || time.Now().After(deadline) || ctx.Err() != nil {
			u.note(fmt.Sprintf("deployment %s: %d/%d ready", d.Name, d.Status.ReadyReplicas, replicasOf(d)), "kube-controller-manager",
				"the controllers saw the pod Ready through their watch, and wrote the ReplicaSet's and the Deployment's status (podlab get deployments, podlab get replicasets)")
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// next are the commands to try after Up; args is the container's
// process, when known.
func (u *upRun) next(args []string) []string {
	name := u.podName()
	if len(args) == 0 && u.res.Pod != nil && len(u.res.Pod.Spec.Containers) > 0 {
		args = []string{containerName(u.res.Pod.Spec.Containers[0].Image)}
	}
	example := "ls /"
	if len(args) > 0 {
		switch filepath.Base(args[0]) {
		case "nginx":
			example = "nginx -v"
		case "hello":
			example = "/hello --once"
		}
	}
	out := []string{"podlab get pods -o wide"}
	if u.o.Deployment {
		out = append(out, "podlab get deployments", "podlab get replicasets")
	}
	return append(out,
		"podlab logs "+name,
		"podlab exec "+name+" -- "+example,
		"podlab trace pod/"+name,
		"podlab reset")
}

// decisions collects the scheduler's decisions, by pod.
type decisions struct {
	mu      sync.Mutex
	got     map[string][]scheduler.Decision
	err     error
	stopped bool
	changed chan struct{}
}

func newDecisions() *decisions {
	return &decisions{got: map[string][]scheduler.Decision{}, changed: make(chan struct{})}
}

func (d *decisions) add(dec scheduler.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := dec.Pod.Namespace + "/" + dec.Pod.Name
	d.got[key] = append(d.got[key], dec)
	close(d.changed)
	d.changed = make(chan struct{})
}

// stop records that the scheduler stopped, and why.
func (d *decisions) stop(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped, d.err = true, err
	close(d.changed)
	d.changed = make(chan struct{})
}

// wait returns the first decision about the pod key.
func (d *decisions) wait(ctx context.Context, key string, timeout time.Duration) (scheduler.Decision, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		d.mu.Lock()
		got, stopped, err, ch := d.got[key], d.stopped, d.err, d.changed
		d.mu.Unlock()
		if len(got) > 0 {
			return got[0], nil
		}
		if stopped {
			return scheduler.Decision{}, fmt.Errorf("the scheduler stopped before it placed %s: %v", key, err)
		}
		select {
		case <-ctx.Done():
			return scheduler.Decision{}, ctx.Err()
		case <-t.C:
			return scheduler.Decision{}, fmt.Errorf("%w after %s: the scheduler made no decision about %s", ErrTimeout, timeout, key)
		case <-ch:
		}
	}
}

// lines splits text into its lines, without the empty last one.
func lines(b []byte) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// tableLines is a scheduling cycle's table.
func tableLines(r scheduler.Result) []string {
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		return nil
	}
	return lines(b.Bytes())
}
