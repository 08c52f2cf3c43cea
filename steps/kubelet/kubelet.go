package kubelet

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet/criremote"
)

// Component is the source.component of the kubelet's Events.
const Component = "kubelet"

// DefaultPoll is how often the kubelet looks at its containers for exits and
// at back-offs that ended (the PLEG's relist period is 1s).
const DefaultPoll = time.Second

// Config is how a kubelet is set up.
type Config struct {
	// Node is the node's name; default apiserver.HostNode (node-1).
	Node string
	// StateDir is podlab's state directory; the node's runtime lives in
	// <StateDir>/nodes/<Node>.
	StateDir string
	// Client is the API server, as system:node:<Node>.
	Client apiserver.Interface
	// CRI is the node's container runtime, as the kubelet's
	// --container-runtime-endpoint and --image-service-endpoint reach it
	// (ConnectRuntime): the node's status comes from it (Version for
	// nodeInfo.containerRuntimeVersion, Status for the Ready condition,
	// ListImages for status.images), and every pod stage is calls to it
	// (stages.go). Required; the caller closes it.
	CRI *criremote.Client
	// ImageBackOff and MaxImageBackOff bound the delay between pulls (and
	// other failed stages) of a container; CrashBackOff and
	// MaxCrashBackOff the delay between restarts of a crashing container.
	// Zero means the kubelet's defaults (10s doubling to 300s).
	ImageBackOff, MaxImageBackOff time.Duration
	CrashBackOff, MaxCrashBackOff time.Duration
	// SyncBackOff is how long Run's pod worker waits before it syncs a pod
	// again after a sync failed (a sandbox that could not be made), jittered
	// by up to half of it: the kubelet's pod workers requeue a failed sync
	// after their backOffPeriod (10s) so, not at every relist. A change of
	// the pod (spec, labels, annotations, deletion) is synced at once.
	// Zero means DefaultSyncBackOff.
	SyncBackOff time.Duration
	// SeccompDefault is the kubelet's --seccomp-default: a container whose
	// pod and container securityContext set no seccompProfile gets the
	// runtime's default profile (RuntimeDefault) instead of none
	// (Unconfined, Kubernetes' default).
	SeccompDefault bool
	// AllowedUnsafeSysctls is the kubelet's --allowed-unsafe-sysctls:
	// sysctls, or patterns ending in "*", a pod may set besides the safe
	// ones (SafeSysctls). Each must be namespaced (net.*, kernel.shm*,
	// kernel.msg*, kernel.sem, fs.mqueue.*, ...): New refuses others
	// (ErrBadSysctlPattern). A pod setting any other sysctl is rejected.
	AllowedUnsafeSysctls []string
	// PodPidsLimit is the kubelet's --pod-max-pids: pids.max of every pod
	// cgroup. Zero or less is no limit (the kubelet's default, -1).
	PodPidsLimit int64
	// Address and Port are where the kubelet's own HTTPS API listens (its
	// --address and --port; steps/kubelet/server serves it). With a Port,
	// the Node publishes them as the real kubelet does:
	// status.daemonEndpoints.kubeletEndpoint.port, and Address as its
	// InternalIP (the machine's address when Address is unspecified,
	// 0.0.0.0), which is how the API server finds the kubelet for
	// kubectl logs and exec. Zero Port: no endpoint is published.
	Address string
	Port    int32
	// Heartbeat is the node status period (10s); Poll how often containers
	// are looked at (1s); Settle how long SyncOnce watches the containers it
	// started before it returns (1s).
	Heartbeat, Poll, Settle time.Duration
	// NodeLeaseDuration is the node Lease's leaseDurationSeconds (the
	// kubelet's --node-lease-duration-seconds, 40s); Run renews the Lease
	// every quarter of it. Whole seconds; at least 4s.
	NodeLeaseDuration time.Duration
	// OnStage, when set, receives every stage the sync loop runs; OnNode
	// every registration and heartbeat.
	OnStage func(Report)
	OnNode  func(*NodeResult, error)
	// OnLease receives every renewal of the node's Lease.
	OnLease func(*LeaseResult, error)
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Report is one stage the sync loop ran, for the command to print.
type Report struct {
	Pod       *corev1.Pod
	Stage     Stage
	Result    any // *SandboxResult, *PullResult, ... (nil when Err is set)
	Err       error
	Took      time.Duration
	BackOff   bool // a back-off was announced (Events, status), nothing ran
	Leftovers bool // Stage remove was for a pod the API server no longer has
}

// Kubelet is one node's kubelet.
type Kubelet struct {
	cfg      Config
	node     string
	layout   Layout
	client   apiserver.Interface
	cri      *criRuntime
	recorder *apiserver.Recorder
	failures *failures
	nodeIP   string
	sysctls  *SysctlAllowlist

	infoOnce sync.Once
	info     corev1.NodeSystemInfo

	mu        sync.Mutex
	announced map[string]time.Time // back-offs whose Events were recorded, by container
	// warned: the pods told which of their fields are not honoured
	warned map[types.UID]bool
	// saidNoPodCIDR: the kubelet said once that the node has no pod CIDR.
	saidNoPodCIDR bool
	// podCIDR is the pod CIDR last handed to the runtime.
	podCIDR string
}

// New sets up the kubelet of cfg.Node: its node directory, and its
// runtime's CRI clients. It talks to nothing yet.
func New(cfg Config) (*Kubelet, error) {
	if cfg.Node == "" {
		cfg.Node = apiserver.HostNode
	}
	if errs := validation.IsDNS1123Subdomain(cfg.Node); len(errs) > 0 {
		return nil, fmt.Errorf("node name %q: %s", cfg.Node, errs[0])
	}
	if cfg.StateDir == "" {
		return nil, errors.New("kubelet: no state directory")
	}
	if cfg.Client == nil {
		return nil, errors.New("kubelet: no API server client")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.ImageBackOff, DefaultImageBackOff)
	def(&cfg.MaxImageBackOff, DefaultMaxImageBackOff)
	def(&cfg.CrashBackOff, DefaultCrashBackOff)
	def(&cfg.MaxCrashBackOff, DefaultMaxCrashBackOff)
	def(&cfg.SyncBackOff, DefaultSyncBackOff)
	def(&cfg.Heartbeat, DefaultHeartbeat)
	def(&cfg.NodeLeaseDuration, DefaultNodeLeaseDuration)
	if cfg.NodeLeaseDuration < 4*time.Second || cfg.NodeLeaseDuration%time.Second != 0 {
		return nil, fmt.Errorf("node lease duration %s: want whole seconds, at least 4s (the kubelet's default is %s)", cfg.NodeLeaseDuration, DefaultNodeLeaseDuration)
	}
	if cfg.CRI == nil {
		return nil, fmt.Errorf("kubelet: %w: connect to the node's runtime first (ConnectRuntime)", ErrNoRuntime)
	}
	def(&cfg.Poll, DefaultPoll)
	def(&cfg.Settle, time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sysctls, err := NewSysctlAllowlist(cfg.AllowedUnsafeSysctls)
	if err != nil {
		return nil, err
	}
	layout, err := NodeLayout(cfg.StateDir, cfg.Node)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(layout.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("making the node directory: %w", err)
	}
	return &Kubelet{
		cfg:       cfg,
		node:      cfg.Node,
		layout:    layout,
		client:    cfg.Client,
		cri:       &criRuntime{rt: cfg.CRI.Runtime, img: cfg.CRI.Image},
		recorder:  apiserver.NewRecorder(cfg.Client, Component, cfg.Node),
		failures:  newFailures(cfg.ImageBackOff, cfg.MaxImageBackOff),
		nodeIP:    nodeIP(cfg.Address, cfg.Port),
		sysctls:   sysctls,
		announced: map[string]time.Time{},
		warned:    map[types.UID]bool{},
	}, nil
}

// Node is the kubelet's node name.
func (k *Kubelet) Node() string { return k.node }

// Layout is where the node's runtime keeps its files.
func (k *Kubelet) Layout() Layout { return k.layout }

// ImageEndpoint is where the kubelet asks for images (CRI ImageService):
// its --image-service-endpoint.
func (k *Kubelet) ImageEndpoint() string { return k.cfg.CRI.ImageEndpoint }

func (k *Kubelet) now() time.Time { return k.cfg.Now() }
