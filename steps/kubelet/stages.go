package kubelet

// One exported method per stage. Each does exactly what the sync loop does
// for that stage, and records it as the kubelet does: Events, and the pod's
// status through UpdateStatus. The sync loop calls these same methods.
// Those of a container take its name; "" means the pod's only container, or
// else the first container whose next stage this is.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/kubelet/subpath"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/spec"
	"github.com/podlab/podlab/steps/unpack"

	"github.com/podlab/podlab/steps/statedir"
)

// SandboxResult is what SandboxStage did.
type SandboxResult struct {
	Pod     string // namespace/name
	Sandbox Sandbox
	// Created is false when the sandbox existed already.
	Created bool
	// PodCgroup is the pod's cgroup in its QoS tier, made before the
	// sandbox (with its settings, and the tier's).
	PodCgroup *PodCgroup
	// Network is the attachment this call made (CNI ADD); NetworkNote says
	// why a pod got none (the node has no pod CIDR), the first time.
	// RuntimeConfig is set when the kubelet handed the runtime its Node's
	// pod CIDR first, and the runtime wrote its network configuration.
	// Handler is the runtime handler the sandbox runs with (its
	// RuntimeClass's, or the default runc).
	Handler       string
	Network       *cni.Result
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
	StoreDir     string
	Took         time.Duration
	Recording
}

// UnpackResult is what UnpackStage did.
type UnpackResult struct {
	Container    string
	RestartCount int
	Bundle       string
	Unpack       *unpack.Result
	Took         time.Duration
	Recording
}

// SpecResult is what SpecStage did.
type SpecResult struct {
	Container    string
	ContainerID  string
	RestartCount int
	// Path is the bundle's config.json.
	Path string
	Spec *specs.Spec
	// OOMScoreAdj is the container's oom_score_adj: what the kubelet asks
	// for its QoS class, and what config.json says when the kernel would
	// refuse that.
	OOMScoreAdj OOMScoreAdj
	Took        time.Duration
	Recording
}

// CreateResult is what CreateStage did.
type CreateResult struct {
	Container    string
	ContainerID  string
	RestartCount int
	// Handler is the runtime handler that created it (the sandbox's).
	Handler string
	Created *runc.Created
	// PodCgroup is set when the pod's cgroup was missing and was made
	// again before the container (it is made with the sandbox).
	PodCgroup *PodCgroup
	// Removed are older runs of the container deleted to make room (the
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
	State        *runc.State
	LogPath      string
	Took         time.Duration
	Recording
}

// Stopped is one container KillStage stopped.
type Stopped struct {
	Container   string
	ContainerID string
	// Signals are the signals sent, in order: SIGTERM, then SIGKILL when
	// the grace period ran out (SIGKILL alone for a container never started).
	Signals []string
	Exit    *runc.Exit
	Took    time.Duration
	Err     error
}

// KillResult is what KillStage did.
type KillResult struct {
	GracePeriod time.Duration
	Stopped     []Stopped
	Took        time.Duration
	Recording
}

