package kubelet

// From a PodSpec to a runtime spec: what the kubelet puts in CRI's
// ContainerConfig (command, args, env, working dir, resources, security
// context, mounts) and what the runtime does with it. steps/spec builds the
// spec from the image config and the options it has; the kubelet adds the
// rest to the *specs.Spec it returns: the sandbox's namespaces, the pod's
// cgroup, the security context, the volumes, and its annotations.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podlab/podlab/steps/kubelet/subpath"
	"github.com/podlab/podlab/steps/spec"
)

// containerSpec makes the runtime spec of container c of pod, restart
// restart, over the image config cfg and the unpacked bundle, with the
// container's oom_score_adj oom.
func (k *Kubelet) containerSpec(ctx context.Context, pod *corev1.Pod, c *corev1.Container, restart int, cfg *v1.ConfigFile, bundle, imageID string, oom int) (*specs.Spec, error) {
	id := ContainerID(pod, c.Name, restart)
	cgroupsPath, err := k.layout.CgroupsPath(pod, id)
	if err != nil {
		return nil, err
	}
	sc := effectiveSecurityContext(pod, c)
	if sc.Privileged != nil && *sc.Privileged {
		return nil, fmt.Errorf("%w: container %s asks for securityContext.privileged, which gives it every capability and the host's devices; podlab runs every node on one shared machine", ErrPrivileged, c.Name)
	}
	env, err := k.containerEnv(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	lookup := envLookup(env)
	opts := spec.Options{
		ContainerID: id,
		Command:     expandAll(c.Command, lookup),
		Args:        expandAll(c.Args, lookup),
		Env:         env,
		WorkingDir:  c.WorkingDir,
		Hostname:    podHostname(pod),
	}
	if sc.RunAsUser != nil {
		opts.User = strconv.FormatInt(*sc.RunAsUser, 10)
		if sc.RunAsGroup != nil {
			opts.User += ":" + strconv.FormatInt(*sc.RunAsGroup, 10)
		}
	} else if sc.RunAsGroup != nil {
		// A group alone keeps the image's user.
		u := cfg.Config.User
		if u == "" {
			u = "0"
		}
		u, _, _ = strings.Cut(u, ":")
		opts.User = u + ":" + strconv.FormatInt(*sc.RunAsGroup, 10)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		opts.CPU = q.String()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		opts.Memory = q.String()
	}
	s, err := spec.Generate(ctx, cfg, bundle, opts)
	if err != nil {
		return nil, err
	}
	if sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && s.Process.User.UID == 0 {
		return nil, fmt.Errorf("%w (pod: %q, container: %s): set securityContext.runAsUser, or use an image with a non-root USER", ErrRunAsNonRoot, podDesc(pod), c.Name)
	}
	mounts, err := k.volumeMounts(pod, c)
	if err != nil {
		return nil, err
	}
	hosts, err := k.podFiles(pod)
	if err != nil {
		return nil, err
	}
	seccomp, err := seccompOption(sc.SeccompProfile, k.layout.SeccompDir(), k.cfg.SeccompDefault)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	sb := k.layout.observeSandbox(pod)
	userns, err := k.userNamespaceOpts(pod, sb, hosts)
	if err != nil {
		return nil, err
	}
	opt := []oci.SpecOpts{
		withSandboxNamespaces(pod, sb),
		withCgroupsPath(cgroupsPath),
		withCPURequest(c.Resources.Requests),
		spec.WithOOMScoreAdj(oom),
		withSecurityContext(sc),
		seccomp, // after the capabilities: the default profile follows them
		withPodSecurityContext(pod.Spec.SecurityContext),
		withMounts(append(hosts, mounts...)),
		withAnnotations(map[string]string{
			AnnotationPodName:      pod.Name,
			AnnotationPodNamespace: pod.Namespace,
			AnnotationPodUID:       string(pod.UID),
			AnnotationContainer:    c.Name,
			AnnotationRestartCount: strconv.Itoa(restart),
			AnnotationImageID:      imageID,
		}),
	}
	opt = append(opt, userns...) // after the mounts it idmaps
	if h := k.podHandler(pod.UID); h.SpecVersion != "" {
		// the version the sandbox's runtime accepts (crun 1.8.1: up to 1.1)
		opt = append(opt, spec.WithOCIVersion(h.SpecVersion))
	}
	if err := oci.ApplyOpts(ctx, nil, &containers.Container{ID: id}, s, opt...); err != nil {
		return nil, err
	}
	return s, nil
}

// effectiveSecurityContext is the container's securityContext over the
// pod's, field by field, as the kubelet merges them.
func effectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) corev1.SecurityContext {
	var out corev1.SecurityContext
	if p := pod.Spec.SecurityContext; p != nil {
		out.RunAsUser, out.RunAsGroup, out.RunAsNonRoot = p.RunAsUser, p.RunAsGroup, p.RunAsNonRoot
		out.SeccompProfile = p.SeccompProfile
	}
	if cs := c.SecurityContext; cs != nil {
		o := *cs
		if o.RunAsUser == nil {
			o.RunAsUser = out.RunAsUser
		}
		if o.RunAsGroup == nil {
			o.RunAsGroup = out.RunAsGroup
		}
		if o.RunAsNonRoot == nil {
			o.RunAsNonRoot = out.RunAsNonRoot
		}
		if o.SeccompProfile == nil {
			o.SeccompProfile = out.SeccompProfile
		}
		out = o
	}
	return out
}

