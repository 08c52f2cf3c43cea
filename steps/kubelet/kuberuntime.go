package kubelet

// The kubelet's side of the CRI, in kuberuntime's terms (Kubernetes'
// pkg/kubelet/kuberuntime): what the sync loop asks the runtime for, over
// the runtime's RuntimeService and ImageService clients and nothing else.
//
//	createPodSandbox   kuberuntime_sandbox.go: generatePodSandboxConfig,
//	                   RunPodSandbox with the RuntimeClass's handler
//	ensureImageExists  images/image_manager.go: the pull policy against
//	                   ImageStatus, PullImage
//	startContainer     kuberuntime_container.go: generateContainerConfig,
//	                   CreateContainer, StartContainer
//	podStatus          kuberuntime_manager.go GetPodStatus: the pod's
//	                   sandboxes and containers found by their labels
//	                   (io.kubernetes.pod.uid), as the PLEG relists them
//	killPod            StopContainer (with the grace period), StopPodSandbox
//	removePod          RemoveContainer, RemovePodSandbox
//
// The stages (stages.go) make these calls; startContainer and killPod are
// the same calls in one piece, for the tests of this file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criRuntime is a kubelet's runtime: its CRI clients, and the name its
// Version answers (the TYPE of the containerIDs in pods' statuses).
type criRuntime struct {
	rt   runtimeapi.RuntimeServiceClient
	img  runtimeapi.ImageServiceClient
	name runtimeName
}

// createPodSandbox asks the runtime for the pod's sandbox, with the
// handler the pod's RuntimeClass names ("" for the default): the
// sandbox's id and the config it was made with (CreateContainer needs it).
func (r *criRuntime) createPodSandbox(ctx context.Context, pod *corev1.Pod, in sandboxInputs, handler string) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg, err := generatePodSandboxConfig(pod, in)
	if err != nil {
		return "", nil, fmt.Errorf("generating the sandbox config of pod %s: %w", podKey(pod), err)
	}
	resp, err := r.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		return "", cfg, err
	}
	return resp.PodSandboxId, cfg, nil
}

// ensuredImage is what ensureImageExists found or pulled.
type ensuredImage struct {
	// Ref is the image's id, what CreateContainer is given.
	Ref string
	// Image is its ImageStatus entry: size, repo digests, USER.
	Image *runtimeapi.Image
	// Pulled is true when PullImage ran; Took is how long it took.
	Pulled bool
	Took   time.Duration
}

// ensureImageExists makes sure the container's image is on the node, as
// its imagePullPolicy says (images/image_manager.go's EnsureImageExists):
// ImageStatus first; Always pulls, IfNotPresent pulls when ImageStatus has
// none, Never only looks. pulling, when set, is called just before
// PullImage (the kubelet's Pulling event). Never with no image is
// ErrImageNeverPull; an ImageStatus error is ErrImageInspect; a PullImage
// error is returned as the runtime gave it
// (a gRPC status: its text is what the Failed event shows).
func (r *criRuntime) ensureImageExists(ctx context.Context, c *corev1.Container, sandbox *runtimeapi.PodSandboxConfig, pulling func()) (ensuredImage, error) {
	spec := &runtimeapi.ImageSpec{Image: c.Image}
	st, err := r.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil {
		return ensuredImage{}, fmt.Errorf("%w: Failed to inspect image %q: %w", ErrImageInspect, c.Image, err)
	}
	present := st.GetImage() != nil
	switch c.ImagePullPolicy {
	case corev1.PullNever:
		if !present {
			return ensuredImage{}, fmt.Errorf("%w: container image %q is not present with pull policy of Never", ErrImageNeverPull, c.Image)
		}
		return ensuredImage{Ref: st.Image.Id, Image: st.Image}, nil
	case corev1.PullIfNotPresent:
		if present {
			return ensuredImage{Ref: st.Image.Id, Image: st.Image}, nil
		}
	case corev1.PullAlways, "":
	default:
		return ensuredImage{}, fmt.Errorf("%w %q for container %s: want Always, IfNotPresent or Never", ErrUnknownPullPolicy, c.ImagePullPolicy, c.Name)
	}
	if pulling != nil {
		pulling()
	}
	start := time.Now()
	resp, err := r.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, SandboxConfig: sandbox})
	took := time.Since(start)
	if err != nil {
		return ensuredImage{Took: took}, err
	}
	st, err = r.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.ImageRef}})
	if err != nil || st.GetImage() == nil {
		return ensuredImage{Pulled: true, Took: took}, fmt.Errorf("ImageStatus of %s after PullImage answered %s: %v", c.Image, resp.ImageRef, err)
	}
	return ensuredImage{Ref: resp.ImageRef, Image: st.Image, Pulled: true, Took: took}, nil
}

