package kubelet

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/runc"
)

// StageName names a stage of a pod's life on its node.
type StageName string

// The stages, in the order the kubelet's syncPod goes through them.
const (
	// StageSandbox creates the pod's namespaces (CRI RunPodSandbox).
	StageSandbox StageName = "sandbox"
	// StagePull makes sure the image is in the node's content store, as the
	// imagePullPolicy says (the kubelet's EnsureImageExists, CRI PullImage).
	StagePull StageName = "pull"
	// StageUnpack unpacks the image into the container's bundle (the
	// runtime's snapshot for CRI CreateContainer).
	StageUnpack StageName = "unpack"
	// StageSpec writes the bundle's config.json from the PodSpec and the
	// image config (the runtime's spec for CRI CreateContainer).
	StageSpec StageName = "spec"
	// StageCreate runs runc create under a shim (CRI CreateContainer).
	StageCreate StageName = "create"
	// StageStart runs runc start (CRI StartContainer).
	StageStart StageName = "start"
	// StageKill stops the pod's containers: SIGTERM, the grace period, then
	// SIGKILL (CRI StopContainer).
	StageKill StageName = "kill"
	// StageRemove removes the pod's containers, bundles, cgroups and
	// sandbox (CRI RemoveContainer, StopPodSandbox, RemovePodSandbox), then
	// deletes the pod object for good.
	StageRemove StageName = "remove"

	// The states in which there is nothing to do now.

	// StageRunning: the container runs; the kubelet watches it.
	StageRunning StageName = "running"
	// StageBackOff: the container waits out a back-off (CrashLoopBackOff,
	// ImagePullBackOff) before the kubelet tries again.
	StageBackOff StageName = "backoff"
	// StageExited: the container ended and its restartPolicy does not
	// restart it.
	StageExited StageName = "exited"
	// StageDone: the pod is finished (Succeeded or Failed), or gone.
	StageDone StageName = "done"
)

// CRI is the CRI call (or kubelet step) a stage plays.
func (n StageName) CRI() string {
	switch n {
	case StageSandbox:
		return "RunPodSandbox"
	case StagePull:
		return "PullImage"
	case StageUnpack:
		return "CreateContainer: prepare the rootfs"
	case StageSpec:
		return "CreateContainer: write the OCI spec"
	case StageCreate:
		return "CreateContainer: runc create"
	case StageStart:
		return "StartContainer"
	case StageKill:
		return "StopContainer"
	case StageRemove:
		return "RemoveContainer, StopPodSandbox, RemovePodSandbox"
	}
	return ""
}

// ParseStage returns the stage called name, one of those RunStage runs
// (`podlab kubelet --stage NAME`), or an error listing them.
func ParseStage(name string) (StageName, error) {
	switch n := StageName(name); n {
	case StageSandbox, StagePull, StageUnpack, StageSpec, StageCreate, StageStart, StageKill, StageRemove:
		return n, nil
	}
	return "", fmt.Errorf("no stage %q: the stages are sandbox, pull, unpack, spec, create, start, kill and remove", name)
}

// Actionable reports whether the stage is work to do now (not a state to
// wait in).
func (n StageName) Actionable() bool {
	switch n {
	case StageRunning, StageBackOff, StageExited, StageDone:
		return false
	}
	return true
}

// Stage is what comes next for a pod or one of its containers.
type Stage struct {
	Name StageName
	// Container is the container the stage is for; "" for the pod-level
	// stages (sandbox, kill, remove, done).
	Container string
	// RestartCount is the restart the stage works on: 0 for the first run.
	RestartCount int
	// ContainerID is the runtime container concerned, when there is one.
	ContainerID string
	// Why says, in Kubernetes terms, why this is the next stage.
	Why string
	// Reason and Until, for StageBackOff: CrashLoopBackOff or
	// ImagePullBackOff, and when the back-off ends.
	Reason string
	Until  time.Time
}

// Plan lists what comes next for pod on its node: one pod-level stage
// (kill, remove, done, sandbox) or, once the sandbox exists, one stage per
// container, in the spec's order. It only reads pod and st.
func Plan(pod *corev1.Pod, st *PodState) []Stage {
	if pod.DeletionTimestamp != nil {
		for _, c := range st.Containers {
			if l := c.Latest(); l != nil && l.State != RunExited {
				return []Stage{{Name: StageKill, Why: fmt.Sprintf("the pod is being deleted (deletionTimestamp %s) and container %s is %s",
					pod.DeletionTimestamp.UTC().Format(time.RFC3339), c.Name, l.State)}}
			}
		}
		return []Stage{{Name: StageRemove, Why: "the pod is being deleted and its containers are stopped: remove them, the bundles and the sandbox, then the pod object"}}
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return []Stage{{Name: StageDone, Why: fmt.Sprintf("the pod is %s: its containers stay on the node (for logs) until the pod is deleted", pod.Status.Phase)}}
	}
	if !st.Sandbox.Ready {
		return []Stage{{Name: StageSandbox, Why: "the pod has no sandbox yet: its network, IPC and UTS namespaces come first"}}
	}
	var out []Stage
	for i := range st.Containers {
		out = append(out, nextForContainer(pod, st, &st.Containers[i]))
	}
	return out
}

