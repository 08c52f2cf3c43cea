package kubelet

// The Node object: the kubelet registers it, then keeps its status fresh
// (kubelet_node_status.go): capacity and allocatable, nodeInfo, addresses,
// the images it holds (for the scheduler's ImageLocality) and the
// conditions, with a heartbeat every nodeStatusUpdateFrequency (10s).

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/podlab/podlab/steps/pki"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// Version is the kubeletVersion podlab's kubelet reports.
	Version = "v1.37.2-podlab"

	// DefaultHeartbeat is the kubelet's nodeStatusUpdateFrequency.
	DefaultHeartbeat = 10 * time.Second

	// MaxPods is the kubelet's default maxPods.
	MaxPods = 110

	// maxImages is how many images a node status lists (nodeStatusMaxImages).
	maxImages = 50

	// AnnotationCapacity marks a Node whose capacity the kubelet measured
	// ("measured"): a kubelet that created its Node keeps it up to date. A
	// Node without it (made by `podlab node add`) has a declared capacity,
	// which the kubelet keeps.
	AnnotationCapacity = "node.podlab.io/capacity"
)

// The kubelet's default hard eviction thresholds, which allocatable leaves
// out of capacity (no kube-reserved or system-reserved by default).
var (
	evictionMemory   = resource.MustParse("100Mi")
	evictionNodefsPc = int64(10) // nodefs.available<10%
)

// NodeResult is what registering or a heartbeat did.
type NodeResult struct {
	Node *corev1.Node
	// Created is true when this call created the Node.
	Created bool
	// Declared is true when the Node's capacity was declared by `podlab
	// node add`: the kubelet kept it and set only conditions, nodeInfo,
	// addresses and images.
	Declared bool
	// Heartbeat is true for the periodic status updates after registering.
	Heartbeat bool
	// RuntimeConfig is what the kubelet handed the runtime of the Node's
	// spec.podCIDR (UpdateRuntimeConfig); RuntimeConfigErr why the
	// runtime refused it.
	RuntimeConfig    *RuntimeConfig
	RuntimeConfigErr error
	Took             time.Duration
}

// Register creates the kubelet's Node, or, when it exists, brings its
// labels and status up to date (the kubelet's registerWithAPIServer).
func (k *Kubelet) Register(ctx context.Context) (*NodeResult, error) {
	start := time.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.node, Labels: k.nodeLabels(),
			Annotations: map[string]string{AnnotationCapacity: "measured"}},
	}
	node.Status = k.nodeStatus(ctx, node, false)
	obj, err := k.client.Create(ctx, node)
	if err == nil {
		res := &NodeResult{Node: obj.(*corev1.Node), Created: true}
		res.RuntimeConfig, res.RuntimeConfigErr = k.UpdateRuntimeConfig(ctx, res.Node)
		res.Took = time.Since(start)
		return res, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("registering node %s: %w", k.node, err)
	}
	res, err := k.updateNode(ctx, true)
	if err != nil {
		return nil, err
	}
	res.RuntimeConfig, res.RuntimeConfigErr = k.UpdateRuntimeConfig(ctx, res.Node)
	res.Took = time.Since(start)
	return res, nil
}

// Heartbeat posts the node's status: the Ready condition's
// lastHeartbeatTime, and what changed (images, capacity).
func (k *Kubelet) Heartbeat(ctx context.Context) (*NodeResult, error) {
	start := time.Now()
	res, err := k.updateNode(ctx, false)
	if err != nil {
		return nil, err
	}
	res.RuntimeConfig, res.RuntimeConfigErr = k.UpdateRuntimeConfig(ctx, res.Node)
	res.Heartbeat, res.Took = true, time.Since(start)
	return res, nil
}

func (k *Kubelet) updateNode(ctx context.Context, labels bool) (*NodeResult, error) {
	for try := 0; ; try++ {
		obj, err := k.client.Get(ctx, "nodes", "", k.node)
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", k.node, err)
		}
		node := obj.(*corev1.Node)
		declared := node.Annotations[AnnotationCapacity] != "measured"
		if labels {
			missing := false
			for key, v := range k.nodeLabels() {
				if _, ok := node.Labels[key]; !ok {
					if node.Labels == nil {
						node.Labels = map[string]string{}
					}
					node.Labels[key], missing = v, true
				}
			}
			if missing {
				obj, err := k.client.Update(ctx, node)
				if apierrors.IsConflict(err) && try < 5 {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("labelling node %s: %w", k.node, err)
				}
				node = obj.(*corev1.Node)
			}
		}
		node.Status = k.nodeStatus(ctx, node, declared)
		obj, err = k.client.UpdateStatus(ctx, node)
		if apierrors.IsConflict(err) && try < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("updating the status of node %s: %w", k.node, err)
		}
		return &NodeResult{Node: obj.(*corev1.Node), Declared: declared}, nil
	}
}

