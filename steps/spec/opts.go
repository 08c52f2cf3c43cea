package spec

import (
	"context"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Each option below is an oci.SpecOpts, like containerd's own: it changes one
// part of the spec, works on an empty spec, and returns an error for input it
// must refuse.

// CFS period and cpu shares as the kubelet computes them
// (pkg/kubelet/cm/helpers_linux.go).
const (
	cfsPeriod   = 100000 // µs: quotas are per 100ms
	minCFSQuota = 1000   // µs: the kernel's minimum quota
	minShares   = 2
	maxShares   = 262144
)

// WithRelativeRootfs sets root.path to "rootfs", relative to the bundle, so
// that the bundle can be moved (oci.WithRootFSPath wants an absolute path).
func WithRelativeRootfs() oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Root == nil {
			s.Root = &specs.Root{}
		}
		s.Root.Path = RootfsDir
		return nil
	}
}

// WithCgroupNamespace gives the container its own cgroup namespace: it sees
// its own cgroup as the root "/" of /proc/self/cgroup and /sys/fs/cgroup.
func WithCgroupNamespace() oci.SpecOpts {
	return oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace})
}

// WithCgroupfsMount mounts the container's own cgroups read-only at
// /sys/fs/cgroup, as Kubernetes runtimes do (containerd's CRI adds this
// "cgroup" mount, ro), so the app can read its limits and write nothing.
//
// On cgroup v2 runc mounts one cgroup2 file system there, read-only. On
// cgroup v1 (and hybrid) hosts it mounts a tmpfs there and each controller
// below it: the controllers read-only, but runc v1.2 and later leave the
// tmpfs itself writable (runc v1.0 remounted it read-only, as systemd does
// on the host), so the app could make files and directories in
// /sys/fs/cgroup. A read-only tmpfs listed at the same place just before the
// cgroup mount closes that: runc's last mount step remounts each read-only
// tmpfs of the list read-only by its destination, which then names the top
// mount there, the cgroup tmpfs. On cgroup v2 it lies hidden under the
// cgroup2 mount. WithWriteableCgroupfs (a privileged container) leaves it
// read-only, as the host's own cgroup tmpfs is: only the controllers
// become writable.
func WithCgroupfsMount() oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		for _, m := range s.Mounts {
			if path.Clean(m.Destination) == "/sys/fs/cgroup" {
				return nil
			}
		}
		s.Mounts = append(s.Mounts,
			specs.Mount{
				Destination: "/sys/fs/cgroup",
				Type:        "tmpfs",
				Source:      "tmpfs",
				Options:     []string{"nosuid", "noexec", "nodev", "mode=755", "size=4k", "ro"},
			},
			specs.Mount{
				Destination: "/sys/fs/cgroup",
				Type:        "cgroup",
				Source:      "cgroup",
				Options:     []string{"nosuid", "noexec", "nodev", "relatime", "ro"},
			})
		return nil
	}
}

// WithSysctls sets linux.sysctl: runc writes each value to
// /proc/sys/<name with dots as slashes> inside the container's namespaces
// before the app starts (it refuses a sysctl of a namespace the container
// shares with the host). The CRI runtime gives every container of a pod
// its sandbox's sysctls, as containerd does. A name that is not a sysctl
// name (dot- or slash-separated segments of [a-z0-9_-]) or a value with a
// newline is refused.
func WithSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if len(sysctls) == 0 {
			return nil
		}
		setLinux(s)
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for k, v := range sysctls {
			if !sysctlName.MatchString(k) {
				return fmt.Errorf("sysctl %q: not a sysctl name (segments of a-z, 0-9, _ and -, separated by dots or slashes, as net.ipv4.ip_unprivileged_port_start)", k)
			}
			if strings.ContainsAny(v, "\n\x00") {
				return fmt.Errorf("sysctl %s: the value %q has a newline or NUL byte", k, v)
			}
			s.Linux.Sysctl[k] = v
		}
		return nil
	}
}

