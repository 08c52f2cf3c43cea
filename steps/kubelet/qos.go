package kubelet

// Quality of Service: what a pod's QoS class (status.qosClass, set by the API
// server on create) makes the kubelet do with cgroups and the OOM killer.
//
//	class       pod cgroup                       cpu.shares            limits on the pod cgroup       oom_score_adj
//	Guaranteed  kubepods/pod<uid>                from requests.cpu     memory, cpu quota              -997
//	Burstable   kubepods/burstable/pod<uid>      from requests.cpu     memory / cpu quota, when every 3..999 from requests.memory
//	                                                                   container has that limit
//	BestEffort  kubepods/besteffort/pod<uid>     2                     none                           1000
//
// The tiers are cgroups of their own: kubepods/besteffort has cpu.shares 2
// (BestEffort pods share what nobody else uses), kubepods/burstable the sum
// of the Burstable pods' cpu requests. Everything here is computed from
// values, as Kubernetes v1.37 computes it (pkg/kubelet/cm/helpers_linux.go
// ResourceConfigForPod and MilliCPUToShares, qos_container_manager_linux.go,
// pkg/kubelet/qos/policy.go GetContainerOOMScoreAdjust); podcgroup.go
// writes it into the cgroup files.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podlab/podlab/internal/qos"
	"github.com/podlab/podlab/steps/statedir"
)

// CPU shares and CFS quota as the kubelet converts them
// (pkg/kubelet/cm/helpers_linux.go).
const (
	minShares      = 2      // the kernel's minimum cpu.shares
	maxShares      = 262144 // and its maximum
	sharesPerCPU   = 1024
	quotaPeriod    = 100000 // µs: the CFS period, 100ms
	minQuotaPeriod = 1000   // µs: the kernel's minimum quota
)

// The kubelet's OOM score adjustments (pkg/kubelet/qos/policy.go).
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// ErrQOSClass means a pod without a known status.qosClass: the API server
// sets it when it stores the pod, so a pod without one did not come through
// it (or was written by a podlab older than that).
var ErrQOSClass = errors.New("the pod has no known QoS class")

// PodCgroupConfig is what the kubelet writes into a pod's cgroup (the
// kubelet's ResourceConfig). A zero limit is no limit.
type PodCgroupConfig struct {
	QOS corev1.PodQOSClass
	// Tier is the QoS tier cgroup under kubepods (statedir.TierBurstable,
	// statedir.TierBestEffort, or statedir.TierNone for Guaranteed).
	Tier string
	// CPUShares is cpu.shares on cgroup v1; on v2 cpu.weight is
	// CPUWeight(CPUShares).
	CPUShares uint64
	// CPUQuota µs of CPU time per CPUPeriod µs (cpu.cfs_quota_us and
	// cpu.cfs_period_us, v2 cpu.max); 0 is no quota.
	CPUQuota  int64
	CPUPeriod uint64
	// Memory is the memory limit in bytes (memory.limit_in_bytes, v2
	// memory.max); 0 is no limit.
	Memory int64
	// PidsLimit is pids.max; 0 is no limit (the kubelet's --pod-max-pids -1).
	PidsLimit int64
}

// podQOS is the pod's QoS class and its tier. The kubelet reads the class
// from status.qosClass (v1qos.GetPodQOS), which is immutable after create,
// and computes it for a pod stored before the API server set it.
func podQOS(pod *corev1.Pod) (corev1.PodQOSClass, string, error) {
	switch q := qos.Of(pod); q {
	case corev1.PodQOSGuaranteed:
		return q, statedir.TierNone, nil
	case corev1.PodQOSBurstable:
		return q, statedir.TierBurstable, nil
	case corev1.PodQOSBestEffort:
		return q, statedir.TierBestEffort, nil
	default:
		return "", "", fmt.Errorf("%w: pod %s has status.qosClass %q; want Guaranteed, Burstable or BestEffort", ErrQOSClass, podKey(pod), q)
	}
}

// MilliCPUToShares is cpu.shares for a cpu request in millicores: 1024 per
// CPU, at least 2 (also for no request: the kernel's default of 1024 would
// give a pod without requests as much as one that asked for a CPU), at most
// 262144.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return minShares
	}
	shares := milliCPU * sharesPerCPU / 1000
	return uint64(min(max(shares, minShares), maxShares))
}

