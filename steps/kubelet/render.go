package kubelet

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/unpack"
)

// ipList is a list of IPs as one word: 10.244.0.2,fd00::2.
func ipList(ips []net.IP) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, ",")
}

// printRuntimeConfig prints what the runtime did with the node's pod CIDR,
// when it did something.
func WriteRuntimeConfig(w io.Writer, node string, rc *RuntimeConfig, err error) {
	if err != nil {
		fmt.Fprintf(w, "node %s: %v\n", node, err)
		return
	}
	if rc != nil && rc.Changed {
		fmt.Fprintf(w, "node %s: podCIDR %s handed to the runtime (UpdateRuntimeConfig): wrote %s\n", node, rc.PodCIDR, rc.ConfList)
	}
}

// WriteReport writes one stage of the sync loop in Kubernetes terms, with
// where its artifacts are: the one rendering of a stage, which `podlab
// kubelet` prints for every stage it runs, and `podlab up` for its
// kubelet's.
func WriteReport(w io.Writer, r Report) {
	who := "node"
	if r.Pod != nil {
		who = "pod " + r.Pod.Namespace + "/" + r.Pod.Name
	}
	if ctr := r.Stage.Container; ctr != "" || containerOf(r.Result) != "" {
		if ctr == "" {
			ctr = containerOf(r.Result)
		}
		who += ", container " + ctr
	}
	what := string(r.Stage.Name)
	if cri := r.Stage.Name.CRI(); cri != "" {
		what = cri
	}
	if r.Err != nil && r.Result == nil {
		fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		return
	}
	var rec *Recording
	switch res := r.Result.(type) {
	case *SandboxResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else if res.Created {
			fmt.Fprintf(w, "%s: %s: namespaces unshared and pinned, hostname %q\n", who, what, res.Sandbox.Hostname)
			if u := res.Sandbox.UserNamespace; u != nil {
				fmt.Fprintf(w, "  user namespace: uids and gids 0-65535 are host ids %d-%d (hostUsers: false)\n", u.Base(), u.Base()+UserNamespaceLength-1)
			}
		} else {
			fmt.Fprintf(w, "%s: %s: the sandbox exists\n", who, what)
		}
		for _, kind := range []string{"user", "net", "ipc", "uts"} {
			if p, ok := res.Sandbox.Namespaces[kind]; ok {
				fmt.Fprintf(w, "    %-4s %s\n", kind, p)
			}
		}
		writePodCgroup(w, res.PodCgroup)
		if res.RuntimeConfig != nil {
			WriteRuntimeConfig(w, r.Pod.Spec.NodeName, res.RuntimeConfig, nil)
		}
		if n := res.Network; n != nil {
			fmt.Fprintf(w, "    network: CNI ADD (%s): %s %s in %s\n", n.ConfList, n.Interface, ipList(n.IPs), n.Took.Round(time.Millisecond))
			fmt.Fprintf(w, "    the CNI result: cat %s\n", n.ResultPath)
		}
		if res.NetworkNote != "" {
			fmt.Fprintf(w, "    network: %s\n", res.NetworkNote)
		}
		rec = &res.Recording
	case *PullResult:
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: %s %s (imagePullPolicy %s) failed: %v\n", who, what, res.Image, res.Policy, r.Err)
		case res.Pulled:
			fmt.Fprintf(w, "%s: %s %s (imagePullPolicy %s): pulled in %s, %s\n", who, what, res.Image, res.Policy,
				res.PullTook.Round(time.Millisecond), pull.HumanSize(res.Size))
		default:
			fmt.Fprintf(w, "%s: %s %s (imagePullPolicy %s): already present, not pulled\n", who, what, res.Image, res.Policy)
		}
		if r.Err == nil {
			fmt.Fprintf(w, "    image %s in %s\n", res.ImageID, res.StoreDir)
		}
		rec = &res.Recording
	case *UnpackResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else {
			u := res.Unpack
			fmt.Fprintf(w, "%s: %s: %d layers, %d files unpacked in %s (restart %d)\n", who, what, len(u.Layers), u.Total.Files,
				u.Duration.Round(time.Millisecond), res.RestartCount)
			fmt.Fprintf(w, "    rootfs %s\n", u.RootFS)
			writeSnapshotter(w, u)
		}
		rec = &res.Recording
	case *SpecResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else {
			fmt.Fprintf(w, "%s: %s: %s in cgroup %s\n", who, what, strings.Join(res.Spec.Process.Args, " "), res.Spec.Linux.CgroupsPath)
			fmt.Fprintf(w, "    config.json %s\n", res.Path)
			fmt.Fprintf(w, "    oom_score_adj %s\n", res.OOMScoreAdj)
		}
		rec = &res.Recording
	case *CreateResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else {
			cr := res.Created
			writePodCgroup(w, res.PodCgroup)
			fmt.Fprintf(w, "%s: %s: container %s created (pid %d, shim pid %d)\n", who, what, res.ContainerID, cr.Pid, cr.ShimPid)
			fmt.Fprintf(w, "    bundle    %s\n    state     %s\n    log       %s\n", cr.Bundle, cr.StateFile, cr.LogPath)
			for _, id := range res.Removed {
				fmt.Fprintf(w, "    removed the older run %s\n", id)
			}
		}
		rec = &res.Recording
	case *StartResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else {
			if res.State.Status == "running" {
				fmt.Fprintf(w, "%s: %s: container %s running (pid %d)\n", who, what, res.ContainerID, res.State.Pid)
			} else {
				fmt.Fprintf(w, "%s: %s: container %s started, and is %s already\n", who, what, res.ContainerID, res.State.Status)
			}
			fmt.Fprintf(w, "    log %s (podlab logs %s)\n", res.LogPath, r.Pod.Name)
		}
		rec = &res.Recording
	case *KillResult:
		fmt.Fprintf(w, "%s: %s: grace period %s\n", who, what, res.GracePeriod)
		for _, s := range res.Stopped {
			switch {
			case s.Err != nil:
				fmt.Fprintf(w, "    %s: %v\n", s.Container, s.Err)
			default:
				fmt.Fprintf(w, "    %s: %s, exited with code %d after %s\n", s.Container, strings.Join(s.Signals, " then "), s.Exit.Code, s.Took.Round(time.Millisecond))
			}
		}
		rec = &res.Recording
	case *RemoveResult:
		if r.Leftovers {
			fmt.Fprintf(w, "pod uid %s: %s (%s)\n", res.UID, what, r.Stage.Why)
		} else {
			fmt.Fprintf(w, "%s: %s\n", who, what)
		}
		for _, id := range res.Containers {
			fmt.Fprintf(w, "    runc delete %s\n", id)
		}
		if len(res.Cgroups) > 0 {
			fmt.Fprintf(w, "    removed the cgroups %s\n", CgroupSummary(res.Cgroups))
		}
		for _, p := range res.Paths {
			fmt.Fprintf(w, "    removed %s\n", p)
		}
		for _, n := range res.Network {
			fmt.Fprintf(w, "    CNI DEL: released %s %s\n", n.Interface, ipList(n.IPs))
		}
		if res.Deleted {
			fmt.Fprintf(w, "    deleted the pod from the API server (grace period 0)\n")
		}
		if r.Err != nil {
			fmt.Fprintf(w, "    error: %v\n", r.Err)
		}
		rec = &res.Recording
	case *Recording: // a back-off announced
		fmt.Fprintf(w, "%s: %s until %s: %s\n", who, r.Stage.Reason, r.Stage.Until.Format("15:04:05.000"), r.Stage.Why)
		rec = res
	default:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s: %v\n", who, what, r.Err)
		}
		return
	}
	for _, e := range rec.Events {
		fmt.Fprintf(w, "    event %s\n", e)
	}
	if rec.StatusWritten {
		fmt.Fprintf(w, "    status: %s\n", rec.Phase)
	}
}

