// Package cgroups reads the host's cgroup hierarchies and a container's
// cgroups back from the kernel, and makes and removes cgroup directories:
// what the runtime (steps/runc, steps/cri) and the kubelet (its pod and QoS
// cgroups) both need of the host, as runc's libcontainer/cgroups serves
// both runc and the kubelet in Kubernetes.
package cgroups

// Reading a container's cgroups back from the kernel.
//
// runc writes the limits of config.json's linux.resources into cgroup files;
// the kernel enforces them. Reading the files back shows what really applies.
// Three layouts exist:
//
//   - v1: one hierarchy per controller, /sys/fs/cgroup/memory/<path>/memory.limit_in_bytes,
//     /sys/fs/cgroup/pids/<path>/pids.max, /sys/fs/cgroup/cpu/<path>/cpu.cfs_quota_us, ...
//   - v2: one unified hierarchy, /sys/fs/cgroup/<path>/{memory.max,pids.max,cpu.max}
//   - hybrid: the controllers in v1 hierarchies, plus an (often controller-less)
//     cgroup2 mount at /sys/fs/cgroup/unified.
//
// Everything here takes its inputs as values (the text of /proc/self/mountinfo
// and of /proc/<pid>/cgroup), so that it runs on fake trees in tests.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CgroupVersion names a cgroup layout.
type CgroupVersion string

// The cgroup layouts.
const (
	CgroupNone   CgroupVersion = "none"   // no cgroup file system mounted
	CgroupV1     CgroupVersion = "v1"     // one hierarchy per controller
	CgroupV2     CgroupVersion = "v2"     // the unified hierarchy only
	CgroupHybrid CgroupVersion = "hybrid" // v1 controllers plus a cgroup2 mount
)

// CgroupMount is one mounted cgroup hierarchy, from a line of mountinfo.
type CgroupMount struct {
	Mountpoint  string   // where it is mounted, e.g. /sys/fs/cgroup/memory
	Root        string   // the cgroup the mount shows at Mountpoint, usually "/"
	Version     int      // 1 or 2
	Controllers []string // v1 only: e.g. [cpu cpuacct], or [name=systemd]
}

// v1Controllers are the mount options of a cgroup v1 mount that name a
// controller; the rest (rw, relatime, ...) are ordinary mount options.
var v1Controllers = map[string]bool{
	"blkio": true, "cpu": true, "cpuacct": true, "cpuset": true, "devices": true,
	"freezer": true, "hugetlb": true, "memory": true, "misc": true, "net_cls": true,
	"net_prio": true, "perf_event": true, "pids": true, "rdma": true, "debug": true,
}

// ParseCgroupMounts reads the cgroup and cgroup2 mounts out of the text of
// /proc/self/mountinfo.
func ParseCgroupMounts(mountinfo io.Reader) ([]CgroupMount, error) {
	var mounts []CgroupMount
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 {
			continue
		}
		m := CgroupMount{Root: unescapeMount(f[3]), Mountpoint: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup2":
			m.Version = 2
		case "cgroup":
			m.Version = 1
			if len(g) >= 3 {
				for _, o := range strings.Split(g[2], ",") {
					if v1Controllers[o] || strings.HasPrefix(o, "name=") {
						m.Controllers = append(m.Controllers, o)
					}
				}
			}
		default:
			continue
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return mounts, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// HostCgroupMounts reads the cgroup mounts of this machine.
func HostCgroupMounts() ([]CgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseCgroupMounts(f)
}

// CgroupLayout tells v1, v2 and hybrid apart.
func CgroupLayout(mounts []CgroupMount) CgroupVersion {
	var v1, v2 bool
	for _, m := range mounts {
		switch m.Version {
		case 2:
			v2 = true
		case 1:
			for _, c := range m.Controllers {
				if !strings.HasPrefix(c, "name=") {
					v1 = true
				}
			}
		}
	}
	switch {
	case v1 && v2:
		return CgroupHybrid
	case v1:
		return CgroupV1
	case v2:
		return CgroupV2
	}
	return CgroupNone
}

// AvailableControllers maps each controller podlab can use to the cgroup
// version that provides it: v1 where a v1 hierarchy has it, else v2 where the
// unified hierarchy's cgroup.controllers lists it.
func AvailableControllers(mounts []CgroupMount) map[string]CgroupVersion {
	out := map[string]CgroupVersion{}
	for _, m := range mounts {
		if m.Version != 2 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.Mountpoint, "cgroup.controllers"))
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(b)) {
			out[c] = CgroupV2
		}
	}
	for _, m := range mounts {
		if m.Version == 1 {
			for _, c := range m.Controllers {
				if !strings.HasPrefix(c, "name=") {
					out[c] = CgroupV1
				}
			}
		}
	}
	return out
}

