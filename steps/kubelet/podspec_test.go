package kubelet_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/spec"
)

// TestCreateStage_FromPodSpec: what the PodSpec asks reaches the runtime's
// config.json through the kubelet's ContainerConfig, and the running
// container sees it.
func TestCreateStage_FromPodSpec(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	uid, gid, yes, no := int64(1000), int64(2000), true, false
	p := helloPod(t, "shaped")
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, SupplementalGroups: []int64{3000}}
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	ctr := &p.Spec.Containers[0]
	ctr.Command = []string{"/hello"}
	ctr.Args = []string{"--once", "--listen=$(ADDR)"}
	ctr.Env = []corev1.EnvVar{
		{Name: "PORT", Value: "9090"},
		{Name: "ADDR", Value: ":$(PORT)"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "GREETING", Value: "Hello from the PodSpec"},
	}
	ctr.WorkingDir = "/tmp"
	ctr.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
	}
	ctr.SecurityContext = &corev1.SecurityContext{
		RunAsGroup: &gid, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
	}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	pod := c.create(t, p)

	walked := walkByHand(t, c, "shaped")
	if len(walked) != 4 {
		t.Fatalf("walked %v", walked)
	}
	ctrs := c.containersOf(t, pod.UID)
	if len(ctrs) != 1 {
		t.Fatalf("the runtime's containers of the pod: %v", ctrs)
	}
	in := c.inspect(t, ctrs[0].Id)
	s := readSpec(t, in.Info.Config)
	sb := c.sandboxOf(t, pod.UID)
	checks := []struct {
		what string
		ok   bool
	}{
		{"args: command and expanded args", slices.Equal(s.Process.Args, []string{"/hello", "--once", "--listen=:9090"})},
		{"env: expanded, downward API", slices.Contains(s.Process.Env, "ADDR=:9090") && slices.Contains(s.Process.Env, "POD_NAME=shaped")},
		{"cwd", s.Process.Cwd == "/tmp"},
		{"user: runAsUser of the pod, runAsGroup of the container, supplementalGroups",
			s.Process.User.UID == 1000 && s.Process.User.GID == 2000 && slices.Contains(s.Process.User.AdditionalGids, 3000)},
		{"readOnlyRootFilesystem", s.Root.Readonly},
		{"allowPrivilegeEscalation false", s.Process.NoNewPrivileges},
		{"capabilities: drop ALL, add NET_BIND_SERVICE", slices.Equal(s.Process.Capabilities.Bounding, []string{"CAP_NET_BIND_SERVICE"})},
		{"memory limit", s.Linux.Resources.Memory != nil && *s.Linux.Resources.Memory.Limit == 64<<20},
		{"cpu quota from the limit, shares from the request", *s.Linux.Resources.CPU.Quota == 50000 && *s.Linux.Resources.CPU.Shares == 256},
		{"cgroupsPath under the kubelet's pod cgroup", strings.HasPrefix(s.Linux.CgroupsPath, sb.Info.CgroupParent+"/") && strings.Contains(s.Linux.CgroupsPath, "/kubepods/burstable/pod")},
		{"hostname", s.Hostname == "shaped"},
		{"the kubelet's annotations", in.Status.Annotations[kubelet.AnnotationRestartCount] == "0" && in.Status.Labels[kubelet.LabelPodUID] == string(pod.UID)},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("config.json: %s", ch.what)
		}
	}
	layout := c.kubelet.Layout()
	for kind, typ := range map[string]specs.LinuxNamespaceType{"net": specs.NetworkNamespace, "ipc": specs.IPCNamespace, "uts": specs.UTSNamespace} {
		if !slices.Contains(s.Linux.Namespaces, specs.LinuxNamespace{Type: typ, Path: sb.Info.Namespaces[kind]}) {
			t.Errorf("config.json does not join the sandbox's %s namespace: %+v", kind, s.Linux.Namespaces)
		}
	}
	if !slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.PIDNamespace && n.Path == "" }) {
		t.Errorf("the container should have a pid namespace of its own: %+v", s.Linux.Namespaces)
	}
	mounts := map[string]string{}
	for _, m := range s.Mounts {
		mounts[m.Destination] = m.Source
	}
	if mounts["/scratch"] != layout.EmptyDir(pod.UID, "scratch") || mounts["/etc/hosts"] == "" || mounts["/etc/hostname"] == "" {
		t.Errorf("mounts: %v", mounts)
	}

	// It ran: hello saw its user, its limits and the greeting from env.
	got := c.syncUntil(t, "shaped", 10*time.Second, "Succeeded", func(p *corev1.Pod) bool {
		return p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending
	})
	var out bytes.Buffer
	if _, err := kubelet.Logs(ctx, c.dir, got, &out, kubelet.LogsOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Hello from the PodSpec!", "hostname  shaped", "uid 1000", "gid 2000", "64.0 MiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the container's output lacks %q:\n%s", want, out.String())
		}
	}
	if got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase %s:\n%s\n%s", got.Status.Phase, statusText(got), out.String())
	}
}

func readSpec(t *testing.T, path string) *specs.Spec {
	t.Helper()
	if path == "" {
		t.Fatal("no config.json")
	}
	s, err := spec.Read(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
