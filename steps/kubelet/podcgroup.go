package kubelet

// The pod and QoS cgroups, written as the kubelet's cgroupfs driver writes
// them (pkg/kubelet/cm: pod_container_manager_linux.go EnsureExists,
// qos_container_manager_linux.go UpdateCgroups): the kubelet makes a pod's
// cgroup, with its settings, before the pod's first container; the runtime
// puts each container under it (linux.cgroupsPath); the kubelet removes it
// when the pod goes. The tiers kubepods/burstable and kubepods/besteffort
// stay, as the kubelet keeps them.
//
// Cgroup v1 has one hierarchy per controller: cpu.shares goes into
// /sys/fs/cgroup/cpu,cpuacct/<path>, memory.limit_in_bytes into
// /sys/fs/cgroup/memory/<path>, pids.max into /sys/fs/cgroup/pids/<path>.
// Cgroup v2 has one tree, /sys/fs/cgroup/<path>, where a controller's files
// (cpu.weight, cpu.max, memory.max, pids.max) exist only once every parent
// enables it in cgroup.subtree_control. A hybrid machine has both: each
// controller is in the v1 hierarchy that has it, and the pod cgroup also
// exists in the (controller-less) v2 tree, where runc puts the container too.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/internal/cgroups"
	"github.com/podlab/podlab/steps/statedir"
)

// CgroupWrite is one cgroup file the kubelet wrote.
type CgroupWrite struct {
	File  string // e.g. /sys/fs/cgroup/cpu,cpuacct/podlab-1a2b3c4d/.../cpu.shares
	Value string
}

// CgroupApplied is one cgroup (a pod's or a tier's) as the kubelet set it up.
type CgroupApplied struct {
	// Path is the cgroup, e.g. /podlab-1a2b3c4d/nodes/node-1/kubepods/burstable/pod<uid>.
	Path string
	// Dirs are its directories, one per hierarchy.
	Dirs []string
	// Writes are the settings written into its files.
	Writes []CgroupWrite
	// Unset are the settings no mounted hierarchy has a controller for
	// ("memory.max 67108864: no memory controller").
	Unset []string
}

// PodCgroup is what the kubelet made for a pod: its cgroup and the tier's.
type PodCgroup struct {
	Config PodCgroupConfig
	// Pod is the pod's cgroup; Tier the QoS tier's (nil for Guaranteed).
	Pod  CgroupApplied
	Tier *CgroupApplied
	// Created is false when the pod cgroup existed already: the kubelet
	// leaves it as it is (EnsureExists).
	Created bool
}

// cgroupSettings are the values written into one cgroup.
type cgroupSettings struct {
	cpuShares uint64
	cpuQuota  int64
	cpuPeriod uint64
	memory    int64
	pids      int64
}

func (c PodCgroupConfig) settings() cgroupSettings {
	return cgroupSettings{cpuShares: c.CPUShares, cpuQuota: c.CPUQuota, cpuPeriod: c.CPUPeriod, memory: c.Memory, pids: c.PidsLimit}
}

// cgroupFile is one setting: its controller, and its file and value in v1
// and in v2 (several files for v1's cpu quota, the period first).
type cgroupFile struct {
	controller string
	v1         [][2]string // file, value
	v2         [2]string
}

func (s cgroupSettings) files() []cgroupFile {
	var out []cgroupFile
	if s.cpuShares > 0 {
		out = append(out, cgroupFile{"cpu",
			[][2]string{{"cpu.shares", strconv.FormatUint(s.cpuShares, 10)}},
			[2]string{"cpu.weight", strconv.FormatUint(CPUWeight(s.cpuShares), 10)}})
	}
	if s.cpuQuota > 0 {
		p := strconv.FormatUint(s.cpuPeriod, 10)
		q := strconv.FormatInt(s.cpuQuota, 10)
		out = append(out, cgroupFile{"cpu",
			[][2]string{{"cpu.cfs_period_us", p}, {"cpu.cfs_quota_us", q}},
			[2]string{"cpu.max", q + " " + p}})
	}
	if s.memory > 0 {
		m := strconv.FormatInt(s.memory, 10)
		out = append(out, cgroupFile{"memory", [][2]string{{"memory.limit_in_bytes", m}}, [2]string{"memory.max", m}})
	}
	if s.pids > 0 {
		n := strconv.FormatInt(s.pids, 10)
		out = append(out, cgroupFile{"pids", [][2]string{{"pids.max", n}}, [2]string{"pids.max", n}})
	}
	return out
}

