package kubelet

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodState is what the node's runtime holds of a pod, as the kubelet's
// GetPodStatus reads it over CRI (ListPodSandbox and ListContainers by the
// label io.kubernetes.pod.uid, then PodSandboxStatus and ContainerStatus;
// ImageStatus for each image), plus the kubelet's memory of its failed
// stages' back-offs: everything NextStage needs besides the pod itself.
// The kubelet stores nothing of the runtime's for its own use.
type PodState struct {
	// Now is when the state was read; back-offs are compared with it.
	Now  time.Time
	Node string
	// Sandbox is the pod's newest sandbox, as the runtime reports it.
	Sandbox Sandbox
	// Sandboxes counts the pod's sandboxes, ready or not: the attempt of
	// the next one.
	Sandboxes int
	// Containers are the pod's containers, in the spec's order.
	Containers []ContainerState
	// Leftovers is true while anything of the pod remains on the node:
	// the runtime's sandboxes and containers, the kubelet's pod directory
	// (volumes, subPath mounts, the user namespace record).
	Leftovers bool
	// RuntimeName is the runtime's name, as its CRI Version answers it
	// (podlab, containerd): the TYPE of the status's containerIDs,
	// <RuntimeName>://<id>.
	RuntimeName string

	cri *criPodStatus
}

// ContainerID is the status's containerID of a run: <RuntimeName>://<id>.
func (s *PodState) ContainerID(r *Run) string {
	return ContainerID{Type: s.RuntimeName, ID: r.ID}.String()
}

// Container returns the state of the container called name, or nil.
func (s *PodState) Container(name string) *ContainerState {
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}

// Sandbox is a pod's sandbox as the runtime reports it (PodSandboxStatus).
type Sandbox struct {
	// ID is the runtime's id of the sandbox; "" when the pod has none.
	ID string
	// Attempt is its metadata's attempt: how many sandboxes the pod had
	// before it.
	Attempt uint32
	// Ready is true while its state is SANDBOX_READY.
	Ready bool
	// HostNetwork: the pod uses the node's network namespace.
	HostNetwork bool
	// Hostname is the pod's hostname, as the sandbox config gives it.
	Hostname string
	// IPs are the pod's addresses, its IP first (empty with no pod network).
	IPs []string
	// Handler is the runtime handler it runs with ("" is the runtime's
	// default).
	Handler string
	// Namespaces maps each namespace kind the runtime pinned to its path,
	// Record is the runtime's record of the sandbox, PodDir its
	// directory and CgroupParent the cgroup it was given: from the verbose
	// PodSandboxStatus (`crictl inspectp`), when the runtime gives them.
	Namespaces   map[string]string
	Record       string
	PodDir       string
	CgroupParent string
	// UserNamespace is the pod's range of host ids (hostUsers: false), as
	// the kubelet recorded it.
	UserNamespace *UserNamespace
}

// ContainerState is one container of a pod as the node holds it.
type ContainerState struct {
	Name string
	// Image is the image as the spec names it ("nginx"); Ref is its
	// normalized reference ("docker.io/library/nginx:latest"), empty when
	// it does not parse (RefErr says why).
	Image  string
	Ref    string
	RefErr error
	Policy corev1.PullPolicy
	// Present: the runtime's ImageStatus has the image. ImageID is its
	// repository@digest, ImageSize its size as the runtime reports it.
	Present   bool
	ImageID   string
	ImageSize int64

	// Runs are the runtime's containers for it, one per restart, oldest
	// first (the kubelet keeps the latest and the one before).
	Runs []Run

	// CrashBackOff is the delay before the next restart after the latest
	// run exited, and CrashBackOffUntil when it ends (derived from the
	// restart count and the exit time, as the kubelet's back-off does).
	CrashBackOff      time.Duration
	CrashBackOffUntil time.Time
	// FailedStage, FailedReason and FailedErr are this kubelet's memory of
	// the last failure of a stage before the container runs (a pull, a
	// config error, CreateContainer), and BackOff and BackOffUntil the
	// wait before the next try. A kubelet started afresh remembers none,
	// as in Kubernetes.
	FailedStage  StageName
	FailedReason string
	FailedErr    string
	BackOff      time.Duration
	BackOffUntil time.Time
}

