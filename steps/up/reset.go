package up

// Reset undoes everything podlab made under a state directory, in the
// order the pieces depend on each other: the containers first (a cgroup
// with a process in it cannot be removed, a namespace with a process in it
// lives on), then the mounts (a bind-mounted namespace file cannot be
// deleted before it is unmounted), then the cgroups, then the files.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moby/sys/mountinfo"
	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// ResetOptions say what Reset removes.
type ResetOptions struct {
	StateDir string
	// All removes the demo images and the .deb cache too.
	All bool
	// Runtime is the OCI runtime binary, to kill and delete containers.
	Runtime string
	// OnCommand receives every runc command line.
	OnCommand func(argv []string)
	// UsernsClaims are the machine-wide claims on user namespace ranges;
	// the zero value means statedir.MachineUsernsClaims.
	UsernsClaims statedir.UsernsClaims
}

// ResetResult is what Reset removed.
type ResetResult struct {
	// Containers are the runtime containers killed and deleted, as
	// "<runc root> <id>".
	Containers []string
	// Network are what was undone of the nodes' pod networks: "CNI DEL"
	// of each attached sandbox (its IPs released), each bridge deleted.
	Network []string
	// Unmounted are the mounts under the state directory (the pods'
	// namespace files) that were unmounted.
	Unmounted []string
	// Cgroups are the cgroup directories removed, in every hierarchy
	// (with the containers, then the state directory's cgroup root,
	// /podlab-<hash>, and what is left under it); BusyCgroups are the
	// cgroups left because processes are still in them (each once, whatever
	// the hierarchies: /podlab-<hash>/nodes/n/kubepods/pod1/c1).
	Cgroups     []string
	BusyCgroups []string
	// Removed are the files and directories removed; Kept those left, with
	// why.
	Removed []string
	Kept    []string
	// Containerd is what was undone of the lab containerd (podlab
	// containerd; steps/containerd.Cleanup): containerd and its shims
	// stopped, its pods' CNI DEL, its containers deleted, its bridge, and
	// the files it wrote outside the state directory.
	Containerd []string
	// Pauses are the pause processes of the nodes' CRI sandboxes that were
	// stopped, as "node NAME: sandbox ID pid N".
	Pauses []string
	// Runtimes are the nodes' runtime processes (podlab runtime, by hand or
	// started by their kubelets) that were stopped, as "node NAME: pid N".
	Runtimes []string
	// Machines are the joined nodes whose machines were removed (their
	// processes stopped, veth, namespace and its mount removed), and Lab
	// the lab network's bridge and iptables rules, if they were there.
	Machines []string
	Lab      string
}

// CheckStateDir refuses a directory that holds none of what podlab makes
// (etcd/, nodes/, content/ or containerd/), so that a mistyped --state-dir removes
// nothing.
func CheckStateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if abs == "/" {
		return fmt.Errorf("%w: /", ErrNotStateDir)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotStateDir, abs, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrNotStateDir, abs)
	}
	for _, m := range statedir.Markers() {
		if fi, err := os.Stat(filepath.Join(abs, m)); err == nil && fi.IsDir() {
			return nil
		}
	}
	return fmt.Errorf("%w: %s has no %s/ inside: nothing of podlab's to remove (is --state-dir right?)", ErrNotStateDir, abs, strings.Join(statedir.Markers(), "/, "))
}

