package kubectl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// describe runs Describe and returns its output.
func describe(t *testing.T, obj apiserver.Object, events []corev1.Event, opts ...DescribeOption) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Describe(&buf, obj, events, now, opts...); err != nil {
		t.Fatalf("Describe: %v", err)
	}
	return buf.String()
}

// squeezed is text with every run of spaces made one space, so that key
// lines can be checked without the column widths.
func squeezed(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		lines = append(lines, strings.Repeat(" ", indent)+strings.Join(strings.Fields(l), " "))
	}
	return lines
}

// wantLines checks that want appear in out, in this order, as whole lines
// (spaces squeezed, indentation kept). A want starting with a tab is a
// continuation line (the second label...), whose indentation is the
// column's width: it matches whatever the indentation.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	lines := squeezed(out)
	i := 0
	for _, w := range want {
		for i < len(lines) && !lineMatches(lines[i], w) {
			i++
		}
		if i == len(lines) {
			t.Errorf("line %q missing (or out of order) in\n%s", w, out)
			return
		}
	}
}

func lineMatches(line, want string) bool {
	if rest, ok := strings.CutPrefix(want, "\t"); ok {
		return strings.TrimSpace(line) == rest
	}
	return line == want
}

func event(obj corev1.ObjectReference, typ, reason, from, message string, first, last time.Duration, count int32) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name + "." + reason},
		InvolvedObject: obj,
		Type:           typ, Reason: reason, Message: message, Count: count,
		Source:         corev1.EventSource{Component: from},
		FirstTimestamp: ago(first), LastTimestamp: ago(last),
	}
}

func TestDescribe_Pod(t *testing.T) {
	pod := runningPod("default", "web", 5*time.Minute)
	pod.Labels = map[string]string{"app": "web", "pod-template-hash": "7d9c"}
	pod.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{...}", "note": "hello"}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c", UID: "rs", Controller: ptrTo(true)}}
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Priority = ptrTo(int32(0))
	pod.Status.HostIP = "10.0.0.1"
	pod.Status.StartTime = ptrTo(ago(5 * time.Minute))
	pod.Status.QOSClass = corev1.PodQOSBurstable
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	c.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	c.Env = []corev1.EnvVar{
		{Name: "MODE", Value: "prod"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(300))},
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(300))},
	}
	pod.Status.ContainerStatuses[0].ContainerID = "podlab://web-nginx"
	pod.Status.ContainerStatuses[0].ImageID = "docker.io/library/nginx@sha256:abc"

	ref := corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}
	events := []corev1.Event{
		event(ref, "Normal", "Pulled", "kubelet", "Container image \"nginx:1.27\" already present on machine", 5*time.Minute, 30*time.Second, 3),
		event(ref, "Normal", "Scheduled", "default-scheduler", "Successfully assigned default/web to node-1", 5*time.Minute, 5*time.Minute, 1),
	}
	out := describe(t, pod, events)
	wantLines(t, out,
		"Name: web",
		"Namespace: default",
		"Priority: 0",
		"Service Account: default",
		"Node: node-1/10.0.0.1",
		"Start Time: Fri, 14 Mar 2025 15:04:26 +0000",
		"Labels: app=web",
		"\tpod-template-hash=7d9c",
		"Annotations: note: hello",
		"Status: Running",
		"IP: 10.244.0.5",
		"IPs:",
		"  IP: 10.244.0.5",
		"Controlled By: ReplicaSet/web-7d9c",
		"Containers:",
		"  nginx:",
		"    Container ID: podlab://web-nginx",
		"    Image: nginx:1.27",
		"    Image ID: docker.io/library/nginx@sha256:abc",
		"    Port: 80/TCP",
		"    Host Port: 0/TCP",
		"    State: Running",
		"      Started: Fri, 14 Mar 2025 15:04:27 +0000",
		"    Ready: True",
		"    Restart Count: 0",
		"    Limits:",
		"      memory: 128Mi",
		"    Requests:",
		"      cpu: 100m",
		"      memory: 64Mi",
		"    Readiness: http-get http://:80/ delay=0s timeout=1s period=10s #success=1 #failure=3",
		"    Environment:",
		"      MODE: prod",
		"      POD_NAME: web (v1:metadata.name)",
		"    Mounts:",
		"      /data from data (rw)",
		"Conditions:",
		"  Type Status",
		"  Initialized True",
		"  Ready True",
		"Volumes:",
		"  data:",
		"    Type: EmptyDir (a temporary directory that shares a pod's lifetime)",
		"    Medium:",
		"    SizeLimit: <unset>",
		"QoS Class: Burstable",
		"Node-Selectors: <none>",
		"Tolerations: node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
		"\tnode.kubernetes.io/unreachable:NoExecute op=Exists for 300s",
		"Events:",
		"  Type Reason Age From Message",
		"  ---- ------ ---- ---- -------",
		"  Normal Scheduled 5m default-scheduler Successfully assigned default/web to node-1",
		"  Normal Pulled 30s (x3 over 5m) kubelet Container image \"nginx:1.27\" already present on machine",
	)
	if strings.Contains(out, "last-applied-configuration") {
		t.Errorf("describe shows the last-applied-configuration annotation, which kubectl hides:\n%s", out)
	}
	// The events table is aligned on its own, as kubectl flushes before it.
	wantExact := "" +
		"Events:\n" +
		"  Type    Reason     Age               From               Message\n" +
		"  ----    ------     ----              ----               -------\n" +
		"  Normal  Scheduled  5m                default-scheduler  Successfully assigned default/web to node-1\n" +
		"  Normal  Pulled     30s (x3 over 5m)  kubelet            Container image \"nginx:1.27\" already present on machine\n"
	if !strings.HasSuffix(out, wantExact) {
		t.Errorf("events table:\n%s\nwant it to end with\n%s", out, wantExact)
	}
}