// podControllers are the controllers the kubelet sets on pod and tier
// cgroups; on v1 it makes their directories, on v2 it enables them.
var podControllers = []string{"cpu", "memory", "pids"}

// applyCgroup makes the cgroup path in every hierarchy that has one of
// podControllers, and in the v2 tree, then writes the settings, each into
// the hierarchy that has its controller. mounts are the machine's cgroup
// mounts (cgroups.HostCgroupMounts).
func applyCgroup(mounts []cgroups.CgroupMount, path string, s cgroupSettings) (*CgroupApplied, error) {
	out := &CgroupApplied{Path: path}
	avail := cgroups.AvailableControllers(mounts)
	var v2 []string // the controllers the v2 tree provides
	for _, c := range podControllers {
		if avail[c] == cgroups.CgroupV2 {
			v2 = append(v2, c)
		}
	}
	for _, m := range mounts {
		var err error
		switch {
		case m.Version == 2:
			err = makeV2(m, path, v2)
		case slices.ContainsFunc(m.Controllers, func(c string) bool { return slices.Contains(podControllers, c) }):
			err = os.MkdirAll(m.Dir(path), 0o755)
		default:
			continue
		}
		if err != nil {
			return out, fmt.Errorf("making cgroup %s: %w", path, err)
		}
		out.Dirs = append(out.Dirs, m.Dir(path))
	}
	for _, f := range s.files() {
		m, ok := controllerMount(mounts, f.controller, avail[f.controller])
		if !ok {
			out.Unset = append(out.Unset, fmt.Sprintf("%s %s: no %s controller", f.v2[0], f.v2[1], f.controller))
			continue
		}
		writes := f.v1
		if m.Version == 2 {
			writes = [][2]string{f.v2}
		}
		for _, w := range writes {
			file := filepath.Join(m.Dir(path), w[0])
			if err := os.WriteFile(file, []byte(w[1]), 0o644); err != nil {
				return out, fmt.Errorf("setting %s of cgroup %s to %s: %w", w[0], path, w[1], err)
			}
			out.Writes = append(out.Writes, CgroupWrite{File: file, Value: w[1]})
		}
	}
	return out, nil
}

// controllerMount is the hierarchy that provides controller.
func controllerMount(mounts []cgroups.CgroupMount, controller string, v cgroups.CgroupVersion) (cgroups.CgroupMount, bool) {
	for _, m := range mounts {
		switch {
		case v == cgroups.CgroupV1 && m.Version == 1 && slices.Contains(m.Controllers, controller):
			return m, true
		case v == cgroups.CgroupV2 && m.Version == 2:
			return m, true
		}
	}
	return cgroups.CgroupMount{}, false
}

