package cri

// From a CRI ContainerConfig to an OCI runtime spec, as containerd's
// internal/cri/server/container_create_linux.go builds it: steps/spec
// makes the spec from the image config with containerd's defaults and the
// config's command, args, env, working dir, user and hostname; the options
// below add what the CRI config says besides.

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/spec"
)

// The annotations containerd's CRI puts on every container's spec
// (pkg/cri/annotations), which tie the bundle to its sandbox.
const (
	AnnotationContainerType    = "io.kubernetes.cri.container-type"
	AnnotationSandboxID        = "io.kubernetes.cri.sandbox-id"
	AnnotationSandboxName      = "io.kubernetes.cri.sandbox-name"
	AnnotationSandboxNamespace = "io.kubernetes.cri.sandbox-namespace"
	AnnotationSandboxUID       = "io.kubernetes.cri.sandbox-uid"
	AnnotationContainerName    = "io.kubernetes.cri.container-name"
	AnnotationImageName        = "io.kubernetes.cri.image-name"
	ContainerTypeContainer     = "container"
)

// containerSpec is the spec of container id of sandbox sb, from cfg and the
// image config img, over the bundle's rootfs. oomFloor is the runtime's own
// oom_score_adj: a container gets no lower (restrict_oom_score_adj).
func (s *Server) containerSpec(ctx context.Context, id string, sb *sandboxRecord, cfg *runtimeapi.ContainerConfig, img *v1.ConfigFile, imageName, bundle string, oomFloor int) (*specs.Spec, error) {
	lx := cfg.GetLinux()
	sc := lx.GetSecurityContext()
	opts := spec.Options{
		ContainerID:  id,
		CgroupParent: sb.CgroupParent,
		Command:      cfg.Command,
		Args:         cfg.Args,
		WorkingDir:   cfg.WorkingDir,
		Hostname:     hostname(sb.config),
	}
	for _, e := range cfg.Envs {
		opts.Env = append(opts.Env, e.Key+"="+string(e.Value))
	}
	switch {
	case sc.GetRunAsUser() != nil:
		opts.User = strconv.FormatInt(sc.GetRunAsUser().Value, 10)
	case sc.GetRunAsUsername() != "":
		opts.User = sc.GetRunAsUsername()
	}
	if g := sc.GetRunAsGroup(); g != nil {
		u := opts.User
		if u == "" {
			u, _, _ = strings.Cut(img.Config.User, ":")
			if u == "" {
				u = "0"
			}
		}
		opts.User = u + ":" + strconv.FormatInt(g.Value, 10)
	}
	// Seccomp goes last, after the capabilities: the default profile
	// follows them. No profile is Unconfined, Kubernetes' default.
	seccompType, seccompPath := spec.SeccompUnconfined, ""
	switch p := sc.GetSeccomp(); {
	case p == nil || sc.GetPrivileged():
	case p.ProfileType == runtimeapi.SecurityProfile_RuntimeDefault:
		seccompType = spec.SeccompRuntimeDefault
	case p.ProfileType == runtimeapi.SecurityProfile_Localhost:
		seccompType, seccompPath = spec.SeccompLocalhost, p.LocalhostRef
	}
	if sc.GetApparmor() != nil && sc.GetApparmor().GetProfileType() != runtimeapi.SecurityProfile_Unconfined {
		s.note("container %s: AppArmor profile %s ignored: podlab's machines load no AppArmor profiles", id, sc.GetApparmor().GetProfileType())
	}
	sp, err := spec.Generate(ctx, img, bundle, opts)
	if err != nil {
		return nil, err
	}
	oom := int(lx.GetResources().GetOomScoreAdj())
	if oom < oomFloor {
		oom = oomFloor
	}
	mounts, err := s.containerMounts(sb, cfg)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		AnnotationContainerType:    ContainerTypeContainer,
		AnnotationSandboxID:        sb.ID,
		AnnotationSandboxName:      sb.config.GetMetadata().GetName(),
		AnnotationSandboxNamespace: sb.config.GetMetadata().GetNamespace(),
		AnnotationSandboxUID:       sb.config.GetMetadata().GetUid(),
		AnnotationContainerName:    cfg.GetMetadata().GetName(),
		AnnotationImageName:        imageName,
	}
	if gVisor(s.handler(sb.RuntimeHandler)) {
		// runsc reads these to put a "container" into the gVisor sandbox
		// of its pause container; podlab's sandboxes have none (the
		// namespaces are pinned), so each container is a sandbox of its own.
		delete(annotations, AnnotationContainerType)
		delete(annotations, AnnotationSandboxID)
	}
	for k, v := range cfg.Annotations {
		if _, ours := annotations[k]; !ours {
			annotations[k] = v
		}
	}
	list := []oci.SpecOpts{
		withSandboxNamespaces(sb, sc.GetNamespaceOptions(), s.note, func() error {
			o := s.pauseOptions(sb)
			return runc.PauseRunning(o.PidFile, o.NamespaceFile)
		}),
		withResources(lx.GetResources()),
		// the pod's sysctls, in every container, as containerd's
		// WithSysctls(sandboxConfig.Linux.Sysctls): runc sets them in
		// the sandbox's namespaces, which the container joins
		spec.WithSysctls(sb.config.GetLinux().GetSysctls()),
		spec.WithOOMScoreAdj(oom),
		withMounts(mounts),
		withDevices(cfg.Devices),
		withSecurity(sc),
		spec.WithSeccomp(seccompType, seccompPath),
		oci.WithAnnotations(annotations),
	}
	if cfg.GetTty() {
		list = append(list, oci.WithTTY) // the shim holds the terminal (runc's --console-socket)
	}
	if u := sb.UserNS; u != nil {
		// after the mounts it idmaps: the runtime's files for the pod
		uids, gids := u.mappings()
		var own []string
		for _, m := range mounts {
			if strings.HasPrefix(m.Source, s.node.PodDir(sb.ID)+"/") {
				own = append(own, m.Destination)
			}
		}
		list = append(list, spec.WithUserNamespace(sb.Namespaces["user"], uids, gids), spec.WithIDMappedMounts(own...))
	}
	if v := s.handler(sb.RuntimeHandler).SpecVersion; v != "" {
		// the version the sandbox's runtime accepts (crun 1.8.1: up to 1.1)
		list = append(list, spec.WithOCIVersion(v))
	}
	if err := oci.ApplyOpts(ctx, nil, &containers.Container{ID: id}, sp, list...); err != nil {
		return nil, err
	}
	return sp, nil
}

