package kubelet_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/kubelet"
)

// TestKubelet_Seccomp runs, with real runc, a probe that reads its own
// /proc/self/status and tries two system calls containerd's default profile
// refuses (unshare -U, keyctl), under the profile the kubelet chose from the
// pod's and the container's securityContext.seccompProfile.
func TestKubelet_Seccomp(t *testing.T) {
	c := newCluster(t)
	probeDir := buildSeccompProbe(t)
	profiles := filepath.Join(c.kubelet.Layout().SeccompDir(), "profiles")
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	// A Localhost profile of its own: everything allowed but keyctl.
	if err := os.WriteFile(filepath.Join(profiles, "no-keyctl.json"), []byte(`{"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [{"names": ["keyctl"], "action": "SCMP_ACT_ERRNO"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	noKeyctl := "profiles/no-keyctl.json"
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}

	tests := []struct {
		name           string
		pod, container *corev1.SeccompProfile
		want           map[string]string
	}{
		{
			name: "pod RuntimeDefault",
			pod:  runtimeDefault,
			want: map[string]string{"Seccomp": "2", "unshare": "EPERM", "keyctl": "EPERM"},
		},
		{
			name: "container Unconfined over the pod's RuntimeDefault",
			pod:  runtimeDefault, container: unconfined,
			want: map[string]string{"Seccomp": "0", "unshare": "invalid argument"},
		},
		{
			name:      "container Localhost",
			container: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &noKeyctl},
			want:      map[string]string{"Seccomp": "2", "unshare": "invalid argument", "keyctl": "EPERM"},
		},
		{
			name: "none: unconfined, as Kubernetes without --seccomp-default",
			want: map[string]string{"Seccomp": "0", "unshare": "invalid argument"},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := seccompPod(t, "seccomp-"+string(rune('a'+i)), probeDir, tc.pod, tc.container)
			c.create(t, p)
			got := c.syncUntil(t, p.Name, 30*time.Second, "finished", func(p *corev1.Pod) bool {
				return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			})
			var out bytes.Buffer
			if _, err := kubelet.Logs(context.Background(), c.dir, got, &out, kubelet.LogsOptions{}); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("phase %s:\n%s\n%s", got.Status.Phase, statusText(got), out.String())
			}
			lines := map[string]string{}
			for _, l := range strings.Split(out.String(), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					lines[k] = v
				}
			}
			for k, v := range tc.want {
				if lines[k] != v {
					t.Errorf("%s = %q, want %q; the probe said:\n%s", k, lines[k], v, out.String())
				}
			}
		})
	}
}

// With the kubelet's --seccomp-default, a pod that sets no profile gets the
// runtime's default one.
func TestKubelet_SeccompDefault(t *testing.T) {
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.SeccompDefault = true })
	p := seccompPod(t, "seccomp-default", buildSeccompProbe(t), nil, nil)
	c.create(t, p)
	got := c.syncUntil(t, p.Name, 30*time.Second, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	var out bytes.Buffer
	if _, err := kubelet.Logs(context.Background(), c.dir, got, &out, kubelet.LogsOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Seccomp=2\n") || !strings.Contains(out.String(), "keyctl=EPERM\n") {
		t.Errorf("the probe said:\n%s\nwant Seccomp=2 and keyctl=EPERM", out.String())
	}
}

// A Localhost profile that is not on the node: the runtime cannot load it,
// and the container waits in CreateContainerError with the kubelet's Failed
// event, as with containerd.
func TestKubelet_Seccomp_MissingLocalhostProfile(t *testing.T) {
	c := newCluster(t)
	missing := "profiles/missing.json"
	p := helloPod(t, "seccomp-missing", "--once")
	p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &missing}}
	p = c.create(t, p)
	err := createAfterPull(t, c, p)
	if err == nil || !strings.Contains(err.Error(), "cannot load seccomp profile") {
		t.Fatalf("create stage: error %v, want the runtime's cannot load seccomp profile", err)
	}
	got := c.get(t, p.Name)
	if len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Waiting == nil ||
		got.Status.ContainerStatuses[0].State.Waiting.Reason != kubelet.ReasonCreateContainerError {
		t.Fatalf("status:\n%s\nwant waiting %s", statusText(got), kubelet.ReasonCreateContainerError)
	}
	path := filepath.Join(c.kubelet.Layout().SeccompDir(), missing)
	want := `cannot load seccomp profile "` + path + `": the file does not exist`
	if ev := c.events(t, got); !hasEvent(ev, "Warning Failed: Error: rpc error: code = Unknown desc = ") || !strings.Contains(strings.Join(ev, "\n"), want) {
		t.Errorf("events %q, want a Failed event with the runtime's %q", ev, want)
	}
}

// A localhostProfile that leaves the node's seccomp directory is refused by
// the kubelet itself, whatever the API server let through: the container
// waits in CreateContainerConfigError, and no profile is read.
func TestKubelet_Seccomp_EscapingLocalhostProfile(t *testing.T) {
	c := newCluster(t)
	ok := "profiles/ok.json"
	p := helloPod(t, "seccomp-escape", "--once")
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &ok}}
	p = c.create(t, p)
	escape := "../../../../etc/passwd" // what the kubelet is handed, past any validation
	p.Spec.Containers[0].SecurityContext.SeccompProfile.LocalhostProfile = &escape
	err := createAfterPullOf(t, c, p)
	wantErr(t, err, kubelet.ErrSeccompProfile)
	got := c.get(t, p.Name)
	if len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Waiting == nil ||
		got.Status.ContainerStatuses[0].State.Waiting.Reason != kubelet.ReasonCreateConfigError {
		t.Fatalf("status:\n%s\nwant waiting %s", statusText(got), kubelet.ReasonCreateConfigError)
	}
	if want := "Warning Failed: Error: container web: invalid seccomp profile: localhostProfile \"" + escape + "\" must not contain '..'"; !hasEvent(c.events(t, got), want) {
		t.Errorf("events %q, want one starting %q", c.events(t, got), want)
	}
}

// buildSeccompProbe builds testdata/seccompprobe, static, into a directory
// any uid may read, to be mounted into the pods by a hostPath volume.
func buildSeccompProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(testenv.LookPath(t, "go"), "build", "-o", filepath.Join(dir, "seccompprobe"), "./testdata/seccompprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	return dir
}

// seccompPod runs the probe from probeDir (a hostPath volume) in the hello
// image, once, with the given pod and container seccomp profiles.
func seccompPod(t *testing.T, name, probeDir string, pod, container *corev1.SeccompProfile) *corev1.Pod {
	p := helloPod(t, name)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	if pod != nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: pod}
	}
	dir := corev1.HostPathDirectory
	p.Spec.Volumes = []corev1.Volume{{Name: "probe", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: probeDir, Type: &dir}}}}
	ctr := &p.Spec.Containers[0]
	ctr.Command = []string{"/probe/seccompprobe"}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "probe", MountPath: "/probe", ReadOnly: true}}
	if container != nil {
		ctr.SecurityContext = &corev1.SecurityContext{SeccompProfile: container}
	}
	return p
}