// RemoveResult is what RemoveStage (or the cleanup of a pod the API server
// no longer has) removed.
type RemoveResult struct {
	UID types.UID
	// Containers are the runtime containers deleted (runc delete), Cgroups
	// the cgroup directories removed, Paths the bundles, namespace mounts,
	// subPath bind mounts and pod directories removed.
	Containers []string
	Cgroups    []string
	Paths      []string
	// Network are the sandbox's attachments detached (CNI DEL): their IPs
	// went back to the node's pool.
	Network []cni.Result
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

func (k *Kubelet) target(pod *corev1.Pod, name string, stage StageName) (*target, error) {
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	st, err := k.Observe(pod)
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

// mustPrepare refuses the stages that prepare a new run (pull, unpack, spec,
// create) when there is nothing to prepare.
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
		return fmt.Errorf("%w: container %s is %s (%s): nothing to %s until it exits", ErrOutOfOrder, t.c.Name, l.State, RuntimeContainerID(l.ID), stage)
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

// SandboxStage creates the pod's sandbox: its network, IPC and UTS
// namespaces, pinned under the node directory, with lo up and the pod's
// hostname (CRI RunPodSandbox). The pod's condition
// PodReadyToStartContainers turns True.
func (k *Kubelet) SandboxStage(ctx context.Context, pod *corev1.Pod) (*SandboxResult, error) {
	start := time.Now()
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	if pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: pod %s is being deleted: no sandbox for it", ErrOutOfOrder, podKey(pod))
	}
	res := &SandboxResult{Pod: podKey(pod), Sandbox: k.layout.observeSandbox(pod)}
	// The kubelet resolves the pod's RuntimeClass to a handler, and the
	// runtime looks the handler up: both before anything is made.
	handler, err := k.lookupRuntimeHandler(ctx, pod)
	if err != nil {
		k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return res, errors.Join(fmt.Errorf("creating the sandbox of pod %s: %w", podKey(pod), err), k.report(ctx, pod, &res.Recording, nil))
	}
	h, _, err := k.sandboxRuntime(handler)
	if err != nil {
		k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", sandboxFailure(err))
		var nh *runc.NoHandlerError
		if errors.As(err, &nh) {
			err = fmt.Errorf("%w (%s)", err, nh.Hint())
		}
		return res, errors.Join(fmt.Errorf("creating the sandbox of pod %s (RuntimeClass handler %q): %w", podKey(pod), handler, err), k.report(ctx, pod, &res.Recording, nil))
	}
	res.Handler = h.Name
	// The pod's cgroup comes first, as the kubelet's syncPod makes it
	// before it asks the runtime for a sandbox.
	pc, err := k.ensurePodCgroup(ctx, pod)
	if err != nil {
		k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return res, err
	}
	res.PodCgroup = pc
	if len(res.Sandbox.Namespaces) < len(sandboxKinds(pod)) {
		sb, err := k.pinSandbox(pod)
		if err != nil {
			k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return res, err
		}
		res.Sandbox, res.Created = sb, true
	}
	if res.Created || res.Sandbox.RuntimeHandler != h.Name {
		if err := k.layout.writeSandboxRecord(pod.UID, h.Name); err != nil {
			if res.Created {
				_ = k.layout.removeSandbox(pod.UID)
			}
			k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return res, err
		}
		res.Sandbox.RuntimeHandler = h.Name
	}
	// The runtime attaches the pinned network namespace to the pod
	// network (CNI ADD); a failure undoes the sandbox it just made.
	if needsNetwork(pod) && res.Sandbox.Network == nil {
		nr, note, err := k.attachNetwork(ctx, pod, res)
		if err != nil {
			if res.Created {
				_ = k.layout.removeSandbox(pod.UID)
			}
			k.event(ctx, pod, &res.Recording, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return res, err
		}
		res.Network, res.NetworkNote = nr, note
		res.Sandbox.Network = nr
	}
	res.Sandbox.Ready = len(res.Sandbox.Namespaces) == len(sandboxKinds(pod))
	err = k.report(ctx, pod, &res.Recording, nil)
	res.Took = time.Since(start)
	return res, err
}

// PullStage makes sure the container's image is in the node's content
// store, as its imagePullPolicy says (the kubelet's EnsureImageExists),
// by asking the node's runtime over CRI: ImageStatus, then PullImage;
// Always pulls, IfNotPresent pulls when ImageStatus has no image, Never
// only asks. Events Pulling and Pulled; a failure sets the
// container waiting in ErrImagePull and starts the back-off the next sync
// reports as ImagePullBackOff.
func (k *Kubelet) PullStage(ctx context.Context, pod *corev1.Pod, container string) (*PullResult, error) {
	start := time.Now()
	t, err := k.target(pod, container, StagePull)
	if err != nil {
		return nil, err
	}
	if err := t.mustPrepare(pod, StagePull); err != nil {
		return nil, err
	}
	c, cs := t.c, t.cs
	res := &PullResult{Container: c.Name, Image: c.Image, Ref: cs.Ref, Policy: c.ImagePullPolicy,
		RestartCount: t.restart, StoreDir: k.store.Dir()}
	defer func() { res.Took = time.Since(start) }()
	if cs.RefErr != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", c.Image, c.Image, cs.RefErr)
		return res, k.failed(ctx, pod, t, &res.Recording, StagePull, ReasonInvalidImageName, cs.RefErr, warning{"InspectFailed", msg})
	}
	// The runtime's ImageService decides and pulls (CRI ImageStatus, then
	// PullImage as the policy says), into its content store: the node's,
	// which the unpack stage reads.
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
			fmt.Errorf("%w: the runtime's ImageStatus has no %s in %s (pull it with imagePullPolicy IfNotPresent, or crictl pull %s)", ErrImageNeverPull, cs.Ref, k.store.Dir(), c.Image),
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
	if r, err := pull.ParseReference(cs.Ref); err == nil {
		repo = r.Registry + "/" + r.Repository
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

// UnpackStage makes the container's rootfs in its bundle,
// <node>/bundles/<pod-uid>/<container>/rootfs: a fresh root file system for
// every restart, as a runtime prepares a new snapshot for every container.
// With the node's overlayfs snapshotter (Kubelet.Snapshotter) only the
// layers the node has no snapshot of are unpacked, and the rootfs is an
// overlay mount with an upper directory of its own; for a pod with
// hostUsers: false the lowers are idmapped into its range (a chowned copy
// where the kernel refuses: Unpack.Fallback says so).
func (k *Kubelet) UnpackStage(ctx context.Context, pod *corev1.Pod, container string) (*UnpackResult, error) {
	start := time.Now()
	t, err := k.target(pod, container, StageUnpack)
	if err != nil {
		return nil, err
	}
	if err := t.mustPrepare(pod, StageUnpack); err != nil {
		return nil, err
	}
	res := &UnpackResult{Container: t.c.Name, RestartCount: t.restart, Bundle: t.cs.Bundle}
	defer func() { res.Took = time.Since(start) }()
	if t.cs.Ref == "" {
		return nil, fmt.Errorf("unpacking the image of container %s: %w", t.c.Name, t.cs.RefErr)
	}
	img, err := k.store.Image(t.cs.Ref)
	if err != nil && k.ImageEndpoint() != DefaultRuntimeEndpoint(k.layout.Node) {
		return nil, fmt.Errorf("unpacking the image of container %s: %w: the pull stage asks the runtime on %s, which keeps its images in its own store; the in-process unpack reads only the node's, %s (the node's own runtime, %s, pulls into it)",
			t.c.Name, err, k.ImageEndpoint(), k.store.Dir(), DefaultRuntimeEndpoint(k.layout.Node))
	}
	if err != nil {
		return nil, fmt.Errorf("unpacking the image of container %s: %w; the pull stage comes first", t.c.Name, err)
	}
	if err := os.MkdirAll(k.layout.PodBundles(pod.UID), 0o700); err != nil {
		return nil, err
	}
	shift, err := k.rootfsShift(pod)
	var opts unpack.Options
	if err == nil {
		opts, err = k.rootfsOptions(pod.UID, t.c.Name)
	}
	if err == nil {
		opts.Force, opts.Shift = true, shift
		res.Unpack, err = unpack.Unpack(ctx, img, t.cs.Bundle, opts)
	}
	if err == nil {
		err = k.openBundle(pod, t.c.Name)
	}
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageUnpack, ReasonCreateContainerError, err, errorEvent(err))
	}
	return res, k.report(ctx, pod, &res.Recording, map[string]*override{t.c.Name: waiting(ReasonContainerCreating, "")})
}

// SpecStage writes the bundle's config.json from the PodSpec and the image
// config: command and args, env, workingDir, resources, securityContext,
// the sandbox's namespaces, the pod's cgroup, the volumes (each subPath
// resolved inside its volume and bind-mounted under volume-subpaths). A
// PodSpec podlab refuses, or a subPath that leaves its volume, sets the
// container waiting in CreateContainerConfigError.
func (k *Kubelet) SpecStage(ctx context.Context, pod *corev1.Pod, container string) (*SpecResult, error) {
	start := time.Now()
	t, err := k.target(pod, container, StageSpec)
	if err != nil {
		return nil, err
	}
	if err := t.mustPrepare(pod, StageSpec); err != nil {
		return nil, err
	}
	res := &SpecResult{Container: t.c.Name, RestartCount: t.restart, ContainerID: ContainerID(pod, t.c.Name, t.restart)}
	defer func() { res.Took = time.Since(start) }()
	if t.cs.Ref == "" {
		return nil, fmt.Errorf("writing the spec of container %s: %w", t.c.Name, t.cs.RefErr)
	}
	d, err := k.store.Inspect(t.cs.Ref)
	if err != nil {
		return nil, fmt.Errorf("writing the spec of container %s: %w; the pull stage comes first", t.c.Name, err)
	}
	if !t.cs.Rootfs || (t.cs.ConfigRestart >= 0 && t.cs.ConfigRestart != t.restart) {
		return nil, fmt.Errorf("%w: %w: %s has no fresh rootfs for restart %d; the unpack stage comes first", ErrOutOfOrder, spec.ErrNoRootfs, t.cs.Bundle, t.restart)
	}
	var s *specs.Spec
	if len(pod.Spec.InitContainers) > 0 {
		err = fmt.Errorf("%w: init containers (pod %s has %d)", ErrUnsupported, podKey(pod), len(pod.Spec.InitContainers))
	} else if res.OOMScoreAdj, err = k.oomScoreAdj(ctx, pod, t.c); err == nil {
		s, err = k.containerSpec(ctx, pod, t.c, t.restart, d.ConfigJSON, t.cs.Bundle, imageID(d), res.OOMScoreAdj.Set)
	}
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageSpec, specFailureReason(err), err, errorEvent(err))
	}
	if res.Path, err = spec.Write(t.cs.Bundle, s); err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageSpec, ReasonCreateContainerError, err, errorEvent(err))
	}
	res.Spec = s
	return res, k.report(ctx, pod, &res.Recording, map[string]*override{t.c.Name: waiting(ReasonContainerCreating, "")})
}

