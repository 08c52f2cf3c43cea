package kubelet

// One exported method per stage. Each does exactly what the sync loop does
// for that stage, and records it as the kubelet does: Events, and the pod's
// status through UpdateStatus. The sync loop calls these same methods.
// Those of a container take its name; "" means the pod's only container, or
// else the first container whose next stage this is. Every stage is the
// kubelet's preparations, then CRI calls to the node's runtime: the
// kubelet makes no namespace, rootfs, spec or runc container itself.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet/subpath"
)

// SandboxResult is what SandboxStage did.
type SandboxResult struct {
	Pod string // namespace/name
	// Sandbox is the sandbox as PodSandboxStatus reports it after the
	// stage (its id, IPs, namespaces).
	Sandbox Sandbox
	// Created is false when a ready sandbox existed already.
	Created bool
	// PodCgroup is the pod's cgroup in its QoS tier, made before the
	// sandbox (with its settings, and the tier's): its CgroupParent.
	PodCgroup *PodCgroup
	// Handler is the RuntimeClass's handler the kubelet asked for ("" is
	// the runtime's default); LogDirectory the sandbox's log directory.
	Handler      string
	LogDirectory string
	// NetworkNote says why a pod got no IP (the node has no pod CIDR), the
	// first time. RuntimeConfig is set when the kubelet handed the runtime
	// its Node's pod CIDR first (CRI UpdateRuntimeConfig).
	NetworkNote   string
	RuntimeConfig *RuntimeConfig
	Took          time.Duration
	Recording
}

// PullResult is what PullStage did.
type PullResult struct {
	Container string
	// Image is the spec's image, Ref its normalized reference.
	Image, Ref string
	Policy     corev1.PullPolicy
	// Pulled is true when the runtime pulled the image (CRI PullImage);
	// false when the policy let the stored image be used. PullTook is how
	// long PullImage took.
	Pulled   bool
	PullTook time.Duration
	// ImageRef is the runtime's id of the image (sha256:<config digest>),
	// ImageID its repository@digest (the status's imageID), Size its
	// compressed size, as the Pulled event says it: all from ImageStatus.
	ImageRef     string
	ImageID      string
	Size         int64
	RestartCount int
	// Endpoint is the runtime's image service the kubelet asked.
	Endpoint string
	Took     time.Duration
	Recording
}

// CreateResult is what CreateStage did.
type CreateResult struct {
	Container    string
	ContainerID  string
	RestartCount int
	SandboxID    string
	// Handler is the runtime handler that created it (the sandbox's).
	Handler string
	// Config is the ContainerConfig the kubelet sent (generateContainerConfig).
	Config *runtimeapi.ContainerConfig
	// OOMScoreAdj is the container's oom_score_adj for its QoS class.
	OOMScoreAdj OOMScoreAdj
	// Status is the runtime's ContainerStatus after CreateContainer, Info
	// what its verbose status adds (podlab's runtime: the bundle,
	// config.json, the pids; nil from another runtime).
	Status *runtimeapi.ContainerStatus
	Info   *containerInfo
	// PodCgroup is set when the pod's cgroup was missing and was made
	// again before the container (it is made with the sandbox).
	PodCgroup *PodCgroup
	// Removed are older runs of the container removed to make room (the
	// kubelet keeps the latest dead one, for logs --previous).
	Removed []string
	Took    time.Duration
	Recording
}

// StartResult is what StartStage did.
type StartResult struct {
	Container    string
	ContainerID  string
	RestartCount int
	// State is the container's state after StartContainer (running, or
	// exited already); Pid its process on the node when the runtime says.
	State   string
	Pid     int
	LogPath string
	Took    time.Duration
	Recording
}

// Stopped is one container KillStage stopped.
type Stopped struct {
	Container   string
	ContainerID string
	// Timeout is the StopContainer timeout: the runtime sends the stop
	// signal, waits that long, then SIGKILL.
	Timeout time.Duration
	Exit    *Exit
	Took    time.Duration
	Err     error
}

