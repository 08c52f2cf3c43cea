package kubelet

// The pod's status, as the kubelet's status manager reports it: computed
// from what the node holds (the runtime's containers and their exits, the
// sandbox) and from the previous status (what the API server keeps: start
// times, the waiting reason a stage set), then written with UpdateStatus
// when it changed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Waiting reasons the kubelet sets, as Kubernetes names them.
const (
	ReasonContainerCreating    = "ContainerCreating"
	ReasonErrImagePull         = "ErrImagePull"
	ReasonImagePullBackOff     = "ImagePullBackOff"
	ReasonErrImageNeverPull    = "ErrImageNeverPull"
	ReasonImageInspectError    = "ImageInspectError"
	ReasonInvalidImageName     = "InvalidImageName"
	ReasonCrashLoopBackOff     = "CrashLoopBackOff"
	ReasonCreateConfigError    = "CreateContainerConfigError"
	ReasonCreateContainerError = "CreateContainerError"
	ReasonRunContainerError    = "RunContainerError"
)

// override is what a stage says about a container that the node cannot
// show: why it waits, and the image a pull found.
type override struct {
	waiting   *corev1.ContainerStateWaiting
	imageID   string
	startedAt time.Time // when StartStage started it
}

func waiting(reason, message string) *override {
	return &override{waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

// Recording is what a stage wrote to the API server besides its work: the
// events and the pod status.
type Recording struct {
	// Events are "Type Reason: message" lines, as kubectl describe lists them.
	Events []string
	// Phase is the pod's phase after the stage; StatusWritten is false when
	// the status did not change.
	Phase         corev1.PodPhase
	StatusWritten bool
	// Took is the time spent writing them.
	Took time.Duration
}

// event records an Event about pod, and notes it in rec.
func (k *Kubelet) event(ctx context.Context, pod *corev1.Pod, rec *Recording, typ, reason, msg string) {
	start := time.Now()
	if err := k.recorder.Event(ctx, pod, typ, reason, msg); err == nil {
		rec.Events = append(rec.Events, typ+" "+reason+": "+msg)
	} else {
		rec.Events = append(rec.Events, fmt.Sprintf("%s %s: %s (not recorded: %v)", typ, reason, msg, err))
	}
	rec.Took += time.Since(start)
}

// report computes pod's status from the node and writes it if it changed.
// ov sets waiting reasons by container name.
func (k *Kubelet) report(ctx context.Context, pod *corev1.Pod, rec *Recording, ov map[string]*override) error {
	_, err := k.reportObserved(ctx, pod, rec, ov, false)
	return err
}

// reportObserved is report, and returns the node's state the status was
// computed from (nil when the pod was gone, or nothing was read); with
// verbose, its containers' verbose info too (what CreateStage and
// StartStage show of their container).
func (k *Kubelet) reportObserved(ctx context.Context, pod *corev1.Pod, rec *Recording, ov map[string]*override, verbose bool) (*PodState, error) {
	start := time.Now()
	defer func() { rec.Took += time.Since(start) }()
	for try := 0; ; try++ {
		obj, err := k.client.Get(ctx, "pods", pod.Namespace, pod.Name)
		if podGone(err) {
			return nil, nil // deleted meanwhile: nothing to report to
		}
		if err != nil {
			return nil, fmt.Errorf("reading pod %s to update its status: %w", podKey(pod), err)
		}
		cur := obj.(*corev1.Pod)
		if cur.UID != pod.UID {
			return nil, nil // another pod of the same name
		}
		st, err := k.observe(ctx, cur, verbose)
		if err != nil {
			return nil, err
		}
		status := k.computeStatus(cur, st, ov)
		rec.Phase = status.Phase
		if sameStatus(cur.Status, status) {
			return st, nil
		}
		cur.Status = status
		_, err = k.client.UpdateStatus(ctx, cur)
		if apierrors.IsConflict(err) && try < 5 {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("updating the status of pod %s: %w", podKey(pod), err)
		}
		rec.StatusWritten = true
		return st, nil
	}
}

func sameStatus(a, b corev1.PodStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// ComputeStatus is the status the kubelet would report for pod on the node
// state st (for tests and `podlab kubelet --next`).
func (k *Kubelet) ComputeStatus(pod *corev1.Pod, st *PodState) corev1.PodStatus {
	return k.computeStatus(pod, st, nil)
}

func (k *Kubelet) computeStatus(pod *corev1.Pod, st *PodState, ov map[string]*override) corev1.PodStatus {
	old := pod.Status
	now := metav1.NewTime(st.Now)
	s := corev1.PodStatus{
		Phase:             old.Phase,
		QOSClass:          old.QOSClass,
		PodIP:             old.PodIP,
		PodIPs:            old.PodIPs,
		NominatedNodeName: old.NominatedNodeName,
		StartTime:         old.StartTime,
	}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	if old.Phase == corev1.PodSucceeded || old.Phase == corev1.PodFailed {
		s.Reason, s.Message = old.Reason, old.Message // a rejection's SysctlForbidden, say
	}
	if ip, ips := podIPs(st.Sandbox); ip != "" {
		s.PodIP, s.PodIPs = ip, ips // the runtime's PodSandboxStatus
	}
	if ip := k.nodeIP; ip != "" {
		s.HostIP, s.HostIPs = ip, []corev1.HostIP{{IP: ip}}
		if pod.Spec.HostNetwork {
			// a hostNetwork pod has no sandbox network of its own: its IP
			// is the node's, as the kubelet's generateAPIPodStatus says
			s.PodIP, s.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		}
	}
	deleting := pod.DeletionTimestamp != nil
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := st.Container(c.Name)
		if cs == nil {
			continue
		}
		s.ContainerStatuses = append(s.ContainerStatuses,
			k.containerStatus(pod, c, st, cs, containerStatus(pod, c.Name), ov[c.Name], deleting))
	}
	if old.Phase != corev1.PodSucceeded && old.Phase != corev1.PodFailed {
		s.Phase = podPhase(pod, s.ContainerStatuses)
		if deleting {
			s.Phase = deletedPhase(s.Phase, s.ContainerStatuses)
		}
	}

	ready, notReady := true, []string{}
	for _, cs := range s.ContainerStatuses {
		if !cs.Ready {
			ready = false
			notReady = append(notReady, cs.Name)
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		c.LastTransitionTime = now
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	readyReason, readyMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if s.Phase == corev1.PodSucceeded || s.Phase == corev1.PodFailed {
		ready, readyReason, readyMsg = false, "PodCompleted", ""
	}
	s.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, st.Sandbox.Ready && !deleting, "", ""),
		cond(corev1.PodInitialized, true, "", ""),
		cond(corev1.PodReady, ready, readyReason, readyMsg),
		cond(corev1.ContainersReady, ready, readyReason, readyMsg),
	}
	for _, o := range old.Conditions {
		switch o.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady:
		default:
			s.Conditions = append(s.Conditions, o) // PodScheduled, and whatever others set
		}
	}
	return s
}

// containerStatus is one container's status: from its latest run (running,
// created, exited), else waiting for the reason a stage gave. Its
// containerIDs are <runtime name>://<id> (st.ContainerID).
func (k *Kubelet) containerStatus(pod *corev1.Pod, c *corev1.Container, st *PodState, cs *ContainerState, old *corev1.ContainerStatus, ov *override, deleting bool) corev1.ContainerStatus {
	now := st.Now
	f := false
	out := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: &f}
	if cs.Ref != "" {
		out.Image = cs.Ref
	}
	l, p := cs.Latest(), cs.Previous()
	last := func(r *Run) corev1.ContainerState {
		if r == nil || r.State != RunExited {
			return corev1.ContainerState{}
		}
		return corev1.ContainerState{Terminated: k.terminated(st, r, old)}
	}
	waitingFor := func() *corev1.ContainerStateWaiting {
		switch {
		case ov != nil && ov.waiting != nil:
			return ov.waiting
		case old != nil && old.State.Waiting != nil:
			return old.State.Waiting
		}
		return &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}
	}
	if l != nil {
		out.RestartCount = int32(l.RestartCount)
		out.ContainerID = st.ContainerID(l)
		out.ImageID = runImageID(cs, l, old)
	}
	switch {
	case l == nil:
		out.State.Waiting = waitingFor()
		if ov != nil && ov.imageID != "" {
			out.ImageID = ov.imageID
		} else if old != nil {
			out.ImageID = old.ImageID
		}
	case l.State == RunRunning:
		t := true
		out.State.Running = &corev1.ContainerStateRunning{StartedAt: k.startedAt(l, old)}
		if ov != nil && !ov.startedAt.IsZero() {
			out.State.Running.StartedAt = metav1.NewTime(ov.startedAt)
		}
		out.Ready, out.Started = true, &t
		out.LastTerminationState = last(p)
	case l.State == RunCreated:
		out.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}
		out.LastTerminationState = last(p)
	default: // exited
		term := k.terminated(st, l, old)
		if deleting || !shouldRestart(pod, l.Exit) {
			out.State.Terminated = term
			out.LastTerminationState = last(p)
			break
		}
		lastMatches := old != nil && old.LastTerminationState.Terminated != nil &&
			isRun(old.LastTerminationState.Terminated.ContainerID, l.ID)
		switch {
		case ov != nil && ov.waiting != nil:
			out.State.Waiting = ov.waiting
		case now.Before(cs.CrashBackOffUntil):
			out.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff,
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", cs.CrashBackOff, c.Name, podDesc(pod))}
		case old != nil && old.State.Waiting != nil && lastMatches:
			out.State.Waiting = old.State.Waiting
		default: // about to restart
			out.State.Terminated = term
			out.LastTerminationState = last(p)
			return out
		}
		out.LastTerminationState = corev1.ContainerState{Terminated: term}
		if ov != nil && ov.imageID != "" {
			out.ImageID = ov.imageID
		} else if old != nil && lastMatches && old.State.Waiting != nil {
			out.ImageID = old.ImageID
		}
	}
	return out
}

