package spec

import (
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Explain writes, part by part, what s will make runc ask of the kernel:
// rootfs, process and user, namespace by namespace, limit by limit,
// capability by capability, the other guards (noNewPrivileges, masked
// and read-only paths, rlimits, devices), and the seccomp filter. It returns
// the first write error.
func Explain(w io.Writer, s *specs.Spec) error {
	e := &explainer{w: w}
	if s == nil {
		e.line("(no spec)")
		return e.err
	}
	e.rootfs(s)
	e.process(s)
	e.namespaces(s)
	e.cgroups(s)
	e.capabilities(s)
	e.guards(s)
	e.seccomp(s)
	return e.err
}

type explainer struct {
	w   io.Writer
	err error
}

func (e *explainer) line(format string, args ...any) {
	if e.err != nil {
		return
	}
	_, e.err = fmt.Fprintf(e.w, format+"\n", args...)
}

// wrapped writes words after indent, several to a line of at most 90 bytes.
func (e *explainer) wrapped(indent string, words []string) {
	line := indent
	for _, w := range words {
		if line != indent && len(line)+1+len(w) > 90 {
			e.line("%s", line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	if line != indent {
		e.line("%s", line)
	}
}

func (e *explainer) rootfs(s *specs.Spec) {
	e.line("Root filesystem")
	if s.Root == nil {
		e.line("  none: runc needs root.path")
		return
	}
	where := "an absolute path"
	if !path.IsAbs(s.Root.Path) {
		where = "relative to the bundle, so the bundle can be moved"
	}
	e.line("  root.path %q (%s):", s.Root.Path, where)
	e.line("  runc bind-mounts it, pivot_root(2)s into it and detaches the old root: the app sees")
	e.line("  only the image's files as /.")
	if s.Root.Readonly {
		e.line("  readonly: the root is remounted read-only; the app can write only to mounts.")
	} else {
		e.line("  writable: the app's writes land in the bundle's rootfs directory.")
	}
	if len(s.Mounts) > 0 {
		e.line("  mounts, made in the new mount namespace before the pivot:")
		for _, m := range s.Mounts {
			e.line("    %-16s %-7s %s", m.Destination, m.Type, strings.Join(m.Options, ","))
		}
	}
	e.line("")
}

func (e *explainer) process(s *specs.Spec) {
	e.line("Process")
	p := s.Process
	if p == nil {
		e.line("  none: runc needs process.args")
		e.line("")
		return
	}
	e.line("  execve(%q) with args %q,", first(p.Args), p.Args)
	e.line("  started in %s with %d environment variables; it becomes PID 1 of its pid namespace.", p.Cwd, len(p.Env))
	if s.Hostname != "" {
		e.line("  hostname %q: sethostname(2) in the new uts namespace; the host's name is untouched.", s.Hostname)
	}
	u := p.User
	who := fmt.Sprintf("uid %d, gid %d", u.UID, u.GID)
	if len(u.AdditionalGids) > 0 {
		who += fmt.Sprintf(", groups %v", u.AdditionalGids)
	}
	e.line("  user: %s: runc calls setgroups(2), setgid(2), setuid(2) just before execve.", who)
	if host, ok := hostID(s, u.UID); ok {
		e.line("  uid %d in the user namespace is host uid %d: root only inside, its capabilities hold", u.UID, host)
		e.line("  over the namespaces its user namespace owns, never over the host's files or devices.")
	} else if u.UID == 0 {
		e.line("  uid 0 without a user namespace is the host's root, held back only by the")
		e.line("  capabilities, namespaces and masked paths below (Kubernetes: runAsNonRoot refuses this).")
	} else {
		e.line("  a non-root uid ends up with no capabilities: at execve(2) the kernel grants them only")
		e.line("  to uid 0, to files carrying capabilities, or through the (empty) ambient set.")
	}
	if u.Umask != nil {
		e.line("  umask %04o.", *u.Umask)
	}
	e.line("")
}

func (e *explainer) namespaces(s *specs.Spec) {
	e.line("Namespaces (what the app gets its own copy of: clone(2)/unshare(2) flags)")
	if s.Linux == nil || len(s.Linux.Namespaces) == 0 {
		e.line("  none: the app shares every namespace with the host")
		e.line("")
		return
	}
	have := map[specs.LinuxNamespaceType]bool{}
	for _, ns := range s.Linux.Namespaces {
		have[ns.Type] = true
		how := "new"
		if ns.Path != "" {
			how = "joins " + ns.Path + ","
		}
		e.line("  %-7s %s %s", ns.Type, how, namespaceMeaning(ns.Type))
	}
	var shared []string
	for _, t := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace,
		specs.UTSNamespace, specs.MountNamespace, specs.CgroupNamespace, specs.UserNamespace, specs.TimeNamespace} {
		if !have[t] {
			shared = append(shared, string(t))
		}
	}
	if have[specs.UserNamespace] {
		e.idMappings("uid", s.Linux.UIDMappings)
		e.idMappings("gid", s.Linux.GIDMappings)
	}
	if len(shared) > 0 {
		e.line("  shared with the host: %s", strings.Join(shared, ", "))
		if !have[specs.UserNamespace] {
			e.line("    (no user namespace: uids in the container are the host's uids)")
		}
	}
	e.line("  In a Pod, the containers join the sandbox's (pause container's) network, ipc and")
	e.line("  uts namespaces, so they share one IP and localhost; here this container has its own.")
	e.line("")
}

// idMappings writes what linux.uidMappings or gidMappings say: the lines
// runc writes to /proc/<pid>/uid_map and gid_map.
func (e *explainer) idMappings(kind string, ms []specs.LinuxIDMapping) {
	if len(ms) == 0 {
		e.line("    no %s mapping: every %s shows as 65534 (nobody) inside", kind, kind)
		return
	}
	for _, m := range ms {
		e.line("    %ss %d-%d in the container are host %ss %d-%d (%s_map line \"%d %d %d\")", kind, m.ContainerID, uint64(m.ContainerID)+uint64(m.Size)-1,
			kind, m.HostID, uint64(m.HostID)+uint64(m.Size)-1, kind, m.ContainerID, m.HostID, m.Size)
	}
}

// hostID is the host uid that uid in the container stands for, when the
// spec has a user namespace that maps it.
func hostID(s *specs.Spec, uid uint32) (uint32, bool) {
	if s.Linux == nil || !slices.ContainsFunc(s.Linux.Namespaces, func(ns specs.LinuxNamespace) bool { return ns.Type == specs.UserNamespace }) {
		return 0, false
	}
	for _, m := range s.Linux.UIDMappings {
		if uid >= m.ContainerID && uint64(uid) < uint64(m.ContainerID)+uint64(m.Size) {
			return m.HostID + (uid - m.ContainerID), true
		}
	}
	return 0, false
}

func namespaceMeaning(t specs.LinuxNamespaceType) string {
	switch t {
	case specs.PIDNamespace:
		return "the app is PID 1 and sees only its own processes; when it exits, the kernel kills the rest"
	case specs.NetworkNamespace:
		return "its own network stack: only lo (down until someone brings it up), no routes; CNI adds the rest"
	case specs.IPCNamespace:
		return "its own System V IPC and POSIX message queues: no shared memory with host processes"
	case specs.UTSNamespace:
		return "its own hostname and domain name"
	case specs.MountNamespace:
		return "its own mount table: mounts made inside are invisible outside, and the rootfs becomes /"
	case specs.CgroupNamespace:
		return "its own cgroup appears as / in /proc/self/cgroup and /sys/fs/cgroup: the host's cgroup tree is hidden"
	case specs.UserNamespace:
		return "its own uid/gid mapping: root inside can be an unprivileged uid outside"
	case specs.TimeNamespace:
		return "its own offsets for the monotonic and boot clocks"
	}
	return "(unknown namespace type)"
}

func (e *explainer) cgroups(s *specs.Spec) {
	e.line("Cgroup and limits")
	if s.Linux == nil {
		e.line("  none")
		e.line("")
		return
	}
	cg := s.Linux.CgroupsPath
	if cg != "" {
		e.line("  cgroupsPath %s: runc creates /sys/fs/cgroup%s (cgroup v2)", cg, cg)
		e.line("  or /sys/fs/cgroup/<controller>%s (v1), writes the limits, then moves the app in.", cg)
	}
	r := s.Linux.Resources
	if r == nil {
		r = &specs.LinuxResources{}
	}
	if r.Memory != nil && r.Memory.Limit != nil && *r.Memory.Limit > 0 {
		n := *r.Memory.Limit
		e.line("  memory  %d bytes (%s): memory.max (v2) / memory.limit_in_bytes (v1); past it the", n, humanBytes(n))
		e.line("          kernel reclaims page cache, then the OOM killer kills a process in the container")
		e.line("          (Kubernetes reports OOMKilled, exit code 137).")
	} else {
		e.line("  memory  no limit: the container may use all of the host's memory.")
	}
	if c := r.CPU; c != nil && c.Quota != nil && c.Period != nil && *c.Quota > 0 {
		e.line("  cpu     quota %dµs per %dµs period = %.3g CPUs: cpu.max \"%d %d\" (v2) / cpu.cfs_quota_us,", *c.Quota, *c.Period,
			float64(*c.Quota)/float64(*c.Period), *c.Quota, *c.Period)
		e.line("          cpu.cfs_period_us (v1); once the quota is used up, the app's threads wait for the")
		e.line("          next period (throttling, not killing).")
	} else {
		e.line("  cpu     no quota: the app may use every CPU.")
	}
	if c := r.CPU; c != nil && c.Shares != nil {
		e.line("  shares  %d: cpu.shares (v1), converted to cpu.weight (v2): the app's share when CPUs are busy.", *c.Shares)
	}
	if r.Pids != nil && r.Pids.Limit != nil && *r.Pids.Limit > 0 {
		e.line("  pids    %d: pids.max; fork(2) and clone(2) fail with EAGAIN past it (a fork bomb stops there).", *r.Pids.Limit)
	} else {
		e.line("  pids    no limit.")
	}
	e.line("")
}

func (e *explainer) capabilities(s *specs.Spec) {
	e.line("Capabilities (root's powers, split into pieces)")
	var c *specs.LinuxCapabilities
	if s.Process != nil {
		c = s.Process.Capabilities
	}
	if c == nil {
		e.line("  none set: runc keeps no capabilities")
		e.line("")
		return
	}
	e.line("  bounding set, the most any process in the container can ever get:")
	for _, name := range c.Bounding {
		e.line("    %-22s %s", name, capMeaning(name))
	}
	e.line("  effective %d, permitted %d, inheritable %d, ambient %d.", len(c.Effective), len(c.Permitted), len(c.Inheritable), len(c.Ambient))
	if len(c.Inheritable) == 0 {
		e.line("  The inheritable set is empty: a program exec'd with file capabilities gains none from")
		e.line("  the app (the fix for CVE-2022-24769).")
	}
	var missing []string
	for _, name := range notableCaps() {
		if !slices.Contains(c.Bounding, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		e.line("  NOT granted (among others):")
		for _, name := range missing {
			e.line("    %-22s %s", name, capMeaning(name))
		}
	}
	e.line("  Kubernetes: securityContext.capabilities.add/drop edit this list; privileged: true grants all.")
	e.line("")
}

func (e *explainer) guards(s *specs.Spec) {
	e.line("Other guards")
	if s.Process != nil {
		if s.Process.NoNewPrivileges {
			e.line("  noNewPrivileges: prctl(PR_SET_NO_NEW_PRIVS): setuid binaries and file capabilities")
			e.line("  grant nothing on execve (Kubernetes: allowPrivilegeEscalation: false).")
		} else {
			e.line("  noNewPrivileges is off: a setuid-root binary in the image can regain privileges.")
		}
		for _, r := range s.Process.Rlimits {
			e.line("  %s soft %d hard %d (setrlimit(2))%s.", r.Type, r.Soft, r.Hard, rlimitMeaning(r.Type))
		}
	}
	if l := s.Linux; l != nil {
		if len(l.MaskedPaths) > 0 {
			e.line("  masked paths (/dev/null bound over files, an empty read-only tmpfs over directories),")
			e.line("  host information the app must not read:")
			e.wrapped("    ", l.MaskedPaths)
		}
		if len(l.ReadonlyPaths) > 0 {
			e.line("  read-only paths (bind-remounted read-only), kernel knobs the app must not turn:")
			e.wrapped("    ", l.ReadonlyPaths)
		}
		if r := l.Resources; r != nil && len(r.Devices) > 0 {
			e.line("  device cgroup rules (devices.allow/deny in v1, an eBPF program in v2), in order:")
			for _, d := range r.Devices {
				verb := "deny"
				if d.Allow {
					verb = "allow"
				}
				e.line("    %-5s %s", verb, deviceRule(d))
			}
			e.line("  runc then allows its default devices: null, zero, full, random, urandom, tty, ptmx, pts.")
		}
		for _, d := range l.Devices {
			e.line("  device node %s (%s %d:%d) created in /dev", d.Path, d.Type, d.Major, d.Minor)
		}
	}
	if s.Process != nil && s.Process.ApparmorProfile != "" {
		e.line("  AppArmor profile %s.", s.Process.ApparmorProfile)
	}
}

func deviceRule(d specs.LinuxDeviceCgroup) string {
	typ := d.Type
	if typ == "" {
		typ = "a"
	}
	num := func(p *int64) string {
		if p == nil {
			return "*"
		}
		return fmt.Sprint(*p)
	}
	rule := fmt.Sprintf("%s %s:%s %s", typ, num(d.Major), num(d.Minor), d.Access)
	if typ == "a" && d.Major == nil && d.Minor == nil {
		rule += " (every device)"
	}
	return rule
}

func rlimitMeaning(t string) string {
	switch t {
	case "RLIMIT_NOFILE":
		return ": open(2) fails with EMFILE past that many open files"
	case "RLIMIT_NPROC":
		return ": at most that many processes for the uid"
	case "RLIMIT_CORE":
		return ": the largest core dump"
	}
	return ""
}

// notableCaps are capabilities a learner should know a container does not
// get by default.
func notableCaps() []string {
	return []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_MODULE", "CAP_SYS_TIME",
		"CAP_SYS_BOOT", "CAP_SYS_RAWIO", "CAP_DAC_READ_SEARCH", "CAP_SYS_RESOURCE", "CAP_BPF", "CAP_PERFMON"}
}

func capMeaning(name string) string {
	switch name {
	case "CAP_CHOWN":
		return "change the owner of any file"
	case "CAP_DAC_OVERRIDE":
		return "read, write and execute any file regardless of its permission bits"
	case "CAP_DAC_READ_SEARCH":
		return "read any file and search any directory; open files by handle (the 2014 Docker breakout)"
	case "CAP_FOWNER":
		return "act on files it does not own (chmod, utime) as if it owned them"
	case "CAP_FSETID":
		return "keep setuid/setgid bits when modifying a file; set setgid for other groups"
	case "CAP_KILL":
		return "send signals to processes of other users (in its pid namespace)"
	case "CAP_SETGID":
		return "change its gid and supplementary groups (to drop privileges, as nginx does)"
	case "CAP_SETUID":
		return "change its uid (to drop privileges, as nginx does)"
	case "CAP_SETPCAP":
		return "drop capabilities from its bounding set and grant inheritable ones"
	case "CAP_LINUX_IMMUTABLE":
		return "set the immutable and append-only file attributes"
	case "CAP_NET_BIND_SERVICE":
		return "bind ports below 1024"
	case "CAP_NET_BROADCAST":
		return "broadcast and listen to multicast"
	case "CAP_NET_ADMIN":
		return "configure interfaces, routes, firewall rules of its network namespace"
	case "CAP_NET_RAW":
		return "open raw and packet sockets (ping; also ARP/DNS spoofing on the pod network)"
	case "CAP_IPC_LOCK":
		return "lock memory (mlock) beyond RLIMIT_MEMLOCK"
	case "CAP_IPC_OWNER":
		return "bypass permission checks on System V IPC objects"
	case "CAP_SYS_MODULE":
		return "load and unload kernel modules: full control of the host kernel"
	case "CAP_SYS_RAWIO":
		return "raw I/O ports and /dev/mem: read and write host memory"
	case "CAP_SYS_CHROOT":
		return "call chroot(2)"
	case "CAP_SYS_PTRACE":
		return "ptrace any process it can see and read its memory"
	case "CAP_SYS_PACCT":
		return "switch process accounting on and off"
	case "CAP_SYS_ADMIN":
		return "mount, unshare, sethostname, bpf and much more: 'the new root', most breakouts need it"
	case "CAP_SYS_BOOT":
		return "reboot(2) the host and load a new kernel"
	case "CAP_SYS_NICE":
		return "raise priorities and set real-time scheduling for any process"
	case "CAP_SYS_RESOURCE":
		return "exceed resource limits and quotas"
	case "CAP_SYS_TIME":
		return "set the system clock, which is not namespaced: the host's clock"
	case "CAP_SYS_TTY_CONFIG":
		return "vhangup(2) and configure terminals"
	case "CAP_MKNOD":
		return "create device nodes with mknod(2) (the device cgroup still decides which open)"
	case "CAP_LEASE":
		return "take leases on files it does not own"
	case "CAP_AUDIT_WRITE":
		return "write records to the kernel audit log (login programs such as sshd need it)"
	case "CAP_AUDIT_CONTROL":
		return "configure kernel auditing"
	case "CAP_SETFCAP":
		return "set file capabilities on files"
	case "CAP_MAC_OVERRIDE":
		return "override mandatory access control (Smack)"
	case "CAP_MAC_ADMIN":
		return "configure mandatory access control (Smack, AppArmor)"
	case "CAP_SYSLOG":
		return "read and clear the kernel log (kernel addresses)"
	case "CAP_WAKE_ALARM":
		return "set alarms that wake the system"
	case "CAP_BLOCK_SUSPEND":
		return "prevent the system from suspending"
	case "CAP_AUDIT_READ":
		return "read the audit log over netlink"
	case "CAP_PERFMON":
		return "use perf_event_open(2) and other performance monitoring"
	case "CAP_BPF":
		return "load BPF programs and create maps"
	case "CAP_CHECKPOINT_RESTORE":
		return "checkpoint and restore processes (set pids, read other processes' maps)"
	}
	return "(unknown capability)"
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.4g %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// notableSyscalls are system calls a learner should know the runtime's
// default filter closes (unless CAP_SYS_ADMIN or another capability opens
// them again), each with what it would let the app do.
var notableSyscalls = []struct{ name, meaning string }{
	{"mount", "mount file systems (a new /proc, the host's disk if a device is reachable)"},
	{"umount2", "unmount what the runtime mounted over host paths"},
	{"unshare", "make new namespaces, e.g. a user namespace where it is root again (unshare -U)"},
	{"setns", "join another process's namespaces"},
	{"keyctl", "use the kernel keyring, which is not namespaced: other containers' keys"},
	{"add_key", "add keys to the kernel keyring"},
	{"ptrace", "trace processes it can see (containerd allows it on kernel 4.8+, where it cannot undo seccomp)"},
	{"bpf", "load BPF programs into the kernel"},
	{"perf_event_open", "performance counters: a classic source of kernel exploits and leaks"},
	{"kexec_load", "load a new kernel to boot into"},
	{"init_module", "load a kernel module"},
	{"open_by_handle_at", "open host files by handle, around the mount namespace (the 2014 Docker breakout)"},
	{"reboot", "reboot the host"},
	{"clock_settime", "set the host's clock"},
	{"userfaultfd", "pause the kernel on page faults, a tool of race exploits"},
	{"io_uring_setup", "io_uring, a large kernel attack surface"},
}

func (e *explainer) seccomp(s *specs.Spec) {
	e.line("")
	e.line("Seccomp (a BPF filter on every system call: what the app may ask the kernel at all)")
	var f *specs.LinuxSeccomp
	if s.Linux != nil {
		f = s.Linux.Seccomp
	}
	if f == nil {
		e.line("  none: no filter, every system call the capabilities allow is open; /proc/PID/status")
		e.line("  will show \"Seccomp: 0\". Kubernetes' default without the kubelet's --seccomp-default;")
		e.line("  securityContext.seccompProfile type RuntimeDefault adds the runtime's filter, which")
		e.line("  blocks calls such as mount, unshare, keyctl, bpf and kexec_load.")
		return
	}
	def := string(f.DefaultAction)
	if f.DefaultAction == specs.ActErrno {
		errno := uint(1)
		if f.DefaultErrnoRet != nil {
			errno = *f.DefaultErrnoRet
		}
		def += fmt.Sprintf(" (the call fails with %s)", errnoName(errno))
	}
	e.line("  runc loads it with seccomp(2) just before execve; /proc/PID/status will show")
	e.line("  \"Seccomp: 2\" (filter mode), and no process in the container can remove it.")
	e.line("  default action %s: for any call no rule names.", def)
	var arches []string
	for _, a := range f.Architectures {
		arches = append(arches, string(a))
	}
	if len(arches) == 0 {
		arches = []string{"the native one only"}
	}
	e.line("  architectures  %s", strings.Join(arches, ", "))
	allowed := map[string]bool{}
	for _, r := range f.Syscalls {
		if r.Action == specs.ActAllow {
			for _, n := range r.Names {
				allowed[n] = true
			}
		}
	}
	e.line("  %d rules naming %d system calls allowed (some only for certain arguments).", len(f.Syscalls), len(allowed))
	var blocked, open []string
	for _, sc := range notableSyscalls {
		action, conditional, errno := seccompVerdict(f, sc.name)
		switch {
		case action == specs.ActAllow && conditional:
			open = append(open, fmt.Sprintf("    %-17s only for some arguments: %s", sc.name, sc.meaning))
		case action == specs.ActAllow:
			open = append(open, fmt.Sprintf("    %-17s %s", sc.name, sc.meaning))
		case action == specs.ActErrno:
			if errno == 0 {
				errno = 1
			}
			blocked = append(blocked, fmt.Sprintf("    %-17s %-6s %s", sc.name, errnoName(errno), sc.meaning))
		default:
			blocked = append(blocked, fmt.Sprintf("    %-17s %s: %s", sc.name, action, sc.meaning))
		}
	}
	if len(blocked) > 0 {
		e.line("  NOT allowed (among others), and the error the app gets instead:")
		for _, l := range blocked {
			e.line("%s", l)
		}
	}
	if len(open) > 0 {
		e.line("  allowed by this profile:")
		for _, l := range open {
			e.line("%s", l)
		}
	}
	e.line("  Kubernetes: securityContext.seccompProfile (pod or container): RuntimeDefault is this")
	e.line("  runtime's profile, Localhost a file in the kubelet's seccomp directory, Unconfined none.")
}

func errnoName(n uint) string {
	switch n {
	case 1:
		return "EPERM"
	case 38:
		return "ENOSYS"
	}
	return fmt.Sprintf("errno %d", n)
}