// ProcCgroup is the parsed /proc/<pid>/cgroup: the cgroup path of a process
// in each hierarchy, keyed by controller ("memory", "cpu", "name=systemd"),
// with "" for the unified (v2) hierarchy ("0::/path").
type ProcCgroup map[string]string

// ParseProcCgroup parses the text of /proc/<pid>/cgroup.
func ParseProcCgroup(r io.Reader) (ProcCgroup, error) {
	out := ProcCgroup{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("parsing cgroup line %q: want ID:controllers:path", line)
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("parsing cgroup file: no cgroup lines")
	}
	return out, nil
}

// UniformProcCgroup is what /proc/<pid>/cgroup would say for a process that
// sits at path in every hierarchy, as runc places a container at its
// linux.cgroupsPath. It stands in when the process is gone.
func UniformProcCgroup(mounts []CgroupMount, path string) ProcCgroup {
	out := ProcCgroup{}
	for _, m := range mounts {
		if m.Version == 2 {
			out[""] = path
		}
		for _, c := range m.Controllers {
			out[c] = path
		}
	}
	return out
}

// Limit is one limit read back from a cgroup file.
type Limit struct {
	Value     int64  // the limit, when Known and not Unlimited
	Unlimited bool   // the file says "max" (or v1's "no limit" values)
	Known     bool   // the file was found and read
	File      string // the file it was read from
}

// String is "max", the number, or "unknown".
func (l Limit) String() string {
	switch {
	case !l.Known:
		return "unknown"
	case l.Unlimited:
		return "max"
	}
	return strconv.FormatInt(l.Value, 10)
}

// Cgroup is a container's cgroup as the kernel reports it.
type Cgroup struct {
	Layout CgroupVersion
	// Path is the container's cgroup path (the unified hierarchy's, else the
	// memory controller's), e.g. /podlab/web.
	Path string
	// Dirs are the cgroup directories on disk that exist for the container,
	// one per hierarchy.
	Dirs []string
	// Memory is the memory limit in bytes (memory.max, memory.limit_in_bytes).
	Memory Limit
	// Pids is the maximum number of processes (pids.max).
	Pids Limit
	// CPUQuota is the CPU time in microseconds the cgroup may use per
	// CPUPeriod (cpu.max, cpu.cfs_quota_us): 50000 per 100000 is half a CPU.
	CPUQuota  Limit
	CPUPeriod Limit
}

// Dir is where the hierarchy m shows the cgroup path (a linux.cgroupsPath
// such as /podlab-1a2b3c4d/web): /sys/fs/cgroup/memory/podlab-1a2b3c4d/web.
func (m CgroupMount) Dir(path string) string { return m.dir(path) }

// dir is where the hierarchy m shows the cgroup path.
func (m CgroupMount) dir(path string) string {
	rel := path
	if m.Root != "/" && m.Root != "" {
		if r, ok := strings.CutPrefix(path, m.Root); ok && (r == "" || r[0] == '/') {
			rel = r
		}
	}
	return filepath.Join(m.Mountpoint, filepath.FromSlash(rel))
}

// controllerDir finds the directory that holds controller's files for a
// process with the given cgroups: its v1 hierarchy if it has one, else the
// unified hierarchy.
func controllerDir(mounts []CgroupMount, pc ProcCgroup, controller string) (string, bool) {
	for _, m := range mounts {
		if m.Version != 1 {
			continue
		}
		for _, c := range m.Controllers {
			if p, ok := pc[c]; ok && c == controller {
				return m.dir(p), true
			}
		}
	}
	for _, m := range mounts {
		if p, ok := pc[""]; ok && m.Version == 2 {
			return m.dir(p), true
		}
	}
	return "", false
}