// runImageID is the image a run was made from: the runtime's image_ref
// for it (repository@digest), else what the status said, else the image
// the runtime has now.
func runImageID(cs *ContainerState, l *Run, old *corev1.ContainerStatus) string {
	if strings.Contains(l.ImageRef, "@") {
		return l.ImageRef
	}
	if old != nil && isRun(old.ContainerID, l.ID) && old.ImageID != "" {
		return old.ImageID
	}
	return cs.ImageID
}

// terminated is an exited run's state.
func (k *Kubelet) terminated(st *PodState, r *Run, old *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{
		ExitCode:    int32(r.Exit.Code),
		Reason:      "Completed",
		StartedAt:   k.startedAt(r, old),
		FinishedAt:  metav1.NewTime(r.Exit.ExitedAt),
		ContainerID: st.ContainerID(r),
	}
	if r.Exit.Code != 0 {
		t.Reason = "Error"
	}
	return t
}

// startedAt is when a run started: what the status recorded when
// StartStage reported it, else what the runtime's ContainerStatus says.
func (k *Kubelet) startedAt(r *Run, old *corev1.ContainerStatus) metav1.Time {
	if old != nil {
		switch {
		case isRun(old.ContainerID, r.ID) && old.State.Running != nil:
			return old.State.Running.StartedAt
		case isRun(old.ContainerID, r.ID) && old.State.Terminated != nil:
			return old.State.Terminated.StartedAt
		case old.LastTerminationState.Terminated != nil && isRun(old.LastTerminationState.Terminated.ContainerID, r.ID):
			return old.LastTerminationState.Terminated.StartedAt
		}
	}
	if !r.StartedAt.IsZero() {
		return metav1.NewTime(r.StartedAt)
	}
	return metav1.NewTime(k.now())
}

// podPhase is the kubelet's getPhase: Pending while a container waits to
// run for the first time, Running while one runs (or will restart),
// Succeeded when all exited 0 for good, Failed when all stopped and one
// failed for good.
func podPhase(pod *corev1.Pod, statuses []corev1.ContainerStatus) corev1.PodPhase {
	var waiting, running, stopped, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyNever:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		case corev1.RestartPolicyOnFailure:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// deletedPhase is the phase of a pod being deleted once its containers
// stopped: the kubelet moves it to Succeeded (every container exited 0) or
// Failed before it deletes it, whatever its restartPolicy.
func deletedPhase(phase corev1.PodPhase, statuses []corev1.ContainerStatus) corev1.PodPhase {
	failed := false
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			return phase
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			failed = true
		case cs.State.Waiting != nil:
			failed = true // never ran, or waited out a back-off after a failure
		}
	}
	if failed {
		return corev1.PodFailed
	}
	return corev1.PodSucceeded
}