// KillResult is what KillStage did.
type KillResult struct {
	GracePeriod time.Duration
	Stopped     []Stopped
	// Sandboxes are the sandboxes stopped (StopPodSandbox).
	Sandboxes []string
	Took      time.Duration
	Recording
}

// RemoveResult is what RemoveStage (or the cleanup of a pod the API server
// no longer has) removed.
type RemoveResult struct {
	UID types.UID
	// Containers and Sandboxes are the runtime's, removed over CRI
	// (RemoveContainer, RemovePodSandbox); Cgroups the pod's cgroup
	// directories the kubelet removed, Paths its subPath bind mounts and
	// pod directory.
	Containers []string
	Sandboxes  []string
	Cgroups    []string
	Paths      []string
	// Deleted is true when the pod object was deleted from the API server.
	Deleted bool
	Took    time.Duration
	Recording
}

// target is the container a stage works on.
type target struct {
	c       *corev1.Container
	st      *PodState
	cs      *ContainerState
	restart int // the restart the stage prepares
	key     string
}

func (k *Kubelet) checkNode(pod *corev1.Pod) error {
	if pod.Spec.NodeName != k.node {
		where := "is not scheduled yet"
		if pod.Spec.NodeName != "" {
			where = fmt.Sprintf("is bound to node %q", pod.Spec.NodeName)
		}
		return fmt.Errorf("%w: pod %s %s; this kubelet is node %q", ErrNotOnThisNode, podKey(pod), where, k.node)
	}
	return nil
}

func (k *Kubelet) target(ctx context.Context, pod *corev1.Pod, name string, stage StageName) (*target, error) {
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	st, err := k.Observe(ctx, pod)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	if name == "" && len(names) > 0 {
		name = names[0]
		if st.Sandbox.Ready {
			for i := range st.Containers {
				if nextForContainer(pod, st, &st.Containers[i]).Name == stage {
					name = st.Containers[i].Name
					break
				}
			}
		}
	}
	t := &target{st: st, cs: st.Container(name)}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			t.c = &pod.Spec.Containers[i]
		}
	}
	if t.c == nil || t.cs == nil {
		return nil, fmt.Errorf("%w: %q (pod %s has %s)", ErrNoSuchContainer, name, podKey(pod), strings.Join(names, ", "))
	}
	t.restart = 0
	if l := t.cs.Latest(); l != nil {
		t.restart = l.RestartCount
		if l.State == RunExited {
			t.restart++
		}
	}
	t.key = failureKey(pod, t.c.Name, t.c.Image)
	return t, nil
}

// mustPrepare refuses the stages that prepare a new run (pull, create) when there is nothing to prepare.
func (t *target) mustPrepare(pod *corev1.Pod, stage StageName) error {
	if pod.DeletionTimestamp != nil {
		return fmt.Errorf("%w: pod %s is being deleted: nothing to %s (next: kill and remove)", ErrOutOfOrder, podKey(pod), stage)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return fmt.Errorf("%w: pod %s is %s: it runs nothing more", ErrOutOfOrder, podKey(pod), pod.Status.Phase)
	}
	l := t.cs.Latest()
	if l == nil {
		return nil
	}
	if l.State != RunExited {
		return fmt.Errorf("%w: container %s is %s (%s): nothing to %s until it exits", ErrOutOfOrder, t.c.Name, l.State, t.st.ContainerID(l), stage)
	}
	if !shouldRestart(pod, l.Exit) {
		return fmt.Errorf("%w: container %s exited with code %d and restartPolicy %s does not restart it", ErrOutOfOrder, t.c.Name, l.Exit.Code, pod.Spec.RestartPolicy)
	}
	return nil
}