// ReadCgroup reads back the limits of the cgroups pc (a process's
// /proc/<pid>/cgroup) from the hierarchies mounted at mounts.
func ReadCgroup(mounts []CgroupMount, pc ProcCgroup) *Cgroup {
	cg := &Cgroup{Layout: CgroupLayout(mounts), Path: pc[""]}
	if p, ok := pc["memory"]; ok && (cg.Path == "" || cg.Path == "/") {
		cg.Path = p
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		key := ""
		if m.Version == 1 {
			if len(m.Controllers) == 0 {
				continue
			}
			key = m.Controllers[0]
		}
		p, ok := pc[key]
		if !ok {
			continue
		}
		d := m.dir(p)
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && !seen[d] {
			seen[d] = true
			cg.Dirs = append(cg.Dirs, d)
		}
	}
	sort.Strings(cg.Dirs)

	if d, ok := controllerDir(mounts, pc, "memory"); ok {
		cg.Memory = readFirst(d, "memory.max", "memory.limit_in_bytes")
	}
	if d, ok := controllerDir(mounts, pc, "pids"); ok {
		cg.Pids = readFirst(d, "pids.max")
	}
	if d, ok := controllerDir(mounts, pc, "cpu"); ok {
		if l := readFirst(d, "cpu.cfs_quota_us"); l.Known {
			cg.CPUQuota, cg.CPUPeriod = l, readFirst(d, "cpu.cfs_period_us")
		} else if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
			// cpu.max: "$MAX $PERIOD", MAX may be "max"
			f := strings.Fields(string(b))
			file := filepath.Join(d, "cpu.max")
			if len(f) >= 1 {
				cg.CPUQuota = parseLimit(f[0], file)
			}
			if len(f) >= 2 {
				cg.CPUPeriod = parseLimit(f[1], file)
			}
		}
	}
	return cg
}

// readFirst reads the first of names that exists in dir.
func readFirst(dir string, names ...string) Limit {
	for _, n := range names {
		p := filepath.Join(dir, n)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		return parseLimit(strings.TrimSpace(string(b)), p)
	}
	return Limit{}
}

// parseLimit reads "max", a number, or v1's "no limit" values: -1, and the
// page-rounded maximum int64 that memory.limit_in_bytes reports.
func parseLimit(s, file string) Limit {
	l := Limit{File: file}
	if s == "max" {
		l.Known, l.Unlimited = true, true
		return l
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return l
	}
	l.Known = true
	if n < 0 || n >= 1<<62 {
		l.Unlimited = true
		return l
	}
	l.Value = n
	return l
}