func (k *Kubelet) nodeLabels() map[string]string {
	return map[string]string{
		"kubernetes.io/hostname":  k.node,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
}

// nodeStatus is the status to post for node: capacity measured (or kept,
// when declared), nodeInfo, addresses, images and conditions. What is the
// runtime's comes from it over CRI, as the kubelet's nodestatus setters
// ask it: Version (containerRuntimeVersion), ListImages (images) and
// Status (a runtime that is down or not ready makes the node NotReady).
func (k *Kubelet) nodeStatus(ctx context.Context, node *corev1.Node, declared bool) corev1.NodeStatus {
	old := node.Status
	now := metav1.NewTime(k.now())
	s := old
	if !declared || len(old.Capacity) == 0 {
		s.Capacity = k.capacity()
		s.Allocatable = allocatable(s.Capacity)
	}
	s.NodeInfo = k.nodeInfo()
	if v, err := k.cri.rt.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		s.NodeInfo.ContainerRuntimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
		k.cri.name.remember(v.RuntimeName)
	} else {
		s.NodeInfo.ContainerRuntimeVersion = old.NodeInfo.ContainerRuntimeVersion
	}
	if k.cfg.Port > 0 {
		s.DaemonEndpoints.KubeletEndpoint.Port = k.cfg.Port
	}
	if !declared || len(old.Addresses) == 0 || k.cfg.Port > 0 {
		s.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: k.nodeIP},
			{Type: corev1.NodeHostName, Address: k.node},
		}
	}
	if l, err := k.cri.img.ListImages(ctx, &runtimeapi.ListImagesRequest{}); err == nil {
		s.Images = nodeImagesFrom(l.Images, maxImages)
	}
	cond := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	s.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		k.readyCondition(ctx, cond),
	}
	return s
}

// readyCondition is the node's Ready condition: True while the runtime
// answers Status with RuntimeReady, else False with the kubelet's
// KubeletNotReady and what is wrong, as its runtimeState says it ("container
// runtime is down", "container runtime not ready: RuntimeReady=false ...").
// NetworkReady does not count here: a node with no pod CIDR yet runs
// hostNetwork pods and pods with only lo (podlab's choice; a real kubelet
// would stay NotReady).
func (k *Kubelet) readyCondition(ctx context.Context, cond func(corev1.NodeConditionType, corev1.ConditionStatus, string, string) corev1.NodeCondition) corev1.NodeCondition {
	if msg := k.runtimeNotReady(ctx); msg != "" {
		return cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", msg)
	}
	return cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
}

// runtimeNotReady is what is wrong with the node's runtime, or "".
func (k *Kubelet) runtimeNotReady(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, runtimeStatusTimeout)
	defer cancel()
	st, err := k.cri.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Sprintf("container runtime is down: %v", err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.Type == runtimeapi.RuntimeReady && !c.Status {
			return fmt.Sprintf("container runtime not ready: RuntimeReady=false reason:%s message:%s", c.Reason, c.Message)
		}
	}
	return ""
}

// runtimeStatusTimeout bounds the runtime's answer to Status.
const runtimeStatusTimeout = 2 * time.Second

// capacity measures this machine: CPUs the process may use, MemTotal from
// /proc/meminfo, the state directory's file system, and maxPods.
func (k *Kubelet) capacity() corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(MaxPods, resource.DecimalSI),
	}
	if mem, err := memTotal(); err == nil {
		c[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	var fs unix.Statfs_t
	if unix.Statfs(k.layout.Dir, &fs) == nil {
		c[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI)
	}
	return c
}

// allocatable is capacity less the kubelet's default hard eviction
// thresholds: memory.available<100Mi, nodefs.available<10%.
func allocatable(c corev1.ResourceList) corev1.ResourceList {
	a := c.DeepCopy()
	if m, ok := a[corev1.ResourceMemory]; ok {
		m.Sub(evictionMemory)
		a[corev1.ResourceMemory] = m
	}
	if e, ok := a[corev1.ResourceEphemeralStorage]; ok {
		a[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(e.Value()-e.Value()*evictionNodefsPc/100, resource.BinarySI)
	}
	return a
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

// nodeInfo is computed once: the machine does not change while the kubelet runs.
func (k *Kubelet) nodeInfo() corev1.NodeSystemInfo {
	k.infoOnce.Do(func() {
		info := corev1.NodeSystemInfo{
			KubeletVersion:  Version,
			OperatingSystem: runtime.GOOS,
			Architecture:    runtime.GOARCH,
			MachineID:       readTrim("/etc/machine-id"),
			BootID:          readTrim("/proc/sys/kernel/random/boot_id"),
			SystemUUID:      readTrim("/sys/class/dmi/id/product_uuid"),
			OSImage:         osImage(),
		}
		var u unix.Utsname
		if unix.Uname(&u) == nil {
			info.KernelVersion = unix.ByteSliceToString(u.Release[:])
		}
		k.info = info
	})
	return k.info
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// osImage is PRETTY_NAME from /etc/os-release.
func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return runtime.GOOS
}

// nodeIP is the InternalIP the kubelet reports: the address its API
// listens on when it serves one on a specific address, else hostIP.
func nodeIP(address string, port int32) string {
	if ip := net.ParseIP(address); port > 0 && ip != nil && !ip.IsUnspecified() {
		return ip.String()
	}
	return hostIP()
}

// hostIP is the machine's first IPv4 address that is up and not loopback
// (the one its serving certificate names, pki.MachineIP), else 127.0.0.1.
func hostIP() string {
	if ip := pki.MachineIP(); ip != "" {
		return ip
	}
	return "127.0.0.1"
}