// failed records a failed stage: Warning events, the container's waiting
// reason, and the back-off before the next try.
func (k *Kubelet) failed(ctx context.Context, pod *corev1.Pod, t *target, rec *Recording, stage StageName, reason string, err error, events ...warning) error {
	for _, e := range events {
		k.event(ctx, pod, rec, corev1.EventTypeWarning, e.reason, e.message)
	}
	msg := statusMessage(err)
	k.failures.fail(t.key, k.now(), stage, reason, msg)
	if rerr := k.report(ctx, pod, rec, map[string]*override{t.c.Name: waiting(reason, msg)}); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// warning is a Warning Event a failed stage records.
type warning struct{ reason, message string }

// errorEvent is the kubelet's Warning Failed "Error: ..." event.
func errorEvent(err error) warning { return warning{"Failed", "Error: " + statusMessage(err)} }

// SandboxStage has the runtime make the pod's sandbox (CRI RunPodSandbox):
// the kubelet resolves the RuntimeClass to a handler, makes the pod's
// cgroup and, for hostUsers: false, allocates its user namespace range;
// the runtime makes the namespaces, attaches the network and reports the
// IPs. The pod's condition PodReadyToStartContainers turns True.
func (k *Kubelet) SandboxStage(ctx context.Context, pod *corev1.Pod) (*SandboxResult, error) {
	start := time.Now()
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	if pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: pod %s is being deleted: no sandbox for it", ErrOutOfOrder, podKey(pod))
	}
	if msg := k.sysctls.Admit(pod); msg != "" {
		return nil, fmt.Errorf("%w: pod %s: %s: no sandbox for it", ErrSysctlForbidden, podKey(pod), msg)
	}
	st, err := k.Observe(ctx, pod)
	if err != nil {
		return nil, err
	}
	res := &SandboxResult{Pod: podKey(pod), Sandbox: st.Sandbox}
	defer func() { res.Took = time.Since(start) }()
	fail := func(err error) (*SandboxResult, error) {
		k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return res, errors.Join(fmt.Errorf("creating the sandbox of pod %s: %w", podKey(pod), err), k.report(ctx, pod, &res.Recording, nil))
	}
	// The kubelet resolves the pod's RuntimeClass to a handler; the runtime
	// looks the handler up: both before anything is made.
	handler, err := k.lookupRuntimeHandler(ctx, pod)
	if err != nil {
		return fail(err)
	}
	res.Handler = handler
	if st.Sandbox.Ready {
		res.Sandbox.Hostname = podHostname(pod)
		return res, k.report(ctx, pod, &res.Recording, nil)
	}
	// The pod's cgroup comes first, as the kubelet's syncPod makes it
	// before it asks the runtime for a sandbox; then the pod CIDR, should
	// the runtime have none yet.
	in, pc, err := k.prepareSandbox(ctx, pod, uint32(st.Sandboxes))
	res.PodCgroup = pc
	if err != nil {
		return fail(err)
	}
	if !pod.Spec.HostNetwork {
		rc, note, err := k.ensurePodCIDR(ctx)
		if err != nil {
			return fail(err)
		}
		res.RuntimeConfig, res.NetworkNote = rc, note
	}
	id, cfg, err := k.cri.createPodSandbox(ctx, pod, in, handler)
	if err != nil {
		if in.UserNamespace != nil && st.Sandboxes == 0 {
			// The pod has no sandbox: its range is not held for it.
			err = errors.Join(err, os.Remove(k.layout.UserNamespaceFile(pod.UID)), k.layout.releaseUserNamespace(pod.UID))
		}
		return fail(err)
	}
	res.Created, res.LogDirectory = true, cfg.GetLogDirectory()
	// The sandbox as the runtime reports it is the one the pod's status
	// is computed from (PodSandboxStatus once, not once more before it).
	rst, rerr := k.reportObserved(ctx, pod, &res.Recording, nil, false)
	if rst == nil {
		if rst, err = k.Observe(ctx, pod); err != nil {
			return res, errors.Join(err, rerr)
		}
	}
	res.Sandbox = rst.Sandbox
	if res.Sandbox.ID != id {
		return res, errors.Join(fmt.Errorf("the runtime made sandbox %s for pod %s and lists %q as its newest", id, podKey(pod), res.Sandbox.ID), rerr)
	}
	return res, rerr
}

