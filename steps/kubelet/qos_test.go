package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// res is a container's resources: "cpu=250m,memory=32Mi" for requests and
// limits ("" for none).
func res(requests, limits string) corev1.ResourceRequirements {
	parse := func(s string) corev1.ResourceList {
		if s == "" {
			return nil
		}
		l := corev1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: parse(requests), Limits: parse(limits)}
}

func qosPod(qos corev1.PodQOSClass, rs ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}}
	for i, r := range rs {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	p.Status.QOSClass = qos
	return p
}

const gi = int64(1) << 30

// TestQOS is the kubelet's QoS arithmetic, pod by pod: the cgroup's tier and
// settings (ResourceConfigForPod), the first container's oom_score_adj
// (GetContainerOOMScoreAdjust) on a node with 1Gi of memory.
func TestQOS(t *testing.T) {
	critical := qosPod(corev1.PodQOSBurstable, res("cpu=100m,memory=100Mi", ""))
	prio := int32(2000001000)
	critical.Spec.PriorityClassName, critical.Spec.Priority = "system-node-critical", &prio
	tests := []struct {
		name string
		pod  *corev1.Pod
		pids int64
		want PodCgroupConfig
		path string
		oom  int
	}{
		{"guaranteed: two containers, limits summed",
			qosPod(corev1.PodQOSGuaranteed, res("cpu=200m,memory=32Mi", "cpu=200m,memory=32Mi"), res("cpu=300m,memory=48Mi", "cpu=300m,memory=48Mi")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSGuaranteed, Tier: statedir.TierNone, CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, Memory: 80 << 20},
			"/kubepods/podu1", -997},
		{"burstable with every limit",
			qosPod(corev1.PodQOSBurstable, res("cpu=250m,memory=32Mi", "cpu=500m,memory=64Mi")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSBurstable, Tier: statedir.TierBurstable, CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, Memory: 64 << 20},
			"/kubepods/burstable/podu1", 1000 - 1000*32/1024},
		{"burstable: one container without a memory limit, so no pod memory limit",
			qosPod(corev1.PodQOSBurstable, res("cpu=100m", "cpu=100m,memory=64Mi"), res("cpu=100m", "cpu=200m")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSBurstable, Tier: statedir.TierBurstable, CPUShares: 204, CPUQuota: 30000, CPUPeriod: 100000},
			"/kubepods/burstable/podu1", 999},
		{"burstable with requests only: shares, no limits; oom 1000 becomes 999",
			qosPod(corev1.PodQOSBurstable, res("cpu=100m", "")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSBurstable, Tier: statedir.TierBurstable, CPUShares: 102},
			"/kubepods/burstable/podu1", 999},
		{"burstable asking for all the memory: oom clamped to 3",
			qosPod(corev1.PodQOSBurstable, res("memory=1Gi", "")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSBurstable, Tier: statedir.TierBurstable, CPUShares: 2},
			"/kubepods/burstable/podu1", 3},
		{"burstable with a tiny cpu limit: quota at least 1ms",
			qosPod(corev1.PodQOSBurstable, res("cpu=1m", "cpu=1m,memory=8Mi")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSBurstable, Tier: statedir.TierBurstable, CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000, Memory: 8 << 20},
			"/kubepods/burstable/podu1", 999},
		{"besteffort: shares 2, nothing else",
			qosPod(corev1.PodQOSBestEffort, res("", "")), 0,
			PodCgroupConfig{QOS: corev1.PodQOSBestEffort, Tier: statedir.TierBestEffort, CPUShares: 2},
			"/kubepods/besteffort/podu1", 1000},
		{"besteffort with --pod-max-pids",
			qosPod(corev1.PodQOSBestEffort, res("", "")), 1024,
			PodCgroupConfig{QOS: corev1.PodQOSBestEffort, Tier: statedir.TierBestEffort, CPUShares: 2, PidsLimit: 1024},
			"/kubepods/besteffort/podu1", 1000},
		{"node-critical burstable pod: oom as guaranteed",
			critical, 0,
			PodCgroupConfig{QOS: corev1.PodQOSBurstable, Tier: statedir.TierBurstable, CPUShares: 102},
			"/kubepods/burstable/podu1", -997},
	}
	l := Layout{Node: statedir.Layout{Dir: "/s"}.Node("node-1")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podCgroupConfig(tt.pod, tt.pids)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("config\n got %+v\nwant %+v", got, tt.want)
			}
			p, err := l.PodCgroupPath(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if want := l.CgroupRoot + tt.path; p != want {
				t.Errorf("pod cgroup %s, want %s", p, want)
			}
			oom, err := containerOOMScoreAdj(tt.pod, &tt.pod.Spec.Containers[0], gi)
			if err != nil {
				t.Fatal(err)
			}
			if oom != tt.oom {
				t.Errorf("oom_score_adj %d, want %d", oom, tt.oom)
			}
		})
	}
}