// printPodCgroup says where the pod's cgroup is and what the kubelet wrote
// into it and its QoS tier: "pod cgroup /podlab-…/kubepods/burstable/pod<uid>
// (Burstable): cpu.shares=256 memory.limit_in_bytes=67108864".
func writePodCgroup(w io.Writer, pc *PodCgroup) {
	if pc == nil {
		return
	}
	settings := func(a CgroupApplied) string {
		var s []string
		for _, wr := range a.Writes {
			s = append(s, filepath.Base(wr.File)+"="+wr.Value)
		}
		s = append(s, a.Unset...)
		if len(s) == 0 {
			return "no limits"
		}
		return strings.Join(s, " ")
	}
	if !pc.Created {
		fmt.Fprintf(w, "    pod cgroup %s (%s): exists\n", pc.Pod.Path, pc.Config.QOS)
		return
	}
	if pc.Tier != nil {
		fmt.Fprintf(w, "    QoS cgroup %s: %s\n", pc.Tier.Path, settings(*pc.Tier))
	}
	fmt.Fprintf(w, "    pod cgroup %s (%s): %s\n", pc.Pod.Path, pc.Config.QOS, settings(pc.Pod))
}

// CgroupSummary says which cgroups went, in how many hierarchies:
// /sys/fs/cgroup/memory/podlab-1a2b3c4d/nodes/n/kubepods/pod1 and
// .../cpu/podlab-1a2b3c4d/... are one cgroup,
// /podlab-1a2b3c4d/nodes/n/kubepods/pod1, in two hierarchies (on a pure
// cgroup v2 machine, /sys/fs/cgroup/podlab-... is the one hierarchy).
func CgroupSummary(dirs []string) string {
	var paths []string
	hier := map[string]bool{}
	for _, d := range dirs {
		rest := "/" + strings.TrimPrefix(d, "/sys/fs/cgroup/")
		i := strings.Index(rest, "/podlab-")
		if i < 0 {
			paths = append(paths, d)
			continue
		}
		hier[rest[:i]] = true
		if p := rest[i:]; !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return fmt.Sprintf("%s (in %d hierarchies)", strings.Join(paths, ", "), len(hier))
}

// writeSnapshotter says how the kubelet's runtime made a rootfs: the
// snapshots it reused and the overlay mount, or why it is a copy.
func writeSnapshotter(w io.Writer, u *unpack.Result) {
	if u.Snapshot == nil {
		fmt.Fprintf(w, "    snapshotter native: a copy of every layer")
		if u.Fallback != "" {
			fmt.Fprintf(w, " (%s)", u.Fallback)
		}
		fmt.Fprintln(w)
		return
	}
	reused := 0
	for _, l := range u.Layers {
		if l.Reused {
			reused++
		}
	}
	fmt.Fprintf(w, "    snapshotter overlayfs: %d of %d layers already unpacked; lowers %v in %s, upper %d\n",
		reused, len(u.Layers), u.Snapshot.Lowers, u.Snapshot.Snapshots, u.Snapshot.Active)
}