// PullStage makes sure the container's image is in the runtime's content
// store, as its imagePullPolicy says (the kubelet's EnsureImageExists),
// by asking the node's runtime over CRI: ImageStatus, then PullImage;
// Always pulls, IfNotPresent pulls when ImageStatus has no image, Never
// only asks. Events Pulling and Pulled; a failure sets the
// container waiting in ErrImagePull and starts the back-off the next sync
// reports as ImagePullBackOff.
func (k *Kubelet) PullStage(ctx context.Context, pod *corev1.Pod, container string) (*PullResult, error) {
	start := time.Now()
	t, err := k.target(ctx, pod, container, StagePull)
	if err != nil {
		return nil, err
	}
	if err := t.mustPrepare(pod, StagePull); err != nil {
		return nil, err
	}
	c, cs := t.c, t.cs
	res := &PullResult{Container: c.Name, Image: c.Image, Ref: cs.Ref, Policy: c.ImagePullPolicy,
		RestartCount: t.restart, Endpoint: k.ImageEndpoint()}
	defer func() { res.Took = time.Since(start) }()
	if cs.RefErr != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", c.Image, c.Image, cs.RefErr)
		return res, k.failed(ctx, pod, t, &res.Recording, StagePull, ReasonInvalidImageName, cs.RefErr, warning{"InspectFailed", msg})
	}
	// The runtime's ImageService decides and pulls (CRI ImageStatus, then
	// PullImage as the policy says), into its own content store.
	asked := false
	img, err := k.cri.ensureImageExists(ctx, c, nil, func() {
		asked = true
		k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	})
	switch {
	case errors.Is(err, ErrImageInspect):
		msg := strings.TrimPrefix(err.Error(), ErrImageInspect.Error()+": ")
		return res, k.failed(ctx, pod, t, &res.Recording, StagePull, ReasonImageInspectError, err,
			warning{"InspectFailed", msg}, warning{"Failed", "Error: " + ReasonImageInspectError})
	case errors.Is(err, ErrImageNeverPull):
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		return res, k.failed(ctx, pod, t, &res.Recording, StagePull, ReasonErrImageNeverPull,
			fmt.Errorf("%w: the runtime's ImageStatus (%s) has no %s (pull it with imagePullPolicy IfNotPresent, or crictl pull %s)", ErrImageNeverPull, k.ImageEndpoint(), cs.Ref, c.Image),
			warning{"ErrImageNeverPull", msg})
	case err != nil && asked:
		return res, k.failed(ctx, pod, t, &res.Recording, StagePull, ReasonErrImagePull, err,
			warning{"Failed", fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)}, warning{"Failed", "Error: " + ReasonErrImagePull})
	case err != nil:
		return res, k.failed(ctx, pod, t, &res.Recording, StagePull, ReasonErrImagePull, err, errorEvent(err))
	}
	k.failures.reset(t.key)
	res.Pulled, res.PullTook, res.ImageRef = img.Pulled, img.Took, img.Ref
	repo := cs.Ref
	if r, err := parseImageRef(cs.Ref); err == nil {
		repo = r.Repo
	}
	res.ImageID = repoDigest(img.Image, repo)
	res.Size = int64(img.Image.GetSize())
	if res.Pulled {
		took := res.PullTook.Round(time.Millisecond)
		k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Pulled",
			fmt.Sprintf("Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.", c.Image, took, took, res.Size))
	} else {
		k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
	}
	ov := &override{waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}, imageID: res.ImageID}
	return res, k.report(ctx, pod, &res.Recording, map[string]*override{c.Name: ov})
}