// milliCPUToQuota is the CFS quota of a cpu limit in millicores, per period
// µs: at least 1ms; 0 for no limit.
func milliCPUToQuota(milliCPU int64, period int64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	return max(milliCPU*period/1000, minQuotaPeriod)
}

// CPUWeight is the cgroup v2 cpu.weight ([1, 10000]) the kubelet writes
// for cpu.shares ([2, 262144]) on its pod and QoS cgroups: the linear map of
// getCPUWeight in pkg/kubelet/cm/cgroup_manager_linux.go. (runc converts a
// container's shares with a different, quadratic formula, opencontainers/cgroups
// ConvertCPUSharesToCgroupV2Value, so that 1024 shares are weight 100.)
func CPUWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	if shares >= maxShares {
		return 10000
	}
	shares = max(shares, minShares)
	return 1 + ((shares-2)*9999)/262142
}

// podCgroupConfig is the pod cgroup's settings (the kubelet's
// ResourceConfigForPod with CFS quota enforced, the default): requests and
// limits summed over the containers by Kubernetes' own helper (init
// containers and overhead included), shares from the cpu requests, and
// each limit only when every container declares it. podPidsLimit > 0 is the
// kubelet's --pod-max-pids.
func podCgroupConfig(pod *corev1.Pod, podPidsLimit int64) (PodCgroupConfig, error) {
	qos, tier, err := podQOS(pod)
	if err != nil {
		return PodCgroupConfig{}, err
	}
	cfg := PodCgroupConfig{QOS: qos, Tier: tier}
	if podPidsLimit > 0 {
		cfg.PidsLimit = podPidsLimit
	}
	if qos == corev1.PodQOSBestEffort {
		cfg.CPUShares = minShares
		return cfg, nil
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuLimits, memLimits := true, true
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Resources.Limits.Cpu().IsZero() {
				cpuLimits = false
			}
			if c.Resources.Limits.Memory().IsZero() {
				memLimits = false
			}
		}
	}
	cfg.CPUShares = MilliCPUToShares(reqs.Cpu().MilliValue())
	if qos == corev1.PodQOSGuaranteed || cpuLimits {
		if q := milliCPUToQuota(limits.Cpu().MilliValue(), quotaPeriod); q > 0 {
			cfg.CPUQuota, cfg.CPUPeriod = q, quotaPeriod
		}
	}
	if qos == corev1.PodQOSGuaranteed || memLimits {
		cfg.Memory = limits.Memory().Value()
	}
	return cfg, nil
}

// burstableTierShares is the cpu.shares of kubepods/burstable: the sum of
// the cpu requests of the Burstable pods among pods (the kubelet's
// setCPUCgroupConfig). Pods that ended (Succeeded, Failed) count no more.
func burstableTierShares(pods []*corev1.Pod) uint64 {
	var milli int64
	for _, p := range pods {
		if p.Status.QOSClass != corev1.PodQOSBurstable || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		milli += reqs.Cpu().MilliValue()
	}
	return MilliCPUToShares(milli)
}

// containerOOMScoreAdj is the oom_score_adj the kubelet asks for a container
// (GetContainerOOMScoreAdjust): Guaranteed -997, the last the OOM killer
// picks; BestEffort 1000, the first; Burstable 1000 less the share of the
// node's memory the container requests, per mille, kept in [3, 999] (3:
// a Guaranteed container using all the memory scores 1000-997). A
// node-critical pod counts as Guaranteed. memoryCapacity is the node's
// memory in bytes (the Node's status.capacity).
func containerOOMScoreAdj(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) (int, error) {
	if memoryCapacity <= 0 {
		return 0, fmt.Errorf("computing the oom_score_adj of container %s: the node's memory capacity is %d bytes; the kubelet measures it from /proc/meminfo when it registers the Node", c.Name, memoryCapacity)
	}
	qos, _, err := podQOS(pod)
	if err != nil {
		return 0, err
	}
	if isNodeCritical(pod) {
		return guaranteedOOMScoreAdj, nil
	}
	switch qos {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj, nil
	case corev1.PodQOSBestEffort:
		return besteffortOOMScoreAdj, nil
	}
	adj := 1000 - 1000*c.Resources.Requests.Memory().Value()/memoryCapacity
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj, nil
	}
	if adj == besteffortOOMScoreAdj {
		return besteffortOOMScoreAdj - 1, nil
	}
	return int(adj), nil
}

