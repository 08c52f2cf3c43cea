package runc

// podlab doctor: can this machine run the runtime half of Pod creation?

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Status is how a check came out.
type Status string

// Check outcomes.
const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warn" // works, but should be fixed or is slower
	StatusFail Status = "FAIL" // a required thing is missing
)

// Finding is the result of one check.
type Finding struct {
	Check  string // what was checked, e.g. "runtime", "cgroup memory"
	Status Status
	Detail string // what was found
	Fix    string // how to fix it, when not ok
}

// Failed reports whether any finding is a failure.
func Failed(fs []Finding) bool {
	for _, f := range fs {
		if f.Status == StatusFail {
			return true
		}
	}
	return false
}

// Facts is what the doctor looks at, gathered from the machine by
// GatherFacts or given by a test.
type Facts struct {
	EUID int
	// Runtime is the runtime binary's path; RuntimeErr why it is unusable.
	Runtime    string
	RuntimeErr error
	// RuntimeVersion is the output of `<runtime> --version`.
	RuntimeVersion string
	// RuntimeSeccomp says whether the runtime was built with seccomp
	// support (`runc features`); nil when unknown.
	RuntimeSeccomp *bool
	Cgroups        []CgroupMount
	Controllers    map[string]CgroupVersion
	// Namespaces holds the namespace types the kernel offers (/proc/self/ns).
	Namespaces map[string]bool
	// Seccomp says whether the kernel has seccomp (the Seccomp: line of /proc/self/status).
	Seccomp bool
	Pigz    string // path of pigz, "" if absent
	// Snapshotter is the snapshotter a node's runtime uses here
	// (unpack.DefaultSnapshotter: overlayfs where the kernel mounts it),
	// and SnapshotterWhy why it is not overlayfs; "" when not looked at.
	Snapshotter    string
	SnapshotterWhy error
	// Handlers are the other runtime handlers a node knows (runsc, crun)
	// and whether each can run here.
	Handlers []HandlerFacts
}

// HandlerFacts is what the doctor found of one runtime handler.
type HandlerFacts struct {
	Handler Handler
	// Path is the binary found, Version the first line of its --version.
	Path, Version string
	// Err is why the handler cannot run here: its binary is missing
	// (ErrRuntimeNotFound), or it refuses the host (ErrHybridCgroups).
	Err error
}

// GatherHandlerFacts looks at each handler but the default (runc, which
// the runtime checks are about) as a pod's sandbox would: its binary, its
// version, and whether it accepts this host's cgroups (at cgroupRoot).
func GatherHandlerFacts(ctx context.Context, handlers []Handler, cgroupRoot string) []HandlerFacts {
	var out []HandlerFacts
	for _, h := range handlers {
		if h.Name == DefaultHandler {
			continue
		}
		hf := HandlerFacts{Handler: h}
		if p, err := exec.LookPath(h.Binary); err == nil {
			hf.Path = p
			if b, err := exec.CommandContext(ctx, p, "--version").Output(); err == nil {
				hf.Version, _, _ = strings.Cut(string(b), "\n")
			}
		}
		hf.Err = h.Preflight(cgroupRoot)
		out = append(out, hf)
	}
	return out
}

// requiredNamespaces are the namespaces a Pod's containers get.
var requiredNamespaces = []string{"pid", "ipc", "uts", "mnt", "net", "cgroup"}

// requiredControllers are the cgroup controllers podlab sets limits with.
var requiredControllers = []string{"memory", "pids", "cpu"}

// Doctor checks this machine with the given runtime binary.
func Doctor(ctx context.Context, binary string) []Finding {
	return Diagnose(GatherFacts(ctx, binary))
}