// withSandboxNamespaces makes the container join the pod's network, IPC and
// UTS namespaces by path (each container keeps its own mount, PID and
// cgroup namespaces), or the node's with hostNetwork, hostIPC, hostPID.
func withSandboxNamespaces(pod *corev1.Pod, sb Sandbox) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *specs.Spec) error {
		set := func(t specs.LinuxNamespaceType, kind string, host bool) error {
			if host {
				return oci.WithHostNamespace(t)(ctx, cl, c, s)
			}
			p, ok := sb.Namespaces[kind]
			if !ok {
				return fmt.Errorf("%w: no %s namespace at %s: run the sandbox stage first", ErrNoSandbox, kind, pod.UID)
			}
			return oci.WithLinuxNamespace(specs.LinuxNamespace{Type: t, Path: p})(ctx, cl, c, s)
		}
		if err := set(specs.NetworkNamespace, "net", pod.Spec.HostNetwork); err != nil {
			return err
		}
		if err := set(specs.IPCNamespace, "ipc", pod.Spec.HostIPC); err != nil {
			return err
		}
		if err := set(specs.UTSNamespace, "uts", pod.Spec.HostNetwork); err != nil {
			return err
		}
		if pod.Spec.HostNetwork {
			s.Hostname = "" // the node's UTS namespace: runc may not set a hostname in it
		}
		if pod.Spec.HostPID {
			return oci.WithHostNamespace(specs.PIDNamespace)(ctx, cl, c, s)
		}
		return nil
	}
}

// withCgroupsPath puts the container under its pod's cgroup.
func withCgroupsPath(p string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		s.Linux.CgroupsPath = p
		return nil
	}
}

// withCPURequest sets the cpu shares from resources.requests.cpu, as the
// kubelet does (the quota comes from the limit).
func withCPURequest(req corev1.ResourceList) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		q, ok := req[corev1.ResourceCPU]
		if !ok {
			return nil
		}
		shares := uint64(min(max(q.MilliValue()*1024/1000, 2), 262144))
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Resources == nil {
			s.Linux.Resources = &specs.LinuxResources{}
		}
		if s.Linux.Resources.CPU == nil {
			s.Linux.Resources.CPU = &specs.LinuxCPU{}
		}
		s.Linux.Resources.CPU.Shares = &shares
		return nil
	}
}

