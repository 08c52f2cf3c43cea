package kubelet

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	// StageCreate asks the runtime for the container (CRI
	// CreateContainer): the kubelet prepares its volumes, environment and
	// config; the runtime unpacks the image into a bundle, writes its
	// config.json and runs runc create under a shim.
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
	case StageCreate:
		return "CreateContainer"
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
	case StageSandbox, StagePull, StageCreate, StageStart, StageKill, StageRemove:
		return n, nil
	case "unpack", "spec":
		return "", fmt.Errorf("%w %q: the container runtime unpacks the image and writes the OCI spec inside CRI CreateContainer, the kubelet's create stage (podlab kubelet --pod POD --stage create, or podlab runc create --pod POD); by hand, outside any pod: podlab unpack and podlab spec", ErrNoStage, name)
	}
	return "", fmt.Errorf("%w %q: the stages are sandbox, pull, create, start, kill and remove", ErrNoStage, name)
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
			s.Name, s.Why = StageStart, "the runtime created the container (CONTAINER_CREATED); it waits for StartContainer"
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
	if !pulled(pod, c) {
		s.Name = StagePull
		switch {
		case c.RefErr != nil:
			s.Why = "the image reference does not parse"
		case c.Policy == corev1.PullAlways:
			s.Why = fmt.Sprintf("imagePullPolicy Always: the image is pulled for every container the kubelet starts (restart %d)", restart)
		case c.Present:
			s.Why = fmt.Sprintf("imagePullPolicy %s and the runtime has the image (ImageStatus): the kubelet checks it and records that it is present", c.Policy)
		default:
			s.Why = fmt.Sprintf("the runtime does not have the image (ImageStatus; imagePullPolicy %s)", c.Policy)
		}
		return s
	}
	s.Name = StageCreate
	s.Why = fmt.Sprintf("the image is there; the runtime has no container for restart %d (it unpacks the image and writes the spec inside CreateContainer)", restart)
	return s
}

// pulled reports whether the image stage is done for the container's
// current restart: the runtime has the image and the stage ran for this
// restart (with Always, a pull; with IfNotPresent and Never, a check),
// which the pod's status records: PullStage sets the container waiting in
// ContainerCreating with the imageID, and an exit replaces that state.
func pulled(pod *corev1.Pod, c *ContainerState) bool {
	if c.RefErr != nil || !c.Present {
		return false
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
		return l == nil || (cs.LastTerminationState.Terminated != nil && isRun(cs.LastTerminationState.Terminated.ContainerID, l.ID))
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
func shouldRestart(pod *corev1.Pod, ex *Exit) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return ex != nil && ex.Code != 0
	}
	return true // Always, the default
}