// specFailureReason is the waiting reason of a failed spec stage: what the
// kubelet refuses in the PodSpec is CreateContainerConfigError; what the
// runtime fails to load for it (a Localhost seccomp profile) is
// CreateContainerError, as containerd's CreateContainer fails in Kubernetes.
func specFailureReason(err error) string {
	if errors.Is(err, spec.ErrSeccompProfile) {
		return ReasonCreateContainerError
	}
	return ReasonCreateConfigError
}

// CreateStage creates the runtime container: a shim runs runc create on the
// bundle, in the sandbox's namespaces, under the pod's cgroup (made again
// first if it went missing) (CRI CreateContainer). Event Created.
func (k *Kubelet) CreateStage(ctx context.Context, pod *corev1.Pod, container string) (*CreateResult, error) {
	start := time.Now()
	t, err := k.target(pod, container, StageCreate)
	if err != nil {
		return nil, err
	}
	if err := t.mustPrepare(pod, StageCreate); err != nil {
		return nil, err
	}
	id := ContainerID(pod, t.c.Name, t.restart)
	res := &CreateResult{Container: t.c.Name, RestartCount: t.restart, ContainerID: id}
	defer func() { res.Took = time.Since(start) }()
	if !t.st.Sandbox.Ready {
		return nil, fmt.Errorf("%w: pod %s: the sandbox stage comes before its containers", ErrNoSandbox, podKey(pod))
	}
	if t.cs.ConfigRestart != t.restart {
		return nil, fmt.Errorf("%w: %s/config.json is missing or for another restart (want restart %d); the spec stage comes first", ErrOutOfOrder, t.cs.Bundle, t.restart)
	}
	pc, err := k.ensurePodCgroup(ctx, pod)
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateContainerError, err, errorEvent(err))
	}
	if pc.Created {
		res.PodCgroup = pc
	}
	// The sandbox's handler runs every container of the pod.
	rt, err := k.podRuntime(pod.UID)
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateContainerError, err, errorEvent(err))
	}
	res.Handler = rt.Handler
	created, err := rt.Create(ctx, id, t.cs.Bundle)
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageCreate, ReasonCreateContainerError, err, errorEvent(err))
	}
	k.failures.reset(t.key)
	res.Created = created
	for _, r := range t.cs.Runs {
		if r.RestartCount < t.restart-1 {
			if _, err := rt.Delete(ctx, r.ID, true); err == nil {
				res.Removed = append(res.Removed, r.ID)
			}
		}
	}
	k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Created", "Created container: "+t.c.Name)
	return res, k.report(ctx, pod, &res.Recording, nil)
}

