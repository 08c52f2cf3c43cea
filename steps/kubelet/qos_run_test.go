package kubelet_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/runc"
)

// TestQOS_PodCgroups runs a Burstable, a BestEffort and a Guaranteed pod
// with real runc and reads back from the kernel what the kubelet set up:
// each pod cgroup in its QoS tier with the kubelet's settings, the container
// process inside it, its oom_score_adj (and the refusal of -997 reported),
// and every pod cgroup gone once the pods are removed, the tiers kept.
func TestQOS_PodCgroups(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	mounts, err := runc.HostCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	memTotal := meminfoTotal(t)
	kubepods := c.kubelet.Layout().KubepodsCgroup()

	withResources := func(p *corev1.Pod, i int, requests, limits corev1.ResourceList) *corev1.Pod {
		p.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
		return p
	}
	burstable := withResources(helloPod(t, "burst"), 0,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")})
	besteffort := helloPod(t, "best")
	guaranteed := helloPod(t, "guar", "--listen", ":8081")
	side := guaranteed.Spec.Containers[0]
	side.Name, side.Args = "side", []string{"--listen", ":8082"}
	guaranteed.Spec.Containers = append(guaranteed.Spec.Containers, side)
	guaranteed = withResources(guaranteed, 0, nil,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("32Mi")})
	guaranteed = withResources(guaranteed, 1, nil,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("48Mi")})

	type want struct {
		tier   string // "" for Guaranteed
		shares uint64
		memory int64 // 0: no limit
		quota  int64 // 0: no quota
		oom    int   // the kubelet's value, before any restriction
	}
	tests := []struct {
		pod  *corev1.Pod
		want want
	}{
		{burstable, want{"burstable/", 256, 64 << 20, 50000, int(1000 - 1000*(32<<20)/memTotal)}},
		{besteffort, want{"besteffort/", 2, 0, 0, 1000}},
		{guaranteed, want{"", 512, 80 << 20, 50000, -997}},
	}
	var uids []string
	var podCgroups []string
	for _, tt := range tests {
		pod := c.create(t, tt.pod)
		uids = append(uids, string(pod.UID))
		c.syncUntil(t, pod.Name, 15*time.Second, "Running", running)
		podCgroup := kubepods + "/" + tt.want.tier + "pod" + string(pod.UID)
		podCgroups = append(podCgroups, podCgroup)

		// The pod cgroup's settings, from the kernel's files.
		if got := readCgroupUint(t, mounts, podCgroup, "cpu", "cpu.shares", "cpu.weight"); got != sharesOrWeight(mounts, tt.want.shares) {
			t.Errorf("%s: cpu shares/weight of %s: %d, want %d (shares %d)", pod.Name, podCgroup, got, sharesOrWeight(mounts, tt.want.shares), tt.want.shares)
		}
		cg := runc.ReadCgroup(mounts, runc.UniformProcCgroup(mounts, podCgroup))
		if len(cg.Dirs) == 0 {
			t.Errorf("%s: no pod cgroup %s in any hierarchy", pod.Name, podCgroup)
		}
		if tt.want.memory == 0 && !cg.Memory.Unlimited || tt.want.memory != 0 && cg.Memory.Value != tt.want.memory {
			t.Errorf("%s: pod memory limit %s, want %d (0: none)", pod.Name, cg.Memory, tt.want.memory)
		}
		if tt.want.quota == 0 && !cg.CPUQuota.Unlimited || tt.want.quota != 0 && cg.CPUQuota.Value != tt.want.quota {
			t.Errorf("%s: pod cpu quota %s, want %d (0: none)", pod.Name, cg.CPUQuota, tt.want.quota)
		}

		// Each container's process is inside the pod cgroup, with the
		// oom_score_adj the kernel allowed.
		for _, ctr := range pod.Spec.Containers {
			in := c.inspectContainer(t, c.get(t, pod.Name), ctr.Name)
			id, pid := in.Status.Id, in.Info.Pid
			f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
			if err != nil {
				t.Fatal(err)
			}
			pc, err := runc.ParseProcCgroup(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			for ctl, p := range pc {
				if (ctl == "" || ctl == "memory" || ctl == "cpu" || ctl == "pids") && p != podCgroup+"/"+id {
					t.Errorf("%s/%s: pid %d is in cgroup %s (%q), want %s/%s", pod.Name, ctr.Name, pid, p, ctl, podCgroup, id)
				}
			}
			got := readInt(t, "/proc/"+strconv.Itoa(pid)+"/oom_score_adj")
			floor := readInt(t, "/proc/self/oom_score_adj")
			if wantSet := max(tt.want.oom, floor); got != wantSet && !(capSysResource(t) && got == tt.want.oom) {
				t.Errorf("%s/%s: oom_score_adj %d, want %d (the kubelet's %d, not below our own %d)", pod.Name, ctr.Name, got, wantSet, tt.want.oom, floor)
			}
		}
	}

	// The tiers' own settings: besteffort 2, burstable the sum of the
	// Burstable pods' cpu requests (250m).
	if got := readCgroupUint(t, mounts, kubepods+"/besteffort", "cpu", "cpu.shares", "cpu.weight"); got != sharesOrWeight(mounts, 2) {
		t.Errorf("besteffort tier: %d", got)
	}
	if got := readCgroupUint(t, mounts, kubepods+"/burstable", "cpu", "cpu.shares", "cpu.weight"); got != sharesOrWeight(mounts, 256) {
		t.Errorf("burstable tier: %d", got)
	}

	// The refused -997 is said, not hidden: the create stage's result names it.
	if !capSysResource(t) && readInt(t, "/proc/self/oom_score_adj") > -997 {
		var said bool
		for _, r := range c.stageReports() {
			if cr, ok := r.Result.(*kubelet.CreateResult); ok && r.Pod.Name == "guar" {
				o := cr.OOMScoreAdj
				said = o.Restricted && o.Wanted == -997 && strings.Contains(o.String(), "CAP_SYS_RESOURCE")
				if !said {
					t.Errorf("guar's create stage says oom_score_adj %+v (%s)", o, o)
				}
			}
		}
		if !said {
			t.Error("no create stage of guar reported")
		}
	}

	// Removed with the pods: every pod cgroup, in every hierarchy.
	for _, tt := range tests {
		if _, err := c.admin.Delete(ctx, "pods", "default", tt.pod.Name, apiserver.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.kubelet.SyncPod(ctx, c.get(t, tt.pod.Name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, uid := range uids {
		var left []string
		for _, m := range mounts {
			filepath.Walk(m.Dir(c.kubelet.Layout().CgroupRoot), func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.IsDir() && strings.HasSuffix(p, "pod"+uid) {
					left = append(left, p)
				}
				return nil
			})
		}
		if len(left) > 0 {
			t.Errorf("pod cgroups left after the pod was removed: %v", left)
		}
	}
	if cg := runc.ReadCgroup(mounts, runc.UniformProcCgroup(mounts, kubepods+"/besteffort")); len(cg.Dirs) == 0 {
		t.Error("the besteffort tier went with its last pod; the kubelet keeps it")
	}
	if got := readCgroupUint(t, mounts, kubepods+"/burstable", "cpu", "cpu.shares", "cpu.weight"); got != sharesOrWeight(mounts, 2) {
		t.Errorf("burstable tier after its only pod went: %d, want shares 2", got)
	}
}

// readCgroupUint reads the first of files that the hierarchy holding
// controller has for path.
func readCgroupUint(t *testing.T, mounts []runc.CgroupMount, path, controller string, files ...string) uint64 {
	t.Helper()
	for _, m := range mounts {
		if m.Version == 1 && !contains(m.Controllers, controller) {
			continue
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(m.Dir(path), f))
			if err != nil {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			return n
		}
	}
	t.Errorf("no %v for cgroup %s", files, path)
	return 0
}

// sharesOrWeight is what the machine shows for cpu shares: cpu.shares on
// v1, the kubelet's cpu.weight on v2.
func sharesOrWeight(mounts []runc.CgroupMount, shares uint64) uint64 {
	if runc.AvailableControllers(mounts)["cpu"] == runc.CgroupV2 {
		return kubelet.CPUWeight(shares)
	}
	return shares
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func readInt(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}

func meminfoTotal(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// capSysResource tells whether this process may lower oom_score_adj.
func capSysResource(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return caps&(1<<24) != 0
		}
	}
	return false
}