// Reset removes what podlab made under opts.StateDir: first the machines
// of joined nodes (what runs in them stopped, their veths and network
// namespaces removed) and the lab network's bridge and iptables rules (see
// steps/machine), then every container
// (runc kill and delete, under every node's runc root and the top-level
// one) and the pause process of every CRI sandbox, the mounts under the directory (unmounted first), the state
// directory's own cgroup root (/podlab-<hash>, see steps/statedir) in every
// hierarchy, then the store, the tokens,
// the content stores, bundles and node directories. The demo images and
// the .deb cache stay unless opts.All. Last, the machine-wide claims on
// the user namespace ranges of its pods (statedir.UsernsClaimsDir) are
// freed. Entries podlab does not make are
// left alone, and so is everything of another state directory: its
// containers (another runc root), mounts (another path) and cgroups
// (another root).
func Reset(ctx context.Context, opts ResetOptions) (*ResetResult, error) {
	if err := CheckStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	layout, err := statedir.New(opts.StateDir)
	if err != nil {
		return nil, err
	}
	dir := layout.Dir
	res := &ResetResult{}
	var errs []error

	// 0. The machines of joined nodes: what runs in them stops first (a
	// kubelet would start containers again), then their veths and
	// namespaces go, and the lab network with the last.
	if err := resetMachines(ctx, layout, res); err != nil {
		errs = append(errs, err)
	}

	// 0a. The nodes' runtimes, as processes of their own (the kubelet
	// started each when nothing answered on the node's socket): SIGTERM,
	// then SIGKILL. Their containers go in 1, with the others.
	if err := stopRuntimes(ctx, layout, res); err != nil {
		errs = append(errs, err)
	}

	// 0b. The lab containerd: stopped with its shims, its pods' network
	// undone, its containers deleted from its runc root, its shims'
	// sockets under /run/containerd/s removed. Its mounts, cgroups and
	// files go with the rest below.
	if fi, err := os.Stat(layout.Containerd().Dir); err == nil && fi.IsDir() {
		cl, err := containerd.Cleanup(ctx, layout.Containerd(), opts.Runtime)
		if cl != nil {
			for _, s := range cl.Stopped {
				res.Containerd = append(res.Containerd, "stopped "+s)
			}
			res.Containerd = append(res.Containerd, cl.Network...)
			for _, c := range cl.Containers {
				res.Containerd = append(res.Containerd, "runc delete --force "+c)
			}
			for _, o := range cl.Outside {
				res.Containerd = append(res.Containerd, "removed "+o)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cleaning up the lab containerd: %w", err))
		}
	}

	nodes, _ := layout.Nodes()

	// 1. The containers: runc delete --force kills each, removes runc's
	// state and its cgroups; podlab's containers/<id> goes with it.
	for _, rt := range runtimes(layout, opts) {
		ids, err := containerIDs(rt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			d, err := rt.Delete(ctx, id, true)
			if err != nil {
				errs = append(errs, fmt.Errorf("deleting container %s: %w", id, err))
				continue
			}
			res.Containers = append(res.Containers, rt.RootDir()+" "+id)
			res.Cgroups = append(res.Cgroups, d.Cgroups...)
		}
	}

	// 1b. The pause processes of the nodes' CRI sandboxes (pid mode POD):
	// they outlive their runtime, as containerd's shims do, and hold the
	// pod's cgroup; the PIDs are in the sandbox records. Killed before the
	// pins go (unpinned, each would leave within 2 s, too late for step 4).
	for _, n := range nodes {
		stopped, err := cri.StopPauses(ctx, n)
		for _, p := range stopped {
			res.Pauses = append(res.Pauses, fmt.Sprintf("node %s: sandbox %s pid %d", n.Name, p.SandboxID, p.Pid))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stopping the pause processes of node %s: %w", n.Name, err))
		}
	}

	// 2. The nodes' pod networks, while the pods' network namespaces are
	// still mounted: CNI DEL of every sandbox each node's runtime
	// attached (veths, port mappings, addresses), then its bridge, in the
	// network namespace the node's runtime ran in (its machine, if it
	// joined, else this one).
	for _, n := range nodes {
		where := n.MachineNetns()
		if !isNetnsFile(where) {
			where = ""
		}
		rel, err := cni.ReleaseAll(ctx, cni.Config{ConfDir: n.CNIConfDir(), CacheDir: n.CNICacheDir()}, n.BridgeName(), where)
		if rel != nil {
			for _, r := range rel.Sandboxes {
				res.Network = append(res.Network, fmt.Sprintf("node %s: CNI DEL %s (released %s)", n.Name, r.ResultPath, ipsText(r.IPs)))
			}
			if rel.Bridge != "" {
				res.Network = append(res.Network, fmt.Sprintf("node %s: deleted bridge %s", n.Name, rel.Bridge))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("releasing the pod network of node %s: %w", n.Name, err))
		}
	}

	// 3. The mounts under the state directory, deepest first: the pods'
	// namespace files under nodes/*/{netns,ipcns,utsns} and the subPath bind
	// mounts under nodes/*/pods/*/volume-subpaths. Mounts can be stacked on
	// one path: unmount until none is left.
	for range 10 {
		mounts, err := mountsUnder(dir)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(mounts) == 0 {
			break
		}
		for _, m := range mounts {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
				continue
			}
			if !slices.Contains(res.Unmounted, m) {
				res.Unmounted = append(res.Unmounted, m)
			}
		}
	}

	// 4. The state directory's cgroup root, in every hierarchy: empty
	// cgroups go (rmdir is the only way to remove a cgroup; one with
	// processes stays). Nothing outside the root is touched.
	cgroupRoot := layout.CgroupRoot()
	if cgm, err := runc.HostCgroupMounts(); err == nil {
		busy := map[string]bool{}
		for _, m := range cgm {
			removed, left := removeCgroupTree(filepath.Join(m.Mountpoint, cgroupRoot))
			res.Cgroups = append(res.Cgroups, removed...)
			for _, d := range left {
				busy[strings.TrimPrefix(d, filepath.Clean(m.Mountpoint))] = true
			}
		}
		res.BusyCgroups = leaves(busy)
	}

	// 5. The files.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case slices.Contains(statedir.ResetEntries(), e.Name()) || (opts.All && slices.Contains(statedir.KeptEntries(), e.Name())):
			// Never remove through a mount: it would remove the files of
			// what is mounted (a hostPath volume, the host's /).
			if left, _ := mountsUnder(p); len(left) > 0 {
				errs = append(errs, fmt.Errorf("not removing %s: %s is still mounted (umount -l it, then reset again)", p, left[0]))
				res.Kept = append(res.Kept, p+" (a mount is left inside)")
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
				continue
			}
			res.Removed = append(res.Removed, p)
		case slices.Contains(statedir.KeptEntries(), e.Name()):
			res.Kept = append(res.Kept, p+" (kept: reset --all removes it too)")
		default:
			res.Kept = append(res.Kept, p+" (not podlab's: left alone)")
		}
	}

	// 6. The machine-wide claims on the user namespace ranges of this state
	// directory's pods, now that their records are gone (a claim whose
	// record is left, under a mount, stays).
	claims := opts.UsernsClaims
	if claims.Dir == "" {
		claims = statedir.MachineUsernsClaims()
	}
	released, err := kubelet.ReleaseUserNamespaceClaims(claims, layout)
	res.Removed = append(res.Removed, released...)
	if err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// isNetnsFile reports whether path is a pinned namespace (nsfs).
