package kubelet

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/unpack"
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
	// Snapshotter is how containers' rootfs are made (steps/unpack):
	// "" chooses overlayfs where the kernel has it, native otherwise.
	Snapshotter unpack.Snapshotter
	// Client is the API server, as system:node:<Node>.
	Client apiserver.Interface
	// CRI is the node's container runtime, as the kubelet's
	// --container-runtime-endpoint and --image-service-endpoint reach it
	// (ConnectRuntime): the node's status comes from it (Version for
	// nodeInfo.containerRuntimeVersion, Status for the Ready condition,
	// ListImages for status.images). Required; the caller closes it.
	CRI *criremote.Client
	// Runtime is the OCI runtime binary (runc); Shim the command that runs
	// runc.ShimMain (see runc.Runtime).
	Runtime string
	Shim    []string
	// Handlers are the node runtime's handlers, as containerd's runtimes
	// table: a RuntimeClass's handler picks one for a pod's sandbox and
	// every container of it. Default runc.DefaultHandlers(Runtime): runc
	// (the default, for a pod with no RuntimeClass), runsc and crun.
	Handlers []runc.Handler
	// ImageBackOff and MaxImageBackOff bound the delay between pulls (and
	// other failed stages) of a container; CrashBackOff and
	// MaxCrashBackOff the delay between restarts of a crashing container.
	// Zero means the kubelet's defaults (10s doubling to 300s).
	ImageBackOff, MaxImageBackOff time.Duration
	CrashBackOff, MaxCrashBackOff time.Duration
	// SeccompDefault is the kubelet's --seccomp-default: a container whose
	// pod and container securityContext set no seccompProfile gets the
	// runtime's default profile (RuntimeDefault) instead of none
	// (Unconfined, Kubernetes' default).
	SeccompDefault bool
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
	// CNIBinDirs are where the runtime looks for CNI plugins; default
	// cni.DefaultBinDirs (/usr/lib/cni, /opt/cni/bin).
	CNIBinDirs []string
	// NodeLeaseDuration is the node Lease's leaseDurationSeconds (the
	// kubelet's --node-lease-duration-seconds, 40s); Run renews the Lease
	// every quarter of it. Whole seconds; at least 4s.
	NodeLeaseDuration time.Duration
	// OnStage, when set, receives every stage the sync loop runs; OnNode
	// every registration and heartbeat; OnCommand every runc command line.
	OnStage func(Report)
	OnNode  func(*NodeResult, error)
	// OnLease receives every renewal of the node's Lease.
	OnLease   func(*LeaseResult, error)
	OnCommand func(argv []string)
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
	store    *pull.Store
	rt       *runc.Runtime // the default handler's (runc)
	runtimes map[string]*runc.Runtime
	network  *cni.Network
	client   apiserver.Interface
	cri      *criRuntime
	recorder *apiserver.Recorder
	failures *failures
	nodeIP   string

	infoOnce sync.Once
	info     corev1.NodeSystemInfo

	snap snapshotter // the node's snapshotter, chosen at the first unpack

	mu        sync.Mutex
	announced map[string]time.Time // back-offs whose Events were recorded, by container
	// saidNoPodCIDR: the kubelet said once that the node has no pod CIDR.
	saidNoPodCIDR bool
}

// New sets up the kubelet of cfg.Node: its node directory, content store
// and runtime. It talks to nothing yet.
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
	layout, err := NodeLayout(cfg.StateDir, cfg.Node)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(layout.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("making the node directory: %w", err)
	}
	store, err := pull.OpenStore(layout.ContentDir())
	if err != nil {
		return nil, err
	}
	network, err := cni.New(cni.Config{ConfDir: layout.CNIConfDir(), CacheDir: layout.CNICacheDir(), BinDirs: cfg.CNIBinDirs})
	if err != nil {
		return nil, err
	}
	if len(cfg.Handlers) == 0 {
		cfg.Handlers = runc.DefaultHandlers(cfg.Runtime)
	}
	runtimes := map[string]*runc.Runtime{}
	for _, h := range cfg.Handlers {
		rt := layout.handlerRuntime(h)
		rt.Shim, rt.OnCommand = cfg.Shim, cfg.OnCommand
		runtimes[h.Name] = rt
	}
	rt := runtimes[runc.DefaultHandler]
	if rt == nil {
		return nil, fmt.Errorf("kubelet: no %q handler: the handlers must include the default runtime", runc.DefaultHandler)
	}
	return &Kubelet{
		cfg:       cfg,
		node:      cfg.Node,
		layout:    layout,
		store:     store,
		rt:        rt,
		runtimes:  runtimes,
		network:   network,
		client:    cfg.Client,
		cri:       &criRuntime{rt: cfg.CRI.Runtime, img: cfg.CRI.Image},
		recorder:  apiserver.NewRecorder(cfg.Client, Component, cfg.Node),
		failures:  newFailures(cfg.ImageBackOff, cfg.MaxImageBackOff),
		nodeIP:    nodeIP(cfg.Address, cfg.Port),
		announced: map[string]time.Time{},
	}, nil
}

// Node is the kubelet's node name.
func (k *Kubelet) Node() string { return k.node }

// Layout is where the node's runtime keeps its files.
func (k *Kubelet) Layout() Layout { return k.layout }

// ImageEndpoint is where the kubelet asks for images (CRI ImageService):
// its --image-service-endpoint.
func (k *Kubelet) ImageEndpoint() string { return k.cfg.CRI.ImageEndpoint }

// Store is the node's content store: the runtime pulls into it, the
// in-process unpack and spec stages read it.
func (k *Kubelet) Store() *pull.Store { return k.store }

// Network is the node's pod network, as its runtime sees it.
func (k *Kubelet) Network() *cni.Network { return k.network }

// Runtime is the node's container runtime (its default handler's).
func (k *Kubelet) Runtime() *runc.Runtime { return k.rt }

// Handlers are the runtime handlers the node knows.
func (k *Kubelet) Handlers() []runc.Handler { return k.cfg.Handlers }

func (k *Kubelet) now() time.Time { return k.cfg.Now() }