// makeV2 makes path in the v2 tree m, enabling controllers in the
// cgroup.subtree_control of every cgroup above it (from the tree's root
// down), so that path has their files. A cgroup already enabling them is
// left as it is.
func makeV2(m cgroups.CgroupMount, path string, controllers []string) error {
	top := filepath.Clean(m.Mountpoint)
	dir := m.Dir(path)
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("cgroup %s is not inside %s", path, top)
	}
	cur := top
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if err := enableControllers(cur, controllers); err != nil {
			return err
		}
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// enableControllers writes +c into dir's cgroup.subtree_control for each of
// controllers that dir has and does not enable yet.
func enableControllers(dir string, controllers []string) error {
	if len(controllers) == 0 {
		return nil
	}
	has, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var add []string
	for _, c := range controllers {
		if slices.Contains(strings.Fields(string(has)), c) && !slices.Contains(strings.Fields(string(on)), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("enabling %s in %s/cgroup.subtree_control: %w", strings.Join(add, " "), dir, err)
	}
	return nil
}

// cgroupExists tells whether path has a directory in any hierarchy the
// kubelet makes it in.
func cgroupExists(mounts []cgroups.CgroupMount, path string) bool {
	for _, m := range mounts {
		if m.Version == 1 && !slices.ContainsFunc(m.Controllers, func(c string) bool { return slices.Contains(podControllers, c) }) {
			continue
		}
		if fi, err := os.Stat(m.Dir(path)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// PodCgroupPath is the pod's cgroup, in its QoS tier: kubepods/pod<uid>,
// kubepods/burstable/pod<uid> or kubepods/besteffort/pod<uid>.
func (l Layout) PodCgroupPath(pod *corev1.Pod) (string, error) {
	_, tier, err := podQOS(pod)
	if err != nil {
		return "", err
	}
	return l.Node.PodCgroup(tier, string(pod.UID)), nil
}

// ensurePodCgroup makes the pod's cgroup with its settings, unless it
// exists, after bringing the QoS tiers up to date (the kubelet's syncPod:
// UpdateQOSCgroups, then EnsureExists).
func (k *Kubelet) ensurePodCgroup(ctx context.Context, pod *corev1.Pod) (*PodCgroup, error) {
	cfg, err := podCgroupConfig(pod, k.cfg.PodPidsLimit)
	if err != nil {
		return nil, err
	}
	path := k.layout.Node.PodCgroup(cfg.Tier, string(pod.UID))
	mounts, err := cgroups.HostCgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("making the cgroup of pod %s: %w", podKey(pod), err)
	}
	out := &PodCgroup{Config: cfg}
	if cgroupExists(mounts, path) {
		out.Pod = CgroupApplied{Path: path}
		return out, nil
	}
	tiers, err := k.updateQOSCgroups(ctx, mounts, pod, "")
	if err != nil {
		return nil, err
	}
	if t, ok := tiers[cfg.Tier]; ok {
		out.Tier = t
	}
	applied, err := applyCgroup(mounts, path, cfg.settings())
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", podKey(pod), err)
	}
	out.Pod, out.Created = *applied, true
	return out, nil
}

// updateQOSCgroups makes the tiers and writes their settings (the kubelet's
// UpdateCgroups): besteffort cpu.shares 2, burstable the sum of the cpu
// requests of the node's Burstable pods, with pod counted and the pod
// whose uid is gone not.
func (k *Kubelet) updateQOSCgroups(ctx context.Context, mounts []cgroups.CgroupMount, pod *corev1.Pod, gone types.UID) (map[string]*CgroupApplied, error) {
	pods, err := k.Pods(ctx)
	if err != nil {
		return nil, fmt.Errorf("updating the QoS cgroups: %w", err)
	}
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return p.UID == gone || (pod != nil && p.UID == pod.UID) })
	if pod != nil {
		pods = append(pods, pod)
	}
	out := map[string]*CgroupApplied{}
	for _, tier := range statedir.Tiers() {
		s := cgroupSettings{cpuShares: minShares}
		if tier == statedir.TierBurstable {
			s.cpuShares = burstableTierShares(pods)
		}
		a, err := applyCgroup(mounts, k.layout.TierCgroup(tier), s)
		if err != nil {
			return nil, fmt.Errorf("updating the QoS cgroup %s: %w", tier, err)
		}
		out[tier] = a
	}
	return out, nil
}

// removePodCgroups removes the pod's cgroup, wherever its tier put it, in
// every hierarchy, once its containers' cgroups are gone; then it updates
// the burstable tier's shares without the pod. It returns the directories
// it removed.
func (k *Kubelet) removePodCgroups(ctx context.Context, uid types.UID) ([]string, error) {
	mounts, err := cgroups.HostCgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("removing the cgroup of pod %s: %w", uid, err)
	}
	var removed []string
	var errs []error
	for _, tier := range []string{statedir.TierNone, statedir.TierBurstable, statedir.TierBestEffort} {
		p := k.layout.Node.PodCgroup(tier, string(uid))
		d, err := cgroups.RemoveCgroupDirsBelow(mounts, p, k.layout.TierCgroup(tier))
		removed = append(removed, d...)
		if err != nil {
			errs = append(errs, err)
		}
		if cgroupExists(mounts, p) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: it still has cgroups or processes in it", p))
		}
	}
	if len(removed) > 0 {
		if _, err := k.updateQOSCgroups(ctx, mounts, nil, uid); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
