package kubelet

import (
	"fmt"
	"maps"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The labels the kubelet puts on every sandbox and container it asks a
// runtime for (Kubernetes' pkg/kubelet/types/labels.go): how it finds its
// own in ListPodSandbox and ListContainers, and how crictl pods shows them.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// sandboxInputs are what the kubelet decided for a pod before it asks the
// runtime for its sandbox: things of the node, not of the PodSpec.
type sandboxInputs struct {
	// Attempt counts the pod's sandboxes (0 for the first).
	Attempt uint32
	// LogRoot is the node's /var/log/pods: the sandbox's log directory is
	// LogRoot/NAMESPACE_NAME_UID.
	LogRoot string
	// CgroupParent is the pod cgroup the kubelet made in its QoS tier.
	CgroupParent string
	// UserNamespace is the range the kubelet allocated (hostUsers: false).
	UserNamespace *UserNamespace
	// SeccompRoot is where Localhost profiles are (--seccomp-profile-root);
	// SeccompDefault the kubelet's --seccomp-default.
	SeccompRoot    string
	SeccompDefault bool
}

// podLogsDirectory is the pod's log directory under root, as the
// kubelet's BuildPodLogsDirectory: NAMESPACE_NAME_UID.
func podLogsDirectory(root string, pod *corev1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// generatePodSandboxConfig is the PodSandboxConfig of a RunPodSandbox, as
// kuberuntime_sandbox.go's generatePodSandboxConfig builds it: what the
// runtime needs to know of the pod, and nothing of the API server.
func generatePodSandboxConfig(pod *corev1.Pod, in sandboxInputs) (*runtimeapi.PodSandboxConfig, error) {
	labels := maps.Clone(pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelPodName], labels[LabelPodNamespace], labels[LabelPodUID] = pod.Name, pod.Namespace, string(pod.UID)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: in.Attempt,
		},
		LogDirectory: podLogsDirectory(in.LogRoot, pod),
		Labels:       labels,
		Annotations:  maps.Clone(pod.Annotations),
	}
	if !pod.Spec.HostNetwork {
		// A hostNetwork pod keeps the node's hostname (the runtime's).
		cfg.Hostname = podHostname(pod)
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol: toRuntimeProtocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	linux, err := generatePodSandboxLinuxConfig(pod, in)
	if err != nil {
		return nil, err
	}
	cfg.Linux = linux
	return cfg, nil
}

// generatePodSandboxLinuxConfig is the sandbox's Linux part: its cgroup
// parent, which namespaces are the node's, the user namespace's mappings,
// sysctls, and the pod-level security context.
func generatePodSandboxLinuxConfig(pod *corev1.Pod, in sandboxInputs) (*runtimeapi.LinuxPodSandboxConfig, error) {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		sc = &corev1.PodSecurityContext{}
	}
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if u := in.UserNamespace; u != nil {
		ns.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD,
			Uids: runtimeIDMappings(u.UIDMappings), Gids: runtimeIDMappings(u.GIDMappings)}
	} else {
		ns.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	}
	seccomp, err := securityProfile(sc.SeccompProfile, in.SeccompRoot, in.SeccompDefault)
	if err != nil {
		return nil, err
	}
	lsc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns, Seccomp: seccomp}
	if sc.RunAsUser != nil {
		lsc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	}
	if sc.RunAsGroup != nil {
		lsc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	lsc.SupplementalGroups = append(lsc.SupplementalGroups, sc.SupplementalGroups...)
	for _, c := range pod.Spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			lsc.Privileged = true // the sandbox of a privileged container is privileged
		}
	}
	out := &runtimeapi.LinuxPodSandboxConfig{CgroupParent: in.CgroupParent, SecurityContext: lsc}
	if len(sc.Sysctls) > 0 {
		out.Sysctls = map[string]string{}
		for _, s := range sc.Sysctls {
			out.Sysctls[s.Name] = s.Value
		}
	}
	return out, nil
}

// securityProfile is a seccompProfile as the CRI's SecurityProfile: a
// Localhost profile by its absolute path on the node (the runtime reads
// it). With none set, RuntimeDefault under --seccomp-default, else
// Unconfined (Kubernetes' default).
func securityProfile(p *corev1.SeccompProfile, root string, fallbackDefault bool) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if fallbackDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case corev1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case corev1.SeccompProfileTypeLocalhost:
		path, err := localhostProfilePath(p.LocalhostProfile, root)
		if err != nil {
			return nil, err
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path}, nil
	}
	return nil, fmt.Errorf("%w: unknown seccompProfile type %q: use RuntimeDefault, Unconfined or Localhost", ErrSeccompProfile, p.Type)
}

func runtimeIDMappings(ms []IDMapping) []*runtimeapi.IDMapping {
	var out []*runtimeapi.IDMapping
	for _, m := range ms {
		out = append(out, &runtimeapi.IDMapping{HostId: m.HostID, ContainerId: m.ContainerID, Length: m.Length})
	}
	return out
}

// toRuntimeProtocol is a port's protocol in the CRI's terms (TCP when unset).
func toRuntimeProtocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}
