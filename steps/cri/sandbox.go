package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// sandboxKinds are the namespaces a sandbox pins: net and uts unless the
// pod uses the node's network, ipc unless it uses the node's IPC.
func sandboxKinds(cfg *runtimeapi.PodSandboxConfig) []string {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	var kinds []string
	if ns.GetNetwork() != runtimeapi.NamespaceMode_NODE {
		kinds = append(kinds, "net")
	}
	if ns.GetIpc() != runtimeapi.NamespaceMode_NODE {
		kinds = append(kinds, "ipc")
	}
	if ns.GetNetwork() != runtimeapi.NamespaceMode_NODE {
		kinds = append(kinds, "uts") // a hostNetwork pod has the node's hostname too
	}
	return kinds
}

func validateSandboxConfig(cfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return status.Error(codes.InvalidArgument, "RunPodSandbox: no config: the request needs a PodSandboxConfig")
	}
	m := cfg.GetMetadata()
	if m == nil || m.Name == "" || m.Namespace == "" || m.Uid == "" {
		return status.Error(codes.InvalidArgument, "sandbox config must include metadata with name, namespace and uid (crictl's pod-config.json: {\"metadata\": {\"name\": ..., \"namespace\": ..., \"uid\": ...}})")
	}
	if p := cfg.GetLinux().GetCgroupParent(); p != "" && (!strings.HasPrefix(p, "/") || filepath.Clean(p) != p) {
		return status.Errorf(codes.InvalidArgument, "cgroup_parent %q: must be a clean absolute cgroupfs path such as /kubepods/besteffort/pod<uid> (podlab's runc uses the cgroupfs driver)", p)
	}
	_, err := sandboxUserNamespace(cfg)
	return err
}

// hostname is the pod's hostname: the config's, else its name.
func hostname(cfg *runtimeapi.PodSandboxConfig) string {
	if cfg.Hostname != "" {
		return cfg.Hostname
	}
	return cfg.GetMetadata().GetName()
}