// TestQOS_ComputedWhenNotStored: a pod stored before the API server set
// status.qosClass gets its class computed from its resources, as the
// kubelet's GetPodQOS does, instead of being refused.
func TestQOS_ComputedWhenNotStored(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"nothing requested", qosPod("", res("", "")), corev1.PodQOSBestEffort},
		{"a memory request", qosPod("", res("memory=32Mi", "")), corev1.PodQOSBurstable},
		{"requests equal limits", qosPod("", res("cpu=1,memory=32Mi", "cpu=1,memory=32Mi")), corev1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := podQOS(tt.pod)
			if err != nil || got != tt.want {
				t.Errorf("podQOS = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestQOS_BadInput(t *testing.T) {
	good := qosPod(corev1.PodQOSBurstable, res("memory=32Mi", ""))
	tests := []struct {
		name     string
		pod      *corev1.Pod
		capacity int64
		want     error // nil: any error
		cgroup   bool  // podCgroupConfig fails too
	}{
		{"unknown qosClass", qosPod("Platinum", res("", "")), gi, ErrQOSClass, true},
		{"node memory capacity 0", good, 0, nil, false},
		{"node memory capacity negative", good, -1, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := containerOOMScoreAdj(tt.pod, &tt.pod.Spec.Containers[0], tt.capacity)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("oom_score_adj: error %v, want %v", err, tt.want)
			}
			_, err = podCgroupConfig(tt.pod, 0)
			if tt.cgroup != (err != nil) {
				t.Errorf("cgroup config: error %v, want one: %v", err, tt.cgroup)
			}
			if tt.cgroup {
				if _, err := (Layout{}).PodCgroupPath(tt.pod); !errors.Is(err, ErrQOSClass) {
					t.Errorf("cgroup path: error %v", err)
				}
			}
		})
	}
}

// TestMilliCPUToShares and TestCPUWeight hold golden values of the kubelet's
// MilliCPUToShares and getCPUWeight (pkg/kubelet/cm, v1.37).
func TestMilliCPUToShares(t *testing.T) {
	for milli, want := range map[int64]uint64{0: 2, 1: 2, 2: 2, 100: 102, 250: 256, 1000: 1024, 4000: 4096, 300000: 262144} {
		if got := MilliCPUToShares(milli); got != want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", milli, got, want)
		}
	}
}

func TestCPUWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{0: 0, 2: 1, 102: 4, 256: 10, 1024: 39, 4096: 157, 262144: 10000, 1 << 20: 10000} {
		if got := CPUWeight(shares); got != want {
			t.Errorf("CPUWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestBurstableTierShares(t *testing.T) {
	done := qosPod(corev1.PodQOSBurstable, res("cpu=1", ""))
	done.Status.Phase = corev1.PodSucceeded
	pods := []*corev1.Pod{
		qosPod(corev1.PodQOSBurstable, res("cpu=100m", "")),
		qosPod(corev1.PodQOSBurstable, res("cpu=150m", ""), res("memory=1Mi", "")),
		qosPod(corev1.PodQOSGuaranteed, res("cpu=1,memory=1Mi", "cpu=1,memory=1Mi")),
		qosPod(corev1.PodQOSBestEffort, res("", "")),
		done,
	}
	if got := burstableTierShares(pods); got != 256 {
		t.Errorf("burstable tier shares %d, want 256 (250m)", got)
	}
	if got := burstableTierShares(nil); got != 2 {
		t.Errorf("no burstable pods: shares %d, want 2", got)
	}
}

func TestRestrictOOMScoreAdj(t *testing.T) {
	tests := []struct {
		wanted, floor, set int
		restricted         bool
	}{
		{-997, 0, 0, true},
		{-997, -1000, -997, false},
		{-997, -997, -997, false},
		{999, 0, 999, false},
		{3, 500, 500, true},
	}
	for _, tt := range tests {
		got := restrictOOMScoreAdj(tt.wanted, tt.floor)
		if got.Set != tt.set || got.Restricted != tt.restricted || got.Wanted != tt.wanted {
			t.Errorf("restrict(%d, floor %d) = %+v, want set %d restricted %v", tt.wanted, tt.floor, got, tt.set, tt.restricted)
		}
		if tt.restricted && !strings.Contains(got.String(), "CAP_SYS_RESOURCE") {
			t.Errorf("%+v says %q", got, got.String())
		}
	}
}

func TestHasCapSysResource(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tx\nCapEff:\t000001fffeffffff\n": false, // root on these machines
		"Name:\tx\nCapEff:\t000001ffffffffff\n": true,
		"CapEff:\t0000000001000000\n":           true,
		"CapEff:\tzz\n":                         false,
		"":                                      false,
	} {
		if got := hasCapSysResource(status); got != want {
			t.Errorf("hasCapSysResource(%q) = %v", status, got)
		}
	}
}

// TestApplyCgroup writes a pod cgroup into fake trees of the three layouts,
// to see each setting land in the hierarchy that has its controller.
func TestApplyCgroup(t *testing.T) {
	s := cgroupSettings{cpuShares: 256, cpuQuota: 50000, cpuPeriod: 100000, memory: 64 << 20, pids: 100}
	const path = "/podlab-x/nodes/n/kubepods/burstable/podu1"
	v1 := func(root string) []runc.CgroupMount {
		return []runc.CgroupMount{
			{Mountpoint: filepath.Join(root, "cpu,cpuacct"), Root: "/", Version: 1, Controllers: []string{"cpu", "cpuacct"}},
			{Mountpoint: filepath.Join(root, "memory"), Root: "/", Version: 1, Controllers: []string{"memory"}},
			{Mountpoint: filepath.Join(root, "pids"), Root: "/", Version: 1, Controllers: []string{"pids"}},
			{Mountpoint: filepath.Join(root, "freezer"), Root: "/", Version: 1, Controllers: []string{"freezer"}},
		}
	}
	// v2root makes a unified tree whose cgroups (down to the pod's parent)
	// have controllers, as the kernel would show them.
	v2root := func(t *testing.T, dir, controllers string) runc.CgroupMount {
		d := dir
		for _, part := range append([]string{""}, strings.Split(strings.TrimPrefix(filepath.Dir(path), "/"), "/")...) {
			d = filepath.Join(d, part)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(d, "cgroup.controllers"), []byte(controllers+"\n"), 0o644)
			os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), nil, 0o644)
		}
		return runc.CgroupMount{Mountpoint: dir, Root: "/", Version: 2}
	}
	read := func(t *testing.T, f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%v", err)
		}
		return strings.TrimSpace(string(b))
	}
	t.Run("v1", func(t *testing.T) {
		root := t.TempDir()
		a, err := applyCgroup(v1(root), path, s)
		if err != nil {
			t.Fatal(err)
		}
		for f, want := range map[string]string{
			"cpu,cpuacct" + path + "/cpu.shares":        "256",
			"cpu,cpuacct" + path + "/cpu.cfs_quota_us":  "50000",
			"cpu,cpuacct" + path + "/cpu.cfs_period_us": "100000",
			"memory" + path + "/memory.limit_in_bytes":  "67108864",
			"pids" + path + "/pids.max":                 "100",
		} {
			if got := read(t, filepath.Join(root, f)); got != want {
				t.Errorf("%s = %q, want %q", f, got, want)
			}
		}
		if _, err := os.Stat(filepath.Join(root, "freezer", path)); err == nil {
			t.Error("made the pod cgroup in the freezer hierarchy: runc makes what it needs there")
		}
		if len(a.Dirs) != 3 || len(a.Writes) != 5 || len(a.Unset) != 0 {
			t.Errorf("applied %+v", a)
		}
	})
	t.Run("v2", func(t *testing.T) {
		root := t.TempDir()
		m := v2root(t, root, "cpuset cpu io memory pids")
		if _, err := applyCgroup([]runc.CgroupMount{m}, path, s); err != nil {
			t.Fatal(err)
		}
		for f, want := range map[string]string{
			path + "/cpu.weight":                                "10",
			path + "/cpu.max":                                   "50000 100000",
			path + "/memory.max":                                "67108864",
			path + "/pids.max":                                  "100",
			"/cgroup.subtree_control":                           "+cpu +memory +pids",
			filepath.Dir(path) + "/cgroup.subtree_control":      "+cpu +memory +pids",
			"/podlab-x/nodes/n/kubepods/cgroup.subtree_control": "+cpu +memory +pids",
		} {
			if got := read(t, filepath.Join(root, f)); got != want {
				t.Errorf("%s = %q, want %q", f, got, want)
			}
		}
	})
	t.Run("hybrid", func(t *testing.T) {
		root := t.TempDir()
		mounts := append(v1(root), v2root(t, filepath.Join(root, "unified"), "hugetlb"))
		a, err := applyCgroup(mounts, path, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, filepath.Join(root, "cpu,cpuacct", path, "cpu.shares")); got != "256" {
			t.Errorf("cpu.shares %q", got)
		}
		if fi, err := os.Stat(filepath.Join(root, "unified", path)); err != nil || !fi.IsDir() {
			t.Errorf("no pod cgroup in the v2 tree: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "unified", path, "cpu.weight")); err == nil {
			t.Error("wrote cpu.weight into the v2 tree of a hybrid machine, whose cpu controller is v1's")
		}
		if got := read(t, filepath.Join(root, "unified", "cgroup.subtree_control")); got != "" {
			t.Errorf("enabled %q in the v2 tree", got)
		}
		if len(a.Dirs) != 4 {
			t.Errorf("dirs %v", a.Dirs)
		}
	})
	t.Run("no controller", func(t *testing.T) {
		root := t.TempDir()
		m := v2root(t, root, "io")
		a, err := applyCgroup([]runc.CgroupMount{m}, path, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Writes) != 0 || !slices.ContainsFunc(a.Unset, func(u string) bool { return strings.Contains(u, "no memory controller") }) {
			t.Errorf("applied %+v", a)
		}
	})
}