// repoDigest is the image's repository@digest for ref's repository (the
// container status's imageID), from ImageStatus's repo digests; the first
// one when none is of that repository.
func repoDigest(img *runtimeapi.Image, repo string) string {
	for _, d := range img.GetRepoDigests() {
		if r, _, ok := strings.Cut(d, "@"); ok && r == repo {
			return d
		}
	}
	if ds := img.GetRepoDigests(); len(ds) > 0 {
		return ds[0]
	}
	return img.GetId()
}

// imageUser is an image's USER as ImageStatus reports it: a uid, or a name.
func imageUser(img *runtimeapi.Image) string {
	if img.GetUid() != nil {
		return strconv.FormatInt(img.Uid.Value, 10)
	}
	return img.GetUsername()
}

// startContainer creates the container from the kubelet's config, in the
// sandbox, and starts it: its id.
func (r *criRuntime) startContainer(ctx context.Context, sandboxID string, sandbox *runtimeapi.PodSandboxConfig, pod *corev1.Pod, c *corev1.Container, in containerInputs) (string, error) {
	cfg, err := generateContainerConfig(pod, c, in)
	if err != nil {
		return "", err
	}
	created, err := r.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox})
	if err != nil {
		return "", err
	}
	if _, err := r.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		return created.ContainerId, err
	}
	return created.ContainerId, nil
}

// criPodStatus is what the runtime has of a pod: its sandboxes, newest
// first, and its containers' statuses.
type criPodStatus struct {
	Sandboxes  []*runtimeapi.PodSandboxStatus
	Containers []*runtimeapi.ContainerStatus
	// SandboxInfo is each sandbox's verbose info, by id, when the runtime
	// gives podlab's (steps/cri).
	SandboxInfo map[string]*sandboxInfo
	// ContainerInfo is each container's verbose info, by id, when it was
	// asked for (podStatusVerbose) and the runtime gives podlab's.
	ContainerInfo map[string]*containerInfo
}

// Ready is the newest sandbox, when it is ready.
func (s *criPodStatus) Ready() *runtimeapi.PodSandboxStatus {
	if len(s.Sandboxes) > 0 && s.Sandboxes[0].State == runtimeapi.PodSandboxState_SANDBOX_READY {
		return s.Sandboxes[0]
	}
	return nil
}

// IPs are the ready sandbox's addresses, the pod's IP first.
func (s *criPodStatus) IPs() []string {
	sb := s.Ready()
	if sb.GetNetwork().GetIp() == "" {
		return nil
	}
	ips := []string{sb.Network.Ip}
	for _, ip := range sb.Network.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips
}

// Container is the newest status of the pod's container name, or nil.
func (s *criPodStatus) Container(name string) *runtimeapi.ContainerStatus {
	for _, c := range s.Containers {
		if c.GetMetadata().GetName() == name {
			return c
		}
	}
	return nil
}

// podStatus lists what the runtime has of the pod uid, found by the
// labels the kubelet put on it.
func (r *criRuntime) podStatus(ctx context.Context, uid types.UID) (*criPodStatus, error) {
	return r.podStatusVerbose(ctx, uid, false)
}