// RunPodSandbox makes the pod's sandbox: its namespaces, pinned under the
// node directory, and its attachment to the pod network (CNI ADD).
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	if err := validateSandboxConfig(cfg); err != nil {
		return nil, err
	}
	// The record keeps the handler as asked ("" for the default, as
	// containerd reports it: crictl pods shows "(default)").
	h, _, err := s.sandboxRuntime(req.RuntimeHandler)
	if err != nil {
		return nil, err
	}
	userns, _ := sandboxUserNamespace(cfg) // validated above
	if userns != nil {
		if err := checkUserNamespaceSupport(h); err != nil {
			return nil, status.Errorf(codes.Unknown, "failed to create sandbox for pod %q: %v", cfg.Metadata.Name, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := cfg.Metadata
	if dup := s.sandboxNamed(m); dup != "" {
		return nil, status.Errorf(codes.AlreadyExists, "failed to reserve sandbox name %q: name %q is reserved for %q",
			sandboxName(m), sandboxName(m), dup)
	}
	id := newID()
	sb := &sandboxRecord{ID: id, State: stateCreating, CreatedAt: time.Now().UnixNano(),
		RuntimeHandler: req.RuntimeHandler, config: cfg, Namespaces: map[string]string{},
		CgroupParent: cfg.GetLinux().GetCgroupParent(), UserNS: userns}
	if sb.CgroupParent == "" {
		sb.CgroupParent = s.node.KubepodsCgroup()
	}
	kinds := sandboxKinds(cfg)
	if userns != nil {
		kinds = append([]string{"user"}, kinds...)
	}
	for _, k := range kinds {
		sb.Namespaces[k] = s.node.NamespaceFile(k, id)
	}
	if s.sharesPidNamespace(cfg, h) {
		sb.Namespaces["pid"] = s.node.NamespaceFile("pid", id) // its pause process pins it
	}
	// The record comes first: a server killed from here on finds it
	// "creating" when it starts again, and removes what was made.
	if err := s.rec.putSandbox(sb); err != nil {
		return nil, status.Errorf(codes.Internal, "recording sandbox %s: %v", id, err)
	}
	fail := func(err error) (*runtimeapi.RunPodSandboxResponse, error) {
		_, cerr := s.teardownSandbox(context.WithoutCancel(ctx), sb)
		cerr = errors.Join(cerr, os.RemoveAll(s.node.PodDir(id)))
		if cerr == nil {
			_ = s.rec.removeSandbox(id) // else the record stays "creating": a restart cleans it
		}
		return nil, status.Errorf(codes.Unknown, "failed to create sandbox for pod %q: %v", m.Name, errors.Join(err, cerr))
	}
	if userns != nil {
		if err := s.openForUserns(userns); err != nil {
			return fail(err)
		}
	}
	var hold func([]string, map[string]string) error // pinInUserNamespace's cat
	_, sharedPid := sb.Namespaces["pid"]
	if userns != nil && sharedPid {
		// The pause process makes the pod's user namespace, and the
		// others inside it: a PID namespace its containers can join
		// belongs to their user namespace.
		hold = func(kinds []string, paths map[string]string) error {
			o := s.pauseOptions(sb)
			o.Namespaces = map[string]string{}
			for _, k := range kinds {
				o.Namespaces[k] = paths[k]
			}
			o.UIDMappings = []syscall.SysProcIDMap{{ContainerID: int(userns.UID.ContainerID), HostID: int(userns.UID.HostID), Size: int(userns.UID.Size)}}
			o.GIDMappings = []syscall.SysProcIDMap{{ContainerID: int(userns.GID.ContainerID), HostID: int(userns.GID.HostID), Size: int(userns.GID.Size)}}
			_, err := runc.StartPause(ctx, s.cfg.Shim, o)
			return err
		}
	}
	if err := pinNamespaces(kinds, sb.Namespaces, hostname(cfg), userns, hold); err != nil {
		return fail(err)
	}
	if err := s.writePodFiles(sb); err != nil {
		return fail(err)
	}
	if sharedPid && userns == nil {
		if _, err := runc.StartPause(ctx, s.cfg.Shim, s.pauseOptions(sb)); err != nil {
			return fail(fmt.Errorf("starting the pod's pause process, PID 1 of its shared PID namespace: %w", err))
		}
	}
	if userns != nil {
		if err := checkIDMappedMounts(s.node.PodDir(id), sb.Namespaces["user"]); err != nil {
			return fail(err)
		}
	}
	if netns, ok := sb.Namespaces["net"]; ok {
		if s.network.Configured() {
			res, err := s.network.Setup(ctx, cni.Attachment{ID: id, NetNS: netns, PodNamespace: m.Namespace, PodName: m.Name,
				PodUID: m.Uid, PortMappings: portMappings(cfg.PortMappings)})
			if err != nil {
				return fail(fmt.Errorf("failed to setup network for sandbox %q: %w", id, err))
			}
			sb.Network = res.Network
			for _, ip := range res.IPs {
				sb.IPs = append(sb.IPs, ip.String())
			}
		} else {
			s.note("sandbox %s: no network configuration in %s (the node has no pod CIDR: UpdateRuntimeConfig gives it one): the pod has lo only", id, s.node.CNIConfDir())
		}
	}
	sb.State = stateReady
	if err := s.rec.putSandbox(sb); err != nil {
		return fail(err)
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%d", m.Name, m.Namespace, m.Uid, m.Attempt)
}

// sandboxNamed is the id of a sandbox with the same metadata, if any.
func (s *Server) sandboxNamed(m *runtimeapi.PodSandboxMetadata) string {
	all, _ := s.rec.sandboxIDs()
	for _, id := range all {
		if sb, err := s.rec.sandbox(id); err == nil && sandboxName(sb.config.GetMetadata()) == sandboxName(m) {
			return id
		}
	}
	return ""
}

func portMappings(pms []*runtimeapi.PortMapping) []cni.PortMapping {
	var out []cni.PortMapping
	for _, p := range pms {
		if p.HostPort == 0 {
			continue
		}
		out = append(out, cni.PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort,
			Protocol: strings.ToLower(p.Protocol.String()), HostIP: p.HostIp})
	}
	return out
}

// writePodFiles writes the sandbox's /etc/hostname, /etc/hosts and (with a
// DNS config) /etc/resolv.conf under its pod directory, as containerd
// writes them in the sandbox's root directory.
func (s *Server) writePodFiles(sb *sandboxRecord) error {
	dir := s.node.PodDir(sb.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	h := hostname(sb.config)
	files := map[string]string{
		"hostname": h + "\n",
		"hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n",
	}
	if dns := sb.config.GetDnsConfig(); dns != nil {
		var b strings.Builder
		if len(dns.Searches) > 0 {
			fmt.Fprintf(&b, "search %s\n", strings.Join(dns.Searches, " "))
		}
		for _, ns := range dns.Servers {
			fmt.Fprintf(&b, "nameserver %s\n", ns)
		}
		if len(dns.Options) > 0 {
			fmt.Fprintf(&b, "options %s\n", strings.Join(dns.Options, " "))
		}
		files["resolv.conf"] = b.String()
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sharesPidNamespace: the sandbox makes a PID namespace its containers
// may share (pid mode POD: shareProcessNamespace, and crictl's default),
// held by a pause process. CONTAINER gives each container its own, NODE
// the node's. runsc runs each container in a gVisor sandbox of its own:
// its containers get their own (note says so).
func (s *Server) sharesPidNamespace(cfg *runtimeapi.PodSandboxConfig, h runc.Handler) bool {
	if cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() != runtimeapi.NamespaceMode_POD {
		return false
	}
	switch {
	case gVisor(h):
		s.note("sandbox %s: pid namespace mode POD under runsc: each container is a gVisor sandbox with its own PID namespace", cfg.GetMetadata().GetName())
		return false
	}
	return true
}

// pauseOptions place a sandbox's pause process: its PID namespace pinned
// with the others, its PID, empty root and log in the pod's directory, and
// the process itself in the pod's cgroup (pauseCgroup).
func (s *Server) pauseOptions(sb *sandboxRecord) runc.PauseOptions { return pauseOptions(s.node, sb) }

func pauseOptions(node statedir.Node, sb *sandboxRecord) runc.PauseOptions {
	return runc.PauseOptions{NamespaceFile: sb.Namespaces["pid"], PidFile: node.PausePidFile(sb.ID),
		Root: node.PauseRoot(sb.ID), Log: node.PauseLog(sb.ID), Cgroup: pauseCgroup(sb)}
}

// pauseCgroup is the cgroup of the sandbox's pause process: a leaf named by
// the sandbox's id under the pod's cgroup (cgroup_parent), where containerd
// puts its sandbox container with the cgroupfs driver
// (podsandbox/helpers_linux.go's getCgroupsPath).
func pauseCgroup(sb *sandboxRecord) string { return sb.CgroupParent + "/" + sb.ID }

// removePauseCgroup removes the pause process's cgroup once the process is
// gone, with the parents it emptied below the node's kubepods, as a
// container's delete removes its own (a cgroup_parent outside kubepods: the
// leaf alone). Whatever is still in the leaf is killed first (a pause
// process whose start was cut short by a killed runtime). A killed process
// counts in its v1 cgroups until its parent has reaped it (rmdir says
// EBUSY): it tries again for up to 5 s.
func (s *Server) removePauseCgroup(ctx context.Context, sb *sandboxRecord) error {
	return removePauseCgroup(ctx, s.node, sb)
}

func removePauseCgroup(ctx context.Context, node statedir.Node, sb *sandboxRecord) error {
	mounts, err := runc.HostCgroupMounts()
	if err != nil {
		return nil // no cgroups: nothing was made
	}
	leaf, stop := pauseCgroup(sb), node.KubepodsCgroup()
	if !strings.HasPrefix(leaf, stop+"/") {
		stop = ""
	}
	// The leaf is the pause process's alone. One a runtime killed between
	// starting it and recording its PID is still there, unrecorded: it goes.
	if _, err := runc.KillCgroupProcs(mounts, leaf); err != nil {
		return err
	}
	var last error
	werr := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, last = runc.RemoveCgroupDirsBelow(mounts, leaf, stop)
		return last == nil || !errors.Is(last, syscall.EBUSY), nil
	})
	if last == nil && werr != nil {
		last = werr
	}
	return last
}

// teardownSandbox detaches the sandbox from the network (CNI DEL, while
// its network namespace still exists), stops its pause process (which
// ends what is left in its PID namespace) and removes its cgroup, and
// unpins its namespaces.
func (s *Server) teardownSandbox(ctx context.Context, sb *sandboxRecord) ([]string, error) {
	var errs []error
	if _, ok := sb.Namespaces["net"]; ok {
		if _, err := s.network.Teardown(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("failed to destroy network for sandbox %q: %w", sb.ID, err))
		}
	}
	if _, ok := sb.Namespaces["pid"]; ok {
		o := s.pauseOptions(sb)
		if err := runc.StopPause(ctx, o.PidFile, o.NamespaceFile); err != nil {
			errs = append(errs, err)
		} else if err := s.removePauseCgroup(ctx, sb); err != nil {
			errs = append(errs, err)
		}
	}
	removed, err := unpinNamespaces(sb.Namespaces)
	return removed, errors.Join(append(errs, err)...)
}

// StopPodSandbox stops the sandbox's containers (at once: SIGKILL), detaches
// it from the network and unpins its namespaces. It is idempotent.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	sb, err := s.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, err := s.containersOf(sb.ID)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	for _, c := range cs {
		if err := s.stopContainer(ctx, c, 0); err != nil {
			return nil, status.Errorf(codes.Unknown, "failed to stop container %q: %v", c.ID, err)
		}
	}
	if _, err := s.teardownSandbox(ctx, sb); err != nil {
		return nil, status.Errorf(codes.Unknown, "%v", err)
	}
	sb.State = stateNotReady
	if err := s.rec.putSandbox(sb); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox removes the sandbox, its containers (forcibly) and its
// files. A sandbox already removed is not an error (the CRI says so, and
// containerd does it).
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	sb, err := s.findSandbox(req.PodSandboxId)
	if status.Code(err) == codes.NotFound {
		s.note("RemovePodSandbox: sandbox %q is not here (removed already): nothing to do", req.PodSandboxId)
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.removeSandbox(ctx, sb); err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to remove sandbox %q: %v", sb.ID, err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (s *Server) removeSandbox(ctx context.Context, sb *sandboxRecord) error {
	cs, err := s.containersOf(sb.ID)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		if err := s.removeContainer(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := s.teardownSandbox(ctx, sb); err != nil {
		errs = append(errs, err)
	}
	if err := s.removeSandboxSnapshots(sb.ID); err != nil {
		errs = append(errs, err)
	}
	for _, p := range []string{s.node.PodBundles(sb.ID), s.node.PodDir(sb.ID)} {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, s.rec.removeSandbox(sb.ID))
	}
	return errors.Join(errs...)
}

// containersOf are the records of the sandbox's containers.
func (s *Server) containersOf(sandboxID string) ([]*containerRecord, error) {
	all, err := s.rec.containerIDs()
	if err != nil {
		return nil, err
	}
	var out []*containerRecord
	for _, id := range all {
		if c, err := s.rec.container(id); err == nil && c.SandboxID == sandboxID {
			out = append(out, c)
		}
	}
	return out, nil
}

func (sb *sandboxRecord) state() runtimeapi.PodSandboxState {
	if sb.State == stateReady {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// PodSandboxStatus is the sandbox's state, its IPs and its namespaces;
// with verbose, the record as info["info"] (crictl inspectp shows it).
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	st := &runtimeapi.PodSandboxStatus{
		Id: sb.ID, Metadata: sb.config.Metadata, State: sb.state(), CreatedAt: sb.CreatedAt,
		Labels: sb.config.Labels, Annotations: sb.config.Annotations, RuntimeHandler: sb.RuntimeHandler,
		Network: &runtimeapi.PodSandboxNetworkStatus{},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: sb.config.GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	if sb.State == stateReady && len(sb.IPs) > 0 {
		st.Network.Ip = sb.IPs[0]
		for _, ip := range sb.IPs[1:] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.Verbose {
		i := map[string]any{"record": s.rec.sandboxPath(sb.ID), "namespaces": sb.Namespaces,
			"cgroupParent": sb.CgroupParent, "cniNetwork": sb.Network, "podDir": s.node.PodDir(sb.ID)}
		if _, ok := sb.Namespaces["pid"]; ok {
			o := s.pauseOptions(sb)
			i["pausePid"], i["pausePidFile"] = readPidFile(o.PidFile), o.PidFile
		}
		info, _ := json.Marshal(i)
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// ListPodSandbox lists the sandboxes the filter lets through.
func (s *Server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	all, err := s.rec.sandboxIDs()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	f := req.GetFilter()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, id := range all {
		if f.GetId() != "" && !strings.HasPrefix(id, f.GetId()) {
			continue
		}
		sb, err := s.rec.sandbox(id)
		if err != nil || sb.State == stateCreating {
			continue
		}
		if f.GetState() != nil && f.GetState().State != sb.state() {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), sb.config.Labels) {
			continue
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{Id: sb.ID, Metadata: sb.config.Metadata, State: sb.state(),
			CreatedAt: sb.CreatedAt, Labels: sb.config.Labels, Annotations: sb.config.Annotations, RuntimeHandler: sb.RuntimeHandler})
	}
	return resp, nil
}

func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// netnsPath is the sandbox's network namespace, or "" (the node's).
func (sb *sandboxRecord) netnsPath() string { return sb.Namespaces["net"] }

// readPidFile is the number in a PID file, or 0.
func readPidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