func TestDescribe_PodStates(t *testing.T) {
	crash := crashingPod("default", "db", time.Hour)
	crash.Spec.Containers[0].Command = []string{"sh", "-c"}
	crash.Spec.Containers[0].Args = []string{"exit 1"}
	wantLines(t, describe(t, crash, nil),
		"    Command:",
		"      sh",
		"      -c",
		"    Args:",
		"      exit 1",
		"    State: Waiting",
		"      Reason: CrashLoopBackOff",
		"    Last State: Terminated",
		"      Reason: Error",
		"      Exit Code: 1",
		"    Ready: False",
		"    Restart Count: 3",
		"QoS Class: BestEffort",
		"Events: <none>",
	)

	pending := &corev1.Pod{ObjectMeta: meta("default", "new", time.Second),
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "busybox",
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	pending.DeletionTimestamp = ptrTo(ago(10 * time.Second))
	pending.DeletionGracePeriodSeconds = ptrTo(int64(30))
	wantLines(t, describe(t, pending, nil),
		"Node: <none>",
		"Status: Terminating (lasts 10s)",
		"Termination Grace Period: 30s",
		"IPs: <none>",
		"QoS Class: Guaranteed", // requests equal to limits, for cpu and memory
	)
}

func TestDescribe_Deployment(t *testing.T) {
	dep := deployment()
	dep.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
	}
	newRS := replicaSet(dep, "web-7d9c", 2)
	oldRS := replicaSet(dep, "web-5f6b", 0)
	oldRS.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
	oldRS.CreationTimestamp = ago(2 * time.Hour)
	stranger := replicaSet(dep, "other-1", 1)
	stranger.OwnerReferences = nil

	ref := corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "web"}
	events := []corev1.Event{event(ref, "Normal", "ScalingReplicaSet", "deployment-controller", "Scaled up replica set web-7d9c from 0 to 2", 45*time.Minute, 45*time.Minute, 1)}
	out := describe(t, dep, events, WithReplicaSets(stranger, newRS, oldRS))
	wantLines(t, out,
		"Name: web",
		"Namespace: default",
		"CreationTimestamp: Fri, 14 Mar 2025 14:24:26 +0000",
		"Labels: app=web",
		"Annotations: <none>",
		"Selector: app=web",
		"Replicas: 2 desired | 2 updated | 2 total | 1 available | 1 unavailable",
		"StrategyType: RollingUpdate",
		"MinReadySeconds: 0",
		"RollingUpdateStrategy: 25% max unavailable, 25% max surge",
		"Pod Template:",
		"  Labels: app=web",
		"  Containers:",
		"   nginx:",
		"    Image: nginx:1.27",
		"    Port: 80/TCP",
		"    Host Port: 0/TCP",
		"    Environment: <none>",
		"    Mounts: <none>",
		"   log:",
		"    Image: busybox",
		"    Port: <none>",
		"  Volumes: <none>",
		"  Node-Selectors: <none>",
		"  Tolerations: <none>",
		"Conditions:",
		"  Type Status Reason",
		"  ---- ------ ------",
		"  Available True MinimumReplicasAvailable",
		"  Progressing True NewReplicaSetAvailable",
		"OldReplicaSets: web-5f6b (0/0 replicas created)",
		"NewReplicaSet: web-7d9c (2/2 replicas created)",
		"Events:",
		"  Normal ScalingReplicaSet 45m deployment-controller Scaled up replica set web-7d9c from 0 to 2",
	)
	if strings.Contains(out, "other-1") {
		t.Errorf("a ReplicaSet the deployment does not control is listed:\n%s", out)
	}

	// Without its ReplicaSets, the lines are left out, as kubectl does
	// when it finds none.
	if out := describe(t, dep, nil); strings.Contains(out, "NewReplicaSet:") {
		t.Errorf("NewReplicaSet line without ReplicaSets:\n%s", out)
	}
}