// withSecurityContext applies readOnlyRootFilesystem, capabilities and
// allowPrivilegeEscalation.
func withSecurityContext(sc corev1.SecurityContext) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			if s.Root == nil {
				s.Root = &specs.Root{Path: spec.RootfsDir}
			}
			s.Root.Readonly = true
		}
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		// CRI sets no_new_privs only for allowPrivilegeEscalation: false.
		s.Process.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		if sc.Capabilities == nil {
			return nil
		}
		if s.Process.Capabilities == nil {
			s.Process.Capabilities = &specs.LinuxCapabilities{}
		}
		caps := s.Process.Capabilities
		sets := []*[]string{&caps.Bounding, &caps.Effective, &caps.Permitted}
		for _, d := range sc.Capabilities.Drop {
			name := capName(d)
			for _, set := range sets {
				if name == "CAP_ALL" {
					*set = nil
					continue
				}
				*set = slices.DeleteFunc(*set, func(c string) bool { return c == name })
			}
		}
		for _, a := range sc.Capabilities.Add {
			name := capName(a)
			if name == "CAP_ALL" {
				return fmt.Errorf("%w: capabilities.add ALL gives every capability, as privileged does", ErrPrivileged)
			}
			for _, set := range sets {
				if !slices.Contains(*set, name) {
					*set = append(*set, name)
				}
			}
		}
		return nil
	}
}

// capName is a Kubernetes capability name ("NET_ADMIN") as the runtime
// spec writes it ("CAP_NET_ADMIN").
func capName(c corev1.Capability) string {
	n := strings.ToUpper(string(c))
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	return n
}

// withPodSecurityContext applies the pod's supplementalGroups, and passes
// its (namespaced) sysctls on; runc refuses any that is not namespaced.
func withPodSecurityContext(psc *corev1.PodSecurityContext) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if psc == nil {
			return nil
		}
		if len(psc.SupplementalGroups) > 0 && s.Process != nil {
			for _, g := range psc.SupplementalGroups {
				if g >= 0 && g <= math.MaxUint32 && !slices.Contains(s.Process.User.AdditionalGids, uint32(g)) {
					s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
				}
			}
		}
		if len(psc.Sysctls) == 0 {
			return nil
		}
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for _, sc := range psc.Sysctls {
			s.Linux.Sysctl[sc.Name] = sc.Value
		}
		return nil
	}
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

func withAnnotations(a map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for k, v := range a {
			s.Annotations[k] = v
		}
		return nil
	}
}

func bindMount(src, dst string, readOnly bool) specs.Mount {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", mode}}
}

// podFiles writes the pod's /etc/hosts and /etc/hostname under its pod
// directory, as the kubelet writes /var/lib/kubelet/pods/<uid>/etc-hosts,
// and returns the mounts every container of the pod gets.
func (k *Kubelet) podFiles(pod *corev1.Pod) ([]specs.Mount, error) {
	if pod.Spec.HostNetwork {
		return nil, nil
	}
	dir := k.layout.PodDir(pod.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	host := podHostname(pod)
	hosts := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"127.0.1.1\t" + host + "\n"
	files := []struct{ name, content, dst string }{
		{"etc-hosts", hosts, "/etc/hosts"},
		{"hostname", host + "\n", "/etc/hostname"},
	}
	var out []specs.Mount
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			return nil, err
		}
		out = append(out, bindMount(p, f.dst, false))
	}
	return out, nil
}

// volumeMounts resolves the container's volumeMounts: emptyDir volumes are
// directories under the pod directory, hostPath volumes the node's paths. A
// subPath is never handed to the runtime as <volume>/<subPath>, a name a
// container sharing the volume could have made a symlink to the host's /:
// it is resolved inside its volume and bind-mounted onto
// volume-subpaths/<volume>/<container>/<index> (package subpath), and the
// runtime is given that path.
func (k *Kubelet) volumeMounts(pod *corev1.Pod, c *corev1.Container) ([]specs.Mount, error) {
	var out []specs.Mount
	for i, vm := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == vm.Name {
				vol = &pod.Spec.Volumes[i]
			}
		}
		if vol == nil {
			return nil, fmt.Errorf("volumeMount %q: the pod has no volume by that name", vm.Name)
		}
		src, err := k.volumePath(pod, vol)
		if err != nil {
			return nil, err
		}
		if vm.SubPath != "" {
			target := k.layout.SubPath(pod.UID, vol.Name, c.Name, i)
			if err := subpath.Bind(src, vm.SubPath, target); err != nil {
				return nil, &SubPathError{VolumeMount: vm.Name, Container: c.Name, SubPath: vm.SubPath,
					Err: fmt.Errorf("preparing subPath %q of volume %q: %w", vm.SubPath, vol.Name, err)}
			}
			src = target
		}
		out = append(out, bindMount(src, vm.MountPath, vm.ReadOnly))
	}
	return out, nil
}