// isNodeCritical is the kubelet's IsNodeCriticalPod: priority class
// system-node-critical with a critical priority (the API server's priority
// admission gives it 2000001000).
func isNodeCritical(pod *corev1.Pod) bool {
	return pod.Spec.PriorityClassName == "system-node-critical" && pod.Spec.Priority != nil && *pod.Spec.Priority >= 2000000000
}

// OOMScoreAdj is a container's oom_score_adj: what the kubelet asked for
// and what config.json says.
type OOMScoreAdj struct {
	// Wanted is the kubelet's value (GetContainerOOMScoreAdjust).
	Wanted int
	// Set is what config.json's process.oomScoreAdj says: Wanted, unless
	// the kernel would refuse it (Restricted).
	Set int
	// Restricted means Wanted is below the kubelet process's own
	// oom_score_adj, Floor: lowering it needs CAP_SYS_RESOURCE, which
	// podlab's root may lack (in a container, a user namespace), and runc
	// would fail to start the container. Set is then Floor, as containerd
	// does with restrict_oom_score_adj.
	Restricted bool
	Floor      int
}

// String says it in a line: "-997", or "999 (asked -997: below the
// kubelet's own 999, which needs CAP_SYS_RESOURCE)".
func (o OOMScoreAdj) String() string {
	if !o.Restricted {
		return strconv.Itoa(o.Set)
	}
	return fmt.Sprintf("%d (the kubelet asks %d; lowering it below the kubelet's own %d needs CAP_SYS_RESOURCE, so the kernel would refuse it)", o.Set, o.Wanted, o.Floor)
}

// restrictOOMScoreAdj is containerd's restrictOOMScoreAdj: never below the
// floor, the runtime's own oom_score_adj.
func restrictOOMScoreAdj(wanted, floor int) OOMScoreAdj {
	o := OOMScoreAdj{Wanted: wanted, Set: wanted, Floor: floor}
	if wanted < floor {
		o.Set, o.Restricted = floor, true
	}
	return o
}

// oomScoreAdjFloor is the lowest oom_score_adj the kernel lets this
// process give its children: anything (-1000) with CAP_SYS_RESOURCE, else
// its own oom_score_adj, which the shim and runc inherit.
func oomScoreAdjFloor() (int, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the kubelet's capabilities: %w", err)
	}
	if hasCapSysResource(string(status)) {
		return -1000, nil
	}
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, fmt.Errorf("reading the kubelet's own oom_score_adj: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("reading the kubelet's own oom_score_adj: %w", err)
	}
	return n, nil
}

// capSysResource is CAP_SYS_RESOURCE's bit (linux/capability.h).
const capSysResource = 24

// hasCapSysResource reads CapEff from the text of /proc/self/status.
func hasCapSysResource(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capSysResource) != 0
		}
	}
	return false
}

// oomScoreAdj is container c's oom_score_adj: the kubelet's value for the
// pod's QoS class and the node's memory capacity, restricted to what the
// kernel lets this process set.
func (k *Kubelet) oomScoreAdj(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (OOMScoreAdj, error) {
	capacity, err := k.nodeMemoryCapacity(ctx)
	if err != nil {
		return OOMScoreAdj{}, err
	}
	wanted, err := containerOOMScoreAdj(pod, c, capacity)
	if err != nil {
		return OOMScoreAdj{}, err
	}
	floor, err := oomScoreAdjFloor()
	if err != nil {
		return OOMScoreAdj{}, err
	}
	return restrictOOMScoreAdj(wanted, floor), nil
}

// nodeMemoryCapacity is the memory capacity of the Node the kubelet
// registered; before it registered, what it would register (MemTotal).
func (k *Kubelet) nodeMemoryCapacity(ctx context.Context) (int64, error) {
	obj, err := k.client.Get(ctx, "nodes", "", k.node)
	switch {
	case err == nil:
		if q, ok := obj.(*corev1.Node).Status.Capacity[corev1.ResourceMemory]; ok {
			return q.Value(), nil
		}
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("reading the memory capacity of node %s: %w", k.node, err)
	}
	q := k.capacity()[corev1.ResourceMemory]
	return q.Value(), nil
}