// podStatusVerbose is podStatus; with verbose, each ContainerStatus is
// asked verbosely and its info kept (ContainerInfo): what a stage shows
// of the container it made or started, read with the status it reports
// rather than by a ContainerStatus call of its own.
func (r *criRuntime) podStatusVerbose(ctx context.Context, uid types.UID, verbose bool) (*criPodStatus, error) {
	sel := map[string]string{LabelPodUID: string(uid)}
	sbs, err := r.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		return nil, fmt.Errorf("listing the sandboxes of pod %s: %w", uid, err)
	}
	out := &criPodStatus{SandboxInfo: map[string]*sandboxInfo{}}
	for _, sb := range sbs.Items {
		st, err := r.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id, Verbose: true})
		if err != nil {
			return nil, fmt.Errorf("the status of sandbox %s: %w", sb.Id, err)
		}
		out.Sandboxes = append(out.Sandboxes, st.Status)
		var i sandboxInfo
		if json.Unmarshal([]byte(st.Info["info"]), &i) == nil {
			out.SandboxInfo[sb.Id] = &i
		}
	}
	slices.SortFunc(out.Sandboxes, func(a, b *runtimeapi.PodSandboxStatus) int {
		return int(b.GetMetadata().GetAttempt()) - int(a.GetMetadata().GetAttempt())
	})
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		return nil, fmt.Errorf("listing the containers of pod %s: %w", uid, err)
	}
	for _, c := range cs.Containers {
		st, err := r.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: verbose})
		if err != nil {
			return nil, fmt.Errorf("the status of container %s: %w", c.Id, err)
		}
		out.Containers = append(out.Containers, st.Status)
		var i containerInfo
		if verbose && json.Unmarshal([]byte(st.Info["info"]), &i) == nil {
			if out.ContainerInfo == nil {
				out.ContainerInfo = map[string]*containerInfo{}
			}
			out.ContainerInfo[c.Id] = &i
		}
	}
	// newest first: the restart count, then creation
	slices.SortFunc(out.Containers, func(a, b *runtimeapi.ContainerStatus) int {
		if d := int(b.GetMetadata().GetAttempt()) - int(a.GetMetadata().GetAttempt()); d != 0 {
			return d
		}
		return int(b.CreatedAt - a.CreatedAt)
	})
	return out, nil
}

// killPod stops the pod's running containers, each given grace seconds
// after its stop signal, then its sandboxes (the network detached).
func (r *criRuntime) killPod(ctx context.Context, st *criPodStatus, grace int64) error {
	var errs []error
	for _, c := range st.Containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING && c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
			continue
		}
		if _, err := r.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: grace}); err != nil {
			errs = append(errs, fmt.Errorf("stopping container %s: %w", c.Id, err))
		}
	}
	for _, sb := range st.Sandboxes {
		if _, err := r.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// removePod removes the pod's containers and sandboxes from the runtime.
func (r *criRuntime) removePod(ctx context.Context, st *criPodStatus) error {
	var errs []error
	for _, c := range st.Containers {
		if _, err := r.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.Id, err))
		}
	}
	for _, sb := range st.Sandboxes {
		if _, err := r.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// containerStatus is a container's status with what the verbose status of
// podlab's runtime adds (crictl inspect): nil info from another runtime.
func (r *criRuntime) containerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, *containerInfo, error) {
	resp, err := r.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return nil, nil, fmt.Errorf("the status of container %s: %w", id, err)
	}
	var i containerInfo
	if json.Unmarshal([]byte(resp.Info["info"]), &i) != nil {
		return resp.Status, nil, nil
	}
	return resp.Status, &i, nil
}

// listAll lists every sandbox and container of the runtime's that a
// kubelet labelled (io.kubernetes.pod.uid), by pod uid.
func (r *criRuntime) listAll(ctx context.Context) (map[types.UID]bool, error) {
	out := map[types.UID]bool{}
	sbs, err := r.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the runtime's sandboxes: %w", err)
	}
	for _, sb := range sbs.Items {
		if uid := sb.Labels[LabelPodUID]; uid != "" {
			out[types.UID(uid)] = true
		}
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the runtime's containers: %w", err)
	}
	for _, c := range cs.Containers {
		if uid := c.Labels[LabelPodUID]; uid != "" {
			out[types.UID(uid)] = true
		}
	}
	return out, nil
}
