package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A process finds its cgroup limits in two steps, the same on every Linux:
//
//  1. /proc/self/cgroup names the cgroup the process is in, once per
//     hierarchy: "4:memory:/kubepods/pod1/abc" for a cgroup v1 controller,
//     "0::/kubepods/pod1/abc" for the single cgroup v2 hierarchy. A host can
//     have both ("hybrid"): v1 hierarchies hold the controllers, and the v2
//     one holds none.
//  2. /proc/self/mountinfo says where each hierarchy is mounted, and which
//     part of it ("root") the mount shows. The limit files are in the mount
//     point plus the cgroup's path below that root.
//
// Inside a container with its own cgroup namespace, /proc/self/cgroup says
// "/" and runc has mounted the container's own cgroup at /sys/fs/cgroup: the
// files are right there.

// Limit is one cgroup limit as the process sees it.
type Limit struct {
	File  string // the file it was read from, as this process sees it
	Raw   string // the file's content, trimmed
	Max   bool   // no limit ("max", or v1's "-1" or near-2^63 value)
	Value int64  // the limit, when !Max
	Err   error  // why it could not be read; the other fields are then empty
}

// CPULimit is the CFS bandwidth limit: Quota microseconds of CPU time per
// Period microseconds, so Quota/Period CPUs.
type CPULimit struct {
	File          string
	Raw           string
	Max           bool
	Quota, Period int64
	Err           error
}

// Limits is what the hello program reports about its cgroups.
type Limits struct {
	Version string // "v1", "v2" or "hybrid", from /proc/self/cgroup
	Path    string // the process's cgroup: the v2 path, else the memory controller's
	Memory  Limit  // bytes
	Pids    Limit  // processes
	CPU     CPULimit
	Err     error // /proc/self/cgroup could not be read: nothing else is known
}

// cgroupLine is one line of /proc/self/cgroup.
type cgroupLine struct {
	controllers []string // empty for the v2 line "0::/path"
	path        string
}

// cgroupMount is a cgroup or cgroup2 filesystem from /proc/self/mountinfo.
type cgroupMount struct {
	root, point string
	v2          bool
	options     []string // super options; a v1 mount lists its controllers there
}

// readLimits reads the limits of the calling process. root prefixes every
// absolute path ("" on a real system, a fake tree in tests).
func readLimits(root string) Limits {
	lines, err := readCgroupLines(filepath.Join(root, "/proc/self/cgroup"))
	if err != nil {
		return Limits{Err: err}
	}
	// mountinfo is optional: without it the usual mount points are assumed.
	mounts, _ := readCgroupMounts(filepath.Join(root, "/proc/self/mountinfo"))

	var l Limits
	var v1, v2 bool
	for _, cl := range lines {
		if len(cl.controllers) == 0 {
			v2 = true
			l.Path = cl.path
		} else if !strings.HasPrefix(cl.controllers[0], "name=") {
			v1 = true
		}
	}
	switch {
	case v1 && v2:
		l.Version = "hybrid"
	case v1:
		l.Version = "v1"
	case v2:
		l.Version = "v2"
	default:
		l.Version = "none"
	}

	memDir, memV1, memErr := controllerDir(root, lines, mounts, "memory")
	if memV1 || l.Path == "" {
		for _, cl := range lines {
			if slices.Contains(cl.controllers, "memory") {
				l.Path = cl.path
			}
		}
	}
	switch {
	case memErr != nil:
		l.Memory = Limit{Err: memErr}
	case memV1:
		l.Memory = readLimit(root, memDir, "memory.limit_in_bytes")
	default:
		l.Memory = readLimit(root, memDir, "memory.max")
	}

	if dir, _, err := controllerDir(root, lines, mounts, "pids"); err != nil {
		l.Pids = Limit{Err: err}
	} else {
		l.Pids = readLimit(root, dir, "pids.max")
	}

	if dir, isV1, err := controllerDir(root, lines, mounts, "cpu"); err != nil {
		l.CPU = CPULimit{Err: err}
	} else if isV1 {
		l.CPU = readCPUv1(root, dir)
	} else {
		l.CPU = readCPUv2(root, dir)
	}
	return l
}