// CreateStage has the runtime create the container (CRI CreateContainer):
// the kubelet resolves its environment, makes its volumes and subPath
// mounts, works out its oom_score_adj and sends the ContainerConfig
// (generateContainerConfig); the runtime unpacks the image into a bundle,
// writes config.json, and has a shim run runc create in the sandbox, under
// the pod's cgroup (made again first if it went missing). Event Created. A
// PodSpec the kubelet refuses is CreateContainerConfigError; a refusal of
// the runtime's, CreateContainerError.
func (k *Kubelet) CreateStage(ctx context.Context, pod *corev1.Pod, container string) (*CreateResult, error) {
	start := time.Now()
	t, err := k.target(ctx, pod, container, StageCreate)
	if err != nil {
		return nil, err
	}
	if err := t.mustPrepare(pod, StageCreate); err != nil {
		return nil, err
	}
	res := &CreateResult{Container: t.c.Name, RestartCount: t.restart}
	defer func() { res.Took = time.Since(start) }()
	sb := t.st.Sandbox
	if !sb.Ready {
		return nil, fmt.Errorf("%w: pod %s: the sandbox stage comes before its containers", ErrNoSandbox, podKey(pod))
	}
	if !pulled(pod, t.cs) {
		// The status records the pull; pod may be older than it.
		if cur, err := k.fresh(ctx, pod); err != nil || cur == nil || !pulled(cur, t.cs) {
			return nil, fmt.Errorf("%w: container %s: the pull stage comes first (the runtime's ImageStatus, for restart %d)", ErrOutOfOrder, t.c.Name, t.restart)
		}
	}
	res.SandboxID, res.Handler = sb.ID, sb.Handler
	if len(pod.Spec.InitContainers) > 0 {
		err := fmt.Errorf("%w: init containers (pod %s has %d)", ErrUnsupported, podKey(pod), len(pod.Spec.InitContainers))
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateConfigError, err, errorEvent(err))
	}
	// The sandbox's config, as the kubelet makes it again on every
	// syncPod: CreateContainer is given it too.
	in, pc, err := k.prepareSandbox(ctx, pod, sb.Attempt)
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateContainerError, err, errorEvent(err))
	}
	if pc.Created {
		res.PodCgroup = pc
	}
	sbCfg, err := generatePodSandboxConfig(pod, in)
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateConfigError, err, errorEvent(err))
	}
	img, err := k.cri.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: t.c.Image}})
	if err == nil && img.GetImage() == nil {
		err = fmt.Errorf("the runtime's ImageStatus has no %s: the pull stage comes first", t.c.Image)
	}
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateContainerError, err, errorEvent(err))
	}
	ns := sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	cin, oom, err := k.prepareContainer(ctx, pod, t.c, t.restart, img.Image.Id, img.Image, ns)
	res.OOMScoreAdj = oom
	var cfg *runtimeapi.ContainerConfig
	if err == nil {
		cfg, err = generateContainerConfig(pod, t.c, cin)
	}
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateConfigError, err, errorEvent(err))
	}
	res.Config = cfg
	created, err := k.cri.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.ID, Config: cfg, SandboxConfig: sbCfg})
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateContainerError, err, errorEvent(err))
	}
	k.failures.reset(t.key)
	res.ContainerID = created.ContainerId
	// The kubelet keeps the latest dead run (logs --previous); older ones go.
	for _, r := range t.cs.Runs {
		if r.RestartCount < t.restart-1 && r.State == RunExited {
			if _, err := k.cri.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: r.ID}); err == nil {
				res.Removed = append(res.Removed, r.ID)
			}
		}
	}
	k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Created", "Created container: "+t.c.Name)
	// The container's status (verbose: its bundle, config.json, pids) is
	// the one the pod's status is computed from: one ContainerStatus.
	st, err := k.reportObserved(ctx, pod, &res.Recording, nil, true)
	res.Status, res.Info = observedContainer(st, created.ContainerId)
	if res.Status == nil {
		res.Status, res.Info, _ = k.cri.containerStatus(ctx, created.ContainerId)
	}
	return res, err
}

// observedContainer is container id's status and verbose info in st, as
// reportObserved read them; nil when st has none of it.
func observedContainer(st *PodState, id string) (*runtimeapi.ContainerStatus, *containerInfo) {
	if st == nil || st.cri == nil {
		return nil, nil
	}
	for _, c := range st.cri.Containers {
		if c.GetId() == id {
			return c, st.cri.ContainerInfo[id]
		}
	}
	return nil, nil
}