func isNetnsFile(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// ipsText lists IPs for a line: "10.244.0.2, 10.244.0.3", or "no address".
func ipsText(ips []net.IP) string {
	if len(ips) == 0 {
		return "no address"
	}
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, ", ")
}

// runtimes are the runc roots of the state directory: the top-level one
// (podlab runc create) and every node's (the kubelets').
func runtimes(layout statedir.Layout, opts ResetOptions) []*runc.Runtime {
	dirs := []statedir.Runtime{layout.Runtime()}
	nodes, _ := layout.Nodes()
	for _, n := range nodes {
		dirs = append(dirs, n.Runtime())
	}
	var rts []*runc.Runtime
	for _, d := range dirs {
		// The other handlers' first (a pod of RuntimeClass gvisor): only
		// its own runtime can stop a runsc sandbox.
		for _, h := range runc.DefaultHandlers(opts.Runtime) {
			if h.Name == runc.DefaultHandler {
				continue
			}
			if _, err := os.Stat(d.HandlerRoot(h.Name)); err == nil {
				rt := runc.NewRuntime(h, d.HandlerRoot(h.Name), d.Dir)
				rt.CgroupParent, rt.OnCommand = d.CgroupParent, opts.OnCommand
				rts = append(rts, rt)
			}
		}
		rts = append(rts, &runc.Runtime{Binary: opts.Runtime, Root: d.RuncRoot(), StateDir: d.Dir,
			CgroupParent: d.CgroupParent, OnCommand: opts.OnCommand})
	}
	return rts
}