func TestDescribe_ReplicaSet(t *testing.T) {
	dep := deployment()
	rs := replicaSet(dep, "web-7d9c", 2)
	mine := runningPod("default", "web-7d9c-a", time.Minute)
	mine.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptrTo(true)}}
	pending := mine.DeepCopy()
	pending.Name, pending.Status.Phase = "web-7d9c-b", corev1.PodPending
	orphan := runningPod("default", "web-7d9c-c", time.Minute)
	wantLines(t, describe(t, rs, nil, WithPods(mine, pending, orphan)),
		"Name: web-7d9c",
		"Selector: app=web,pod-template-hash=7d9c",
		"Controlled By: Deployment/web",
		"Replicas: 2 current / 2 desired",
		"Pods Status: 1 Running / 1 Waiting / 0 Succeeded / 0 Failed",
		"Pod Template:",
		"Events: <none>",
	)
}

func TestDescribe_Node(t *testing.T) {
	node := readyNode("node-1", 3*time.Hour)
	node.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
	node.Status.Conditions[0].Reason = "KubeletReady"
	node.Status.Conditions[0].Message = "kubelet is posting ready status"
	wantLines(t, describe(t, node, nil),
		"Name: node-1",
		"Roles: control-plane",
		"Labels: kubernetes.io/hostname=node-1",
		"\tnode-role.kubernetes.io/control-plane=",
		"Taints: node-role.kubernetes.io/control-plane:NoSchedule",
		"Unschedulable: false",
		"Conditions:",
		"  Ready True Mon, 01 Jan 0001 00:00:00 +0000 Mon, 01 Jan 0001 00:00:00 +0000 KubeletReady kubelet is posting ready status",
		"Addresses:",
		"  InternalIP: 10.0.0.1",
		"  Hostname: node-1",
		"Capacity:",
		"  cpu: 2",
		"  pods: 110",
		"Allocatable:",
		"  cpu: 1900m",
		"System Info:",
		"  Kubelet Version: v1.34.0-podlab",
		"Events: <none>",
	)
}

func TestDescribe_Namespace(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"kubernetes.io/metadata.name": "dev"}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	quota := &corev1.ResourceQuota{ObjectMeta: meta("dev", "compute", time.Hour), Status: corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{"pods": resource.MustParse("10")}, Used: corev1.ResourceList{"pods": resource.MustParse("1")}}}
	limits := &corev1.LimitRange{ObjectMeta: meta("dev", "defaults", time.Hour), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}
	wantLines(t, describe(t, ns, nil, WithResourceQuotas(quota), WithLimitRanges(limits)),
		"Name: dev",
		"Labels: kubernetes.io/metadata.name=dev",
		"Status: Active",
		"Resource Quotas",
		"  Name: compute",
		"  Resource Used Hard",
		"  pods 1 10",
		"Resource Limits",
		" Type Resource Min Max Default Request Default Limit Max Limit/Request Ratio",
		" Container cpu - - 100m 500m -",
	)
	if out := describe(t, ns, nil, WithResourceQuotas(), WithLimitRanges()); !strings.Contains(out, "No resource quota.") || !strings.Contains(out, "No LimitRange resource.") {
		t.Errorf("empty quotas and limit ranges not said:\n%s", out)
	}
	if out := describe(t, ns, nil); strings.Contains(out, "quota") || strings.Contains(out, "Events") {
		t.Errorf("sections kubectl would not show:\n%s", out)
	}
}

func TestDescribe_QuotaAndLimitRange(t *testing.T) {
	quota := &corev1.ResourceQuota{ObjectMeta: meta("dev", "compute", time.Hour), Status: corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")},
		Used: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("500m"), corev1.ResourcePods: resource.MustParse("2")},
	}}
	want := "" +
		"Name:         compute\n" +
		"Namespace:    dev\n" +
		"Resource      Used  Hard\n" +
		"--------      ----  ----\n" +
		"pods          2     10\n" +
		"requests.cpu  500m  1\n"
	if got := describe(t, quota, nil); got != want {
		t.Errorf("describe quota:\n%s\nwant\n%s", got, want)
	}

	limits := &corev1.LimitRange{ObjectMeta: meta("dev", "defaults", time.Hour), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type:           corev1.LimitTypeContainer,
		Max:            corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}}}}
	wantLines(t, describe(t, limits, nil),
		"Name: defaults",
		"Namespace: dev",
		"Type Resource Min Max Default Request Default Limit Max Limit/Request Ratio",
		"---- -------- --- --- --------------- ------------- -----------------------",
		"Container cpu - - 100m 500m -",
		"Container memory - 1Gi - - -",
	)
}

