package kubelet

// What the kubelet resolves of a PodSpec itself before it asks the runtime
// for a container: the effective security context, the volumes (emptyDir
// made, hostPath checked, subPaths bind-mounted) and the environment
// (the downward API, $(VAR) expansion). generateContainerConfig puts them
// in CRI's ContainerConfig; the runtime makes the OCI spec from that.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podlab/podlab/steps/kubelet/subpath"
)

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

func bindMount(src, dst string, readOnly bool) specs.Mount {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", mode}}
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