// Latest is the newest run, or nil.
func (c *ContainerState) Latest() *Run {
	if len(c.Runs) == 0 {
		return nil
	}
	return &c.Runs[len(c.Runs)-1]
}

// Previous is the run before the newest, or nil.
func (c *ContainerState) Previous() *Run {
	if len(c.Runs) < 2 {
		return nil
	}
	return &c.Runs[len(c.Runs)-2]
}

// Run states, from the CRI's container states.
const (
	RunCreated = "created" // CONTAINER_CREATED: made, not started
	RunRunning = "running" // CONTAINER_RUNNING
	RunExited  = "exited"  // CONTAINER_EXITED, or UNKNOWN (exit code 255)
)

// Run is one runtime container of a pod's container: one per restart.
type Run struct {
	ID string
	// RestartCount is its metadata's attempt.
	RestartCount int
	State        string
	// Exit is how it ended (State exited).
	Exit *Exit
	// LogPath is its CRI log file (the config's log_path under the
	// sandbox's log_directory).
	LogPath   string
	StartedAt time.Time
	// ImageRef is the image it runs, as the runtime reports it.
	ImageRef string
}

// Exit is how a container ended, from ContainerStatus: its exit code, when,
// and the runtime's reason (Completed, Error, OOMKilled, ...). A container
// in state UNKNOWN counts as exited with code 255, as the kubelet counts a
// container whose runtime lost track of it.
type Exit struct {
	Code     int
	ExitedAt time.Time
	Reason   string
	Message  string
}

// Observe reads what the node's runtime holds of pod over CRI: its
// sandboxes, its containers and their exits, its images; and the runtime's
// name (Version, asked once), which the status's containerIDs carry.
func (k *Kubelet) Observe(ctx context.Context, pod *corev1.Pod) (*PodState, error) {
	return k.observe(ctx, pod, false)
}

// observe is Observe; verbose keeps the containers' verbose info too.
func (k *Kubelet) observe(ctx context.Context, pod *corev1.Pod, verbose bool) (*PodState, error) {
	now := k.now()
	name, err := k.cri.name.get(ctx, k.cri.rt)
	if err != nil {
		return nil, err
	}
	ps, err := k.cri.podStatusVerbose(ctx, pod.UID, verbose)
	if err != nil {
		return nil, err
	}
	st := &PodState{Now: now, Node: k.node, Sandbox: sandboxOf(pod, ps), Sandboxes: len(ps.Sandboxes), cri: ps, RuntimeName: name}
	if usesUserNamespace(pod) {
		if u, ok, err := readUserNamespace(k.layout.UserNamespaceFile(pod.UID)); err == nil && ok {
			st.Sandbox.UserNamespace = &u
		}
	}
	for _, c := range pod.Spec.Containers {
		cs := ContainerState{Name: c.Name, Image: c.Image, Policy: c.ImagePullPolicy}
		if r, err := parseImageRef(c.Image); err != nil {
			cs.RefErr = err
		} else {
			cs.Ref = r.Ref
			img, err := k.cri.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: c.Image}})
			if err == nil && img.GetImage() != nil {
				cs.Present = true
				cs.ImageID = repoDigest(img.Image, r.Repo)
				cs.ImageSize = int64(img.Image.GetSize())
			}
		}
		// oldest first
		for i := len(ps.Containers) - 1; i >= 0; i-- {
			if s := ps.Containers[i]; s.GetMetadata().GetName() == c.Name {
				cs.Runs = append(cs.Runs, runOf(s, now))
			}
		}
		if l := cs.Latest(); l != nil && l.State == RunExited && shouldRestart(pod, l.Exit) {
			cs.CrashBackOff = k.crashDelay(l.RestartCount)
			cs.CrashBackOffUntil = l.Exit.ExitedAt.Add(cs.CrashBackOff)
		}
		if f, ok := k.failures.get(failureKey(pod, c.Name, c.Image)); ok {
			cs.FailedStage, cs.FailedReason, cs.FailedErr = f.stage, f.reason, f.err
			cs.BackOff, cs.BackOffUntil = f.delay, f.until
		}
		st.Containers = append(st.Containers, cs)
	}
	st.Leftovers = len(ps.Sandboxes) > 0 || len(ps.Containers) > 0 || k.kubeletPodDir(pod.UID)
	return st, nil
}

