package kubelet

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/podlab/podlab/internal/units"
)

// printRuntimeConfig prints what the runtime did with the node's pod CIDR,
// when it did something.
func WriteRuntimeConfig(w io.Writer, node string, rc *RuntimeConfig, err error) {
	if err != nil {
		fmt.Fprintf(w, "node %s: %v\n", node, err)
		return
	}
	if rc != nil && rc.Changed {
		fmt.Fprintf(w, "node %s: podCIDR %s handed to the runtime (UpdateRuntimeConfig)\n", node, rc.PodCIDR)
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
		if r.Stage.Name == "sync" && r.Stage.Why != "" {
			fmt.Fprintf(w, "  %s\n", r.Stage.Why) // the pod worker's back-off
		}
		return
	}
	var rec *Recording
	switch res := r.Result.(type) {
	case *SandboxResult:
		sb := res.Sandbox
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		case res.Created:
			fmt.Fprintf(w, "%s: %s: sandbox %s (attempt %d, handler %s), hostname %q\n", who, what, sb.ID, sb.Attempt, handlerName(sb.Handler), sb.Hostname)
			if u := sb.UserNamespace; u != nil {
				fmt.Fprintf(w, "  user namespace: uids and gids 0-65535 are host ids %d-%d (hostUsers: false)\n", u.Base(), u.Base()+UserNamespaceLength-1)
			}
		default:
			fmt.Fprintf(w, "%s: %s: the sandbox exists: %s\n", who, what, sb.ID)
		}
		if r.Err == nil {
			for _, kind := range []string{"user", "net", "ipc", "uts", "pid"} {
				if p, ok := sb.Namespaces[kind]; ok {
					fmt.Fprintf(w, "    %-4s %s\n", kind, p)
				}
			}
		}
		writePodCgroup(w, res.PodCgroup)
		if res.RuntimeConfig != nil {
			WriteRuntimeConfig(w, r.Pod.Spec.NodeName, res.RuntimeConfig, nil)
		}
		if len(sb.IPs) > 0 {
			fmt.Fprintf(w, "    network: the runtime attached it (CNI ADD): IP %s\n", strings.Join(sb.IPs, ","))
		}
		if res.NetworkNote != "" && len(sb.IPs) == 0 {
			// (a runtime with a network of its own, containerd's CNI
			// conflist, gives an IP whatever the node's pod CIDR)
			fmt.Fprintf(w, "    network: %s\n", res.NetworkNote)
		}
		if r.Err == nil && sb.ID != "" {
			if sb.Record != "" {
				fmt.Fprintf(w, "    the runtime's record %s\n", sb.Record)
			}
			fmt.Fprintf(w, "    see it: crictl inspectp %s\n", shortID(sb.ID))
		}
		rec = &res.Recording
	case *PullResult:
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: %s %s (imagePullPolicy %s) failed: %v\n", who, what, res.Image, res.Policy, r.Err)
		case res.Pulled:
			fmt.Fprintf(w, "%s: %s %s (imagePullPolicy %s): pulled in %s, %s\n", who, what, res.Image, res.Policy,
				res.PullTook.Round(time.Millisecond), units.HumanSize(res.Size))
		default:
			fmt.Fprintf(w, "%s: %s %s (imagePullPolicy %s): already present, not pulled\n", who, what, res.Image, res.Policy)
		}
		if r.Err == nil {
			fmt.Fprintf(w, "    image %s (ImageStatus of %s)\n", res.ImageID, res.Endpoint)
		}
		rec = &res.Recording
	case *CreateResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else {
			writePodCgroup(w, res.PodCgroup)
			fmt.Fprintf(w, "%s: %s: container %s created in sandbox %s (restart %d)\n", who, what, res.ContainerID, shortID(res.SandboxID), res.RestartCount)
			if i := res.Info; i != nil {
				var sp specs.Spec
				if json.Unmarshal(i.RuntimeSpec, &sp) == nil && sp.Process != nil && sp.Linux != nil {
					fmt.Fprintf(w, "    %s in cgroup %s\n", strings.Join(sp.Process.Args, " "), sp.Linux.CgroupsPath)
				}
				fmt.Fprintf(w, "    bundle    %s (the runtime unpacked the image into its rootfs)\n", i.Bundle)
				fmt.Fprintf(w, "    config    %s\n", i.Config)
				if i.Pid > 0 {
					fmt.Fprintf(w, "    runc create: pid %d, shim pid %d\n", i.Pid, i.ShimPid)
				}
			}
			if res.Status != nil {
				fmt.Fprintf(w, "    log       %s\n", res.Status.LogPath)
			}
			fmt.Fprintf(w, "    oom_score_adj %s\n", res.OOMScoreAdj)
			for _, id := range res.Removed {
				fmt.Fprintf(w, "    removed the older run %s (RemoveContainer)\n", id)
			}
		}
		rec = &res.Recording
	case *StartResult:
		if r.Err != nil {
			fmt.Fprintf(w, "%s: %s failed: %v\n", who, what, r.Err)
		} else {
			switch {
			case res.State == RunRunning && res.Pid > 0:
				fmt.Fprintf(w, "%s: %s: container %s running (pid %d)\n", who, what, res.ContainerID, res.Pid)
			case res.State == RunRunning:
				fmt.Fprintf(w, "%s: %s: container %s running\n", who, what, res.ContainerID)
			default:
				fmt.Fprintf(w, "%s: %s: container %s started, and is %s already\n", who, what, res.ContainerID, res.State)
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
				fmt.Fprintf(w, "    %s: StopContainer (timeout %s), exited with code %d after %s\n", s.Container, s.Timeout, s.Exit.Code, s.Took.Round(time.Millisecond))
			}
		}
		for _, id := range res.Sandboxes {
			fmt.Fprintf(w, "    StopPodSandbox %s\n", shortID(id))
		}
		rec = &res.Recording
	case *RemoveResult:
		if r.Leftovers {
			fmt.Fprintf(w, "pod uid %s: %s (%s)\n", res.UID, what, r.Stage.Why)
		} else {
			fmt.Fprintf(w, "%s: %s\n", who, what)
		}
		for _, id := range res.Containers {
			fmt.Fprintf(w, "    RemoveContainer %s\n", id)
		}
		for _, id := range res.Sandboxes {
			fmt.Fprintf(w, "    RemovePodSandbox %s\n", shortID(id))
		}
		if len(res.Cgroups) > 0 {
			fmt.Fprintf(w, "    removed the cgroups %s\n", CgroupSummary(res.Cgroups))
		}
		for _, p := range res.Paths {
			fmt.Fprintf(w, "    removed %s\n", p)
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
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: %s: %v\n", who, what, r.Err)
		case r.Stage.Why != "": // the admission's Unsupported warning
			fmt.Fprintf(w, "%s: %s: %s\n", who, what, r.Stage.Why)
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

// shortID is an id as crictl prints it: its first 13 characters.
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

// handlerName is a sandbox's handler as the renderer names it: "" is the
// runtime's default.
func handlerName(h string) string {
	if h == "" {
		return "the runtime's default"
	}
	return h
}