// sysctlName is Kubernetes' sysctl name (validation.SysctlContainSlashFmt).
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// WithCgroupsPath sets linux.cgroupsPath to parent/id (podlab's convention is
// /podlab/<id>): runc creates that cgroup and writes the limits into it.
func WithCgroupsPath(parent, id string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if err := ValidateID(id); err != nil {
			return err
		}
		if !path.IsAbs(parent) || path.Clean(parent) != parent {
			return fmt.Errorf("cgroup parent %q: must be a clean absolute path", parent)
		}
		setLinux(s)
		s.Linux.CgroupsPath = path.Join(parent, id)
		return nil
	}
}

// The range of oom_score_adj (Documentation/filesystems/proc.rst):
// -1000 exempts a process from the OOM killer, 1000 makes it the first
// victim.
const (
	MinOOMScoreAdj = -1000
	MaxOOMScoreAdj = 1000
)

// WithOOMScoreAdj sets process.oomScoreAdj, which runc writes to
// /proc/<pid>/oom_score_adj of the container's first process. A value out
// of [-1000, 1000] is refused. Lowering it below what the runtime's own
// process has needs CAP_SYS_RESOURCE: the caller picks what the kernel will
// allow (see the kubelet's restriction, as containerd's restrict_oom_score_adj).
func WithOOMScoreAdj(adj int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if adj < MinOOMScoreAdj || adj > MaxOOMScoreAdj {
			return fmt.Errorf("oom_score_adj %d: must be between %d and %d", adj, MinOOMScoreAdj, MaxOOMScoreAdj)
		}
		setProcess(s)
		s.Process.OOMScoreAdj = &adj
		return nil
	}
}

// WithHostname sets the hostname runc gives the container's UTS namespace.
func WithHostname(name string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if err := validateHostname(name); err != nil {
			return err
		}
		s.Hostname = name
		return nil
	}
}

// WithProcessArgs sets process.args by Kubernetes' rules: command replaces
// the image ENTRYPOINT and then the image CMD is ignored; args replaces CMD;
// args alone run ENTRYPOINT + args. No program at all is ErrNoCommand.
func WithProcessArgs(entrypoint, cmd, command, args []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		argv, err := processArgs(entrypoint, cmd, command, args)
		if err != nil {
			return err
		}
		setProcess(s)
		s.Process.Args = argv
		return nil
	}
}

func processArgs(entrypoint, cmd, command, args []string) ([]string, error) {
	var argv []string
	switch {
	case len(command) > 0:
		argv = append(slices.Clone(command), args...)
	case len(args) > 0:
		argv = append(slices.Clone(entrypoint), args...)
	default:
		argv = append(slices.Clone(entrypoint), cmd...)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, ErrNoCommand
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, fmt.Errorf("argument %q: contains a NUL byte, which execve cannot pass", a)
		}
	}
	return argv, nil
}

// WithEnv sets process.env: what the spec already has, then the image's ENV,
// then PATH (DefaultPath) and HOSTNAME (the spec's hostname) unless set,
// then overrides, each KEY=VALUE replacing the same KEY where it is (as
// containerd's oci.WithEnv and the kubelet do: a later name replaces an
// earlier one in place, a new name is appended).
//
// The merge is linear in the number of entries: an index from name to
// position, not a search of the list for each entry. An image config may
// hold hundreds of thousands of entries (up to pull.MaxConfigSize), and a
// search per entry made such an image's spec take minutes.
func WithEnv(imageEnv, overrides []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		setProcess(s)
		env := newEnvList(s.Process.Env, len(imageEnv)+len(overrides)+2)
		for _, e := range imageEnv {
			if err := validateEnv(e); err != nil {
				return fmt.Errorf("image ENV: %w", err)
			}
			env.set(e)
		}
		if !env.has("PATH") {
			env.set("PATH=" + DefaultPath)
		}
		if s.Hostname != "" && !env.has("HOSTNAME") {
			env.set("HOSTNAME=" + s.Hostname)
		}
		for _, e := range overrides {
			if err := validateEnv(e); err != nil {
				return err
			}
			env.set(e)
		}
		s.Process.Env = env.list
		return nil
	}
}

