package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet/criremote"
)

// What the kubelet prepares, handed to the runtime over CRI: a Burstable
// pod whose GREETING uses the downward API and whose emptyDir is mounted
// at /data runs in the pod cgroup the kubelet made, with the kubelet's
// log directory, environment, volume and oom_score_adj, as the runtime's
// config.json and the container's log show.
func TestPrepare_PodThroughCRI(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	ref := demoHello(t)
	n, r := serveNodeRuntime(t)
	dir := n.State().Dir
	if _, err := apiserver.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	admin, err := srv.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, err := srv.ClientAs("system:node:node-1")
	if err != nil {
		t.Fatal(err)
	}
	cri, err := criremote.Dial(DefaultRuntimeEndpoint(n), "", criremote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cri.Close() })
	k, err := New(Config{StateDir: dir, Client: nodeClient, CRI: cri})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "hello", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
			Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "GREETING", Value: "Hello from pod $(POD_NAME), over CRI"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	obj, err := admin.Create(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	pod = obj.(*corev1.Pod)
	if pod.Status.QOSClass != corev1.PodQOSBurstable {
		t.Fatalf("QoS class %s, want Burstable", pod.Status.QOSClass)
	}
	c := &pod.Spec.Containers[0]
	t.Cleanup(func() {
		if st, err := r.podStatus(ctx, pod.UID); err == nil {
			r.killPod(ctx, st, 2)
			r.removePod(ctx, st)
		}
		k.removePodCgroups(ctx, pod.UID)
	})

	in, pc, err := k.prepareSandbox(ctx, pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in.CgroupParent != pc.Pod.Path || !strings.Contains(in.CgroupParent, "/kubepods/burstable/pod"+string(pod.UID)) || in.LogRoot != n.PodLogsDir() || in.UserNamespace != nil {
		t.Fatalf("sandbox inputs %+v (pod cgroup %s), want the burstable pod cgroup, log root %s, no user namespace", in, pc.Pod.Path, n.PodLogsDir())
	}
	sbID, sbCfg, err := r.createPodSandbox(ctx, pod, in, "")
	if err != nil {
		t.Fatal(err)
	}
	ensured, err := r.ensureImageExists(ctx, c, sbCfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	imageRef, img := ensured.Ref, ensured.Image
	cin, oom, err := k.prepareContainer(ctx, pod, c, 0, imageRef, img, sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.startContainer(ctx, sbID, sbCfg, pod, c, cin)
	if err != nil {
		t.Fatal(err)
	}

	// The runtime's spec: the kubelet's cgroup, volume and oom_score_adj.
	b, err := os.ReadFile(filepath.Join(n.CRIBundle(sbID, id), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Linux.CgroupsPath, pc.Pod.Path+"/") {
		t.Errorf("cgroupsPath %s, want under the kubelet's pod cgroup %s", s.Linux.CgroupsPath, pc.Pod.Path)
	}
	if s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != oom.Set || oom.Wanted <= 2 || oom.Wanted >= 1000 {
		got := "none"
		if s.Process.OOMScoreAdj != nil {
			got = strconv.Itoa(*s.Process.OOMScoreAdj)
		}
		t.Errorf("oomScoreAdj %s, want the kubelet's Burstable %+v", got, oom)
	}
	var data *specs.Mount
	for i := range s.Mounts {
		if s.Mounts[i].Destination == "/data" {
			data = &s.Mounts[i]
		}
	}
	if data == nil || data.Source != k.layout.EmptyDir(pod.UID, "data") {
		t.Errorf("the /data mount %+v, want the kubelet's emptyDir %s", data, k.layout.EmptyDir(pod.UID, "data"))
	}
	// The container's log, where the kubelet reads it: the ConfigMap's greeting.
	logPath := filepath.Join(n.PodLogsDir(), "default_web_"+string(pod.UID), "hello", "0.log")
	deadline := time.Now().Add(10 * time.Second)
	for b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "Hello from pod web, over CRI"); b, _ = os.ReadFile(logPath) {
		if time.Now().After(deadline) {
			t.Fatalf("no greeting in %s: %q", logPath, b)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A container whose env names a field the downward API does not have
	// is refused before the runtime is asked (CreateContainerConfigError's
	// cause).
	bad := c.DeepCopy()
	bad.Env[0].ValueFrom.FieldRef.FieldPath = "spec.nope"
	if _, _, err := k.prepareContainer(ctx, pod, bad, 0, imageRef, img, nil); err == nil || !strings.Contains(err.Error(), "spec.nope") {
		t.Errorf("prepareContainer with an unknown fieldRef: %v, want an error naming it", err)
	}
	// hostUsers: false with hostNetwork: refused before anything is made.
	hostUsers := false
	un := pod.DeepCopy()
	un.UID, un.Spec.HostUsers, un.Spec.HostNetwork = "uid-userns", &hostUsers, true
	if _, _, err := k.prepareSandbox(ctx, un, 0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("prepareSandbox of hostUsers: false with hostNetwork: %v, want ErrUnsupported", err)
	}
}
