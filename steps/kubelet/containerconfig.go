package kubelet

import (
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The annotations the kubelet puts on every container it asks a runtime
// for (kuberuntime's labels.go newContainerAnnotations), besides
// AnnotationRestartCount: what it reads back in ListContainers.
const (
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationTerminationGracePeriod   = "io.kubernetes.pod.terminationGracePeriod"
)

// containerInputs are what the kubelet decided for one run of a container
// before it asks the runtime for it: things of the node and of the run,
// not of the PodSpec.
type containerInputs struct {
	// RestartCount is the run's number (0 for the first).
	RestartCount int
	// ImageRef is the image's id, as PullImage (or ImageStatus) answered.
	ImageRef string
	// ImageUser is the image's USER, as ImageStatus answers it (uid or
	// name; "" is root): for runAsNonRoot.
	ImageUser string
	// Env is the container's environment, resolved (envFrom, env,
	// $(VAR)s, the downward API), NAME=value.
	Env []string
	// Mounts are the volume mounts the kubelet prepared: emptyDir
	// directories, hostPaths checked, subPaths bind-mounted.
	Mounts []specs.Mount
	// OOMScoreAdj is what the kubelet computed for the QoS class.
	OOMScoreAdj int
	// SeccompRoot is where Localhost profiles are (--seccomp-profile-root);
	// SeccompDefault the kubelet's --seccomp-default.
	SeccompRoot    string
	SeccompDefault bool
	// Namespaces are the sandbox's namespace options (the container joins
	// the same).
	Namespaces *runtimeapi.NamespaceOption
}

// containerLogPath is a run's log file under the sandbox's log
// directory, as the kubelet's BuildContainerLogsDirectory: NAME/N.log.
func containerLogPath(container string, restart int) string {
	return fmt.Sprintf("%s/%d.log", container, restart)
}

// generateContainerConfig is the ContainerConfig of a CreateContainer, as
// kuberuntime_container.go's generateContainerConfig builds it: the
// command and environment resolved, the mounts the kubelet prepared, the
// resources and oom_score_adj of the QoS class, the security context
// (capabilities, run as, read-only rootfs, no_new_privs, seccomp as a
// SecurityProfile with the Localhost profile's absolute path), labels and
// annotations the kubelet finds it by, and the log path.
func generateContainerConfig(pod *corev1.Pod, c *corev1.Container, in containerInputs) (*runtimeapi.ContainerConfig, error) {
	sc := effectiveSecurityContext(pod, c)
	if sc.Privileged != nil && *sc.Privileged {
		return nil, fmt.Errorf("%w: container %s asks for securityContext.privileged, which gives it every capability and the host's devices; podlab runs every node on one shared machine", ErrPrivileged, c.Name)
	}
	if err := verifyRunAsNonRoot(pod, c, sc, in.ImageUser); err != nil {
		return nil, err
	}
	lookup := envLookup(in.Env)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(in.RestartCount)},
		Image:      &runtimeapi.ImageSpec{Image: in.ImageRef, UserSpecifiedImage: c.Image},
		Command:    expandAll(c.Command, lookup),
		Args:       expandAll(c.Args, lookup),
		WorkingDir: c.WorkingDir,
		Labels: map[string]string{
			LabelPodName: pod.Name, LabelPodNamespace: pod.Namespace, LabelPodUID: string(pod.UID), LabelContainerName: c.Name,
		},
		Annotations: map[string]string{
			AnnotationRestartCount:             strconv.Itoa(in.RestartCount),
			AnnotationTerminationMessagePath:   c.TerminationMessagePath,
			AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		},
		LogPath:   containerLogPath(c.Name, in.RestartCount),
		Stdin:     c.Stdin,
		StdinOnce: c.StdinOnce,
		Tty:       c.TTY,
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		cfg.Annotations[AnnotationTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	for _, e := range in.Env {
		k, v, _ := strings.Cut(e, "=")
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	for _, m := range in.Mounts {
		cfg.Mounts = append(cfg.Mounts, runtimeMount(m))
	}
	seccomp, err := securityProfile(sc.SeccompProfile, in.SeccompRoot, in.SeccompDefault)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	lsc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: in.Namespaces,
		Seccomp:          seccomp,
		ReadonlyRootfs:   sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		// CRI sets no_new_privs only for allowPrivilegeEscalation: false.
		NoNewPrivs: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
	}
	if sc.Capabilities != nil {
		caps := &runtimeapi.Capability{}
		for _, a := range sc.Capabilities.Add {
			if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(string(a)), "CAP_"), "ALL") {
				return nil, fmt.Errorf("%w: capabilities.add ALL gives every capability, as privileged does", ErrPrivileged)
			}
			caps.AddCapabilities = append(caps.AddCapabilities, string(a))
		}
		for _, d := range sc.Capabilities.Drop {
			caps.DropCapabilities = append(caps.DropCapabilities, string(d))
		}
		lsc.Capabilities = caps
	}
	if sc.RunAsUser != nil {
		lsc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	}
	if sc.RunAsGroup != nil {
		lsc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		lsc.SupplementalGroups = append(lsc.SupplementalGroups, psc.SupplementalGroups...)
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: containerResources(c, in.OOMScoreAdj), SecurityContext: lsc}
	return cfg, nil
}

// verifyRunAsNonRoot refuses a container with runAsNonRoot that would run
// as root: runAsUser 0, or no runAsUser and an image whose USER is root
// (or a name the kubelet cannot check), as kuberuntime's
// verifyRunAsNonRoot.
func verifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, sc corev1.SecurityContext, imageUser string) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("%w (pod: %q, container: %s): runAsUser is 0", ErrRunAsNonRoot, podDesc(pod), c.Name)
		}
		return nil
	}
	u, _, _ := strings.Cut(imageUser, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	switch {
	case u == "" || (err == nil && uid == 0):
		return fmt.Errorf("%w (pod: %q, container: %s): set securityContext.runAsUser, or use an image with a non-root USER", ErrRunAsNonRoot, podDesc(pod), c.Name)
	case err != nil:
		return fmt.Errorf("%w (pod: %q, container: %s): the image's USER %q is a name, which cannot be checked to be non-root: set securityContext.runAsUser", ErrRunAsNonRoot, podDesc(pod), c.Name, imageUser)
	}
	return nil
}

// runtimeMount is a prepared volume mount in the CRI's terms.
func runtimeMount(m specs.Mount) *runtimeapi.Mount {
	ro := false
	for _, o := range m.Options {
		ro = ro || o == "ro"
	}
	return &runtimeapi.Mount{ContainerPath: m.Destination, HostPath: m.Source, Readonly: ro,
		Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE}
}

// containerResources are the container's cgroup settings, as kuberuntime's
// generateLinuxContainerResources: cpu shares from its cpu request (its
// limit when it has no request; 2 with neither), cpu quota and period from
// its cpu limit, the memory limit, and oom_score_adj.
func containerResources(c *corev1.Container, oom int) *runtimeapi.LinuxContainerResources {
	req, lim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	r := &runtimeapi.LinuxContainerResources{OomScoreAdj: int64(oom), CpuShares: int64(MilliCPUToShares(req.MilliValue()))}
	if req.IsZero() && !lim.IsZero() {
		r.CpuShares = int64(MilliCPUToShares(lim.MilliValue()))
	}
	if !lim.IsZero() {
		r.CpuPeriod = quotaPeriod
		r.CpuQuota = milliCPUToQuota(lim.MilliValue(), quotaPeriod)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = q.Value()
	}
	return r
}