// NextStage is the first actionable stage of Plan, or else its first stage
// (running, back-off, exited, done).
func NextStage(pod *corev1.Pod, st *PodState) Stage {
	plan := Plan(pod, st)
	for _, s := range plan {
		if s.Name.Actionable() {
			return s
		}
	}
	if len(plan) == 0 {
		return Stage{Name: StageDone, Why: "the pod has no containers"}
	}
	return plan[0]
}

func nextForContainer(pod *corev1.Pod, st *PodState, c *ContainerState) Stage {
	s := Stage{Container: c.Name}
	if l := c.Latest(); l != nil {
		s.ContainerID, s.RestartCount = l.ID, l.RestartCount
		switch l.State {
		case RunRunning:
			s.Name, s.Why = StageRunning, "the container runs; the kubelet watches for its exit"
			return s
		case RunCreated:
			s.Name, s.Why = StageStart, "runc create is done; the app waits on the exec fifo for runc start"
			return s
		}
		if !shouldRestart(pod, l.Exit) {
			s.Name = StageExited
			s.Why = fmt.Sprintf("it exited with code %d and restartPolicy %s does not restart it", l.Exit.Code, pod.Spec.RestartPolicy)
			return s
		}
		if st.Now.Before(c.CrashBackOffUntil) {
			s.Name, s.Reason, s.Until = StageBackOff, ReasonCrashLoopBackOff, c.CrashBackOffUntil
			s.Why = fmt.Sprintf("it exited with code %d; restartPolicy %s restarts it after a back-off of %s", l.Exit.Code, pod.Spec.RestartPolicy, c.CrashBackOff)
			return s
		}
		s.RestartCount, s.ContainerID = l.RestartCount+1, ""
	}
	if st.Now.Before(c.BackOffUntil) {
		s.Name, s.Reason, s.Until = StageBackOff, c.FailedReason, c.BackOffUntil
		if c.FailedStage == StagePull {
			s.Reason = ReasonImagePullBackOff
		}
		s.Why = fmt.Sprintf("the %s stage failed (%s: %s); the kubelet tries again after a back-off of %s", c.FailedStage, c.FailedReason, c.FailedErr, c.BackOff)
		return s
	}
	restart := s.RestartCount
	freshRootfs := c.Rootfs && (c.ConfigRestart < 0 || c.ConfigRestart == restart)
	switch {
	case !pulled(pod, c, freshRootfs):
		s.Name = StagePull
		switch {
		case c.RefErr != nil:
			s.Why = "the image reference does not parse"
		case c.Policy == corev1.PullAlways:
			s.Why = fmt.Sprintf("imagePullPolicy Always: the image is pulled for every container the kubelet starts (restart %d)", restart)
		case c.Present:
			s.Why = fmt.Sprintf("imagePullPolicy %s and the image is in the node's content store: the kubelet checks it and records that it is present", c.Policy)
		default:
			s.Why = fmt.Sprintf("the image is not in the node's content store (imagePullPolicy %s)", c.Policy)
		}
	case !freshRootfs:
		s.Name = StageUnpack
		if c.Rootfs {
			s.Why = fmt.Sprintf("the bundle's rootfs was used by restart %d; restart %d gets a fresh one", c.ConfigRestart, restart)
		} else {
			s.Why = "the image is stored; the container's bundle has no rootfs yet"
		}
	case c.ConfigRestart < 0:
		s.Name, s.Why = StageSpec, "the bundle has a rootfs and no config.json"
	default:
		s.Name, s.Why = StageCreate, "the bundle has its rootfs and config.json; no runtime container exists for this restart"
	}
	return s
}

// pulled reports whether the image stage is done for the container's
// current restart. Once a fresh rootfs exists, it is. Otherwise the image
// must be in the store and the stage must have run for this restart (with
// Always, a pull; with IfNotPresent and Never, a check), which the pod's
// status records: PullStage sets the container waiting in ContainerCreating
// with the imageID, and an exit replaces that state.
func pulled(pod *corev1.Pod, c *ContainerState, freshRootfs bool) bool {
	if c.RefErr != nil || !c.Present {
		return false
	}
	if freshRootfs {
		return true
	}
	switch c.Policy {
	case corev1.PullIfNotPresent, corev1.PullNever, corev1.PullAlways:
		// The image stage ran for this restart, whatever the policy: the
		// kubelet's EnsureImageExists runs before every container start
		// (with the image present it only checks, and records "already
		// present on machine").
		cs := containerStatus(pod, c.Name)
		if cs == nil || cs.State.Waiting == nil || cs.State.Waiting.Reason != ReasonContainerCreating || cs.ImageID == "" {
			return false
		}
		l := c.Latest()
		return l == nil || (cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ContainerID == RuntimeContainerID(l.ID))
	}
	return false // an unknown policy: PullStage reports it
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// shouldRestart applies the pod's restartPolicy to an exit: Always restarts
// every exit, OnFailure a non-zero one, Never none.
func shouldRestart(pod *corev1.Pod, ex *runc.Exit) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return ex != nil && ex.Code != 0
	}
	return true // Always, the default
}