// StartStage starts the created container: runc start opens its exec fifo
// and the app runs (CRI StartContainer). Event Started; the container is
// running, and ready (podlab runs no probes).
func (k *Kubelet) StartStage(ctx context.Context, pod *corev1.Pod, container string) (*StartResult, error) {
	start := time.Now()
	t, err := k.target(pod, container, StageStart)
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
	state, err := k.runtimeOrDefault(pod.UID).Start(ctx, l.ID)
	if err != nil {
		return res, k.failed(ctx, pod, t, &res.Recording, StageStart, ReasonRunContainerError, err,
			warning{"Failed", fmt.Sprintf("Error: failed to start container %q: %v", t.c.Name, err)})
	}
	started := k.now()
	res.State = state
	k.event(ctx, pod, &res.Recording, corev1.EventTypeNormal, "Started", "Started container "+t.c.Name)
	return res, k.report(ctx, pod, &res.Recording, map[string]*override{t.c.Name: {startedAt: started}})
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
// SIGTERM, the grace period, then SIGKILL (CRI StopContainer).
func (k *Kubelet) KillStage(ctx context.Context, pod *corev1.Pod) (*KillResult, error) {
	start := time.Now()
	if err := k.checkNode(pod); err != nil {
		return nil, err
	}
	if pod.DeletionTimestamp == nil {
		return nil, fmt.Errorf("%w: pod %s is not being deleted: delete it first (podlab delete pod %s -n %s), and its kubelet stops it", ErrOutOfOrder, podKey(pod), pod.Name, pod.Namespace)
	}
	st, err := k.Observe(pod)
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
		rt := k.runtimeOrDefault(pod.UID)
		wg.Go(func() {
			s := k.stop(ctx, rt, cs.Name, l, res.GracePeriod)
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
	errs = append(errs, k.report(ctx, pod, &res.Recording, nil))
	res.Took = time.Since(start)
	return res, errors.Join(errs...)
}

// stop stops one run: SIGTERM and the grace period, then SIGKILL.
func (k *Kubelet) stop(ctx context.Context, rt *runc.Runtime, name string, l *Run, grace time.Duration) Stopped {
	start := time.Now()
	s := Stopped{Container: name, ContainerID: l.ID}
	wait := func(d time.Duration) *runc.Exit {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		ex, _ := rt.Wait(wctx, l.ID)
		return ex
	}
	signals := []string{"SIGTERM", "SIGKILL"}
	if l.State == RunCreated {
		signals = signals[1:] // nothing of the app to be graceful with
	}
	for _, sig := range signals {
		if err := rt.Kill(ctx, l.ID, sig); err != nil {
			if ex := wait(100 * time.Millisecond); ex != nil {
				s.Exit = ex
				break
			}
			s.Err = fmt.Errorf("stopping container %s: %w", l.ID, err)
			break
		}
		s.Signals = append(s.Signals, sig)
		d := grace
		if sig == "SIGKILL" {
			d = 10 * time.Second
		}
		if s.Exit = wait(d); s.Exit != nil {
			break
		}
	}
	if s.Exit == nil && s.Err == nil {
		s.Err = fmt.Errorf("container %s did not exit after SIGKILL", l.ID)
	}
	s.Took = time.Since(start)
	return s
}

// RemoveStage removes what a deleted pod left on the node (CRI
// RemoveContainer, StopPodSandbox, RemovePodSandbox): runc delete of every
// container (and its cgroups), the bundles, the namespace mounts, the
// pod's volumes; then it deletes the pod object with a grace period of 0,
// which removes it from the store.
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

// removeLeftovers removes everything of the pod with uid from the node.
func (k *Kubelet) removeLeftovers(ctx context.Context, uid types.UID) (*RemoveResult, error) {
	start := time.Now()
	res := &RemoveResult{UID: uid}
	defer func() { res.Took = time.Since(start) }()
	runs, err := k.listRuns()
	if err != nil {
		return res, err
	}
	var errs []error
	rt := k.runtimeOrDefault(uid) // the sandbox's handler, read before its record goes
	for _, r := range runs {
		if r.name.UID != uid {
			continue
		}
		d, err := rt.Delete(ctx, r.id, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Containers = append(res.Containers, r.id)
		res.Cgroups = append(res.Cgroups, d.Cgroups...)
		if d.CgroupErr != nil {
			errs = append(errs, d.CgroupErr)
		}
	}
	// The pod's cgroup goes once its containers' are gone.
	removed, err := k.removePodCgroups(ctx, uid)
	res.Cgroups = append(res.Cgroups, removed...)
	if err != nil {
		errs = append(errs, err)
	}
	for _, kind := range statedir.NamespaceKinds() {
		p := k.layout.NamespacePath(kind, uid)
		if _, err := os.Lstat(p); err == nil {
			res.Paths = append(res.Paths, p)
		}
	}
	// The runtime detaches the sandbox (CNI DEL) while its network
	// namespace still exists, then the namespaces go.
	detached, err := k.network.Teardown(ctx, sandboxID(uid))
	res.Network = detached
	if err != nil {
		errs = append(errs, err)
	}
	if err := k.layout.removeSandbox(uid); err != nil {
		errs = append(errs, err)
	}
	// Each overlay rootfs is unmounted and its upper directory removed
	// before the bundles go.
	removed, err = k.removeRootfses(uid)
	res.Paths = append(res.Paths, removed...)
	if err != nil {
		errs = append(errs, err)
	}
	// The pod directory holds the subPath bind mounts: each is unmounted
	// before anything is removed, or removing the directory would remove
	// the mounted volume's files.
	for _, p := range []string{k.layout.PodBundles(uid), k.layout.PodDir(uid)} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		unmounted, err := subpath.Clean(p)
		res.Paths = append(res.Paths, unmounted...)
		if err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
			continue
		}
		res.Paths = append(res.Paths, p)
	}
	// The pod's record went with its directory: its machine-wide claim on
	// the range (hostUsers: false) is freed.
	if err := k.layout.releaseUserNamespace(uid); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}