// ReadProcessCgroup reads the cgroup of a running process: /proc/<pid>/cgroup,
// then the limit files of each controller.
func ReadProcessCgroup(mounts []CgroupMount, pid int) (*Cgroup, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	defer f.Close()
	pc, err := ParseProcCgroup(f)
	if err != nil {
		return nil, fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	return ReadCgroup(mounts, pc), nil
}

// RemoveCgroupDirs removes the empty cgroup directories that are left of
// path (a linux.cgroupsPath such as /podlab-1a2b3c4d/web) in every
// hierarchy: the leaf and then each parent that became empty, up to the
// hierarchy's root. runc removes only what it created for the container,
// and not always that. A cgroup still in use (with processes or other
// children) is kept. It returns the directories it removed.
func RemoveCgroupDirs(mounts []CgroupMount, path string) ([]string, error) {
	return RemoveCgroupDirsBelow(mounts, path, "/")
}

// RemoveCgroupDirsBelow is RemoveCgroupDirs that stops at parent: it
// removes path and the parents it emptied strictly below parent, never
// parent or what is above it (another state directory's, or a pod's cgroup
// with its settings). An empty parent removes path alone; a path not under
// parent is refused.
func RemoveCgroupDirsBelow(mounts []CgroupMount, path, parent string) ([]string, error) {
	path = filepath.Clean("/" + path)
	if path == "/" {
		return nil, nil
	}
	stop := filepath.Dir(path) // empty parent: the leaf alone
	if parent != "" {
		stop = filepath.Clean("/" + parent)
		if stop != "/" && !strings.HasPrefix(path, stop+"/") {
			return nil, fmt.Errorf("removing cgroup %s: it is not under %s, the runtime's cgroup parent: left alone", path, stop)
		}
	}
	var removed []string
	var errs []error
	for _, m := range mounts {
		if m.Version == 1 && len(m.Controllers) == 0 {
			continue
		}
		top := filepath.Clean(m.Mountpoint)
		limit := m.dir(stop)
		for d := m.dir(path); d != top && d != limit && strings.HasPrefix(d, top+string(filepath.Separator)); d = filepath.Dir(d) {
			err := unix.Rmdir(d)
			if err == nil {
				removed = append(removed, d)
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				continue // not in this hierarchy; a parent may still be
			}
			if d == m.dir(path) && !errors.Is(err, unix.ENOTEMPTY) {
				errs = append(errs, fmt.Errorf("removing cgroup %s (processes still in it?): %w", d, err))
			}
			break // in use: it and its parents stay
		}
	}
	return removed, errors.Join(errs...)
}

// KillCgroupProcs sends SIGKILL to every process in the cgroup path (a
// cgroupfs path, as RemoveCgroupDirs takes) of every hierarchy, and returns
// their PIDs: what is left in a cgroup that only one process should hold,
// such as the pause process a runtime killed mid-start never recorded. A
// cgroup that does not exist holds nothing.
func KillCgroupProcs(mounts []CgroupMount, path string) ([]int, error) {
	path = filepath.Clean("/" + path)
	if path == "/" {
		return nil, errors.New("killing the processes of a cgroup: no cgroup path given")
	}
	seen := map[int]bool{}
	var killed []int
	var errs []error
	for _, m := range mounts {
		b, err := os.ReadFile(filepath.Join(m.dir(path), "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the processes of cgroup %s: %w", m.dir(path), err))
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 0 || seen[pid] {
				continue
			}
			seen[pid] = true
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("killing process %d of cgroup %s: %w", pid, m.dir(path), err))
				continue
			}
			killed = append(killed, pid)
		}
	}
	return killed, errors.Join(errs...)
}

// EnterCgroup puts process pid into the cgroup path (a cgroupfs path such
// as /podlab-1a2b3c4d/nodes/n/kubepods/pod<uid>/<sandbox id>) of every
// hierarchy runc places a container in: each v1 hierarchy with a
// controller and the unified one. It makes the cgroup where it is missing
// (a new v1 cpuset cgroup gets its parent's cpus and mems, as runc does:
// an empty cpuset takes no process), then writes pid into its
// cgroup.procs, which moves the whole process. This is what runc does for
// a container's init; the CRI runtime does it for the pause process it
// starts itself. It returns the cgroup directories pid is now in.
func EnterCgroup(mounts []CgroupMount, path string, pid int) ([]string, error) {
	path = filepath.Clean("/" + path)
	if path == "/" {
		return nil, fmt.Errorf("putting process %d in a cgroup: no cgroup path given", pid)
	}
	var dirs []string
	for _, m := range mounts {
		if m.Version == 1 && !slices.ContainsFunc(m.Controllers, func(c string) bool { return !strings.HasPrefix(c, "name=") }) {
			continue // a named hierarchy (name=systemd) runc does not join
		}
		dir := m.dir(path)
		if err := makeCgroupDir(m, dir); err != nil {
			return dirs, fmt.Errorf("making cgroup %s: %w", dir, err)
		}
		procs := filepath.Join(dir, "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return dirs, fmt.Errorf("putting process %d in cgroup %s: %w", pid, procs, err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("putting process %d in cgroup %s: no cgroup hierarchy is mounted", pid, path)
	}
	return dirs, nil
}

// makeCgroupDir makes dir in hierarchy m, its parents first; in a v1
// cpuset hierarchy each new cgroup copies its parent's cpuset.cpus and
// cpuset.mems.
func makeCgroupDir(m CgroupMount, dir string) error {
	top := filepath.Clean(m.Mountpoint)
	rel, err := filepath.Rel(top, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not inside %s", dir, top)
	}
	cpuset := m.Version == 1 && slices.Contains(m.Controllers, "cpuset")
	cur := top
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		parent := cur
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if !cpuset {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(cur, f)); err == nil && strings.TrimSpace(string(b)) != "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(cur, f), b, 0o644); err != nil {
				return fmt.Errorf("copying %s of %s: %w", f, parent, err)
			}
		}
	}
	return nil
}