// containerIDs are the containers runc or podlab knows under rt; for
// another handler's runtime, those of podlab's that it knows.
func containerIDs(rt *runc.Runtime) ([]string, error) {
	if rt.Handler != "" && rt.Handler != runc.DefaultHandler {
		ents, err := os.ReadDir((statedir.Runtime{Dir: rt.StateDir}).ContainersDir())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		var ids []string
		for _, e := range ents {
			if _, err := os.Stat(rt.StateFile(e.Name())); err == nil {
				ids = append(ids, e.Name())
			}
		}
		return ids, nil
	}
	seen := map[string]bool{}
	var ids []string
	for _, d := range []string{rt.RootDir(), (statedir.Runtime{Dir: rt.StateDir}).ContainersDir()} {
		ents, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				ids = append(ids, e.Name())
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// mountsUnder lists the mount points under dir, from /proc/self/mountinfo
// (moby's parser, which undoes its octal escapes), deepest first.
func mountsUnder(dir string) ([]string, error) {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range infos {
		if p := m.Mountpoint; strings.HasPrefix(p, dir+"/") && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := strings.Count(out[i], "/"), strings.Count(out[j], "/"); a != b {
			return a > b
		}
		return out[i] > out[j]
	})
	return out, nil
}

// removeCgroupTree removes the empty cgroups under top, children first,
// and top itself. Cgroups that still hold processes (or children that do)
// stay, and are returned as busy.
func removeCgroupTree(top string) (removed, busy []string) {
	var dirs []string
	filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- { // WalkDir lists parents before children
		if err := unix.Rmdir(dirs[i]); err == nil {
			removed = append(removed, dirs[i])
		} else if !errors.Is(err, fs.ErrNotExist) {
			busy = append(busy, dirs[i])
		}
	}
	return removed, busy
}

// leaves are the cgroup paths of set that no other path of set is under:
// the cgroups that hold the processes, not their parents.
func leaves(set map[string]bool) []string {
	var out []string
	for p := range set {
		parent := false
		for q := range set {
			if strings.HasPrefix(q, p+"/") {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// resetMachines removes every joined node's machine, then the lab network
// (bridge and iptables rules), which may be there with no machine left after
// a crash.
// stopRuntimes stops every node's runtime process its kubelet started.
func stopRuntimes(ctx context.Context, l statedir.Layout, res *ResetResult) error {
	nodes, err := l.Nodes()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		pid, err := criremote.Stop(ctx, n.RuntimePidFile(), 5*time.Second)
		if err != nil {
			errs = append(errs, fmt.Errorf("stopping node %s's runtime: %w", n.Name, err))
		}
		if pid != 0 {
			res.Runtimes = append(res.Runtimes, fmt.Sprintf("node %s: pid %d", n.Name, pid))
		}
	}
	return errors.Join(errs...)
}

func resetMachines(ctx context.Context, l statedir.Layout, res *ResetResult) error {
	var errs []error
	nodes, err := l.Nodes()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := os.Lstat(n.MachineNetns()); err != nil {
			if _, lerr := machine.Load(n); errors.Is(lerr, machine.ErrNotJoined) {
				continue
			}
		}
		left, err := machine.Leave(ctx, l, n.Name, 5*time.Second)
		if err != nil {
			errs = append(errs, fmt.Errorf("removing the machine of node %s: %w", n.Name, err))
		}
		if left != nil {
			res.Machines = append(res.Machines, fmt.Sprintf("%s (%s, veth %s, %d processes stopped)", n.Name, left.Machine.Address, left.Machine.HostVeth, len(left.Stopped)))
		}
	}
	lab, err := machine.LoadLab(l)
	if errors.Is(err, machine.ErrNoLab) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := machine.Down(ctx, lab); err != nil {
		errs = append(errs, err)
	}
	res.Lab = fmt.Sprintf("%s: bridge %s (gone) and its iptables rules", lab.CIDR, lab.Bridge)
	return errors.Join(errs...)
}