// StartStage starts the created container (CRI StartContainer): the
// runtime runs runc start, which opens the exec fifo, and the app runs.
// Event Started; the container is running, and ready (podlab runs no
// probes).
func (k *Kubelet) StartStage(ctx context.Context, pod *corev1.Pod, container string) (*StartResult, error) {
	start := time.Now()
	t, err := k.target(ctx, pod, container, StageStart)
	if err != nil {
		return nil, err
	}
	l := t.cs.Latest()
	if pod.DeletionTimestamp != nil || l == nil || l.State != RunCreated {
		next := nextForContainer(pod, t.st, t.cs)
		return nil, fmt.Errorf("%w: container %s has no created container to start (next stage: %s)", ErrOutOfOrder, t.c.Name, next.Name)
	}
	res := &StartResult{Container: t.c.Name, ContainerID: l.ID, RestartCount: l.RestartCount, LogPath: l.LogPath}
	defer func() { res.Took = time.Since(start) }()
	if _, err := k.cri.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: l.ID}); err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageStart, ReasonRunContainerError, err,
			warning{"Failed", fmt.Sprintf("Error: failed to start container %q: %v", t.c.Name, err)})
	}
	started := k.now()
	k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Started", "Started container "+t.c.Name)
	// The container's state and pid are those the pod's status is
	// computed from: one ContainerStatus (verbose), not one more.
	st, err := k.reportObserved(ctx, pod, &res.Recording, map[string]*override{t.c.Name: {startedAt: started}}, true)
	s, info := observedContainer(st, l.ID)
	if s == nil {
		s, info, _ = k.cri.containerStatus(ctx, l.ID)
	}
	if s != nil {
		res.State = runOf(s, started).State
		if info != nil {
			res.Pid = info.Pid
		}
	}
	return res, err
}

// gracePeriod is how long KillStage waits after SIGTERM: the deletion's
// grace period, else the pod's terminationGracePeriodSeconds, at least 2s
// (the kubelet's minimum).
func gracePeriod(pod *corev1.Pod) time.Duration {
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.DeletionGracePeriodSeconds != nil {
		g = *pod.DeletionGracePeriodSeconds
	}
	return time.Duration(max(g, 2)) * time.Second
}

// KillStage stops a deleted pod's containers, all at once: Event Killing,
// then CRI StopContainer with the grace period as its timeout (the runtime
// sends SIGTERM, waits, then SIGKILL); then the sandbox (StopPodSandbox:
// the runtime detaches its network).
func (k *Kubelet) KillStage(ctx context.Context, pod *corev1.Pod) (*KillResult, error) {
	start := time.Now()
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	if pod.DeletionTimestamp == nil {
		return nil, fmt.Errorf("%w: pod %s is not being deleted: delete it first (podlab delete pod %s -n %s), and its kubelet stops it", ErrOutOfOrder, podKey(pod), pod.Name, pod.Namespace)
	}
	st, err := k.Observe(ctx, pod)
	if err != nil {
		return nil, err
	}
	res := &KillResult{GracePeriod: gracePeriod(pod)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, cs := range st.Containers {
		l := cs.Latest()
		if l == nil || l.State == RunExited {
			continue
		}
		k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Killing", "Stopping container "+cs.Name)
		wg.Go(func() {
			s := k.stop(ctx, cs.Name, l, res.GracePeriod)
			mu.Lock()
			res.Stopped = append(res.Stopped, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(res.Stopped, func(a, b Stopped) int { return strings.Compare(a.Container, b.Container) })
	var errs []error
	for _, s := range res.Stopped {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	if len(errs) == 0 {
		for _, sb := range st.cri.Sandboxes {
			if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
				continue
			}
			if _, err := k.cri.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Id, err))
				continue
			}
			res.Sandboxes = append(res.Sandboxes, sb.Id)
		}
	}
	errs = append(errs, k.report(ctx, pod, &res.Recording, nil))
	res.Took = time.Since(start)
	return res, errors.Join(errs...)
}

// stop stops one run (CRI StopContainer with the grace period as its
// timeout), then reads its exit (ContainerStatus).
func (k *Kubelet) stop(ctx context.Context, name string, l *Run, grace time.Duration) Stopped {
	start := time.Now()
	s := Stopped{Container: name, ContainerID: l.ID, Timeout: grace}
	if l.State == RunCreated {
		s.Timeout = 0 // nothing of the app to be graceful with
	}
	_, err := k.cri.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: l.ID, Timeout: int64(s.Timeout / time.Second)})
	if err != nil {
		s.Err = fmt.Errorf("stopping container %s: %w", l.ID, err)
	} else if cs, _, err := k.cri.containerStatus(ctx, l.ID); err != nil {
		s.Err = err
	} else if r := runOf(cs, k.now()); r.Exit != nil {
		s.Exit = r.Exit
	} else {
		s.Err = fmt.Errorf("container %s is %s after StopContainer", l.ID, r.State)
	}
	s.Took = time.Since(start)
	return s
}