func TestDescribe_PodEnvAndVolumes(t *testing.T) {
	pod := runningPod("default", "web", time.Minute)
	pod.Status.HostIP = "10.0.0.1"
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	res := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: name}}
	}
	c.Env = []corev1.EnvVar{
		{Name: "NODE", ValueFrom: field("spec.nodeName")},
		{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
		{Name: "MEM", ValueFrom: res("limits.memory")},
		{Name: "CPU", ValueFrom: res("limits.cpu")},
		{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		{Name: "MOTD", Value: "hello\nworld"},
	}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ok"}}}, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3, TimeoutSeconds: 1}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log", ReadOnly: true, SubPath: "web"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/pods"}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}},
	}
	wantLines(t, describe(t, pod, nil),
		"    Liveness: exec [cat /tmp/ok] delay=0s timeout=1s period=5s #success=1 #failure=3",
		"    Environment:",
		"      NODE: node-1 (v1:spec.nodeName)",
		"      HOST_IP: 10.0.0.1 (v1:status.hostIP)",
		"      MEM: 128Mi (limits.memory)",
		"      CPU: node allocatable (limits.cpu)",
		"      PASSWORD: <set to the key 'password' in secret 'db'> Optional: false",
		"      MOTD: hello",
		"\tworld",
		"    Mounts:",
		"      /var/log from logs (ro,path=\"web\")",
		"Volumes:",
		"  logs:",
		"    Type: HostPath (bare host directory volume)",
		"    Path: /var/log/pods",
		"    HostPathType: <none>",
		"  config:",
		"    Type: ConfigMap (a volume populated by a ConfigMap)",
		"    Name: web",
		"    Optional: false",
	)
}

func TestDescribe_RBAC(t *testing.T) {
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit", Namespace: "dev"},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "ServiceAccount", Name: "ci", Namespace: "dev"}},
	}
	want := "" +
		"Name:         alice-edit\n" +
		"Labels:       <none>\n" +
		"Annotations:  <none>\n" +
		"Role:\n" +
		"  Kind:  ClusterRole\n" +
		"  Name:  edit\n" +
		"Subjects:\n" +
		"  Kind            Name   Namespace\n" +
		"  ----            ----   ---------\n" +
		"  User            alice  \n" +
		"  ServiceAccount  ci     dev\n"
	if got := describe(t, binding, nil); got != want {
		t.Errorf("describe rolebinding:\n%s\nwant\n%s", got, want)
	}

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"watch"}},
		{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}},
	}}
	wantLines(t, describe(t, role, nil),
		"Name: reader",
		"PolicyRule:",
		"  Resources Non-Resource URLs Resource Names Verbs",
		"  --------- ----------------- -------------- -----",
		// kubectl sorts the rules by their Go string, which starts
		// with the verbs.
		"  pods [] [] [get list watch]",
		"  pods/log [] [] [get list]",
		"\t[/healthz] [] [get]",
		"  deployments.apps [] [] [get]",
	)
}

func TestDescribe_Generic(t *testing.T) {
	ev := event(corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}, "Warning", "BackOff", "kubelet", "Back-off restarting failed container", time.Minute, time.Minute, 1)
	wantLines(t, describe(t, &ev, nil),
		"Name: web.BackOff",
		"Namespace: default",
		"Labels: <none>",
		"Annotations: <none>",
		"Count: 1",
		"First Timestamp: 2025-03-14T15:08:26Z",
		"Involved Object:",
		"  kind: Pod",
		"  name: web",
		"  namespace: default",
		"Message: Back-off restarting failed container",
		"Reason: BackOff",
		"Source:",
		"  component: kubelet",
		"Type: Warning",
		"Events: <none>",
	)
}

func TestDescribe_BadInput(t *testing.T) {
	if err := Describe(&bytes.Buffer{}, nil, nil, now); err == nil {
		t.Error("Describe(nil) succeeded")
	}
	if err := Describe(failingWriter{}, runningPod("default", "web", time.Minute), nil, now); err == nil {
		t.Error("Describe to a failing writer succeeded")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, bytes.ErrTooLarge }

func TestSmartLabel(t *testing.T) {
	for in, want := range map[string]string{
		"involvedObject":     "Involved Object",
		"apiVersion":         "API Version",
		"reportingComponent": "Reporting Component",
		"type":               "Type",
		"uid":                "UID",
	} {
		if got := smartLabel(in); got != want {
			t.Errorf("smartLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