// controllerDir finds the directory (as the process sees it, without root)
// holding controller's files: in the v1 hierarchy that has the controller,
// else in the v2 hierarchy.
func controllerDir(root string, lines []cgroupLine, mounts []cgroupMount, controller string) (dir string, v1 bool, err error) {
	for _, cl := range lines {
		if !slices.Contains(cl.controllers, controller) {
			continue
		}
		for _, m := range mounts {
			if !m.v2 && slices.Contains(m.options, controller) {
				return below(root, m, cl.path), true, nil
			}
		}
		// No mountinfo: the usual places, "/sys/fs/cgroup/cpu,cpuacct" or "/sys/fs/cgroup/cpu".
		for _, p := range []string{strings.Join(cl.controllers, ","), controller} {
			m := cgroupMount{root: "/", point: "/sys/fs/cgroup/" + p}
			if exists(root, m.point) {
				return below(root, m, cl.path), true, nil
			}
		}
		return "", true, fmt.Errorf("the %s hierarchy is not mounted", controller)
	}
	for _, cl := range lines {
		if len(cl.controllers) != 0 {
			continue
		}
		for _, m := range mounts {
			if m.v2 {
				return below(root, m, cl.path), false, nil
			}
		}
		for _, p := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
			if exists(root, path.Join(p, "cgroup.controllers")) {
				return below(root, cgroupMount{root: "/", point: p}, cl.path), false, nil
			}
		}
		return "", false, errors.New("the cgroup v2 hierarchy is not mounted")
	}
	return "", false, fmt.Errorf("no %s controller in /proc/self/cgroup", controller)
}

// below is the directory of cgroup cgPath inside mount m. When the mount does
// not show that cgroup (a container whose cgroup was bind-mounted, seen from
// a cgroup namespace), the mount point itself is the process's cgroup.
func below(root string, m cgroupMount, cgPath string) string {
	rel, ok := strings.CutPrefix(cgPath, m.root)
	if ok && (rel == "" || strings.HasPrefix(rel, "/") || m.root == "/") {
		dir := path.Join(m.point, rel)
		if exists(root, dir) {
			return dir
		}
	}
	return m.point
}

func readLimit(root, dir, name string) Limit {
	l := Limit{File: path.Join(dir, name)}
	b, err := os.ReadFile(filepath.Join(root, l.File))
	if err != nil {
		l.Err = err
		return l
	}
	l.Raw = strings.TrimSpace(string(b))
	if l.Raw == "max" {
		l.Max = true
		return l
	}
	v, err := strconv.ParseInt(l.Raw, 10, 64)
	if err != nil {
		l.Err = fmt.Errorf("%s: %w", l.File, err)
		return l
	}
	// cgroup v1 says "no limit" with -1 or with the largest page-aligned int64.
	if v < 0 || v >= 1<<62 {
		l.Max = true
		return l
	}
	l.Value = v
	return l
}

func readCPUv2(root, dir string) CPULimit {
	c := CPULimit{File: path.Join(dir, "cpu.max")}
	b, err := os.ReadFile(filepath.Join(root, c.File))
	if err != nil {
		c.Err = err
		return c
	}
	c.Raw = strings.TrimSpace(string(b))
	quota, period, ok := strings.Cut(c.Raw, " ")
	if !ok {
		c.Err = fmt.Errorf("%s: want \"QUOTA PERIOD\", got %q", c.File, c.Raw)
		return c
	}
	if c.Period, err = strconv.ParseInt(period, 10, 64); err != nil {
		c.Err = fmt.Errorf("%s: %w", c.File, err)
		return c
	}
	if quota == "max" {
		c.Max = true
		return c
	}
	if c.Quota, err = strconv.ParseInt(quota, 10, 64); err != nil {
		c.Err = fmt.Errorf("%s: %w", c.File, err)
	}
	return c
}

func readCPUv1(root, dir string) CPULimit {
	quota := readLimit(root, dir, "cpu.cfs_quota_us")
	c := CPULimit{File: quota.File, Raw: quota.Raw, Max: quota.Max, Quota: quota.Value, Err: quota.Err}
	if c.Err != nil {
		return c
	}
	period := readLimit(root, dir, "cpu.cfs_period_us")
	if period.Err != nil {
		c.Err = period.Err
		return c
	}
	c.Period = period.Value
	c.Raw += " " + period.Raw
	return c
}

func readCgroupLines(file string) ([]cgroupLine, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []cgroupLine
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		cl := cgroupLine{path: parts[2]}
		if parts[1] != "" {
			cl.controllers = strings.Split(parts[1], ",")
		}
		lines = append(lines, cl)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s lists no cgroup", file)
	}
	return lines, nil
}

func readCgroupMounts(file string) ([]cgroupMount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []cgroupMount
	s := bufio.NewScanner(f)
	for s.Scan() {
		// 36 25 0:31 /root /mount/point rw,nosuid - cgroup cgroup rw,memory
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || (b[0] != "cgroup" && b[0] != "cgroup2") {
			continue
		}
		mounts = append(mounts, cgroupMount{
			root:    unescape(a[3]),
			point:   unescape(a[4]),
			v2:      b[0] == "cgroup2",
			options: strings.Split(b[2], ","),
		})
	}
	return mounts, s.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func exists(root, p string) bool {
	_, err := os.Stat(filepath.Join(root, p))
	return err == nil
}