// RemoveStage removes what a deleted pod left on the node: the runtime's
// containers and sandboxes (CRI RemoveContainer, RemovePodSandbox: the
// runtime removes their bundles, namespaces and network), then the
// kubelet's own: the pod's cgroup, its subPath mounts and volumes, its user
// namespace range; then it deletes the pod object with a grace period of
// 0, which removes it from the store.
func (k *Kubelet) RemoveStage(ctx context.Context, pod *corev1.Pod) (*RemoveResult, error) {
	start := time.Now()
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	obj, err := k.client.Get(ctx, "pods", pod.Namespace, pod.Name)
	exists := err == nil && obj.GetUID() == pod.UID
	if err != nil && !podGone(err) {
		return nil, fmt.Errorf("reading pod %s: %w", podKey(pod), err)
	}
	if exists && obj.(*corev1.Pod).DeletionTimestamp == nil {
		return nil, fmt.Errorf("%w: pod %s is not being deleted: delete it first (podlab delete pod %s -n %s)", ErrOutOfOrder, podKey(pod), pod.Name, pod.Namespace)
	}
	res, err := k.removeLeftovers(ctx, pod.UID)
	if err != nil {
		return res, err
	}
	if exists {
		zero := int64(0)
		_, err := k.client.Delete(ctx, "pods", pod.Namespace, pod.Name, apiserver.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("deleting pod %s: %w", podKey(pod), err)
		}
		res.Deleted = err == nil
	}
	res.Took = time.Since(start)
	return res, nil
}

// removeLeftovers removes everything of the pod with uid from the node:
// the runtime's over CRI, then the kubelet's own.
func (k *Kubelet) removeLeftovers(ctx context.Context, uid types.UID) (*RemoveResult, error) {
	start := time.Now()
	res := &RemoveResult{UID: uid}
	defer func() { res.Took = time.Since(start) }()
	ps, err := k.cri.podStatus(ctx, uid)
	if err != nil {
		return res, err
	}
	var errs []error
	// A sandbox still ready is stopped first (its containers with it).
	for _, sb := range ps.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if _, err := k.cri.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Id, err))
			}
		}
	}
	if err := k.cri.removePod(ctx, ps); err != nil {
		errs = append(errs, err)
	}
	for _, c := range ps.Containers {
		res.Containers = append(res.Containers, c.Id)
	}
	for _, sb := range ps.Sandboxes {
		res.Sandboxes = append(res.Sandboxes, sb.Id)
	}
	// The pod's cgroup goes once its containers' are gone.
	removed, err := k.removePodCgroups(ctx, uid)
	res.Cgroups = append(res.Cgroups, removed...)
	if err != nil {
		errs = append(errs, err)
	}
	// The pod directory holds the subPath bind mounts: each is unmounted
	// before anything is removed, or removing the directory would remove
	// the mounted volume's files.
	if p := k.layout.PodDir(uid); k.kubeletPodDir(uid) {
		unmounted, err := subpath.Clean(p)
		res.Paths = append(res.Paths, unmounted...)
		if err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		} else {
			res.Paths = append(res.Paths, p)
		}
	}
	// The pod's logs go too, as the kubelet's container garbage collector
	// removes the log directories of pods that are gone
	// (<pod log root>/NAMESPACE_NAME_UID).
	logs, _ := filepath.Glob(filepath.Join(k.layout.PodLogsDir(), "*_*_"+string(uid)))
	for _, d := range logs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing the logs of pod %s: %w", uid, err))
			continue
		}
		res.Paths = append(res.Paths, d)
	}
	// The pod's record went with its directory: its machine-wide claim on
	// the range (hostUsers: false) is freed.
	if err := k.layout.releaseUserNamespace(uid); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}