// sandboxOf is the pod's newest sandbox in ps.
func sandboxOf(pod *corev1.Pod, ps *criPodStatus) Sandbox {
	sb := Sandbox{HostNetwork: pod.Spec.HostNetwork, Hostname: podHostname(pod)}
	if len(ps.Sandboxes) == 0 {
		return sb
	}
	s := ps.Sandboxes[0]
	sb.ID, sb.Attempt, sb.Handler = s.Id, s.GetMetadata().GetAttempt(), s.RuntimeHandler
	sb.Ready = s.State == runtimeapi.PodSandboxState_SANDBOX_READY
	if sb.Ready {
		sb.IPs = ps.IPs()
	}
	if i := ps.SandboxInfo[s.Id]; i != nil {
		sb.Namespaces, sb.Record, sb.PodDir, sb.CgroupParent = i.Namespaces, i.Record, i.PodDir, i.CgroupParent
	}
	return sb
}

// runOf is a container's status as a Run.
func runOf(s *runtimeapi.ContainerStatus, now time.Time) Run {
	r := Run{ID: s.Id, RestartCount: int(s.GetMetadata().GetAttempt()), LogPath: s.LogPath, ImageRef: s.ImageRef}
	if s.StartedAt > 0 {
		r.StartedAt = time.Unix(0, s.StartedAt).UTC()
	}
	switch s.State {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		r.State = RunCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		r.State = RunRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		r.State = RunExited
		r.Exit = &Exit{Code: int(s.ExitCode), ExitedAt: time.Unix(0, s.FinishedAt).UTC(), Reason: s.Reason, Message: s.Message}
	default:
		at := now.UTC()
		if s.CreatedAt > 0 {
			at = time.Unix(0, s.CreatedAt).UTC()
		}
		r.State = RunExited
		r.Exit = &Exit{Code: 255, ExitedAt: at, Reason: "Unknown", Message: s.Message}
	}
	return r
}

// sandboxInfo is what the verbose PodSandboxStatus of podlab's runtime
// says of a sandbox (its info["info"], as crictl inspectp shows it).
type sandboxInfo struct {
	Record       string            `json:"record"`
	Namespaces   map[string]string `json:"namespaces"`
	CgroupParent string            `json:"cgroupParent"`
	PodDir       string            `json:"podDir"`
}

// containerInfo is what the verbose ContainerStatus of podlab's runtime
// says of a container (crictl inspect): where its record, bundle,
// config.json and runc state are, its pids, and the spec it runs with.
type containerInfo struct {
	SandboxID   string          `json:"sandboxID"`
	Record      string          `json:"record"`
	Bundle      string          `json:"bundle"`
	Config      string          `json:"config"`
	RuntimeDir  string          `json:"runtimeDir"`
	Pid         int             `json:"pid"`
	ShimPid     int             `json:"shimPid"`
	RuncState   string          `json:"runcState"`
	RuntimeSpec json.RawMessage `json:"runtimeSpec"`
}

// kubeletPodDir reports whether the kubelet has files of the pod: in its
// pod directory, its volumes, subPath mounts or user namespace record (the
// runtime keeps directories of its own there too, named by sandbox id,
// never by a pod's uid); its log directory.
func (k *Kubelet) kubeletPodDir(uid types.UID) bool {
	for _, p := range []string{filepath.Join(k.layout.PodDir(uid), "volumes"), k.layout.SubPathsDir(uid), k.layout.UserNamespaceFile(uid)} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	logs, _ := filepath.Glob(filepath.Join(k.layout.PodLogsDir(), "*_*_"+string(uid)))
	return len(logs) > 0
}

// podHostname is the pod's hostname: spec.hostname, else the pod's name,
// cut to 63 characters as the kubelet does.
func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}