// runtimeOOMScoreAdj is the runtime's own oom_score_adj: without
// CAP_SYS_RESOURCE (root here lacks it) nothing lower can be set.
func runtimeOOMScoreAdj() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return spec.MinOOMScoreAdj
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return spec.MinOOMScoreAdj
	}
	return n
}

// withSandboxNamespaces makes the container join its sandbox's network,
// IPC and UTS namespaces by path, or the node's. Its PID namespace, as
// containerd's WithPodNamespaces: mode POD (the zero value, what a crictl
// config without namespace_options asks; the kubelet asks it for
// shareProcessNamespace) joins the sandbox's, which its pause process
// holds (pauseRunning says whether it still does); CONTAINER gets its own,
// NODE the node's; TARGET (a debug container's) is refused.
func withSandboxNamespaces(sb *sandboxRecord, ns *runtimeapi.NamespaceOption, note func(string, ...any), pauseRunning func() error) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		for _, j := range []struct {
			t    specs.LinuxNamespaceType
			kind string
		}{{specs.NetworkNamespace, "net"}, {specs.IPCNamespace, "ipc"}, {specs.UTSNamespace, "uts"}} {
			p, ok := sb.Namespaces[j.kind]
			if !ok {
				if err := oci.WithHostNamespace(j.t)(ctx, cl, c, s); err != nil {
					return err
				}
				continue
			}
			if !isNamespaceMount(p) {
				return fmt.Errorf("the sandbox's %s namespace %s is not pinned (is the sandbox stopped?)", j.kind, p)
			}
			if err := oci.WithLinuxNamespace(specs.LinuxNamespace{Type: j.t, Path: p})(ctx, cl, c, s); err != nil {
				return err
			}
		}
		if _, ok := sb.Namespaces["uts"]; !ok {
			s.Hostname = "" // runc may not set the node's hostname
		}
		switch ns.GetPid() {
		case runtimeapi.NamespaceMode_NODE:
			return oci.WithHostNamespace(specs.PIDNamespace)(ctx, cl, c, s)
		case runtimeapi.NamespaceMode_POD:
			p, ok := sb.Namespaces["pid"]
			if !ok {
				note("container %s: pid namespace mode POD in a sandbox with no PID namespace to share (its pid mode is not POD, or it runs under runsc): the container gets its own", c.ID)
				return nil
			}
			if err := pauseRunning(); err != nil {
				return fmt.Errorf("joining the sandbox's PID namespace: %w (remove the sandbox and run a new one)", err)
			}
			return oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace, Path: p})(ctx, cl, c, s)
		case runtimeapi.NamespaceMode_TARGET:
			return fmt.Errorf("pid namespace mode TARGET (a debug container's target %q) is not supported: podlab's containers share no PID namespace", ns.GetTargetId())
		}
		return nil
	}
}