// volumePath is the directory (or file) of a volume on the node: an
// emptyDir is made under the pod directory, world-writable as in
// Kubernetes, without following a symlink; a hostPath is the node's path
// the pod names, checked against its type.
func (k *Kubelet) volumePath(pod *corev1.Pod, vol *corev1.Volume) (string, error) {
	switch {
	case vol.EmptyDir != nil:
		p := k.layout.EmptyDir(pod.UID, vol.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("making emptyDir volume %q: %w", vol.Name, err)
		}
		d, err := subpath.MkdirAll(filepath.Dir(p), filepath.Base(p), 0o777)
		if err != nil {
			return "", fmt.Errorf("making emptyDir volume %q: %w", vol.Name, err)
		}
		d.Close()
		return p, nil
	case vol.HostPath != nil:
		if err := checkHostPath(vol.HostPath); err != nil {
			return "", fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		return vol.HostPath.Path, nil
	}
	return "", fmt.Errorf("%w: volume %s: podlab mounts emptyDir and hostPath volumes only", ErrUnsupported, vol.Name)
}

// checkHostPath applies a hostPath volume's type, creating what *OrCreate asks for.
func checkHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return err
	}
	switch t {
	case corev1.HostPathUnset:
		if missing {
			return fmt.Errorf("hostPath %s does not exist", hp.Path)
		}
	case corev1.HostPathDirectoryOrCreate:
		if missing {
			return os.MkdirAll(hp.Path, 0o755)
		}
		if !fi.IsDir() {
			return fmt.Errorf("hostPath %s is not a directory", hp.Path)
		}
	case corev1.HostPathDirectory:
		if missing || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", hp.Path)
		}
	case corev1.HostPathFileOrCreate:
		if missing {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if fi.IsDir() {
			return fmt.Errorf("hostPath %s is a directory, not a file", hp.Path)
		}
	case corev1.HostPathFile:
		if missing || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", hp.Path)
		}
	default:
		if missing {
			return fmt.Errorf("hostPath %s does not exist", hp.Path)
		}
	}
	return nil
}

// containerEnv resolves the container's envFrom and env, in the kubelet's
// order (envFrom first, env after, $(VAR) expanded with what came before).
func (k *Kubelet) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	var env []string
	set := func(name, value string) {
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		env = append(env, name+"="+value)
	}
	for _, from := range c.EnvFrom {
		data, err := k.envSource(ctx, pod, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for key := range data {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			set(from.Prefix+key, data[key])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, envLookup(env)))
			continue
		}
		v, err := k.envValueFrom(ctx, pod, c, e)
		if err != nil {
			return nil, err
		}
		set(e.Name, v)
	}
	return env, nil
}

func (k *Kubelet) envSource(ctx context.Context, pod *corev1.Pod, from corev1.EnvFromSource) (map[string]string, error) {
	optional := func(o *bool) bool { return o != nil && *o }
	switch {
	case from.ConfigMapRef != nil:
		obj, err := k.client.Get(ctx, "configmaps", pod.Namespace, from.ConfigMapRef.Name)
		if err != nil {
			if optional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("configmap %q not found: %w", from.ConfigMapRef.Name, err)
		}
		return obj.(*corev1.ConfigMap).Data, nil
	case from.SecretRef != nil:
		obj, err := k.client.Get(ctx, "secrets", pod.Namespace, from.SecretRef.Name)
		if err != nil {
			if optional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("secret %q not found: %w", from.SecretRef.Name, err)
		}
		out := map[string]string{}
		for key, v := range obj.(*corev1.Secret).Data {
			out[key] = string(v)
		}
		for key, v := range obj.(*corev1.Secret).StringData {
			out[key] = v
		}
		return out, nil
	}
	return nil, nil
}