// envList is an environment with an index from each name to its position.
type envList struct {
	list []string
	at   map[string]int
}

func newEnvList(base []string, extra int) *envList {
	l := &envList{list: make([]string, 0, len(base)+extra), at: make(map[string]int, len(base)+extra)}
	for _, e := range base {
		if k, _, ok := strings.Cut(e, "="); ok {
			if _, seen := l.at[k]; !seen {
				l.at[k] = len(l.list)
			}
		}
		l.list = append(l.list, e)
	}
	return l
}

func (l *envList) has(key string) bool {
	_, ok := l.at[key]
	return ok
}

// set replaces KEY=... by e where it is, or appends e.
func (l *envList) set(e string) {
	k, _, _ := strings.Cut(e, "=")
	if i, ok := l.at[k]; ok {
		l.list[i] = e
		return
	}
	l.at[k] = len(l.list)
	l.list = append(l.list, e)
}

func validateEnv(e string) error {
	k, _, ok := strings.Cut(e, "=")
	switch {
	case !ok:
		return fmt.Errorf("%w %q: want KEY=VALUE", ErrInvalidEnv, e)
	case k == "":
		return fmt.Errorf("%w %q: empty name", ErrInvalidEnv, e)
	case strings.ContainsRune(e, 0):
		return fmt.Errorf("%w %q: contains a NUL byte", ErrInvalidEnv, e)
	}
	return nil
}

// WithWorkingDir sets process.cwd to dir ("/" when empty; relative paths are
// taken from /). It refuses a directory inside /proc, also when a symlink in
// the rootfs leads there: the CVE-2024-21626 pattern, where a cwd of
// /proc/self/fd/N hands the app a directory of the host. rootfs may be ""
// (then only the path itself is checked).
func WithWorkingDir(rootfs, dir string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		cwd, err := checkWorkdir(rootfs, dir)
		if err != nil {
			return err
		}
		setProcess(s)
		s.Process.Cwd = cwd
		return nil
	}
}

// WithUser sets process.user from user (see Options.User), looking names up
// in rootfs/etc/passwd and rootfs/etc/group without leaving the rootfs. An
// empty user is root (0:0). A named user (or a uid /etc/passwd names) also
// gets the groups /etc/group lists it in.
func WithUser(rootfs, user string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		u, err := resolveUser(rootfs, user)
		if err != nil {
			return err
		}
		setProcess(s)
		s.Process.User = u
		return nil
	}
}

// WithCPULimit turns a Kubernetes CPU quantity into a CFS quota per 100ms
// period ("500m": 50000µs of every 100000µs) and cpu shares (1 cpu = 1024), as
// the kubelet does for resources.limits.cpu (and for the request, which
// defaults to the limit). Empty means no limit.
func WithCPULimit(q string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if q == "" {
			return nil
		}
		qty, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("%w: cpu %q: %v (try 500m or 1)", ErrInvalidLimit, q, err)
		}
		if qty.Sign() <= 0 {
			return fmt.Errorf("%w: cpu %q: must be more than 0", ErrInvalidLimit, q)
		}
		if qty.Cmp(*resource.NewMilliQuantity(math.MaxInt64/cfsPeriod, resource.DecimalSI)) > 0 {
			return fmt.Errorf("%w: cpu %q: too large", ErrInvalidLimit, q)
		}
		milli := qty.MilliValue()
		quota := max(milli*cfsPeriod/1000, minCFSQuota)
		period := uint64(cfsPeriod)
		shares := uint64(min(max(milli*1024/1000, minShares), maxShares))
		setResources(s)
		if s.Linux.Resources.CPU == nil {
			s.Linux.Resources.CPU = &specs.LinuxCPU{}
		}
		s.Linux.Resources.CPU.Quota = &quota
		s.Linux.Resources.CPU.Period = &period
		s.Linux.Resources.CPU.Shares = &shares
		return nil
	}
}