// GatherFacts looks at this machine.
func GatherFacts(ctx context.Context, binary string) Facts {
	f := Facts{EUID: os.Geteuid(), Namespaces: map[string]bool{}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if binary == "" {
		f.RuntimeErr = fmt.Errorf("%w", ErrRuntimeNotFound)
	} else if p, err := exec.LookPath(binary); err != nil {
		f.Runtime, f.RuntimeErr = binary, unwrapExecErr(err)
	} else {
		f.Runtime = p
		out, err := exec.CommandContext(ctx, p, "--version").Output()
		if err != nil {
			f.RuntimeErr = fmt.Errorf("%s --version: %w", p, err)
		}
		f.RuntimeVersion = string(out)
		if out, err := exec.CommandContext(ctx, p, "features").Output(); err == nil {
			var feat struct {
				Linux struct {
					Seccomp *struct {
						Enabled *bool `json:"enabled"`
					} `json:"seccomp"`
				} `json:"linux"`
			}
			if json.Unmarshal(out, &feat) == nil {
				no := false
				f.RuntimeSeccomp = &no
				if s := feat.Linux.Seccomp; s != nil && s.Enabled != nil {
					f.RuntimeSeccomp = s.Enabled
				}
			}
		}
	}
	if mounts, err := HostCgroupMounts(); err == nil {
		f.Cgroups = mounts
		f.Controllers = AvailableControllers(mounts)
	}
	if ents, err := os.ReadDir("/proc/self/ns"); err == nil {
		for _, e := range ents {
			f.Namespaces[e.Name()] = true
		}
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Seccomp = bytes.Contains(b, []byte("\nSeccomp:"))
	}
	f.Pigz, _ = exec.LookPath("pigz")
	f.Handlers = GatherHandlerFacts(ctx, DefaultHandlers(binary), CgroupMountRoot)
	return f
}

// Diagnose turns facts into findings, each problem with its fix.
func Diagnose(f Facts) []Finding {
	var out []Finding
	add := func(check string, s Status, detail, fix string) {
		out = append(out, Finding{Check: check, Status: s, Detail: detail, Fix: fix})
	}

	if f.EUID == 0 {
		add("root", StatusOK, "running as root", "")
	} else {
		add("root", StatusFail, fmt.Sprintf("running as uid %d: runc needs root to create namespaces, cgroups and mounts", f.EUID),
			"run podlab as root (sudo podlab ...); pull, unpack and spec work without it")
	}

	switch {
	case f.Runtime == "" || f.RuntimeErr != nil && f.RuntimeVersion == "":
		detail := "no runc found"
		if f.Runtime != "" {
			detail = fmt.Sprintf("%s: %v", f.Runtime, f.RuntimeErr)
		}
		add("runtime", StatusFail, detail, "`make deps` installs runc 1.5.3 into bin/; or pass --runtime PATH (runc or crun)")
	default:
		name, version := ParseRuntimeVersion(f.RuntimeVersion)
		detail := fmt.Sprintf("%s: %s %s", f.Runtime, name, version)
		switch vulnerable, err := VulnerableRunc(version); {
		case name != "runc":
			add("runtime", StatusOK, detail+" (the runc CVE checks apply to runc only)", "")
		case err != nil:
			add("runtime", StatusWarn, detail+": cannot read the version: "+err.Error(), "`make deps` installs runc 1.5.3 into bin/")
		case vulnerable:
			add("runtime", StatusWarn, detail+": lacks the fixes for CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881 (container escape through /dev/null, /dev/console and procfs writes; fixed in 1.2.8, 1.3.3, 1.4.0-rc.3)",
				"`make deps` installs runc 1.5.3 into bin/; podlab prefers bin/runc over the one on PATH")
		default:
			add("runtime", StatusOK, detail+" (has the CVE-2025-31133/52565/52881 fixes)", "")
		}
		if f.RuntimeSeccomp != nil && !*f.RuntimeSeccomp {
			add("runtime seccomp", StatusWarn, "the runtime was built without libseccomp: a config.json with linux.seccomp (the RuntimeDefault profile) fails to run",
				"apt-get install libseccomp-dev, then rebuild runc (make deps); or leave seccomp out of the spec")
		}
	}

	switch layout := CgroupLayout(f.Cgroups); layout {
	case CgroupNone:
		add("cgroups", StatusFail, "no cgroup file system mounted", "mount cgroup2 on /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup)")
	default:
		var where []string
		for _, m := range f.Cgroups {
			if m.Version == 2 {
				where = append(where, m.Mountpoint+" (cgroup2)")
			}
		}
		detail := map[CgroupVersion]string{
			CgroupV1:     "cgroup v1: one hierarchy per controller under /sys/fs/cgroup/<controller>",
			CgroupV2:     "cgroup v2: one unified hierarchy",
			CgroupHybrid: "hybrid: v1 controllers under /sys/fs/cgroup/<controller> plus a cgroup2 mount",
		}[layout]
		if len(where) > 0 {
			detail += " at " + strings.Join(where, ", ")
		}
		add("cgroups", StatusOK, detail, "")
	}
	for _, c := range requiredControllers {
		if v, ok := f.Controllers[c]; ok {
			add("cgroup "+c, StatusOK, fmt.Sprintf("%s controller available (%s)", c, v), "")
		} else {
			add("cgroup "+c, StatusFail, fmt.Sprintf("no %s controller: config.json's %s limits cannot be enforced", c, c),
				fmt.Sprintf("enable it: on v2, echo +%s > /sys/fs/cgroup/cgroup.subtree_control; on v1, mount it (mount -t cgroup -o %s cgroup /sys/fs/cgroup/%s); check the kernel's cgroup_disable= boot option", c, c, c))
		}
	}

	var missing []string
	for _, ns := range requiredNamespaces {
		if !f.Namespaces[ns] {
			missing = append(missing, ns)
		}
	}
	if len(missing) == 0 {
		add("namespaces", StatusOK, strings.Join(requiredNamespaces, ", ")+" (under /proc/self/ns)", "")
	} else {
		add("namespaces", StatusFail, "the kernel lacks namespaces: "+strings.Join(missing, ", "),
			"use a kernel built with CONFIG_"+strings.ToUpper(missing[0])+"_NS (and the other *_NS options)")
	}
	if f.Seccomp {
		add("seccomp", StatusOK, "the kernel supports seccomp filters", "")
	} else {
		add("seccomp", StatusFail, "the kernel has no seccomp: containers cannot be confined to a syscall allow-list",
			"use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER")
	}
	for _, h := range f.Handlers {
		check := "handler " + h.Handler.Name
		var refusal *RefusalError
		switch {
		case errors.As(h.Err, &refusal):
			add(check, StatusWarn, refusal.Error(),
				fmt.Sprintf("pods of a RuntimeClass with handler %s fail with this reason in their FailedCreatePodSandBox event; boot with systemd.unified_cgroup_hierarchy=1 for pure cgroup v2, or use handler runc or runsc", h.Handler.Name))
		case h.Err != nil:
			fix := "apt-get install " + h.Handler.Package
			if h.Handler.Package == "" {
				fix = "install it, or point the handler elsewhere: podlab kubelet --runtime-handler " + h.Handler.Name + "=PATH"
			}
			add(check, StatusWarn, fmt.Sprintf("%s not installed (optional: pods of a RuntimeClass with handler %s cannot run)", h.Handler.Binary, h.Handler.Name), fix)
		default:
			add(check, StatusOK, fmt.Sprintf("%s: %s (a RuntimeClass's handler %s runs pods with it)", h.Path, h.Version, h.Handler.Name), "")
		}
	}
	switch {
	case f.Snapshotter == "":
	case f.SnapshotterWhy != nil:
		add("overlay", StatusWarn, fmt.Sprintf("snapshotter %s: %v (each container gets a full copy of its image's layers)", f.Snapshotter, f.SnapshotterWhy), "modprobe overlay, or keep the state directory on a filesystem overlayfs accepts as upper (not overlayfs itself)")
	default:
		add("overlay", StatusOK, "snapshotter "+f.Snapshotter+": a container's rootfs is an overlay of its image's snapshots and an upper directory of its own", "")
	}
	if f.Pigz != "" {
		add("pigz", StatusOK, f.Pigz+" (parallel gunzip speeds up unpacking)", "")
	} else {
		add("pigz", StatusWarn, "pigz not found (optional: unpacking gzip layers is slower without it)", "apt-get install pigz")
	}
	return out
}

// ParseRuntimeVersion reads the name and version from the first line of
// `runc --version` ("runc version 1.5.3") or `crun --version`.
func ParseRuntimeVersion(out string) (name, version string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	if !sc.Scan() {
		return "", ""
	}
	f := strings.Fields(sc.Text())
	if len(f) >= 3 && f[1] == "version" {
		return f[0], f[2]
	}
	if len(f) >= 2 {
		return f[0], f[len(f)-1]
	}
	return "", ""
}

// VulnerableRunc reports whether a runc version lacks the fixes for
// CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881: each release line got
// them in 1.2.8, 1.3.3 and 1.4.0-rc.3; every line before 1.2 has none
// (Debian 12's 1.1.5), every line after 1.4 has them.
func VulnerableRunc(version string) (bool, error) {
	v, err := parseVersion(version)
	if err != nil {
		return false, err
	}
	var fixed string
	switch {
	case v.major < 1 || v.major == 1 && v.minor < 2:
		return true, nil
	case v.major == 1 && v.minor == 2:
		fixed = "1.2.8"
	case v.major == 1 && v.minor == 3:
		fixed = "1.3.3"
	case v.major == 1 && v.minor == 4:
		fixed = "1.4.0-rc.3"
	default:
		return false, nil
	}
	f, _ := parseVersion(fixed)
	return compareVersions(v, f) < 0, nil
}

type version struct {
	major, minor, patch int
	pre                 []string // "rc", "3" for -rc.3
}

// parseVersion reads MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], with an
// optional leading v; Debian's "1.1.5+ds1" is 1.1.5.
func parseVersion(s string) (version, error) {
	var v version
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	s, _, _ = strings.Cut(s, "+")
	core, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
	}
	nums := []*int{&v.major, &v.minor, &v.patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
		}
		*nums[i] = n
	}
	if hasPre {
		if pre == "" {
			return v, fmt.Errorf("version %q has an empty pre-release", s)
		}
		v.pre = strings.Split(pre, ".")
	}
	return v, nil
}

// compareVersions orders versions by semver precedence: 1.4.0-rc.2 <
// 1.4.0-rc.10 < 1.4.0.
func compareVersions(a, b version) int {
	for _, d := range []int{a.major - b.major, a.minor - b.minor, a.patch - b.patch} {
		if d != 0 {
			return sign(d)
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, xerr := strconv.Atoi(a.pre[i])
		y, yerr := strconv.Atoi(b.pre[i])
		switch {
		case xerr == nil && yerr == nil:
			if x != y {
				return sign(x - y)
			}
		case xerr == nil: // numeric identifiers sort before alphanumeric ones
			return -1
		case yerr == nil:
			return 1
		default:
			if c := strings.Compare(a.pre[i], b.pre[i]); c != 0 {
				return c
			}
		}
	}
	return sign(len(a.pre) - len(b.pre))
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