func (k *Kubelet) envValueFrom(ctx context.Context, pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar) (string, error) {
	vf := e.ValueFrom
	optional := func(o *bool) bool { return o != nil && *o }
	switch {
	case vf.FieldRef != nil:
		return podField(pod, vf.FieldRef.FieldPath)
	case vf.ResourceFieldRef != nil:
		return k.resourceField(c, vf.ResourceFieldRef)
	case vf.ConfigMapKeyRef != nil:
		r := vf.ConfigMapKeyRef
		obj, err := k.client.Get(ctx, "configmaps", pod.Namespace, r.Name)
		if err != nil {
			if optional(r.Optional) {
				return "", nil
			}
			return "", fmt.Errorf("env %s: configmap %q not found: %w", e.Name, r.Name, err)
		}
		v, ok := obj.(*corev1.ConfigMap).Data[r.Key]
		if !ok && !optional(r.Optional) {
			return "", fmt.Errorf("env %s: couldn't find key %s in ConfigMap %s/%s", e.Name, r.Key, pod.Namespace, r.Name)
		}
		return v, nil
	case vf.SecretKeyRef != nil:
		r := vf.SecretKeyRef
		obj, err := k.client.Get(ctx, "secrets", pod.Namespace, r.Name)
		if err != nil {
			if optional(r.Optional) {
				return "", nil
			}
			return "", fmt.Errorf("env %s: secret %q not found: %w", e.Name, r.Name, err)
		}
		s := obj.(*corev1.Secret)
		if v, ok := s.Data[r.Key]; ok {
			return string(v), nil
		}
		if v, ok := s.StringData[r.Key]; ok {
			return v, nil
		}
		if optional(r.Optional) {
			return "", nil
		}
		return "", fmt.Errorf("env %s: couldn't find key %s in Secret %s/%s", e.Name, r.Key, pod.Namespace, r.Name)
	}
	return "", fmt.Errorf("%w: env %s: an empty valueFrom", ErrUnsupported, e.Name)
}

// podField is the downward API's fieldRef.
func podField(pod *corev1.Pod, fieldPath string) (string, error) {
	if strings.HasPrefix(fieldPath, "metadata.labels['") && strings.HasSuffix(fieldPath, "']") {
		return pod.Labels[strings.TrimSuffix(strings.TrimPrefix(fieldPath, "metadata.labels['"), "']")], nil
	}
	if strings.HasPrefix(fieldPath, "metadata.annotations['") && strings.HasSuffix(fieldPath, "']") {
		return pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(fieldPath, "metadata.annotations['"), "']")], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	}
	return "", fmt.Errorf("%w: fieldRef %q", ErrUnsupported, fieldPath)
}

// resourceField is the downward API's resourceFieldRef: the container's
// limit or request, in units of the divisor, rounded up; a limit not set is
// the node's allocatable.
func (k *Kubelet) resourceField(c *corev1.Container, r *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(r.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("%w: resourceFieldRef %q", ErrUnsupported, r.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		q, ok = k.capacity()[corev1.ResourceName(name)]
		if !ok {
			return "0", nil
		}
	}
	div := r.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	v := math.Ceil(q.AsApproximateFloat64() / div.AsApproximateFloat64())
	return strconv.FormatInt(int64(v), 10), nil
}

func envLookup(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(env[i], "="); k == name {
				return v, true
			}
		}
		return "", false
	}
}

func expandAll(in []string, lookup func(string) (string, bool)) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, lookup)
	}
	return out
}

// expand replaces $(VAR) by the variable's value, as the kubelet expands
// command, args and env values; $$ is a literal $, and a reference to an
// undefined variable is left as it is.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