// WithMemoryLimit turns a Kubernetes memory quantity ("128Mi") into
// linux.resources.memory.limit in bytes (rounded up, as the kubelet does).
// Empty means no limit.
func WithMemoryLimit(q string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if q == "" {
			return nil
		}
		qty, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("%w: memory %q: %v (try 128Mi or 1Gi)", ErrInvalidLimit, q, err)
		}
		if qty.Sign() <= 0 {
			return fmt.Errorf("%w: memory %q: must be more than 0", ErrInvalidLimit, q)
		}
		limit := qty.Value()
		if limit == math.MaxInt64 {
			return fmt.Errorf("%w: memory %q: too large", ErrInvalidLimit, q)
		}
		setResources(s)
		if s.Linux.Resources.Memory == nil {
			s.Linux.Resources.Memory = &specs.LinuxMemory{}
		}
		s.Linux.Resources.Memory.Limit = &limit
		return nil
	}
}

// WithPidsLimit sets linux.resources.pids.limit: at most n processes and
// threads in the container. 0 means no limit; negative is refused.
func WithPidsLimit(n int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if n < 0 {
			return fmt.Errorf("%w: pids %d: must be 0 (no limit) or more", ErrInvalidLimit, n)
		}
		if n == 0 {
			return nil
		}
		setResources(s)
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: &n}
		return nil
	}
}

// ValidateID checks a container id as runc does (letters, digits, '_', '.',
// '+', '-'), and that it starts with a letter or digit, so that it is never
// "." or ".." and cannot leave the cgroup parent. At most 1024 bytes.
func ValidateID(id string) error {
	bad := id == "" || len(id) > 1024 || !isAlnum(rune(id[0]))
	for _, r := range id {
		if !isAlnum(r) && !strings.ContainsRune("_.+-", r) {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("%w %q: use letters, digits, '_', '.', '+', '-', starting with a letter or digit", ErrInvalidID, id)
	}
	return nil
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func validateHostname(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w %q: must be 1 to 64 bytes", ErrInvalidHostname, name)
	}
	for _, r := range name {
		if !isAlnum(r) && !strings.ContainsRune("-._", r) {
			return fmt.Errorf("%w %q: use letters, digits, '-', '.', '_'", ErrInvalidHostname, name)
		}
	}
	return nil
}

func setProcess(s *specs.Spec) {
	if s.Process == nil {
		s.Process = &specs.Process{}
	}
}

func setLinux(s *specs.Spec) {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
}

func setResources(s *specs.Spec) {
	setLinux(s)
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
}

// WithOCIVersion sets ociVersion, the runtime-spec version config.json
// claims to follow, for an OCI runtime that refuses podlab's own (crun
// 1.8.1 accepts up to 1.1 and says "unknown version specified" to 1.3.0).
// The fields podlab writes are all in runtime-spec 1.0. version is
// MAJOR.MINOR.PATCH with an optional -suffix (runsc's "1.0.2-dev").
func WithOCIVersion(version string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		core, _, _ := strings.Cut(version, "-")
		parts := strings.Split(core, ".")
		ok := len(parts) == 3
		for _, p := range parts {
			ok = ok && p != "" && strings.Trim(p, "0123456789") == ""
		}
		if !ok || !strings.HasPrefix(version, "1.") {
			return fmt.Errorf("%w %q: want a runtime-spec 1.x version, MAJOR.MINOR.PATCH (e.g. 1.0.0)", ErrInvalidOCIVersion, version)
		}
		s.Version = version
		return nil
	}
}