// withResources sets the cgroup limits of LinuxContainerResources.
func withResources(r *runtimeapi.LinuxContainerResources) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if r == nil {
			return nil
		}
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Resources == nil {
			s.Linux.Resources = &specs.LinuxResources{}
		}
		res := s.Linux.Resources
		if res.CPU == nil {
			res.CPU = &specs.LinuxCPU{}
		}
		if r.CpuPeriod != 0 {
			p := uint64(r.CpuPeriod)
			res.CPU.Period = &p
		}
		if r.CpuQuota != 0 {
			q := r.CpuQuota
			res.CPU.Quota = &q
		}
		if r.CpuShares != 0 {
			sh := uint64(r.CpuShares)
			res.CPU.Shares = &sh
		}
		res.CPU.Cpus, res.CPU.Mems = r.CpusetCpus, r.CpusetMems
		if r.MemoryLimitInBytes != 0 {
			if res.Memory == nil {
				res.Memory = &specs.LinuxMemory{}
			}
			m := r.MemoryLimitInBytes
			res.Memory.Limit = &m
			if r.MemorySwapLimitInBytes != 0 {
				sw := r.MemorySwapLimitInBytes
				res.Memory.Swap = &sw
			}
		}
		for _, h := range r.HugepageLimits {
			res.HugepageLimits = append(res.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: h.PageSize, Limit: h.Limit})
		}
		if len(r.Unified) > 0 {
			if res.Unified == nil {
				res.Unified = map[string]string{}
			}
			for k, v := range r.Unified {
				res.Unified[k] = v
			}
		}
		return nil
	}
}

// containerMounts are the config's mounts plus the sandbox's /etc/hostname,
// /etc/hosts and /etc/resolv.conf where the config mounts none there.
func (s *Server) containerMounts(sb *sandboxRecord, cfg *runtimeapi.ContainerConfig) ([]specs.Mount, error) {
	var out []specs.Mount
	has := func(dst string) bool {
		return slices.ContainsFunc(cfg.Mounts, func(m *runtimeapi.Mount) bool { return path.Clean(m.ContainerPath) == dst })
	}
	ro := cfg.GetLinux().GetSecurityContext().GetReadonlyRootfs()
	for _, f := range []struct{ name, dst string }{{"hostname", "/etc/hostname"}, {"hosts", "/etc/hosts"}, {"resolv.conf", "/etc/resolv.conf"}} {
		p := filepath.Join(s.node.PodDir(sb.ID), f.name)
		if _, err := os.Stat(p); err != nil || has(f.dst) {
			continue
		}
		out = append(out, bindMount(p, f.dst, ro, "rprivate"))
	}
	for _, m := range cfg.Mounts {
		if m.Image != nil {
			return nil, fmt.Errorf("mount at %s: image volumes are not supported", m.ContainerPath)
		}
		if !path.IsAbs(m.ContainerPath) {
			return nil, fmt.Errorf("mount at %q: the container path must be absolute", m.ContainerPath)
		}
		if _, err := os.Stat(m.HostPath); err != nil {
			return nil, fmt.Errorf("mount %s onto %s: %w", m.HostPath, m.ContainerPath, err)
		}
		prop := "rprivate"
		switch m.Propagation {
		case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
			prop = "rslave"
		case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
			prop = "rshared"
		}
		out = append(out, bindMount(m.HostPath, m.ContainerPath, m.Readonly, prop))
	}
	return out, nil
}

func bindMount(src, dst string, readOnly bool, propagation string) specs.Mount {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", propagation, mode}}
}

// withMounts adds bind mounts, replacing any mount at the same place.
func withMounts(ms []specs.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		for _, m := range ms {
			s.Mounts = slices.DeleteFunc(s.Mounts, func(o specs.Mount) bool { return path.Clean(o.Destination) == path.Clean(m.Destination) })
			s.Mounts = append(s.Mounts, m)
		}
		return nil
	}
}

// withDevices adds the config's devices (the host's device at host_path,
// at container_path, with its cgroup permissions).
func withDevices(ds []*runtimeapi.Device) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		for _, d := range ds {
			if err := oci.WithDevices(d.HostPath, d.ContainerPath, d.Permissions)(ctx, cl, c, s); err != nil {
				return fmt.Errorf("device %s: %w", d.HostPath, err)
			}
		}
		return nil
	}
}

// withSecurity applies the security context: privileged (every
// capability, the host's devices, writable /sys and cgroupfs, nothing
// masked), capabilities added and dropped (ALL too), readonly rootfs,
// supplemental groups, no_new_privs, masked and readonly paths.
func withSecurity(sc *runtimeapi.LinuxContainerSecurityContext) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		var opts []oci.SpecOpts
		if sc.GetPrivileged() {
			opts = append(opts, oci.WithPrivileged, oci.WithAllDevicesAllowed, oci.WithHostDevices)
		} else {
			caps := sc.GetCapabilities()
			if slices.ContainsFunc(caps.GetDropCapabilities(), isAll) {
				opts = append(opts, oci.WithCapabilities(nil))
			}
			if slices.ContainsFunc(caps.GetAddCapabilities(), isAll) {
				opts = append(opts, oci.WithAllCurrentCapabilities)
			}
			opts = append(opts,
				oci.WithAddedCapabilities(capNames(slices.DeleteFunc(slices.Clone(caps.GetAddCapabilities()), isAll))),
				oci.WithDroppedCapabilities(capNames(slices.DeleteFunc(slices.Clone(caps.GetDropCapabilities()), isAll))),
				oci.WithAmbientCapabilities(capNames(caps.GetAddAmbientCapabilities())))
			if sc.GetMaskedPaths() != nil {
				opts = append(opts, oci.WithMaskedPaths(sc.GetMaskedPaths()))
			}
			if sc.GetReadonlyPaths() != nil {
				opts = append(opts, oci.WithReadonlyPaths(sc.GetReadonlyPaths()))
			}
		}
		if sc.GetReadonlyRootfs() {
			opts = append(opts, oci.WithRootFSReadonly())
		}
		if sc.GetNoNewPrivs() {
			opts = append(opts, oci.WithNoNewPrivileges)
		}
		if err := oci.ApplyOpts(ctx, cl, c, s, opts...); err != nil {
			return err
		}
		for _, g := range sc.GetSupplementalGroups() {
			if g >= 0 && g <= 1<<32-1 && !slices.Contains(s.Process.User.AdditionalGids, uint32(g)) {
				s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
			}
		}
		return nil
	}
}

func isAll(c string) bool { return strings.EqualFold(c, "ALL") }

// capNames are CRI capability names ("NET_ADMIN") as the spec writes them
// ("CAP_NET_ADMIN").
func capNames(cs []string) []string {
	var out []string
	for _, c := range cs {
		n := strings.ToUpper(c)
		if !strings.HasPrefix(n, "CAP_") {
			n = "CAP_" + n
		}
		out = append(out, n)
	}
	return out
}
