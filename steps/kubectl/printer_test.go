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
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// now is the fixed "now" of every test.
var now = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func ptrTo[T any](v T) *T { return &v }

func mustResource(t *testing.T, name string) apiserver.Resource {
	t.Helper()
	r, err := apiserver.LookupResource(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func meta(namespace, name string, created time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: ago(created), UID: types.UID("uid-" + name)}
}

// runningPod is a pod with one ready container.
func runningPod(namespace, name string, created time.Duration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: meta(namespace, name, created),
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  "10.244.0.5",
			PodIPs: []corev1.PodIP{{IP: "10.244.0.5"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "nginx", Ready: true, Image: "nginx:1.27",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(created - time.Second)}},
			}},
		},
	}
}

func crashingPod(namespace, name string, created time.Duration) *corev1.Pod {
	p := runningPod(namespace, name, created)
	p.Labels = map[string]string{"tier": "db", "app": "db"}
	p.Status.PodIP, p.Status.PodIPs = "", nil
	p.Status.ContainerStatuses[0] = corev1.ContainerStatus{
		Name: "nginx", RestartCount: 3,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", FinishedAt: ago(30 * time.Second),
		}},
	}
	return p
}

func readyNode(name string, created time.Duration) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created),
			Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.34.0-podlab", OSImage: "Debian GNU/Linux 12 (bookworm)",
				KernelVersion: "6.1.0-18-amd64", ContainerRuntimeVersion: "runc://1.5.3"},
		},
	}
}

func deployment() *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: ago(45 * time.Minute), UID: "dep-uid", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "nginx", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}},
					{Name: "log", Image: "busybox"},
				}},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptrTo(intstr.FromString("25%")), MaxSurge: ptrTo(intstr.FromString("25%")),
				},
			},
		},
		Status: appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 1},
	}
}

func replicaSet(dep *appsv1.Deployment, name string, replicas int32) *appsv1.ReplicaSet {
	tmpl := *dep.Spec.Template.DeepCopy()
	tmpl.Labels["pod-template-hash"] = strings.TrimPrefix(name, "web-")
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: ago(45 * time.Minute), UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptrTo(true)}}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": tmpl.Labels["pod-template-hash"]}},
			Template: tmpl,
		},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: replicas},
	}
}

func TestPrinter_Tables(t *testing.T) {
	quota := &corev1.ResourceQuota{
		ObjectMeta: meta("dev", "compute", 3*time.Hour+20*time.Minute),
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("1"), "limits.memory": resource.MustParse("1Gi"), "pods": resource.MustParse("10"), "limits.cpu": resource.MustParse("2")},
			Used: corev1.ResourceList{"requests.cpu": resource.MustParse("500m"), "limits.memory": resource.MustParse("256Mi"), "pods": resource.MustParse("1")},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: meta("dev", "alice-edit", 2*time.Hour),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, Name: "alice"}, {Kind: rbacv1.UserKind, Name: "bob"},
			{Kind: rbacv1.GroupKind, Name: "devs"},
			{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "dev"},
		},
	}
	notReady := readyNode("node-2", 100*24*time.Hour)
	notReady.Labels = nil
	notReady.Spec.Unschedulable = true
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	notReady.Status.Addresses = nil
	notReady.Status.NodeInfo.OSImage = ""

	tests := []struct {
		name     string
		resource string
		opts     PrintOptions
		objs     []apiserver.Object
		want     string
	}{
		{
			"pods", "pods", PrintOptions{},
			[]apiserver.Object{runningPod("default", "web", 5*time.Minute), crashingPod("default", "db", 51*time.Hour)},
			"" +
				"NAME   READY   STATUS             RESTARTS      AGE\n" +
				"web    1/1     Running            0             5m\n" +
				"db     0/1     CrashLoopBackOff   3 (30s ago)   2d3h\n",
		},
		{
			"pods wide", "po", PrintOptions{Output: "wide"},
			[]apiserver.Object{runningPod("default", "web", 5*time.Minute), crashingPod("default", "db", 51*time.Hour)},
			"" +
				"NAME   READY   STATUS             RESTARTS      AGE    IP           NODE     NOMINATED NODE   READINESS GATES\n" +
				"web    1/1     Running            0             5m     10.244.0.5   node-1   <none>           <none>\n" +
				"db     0/1     CrashLoopBackOff   3 (30s ago)   2d3h   <none>       node-1   <none>           <none>\n",
		},
		{
			"pods in all namespaces", "pods", PrintOptions{AllNamespaces: true},
			[]apiserver.Object{runningPod("default", "web", 3*time.Minute+2*time.Second), runningPod("kube-system", "etcd", 3*time.Hour+20*time.Minute)},
			"" +
				"NAMESPACE     NAME   READY   STATUS    RESTARTS   AGE\n" +
				"default       web    1/1     Running   0          3m2s\n" +
				"kube-system   etcd   1/1     Running   0          3h20m\n",
		},
		{
			"pods with labels, no headers", "pods", PrintOptions{ShowLabels: true, NoHeaders: true},
			[]apiserver.Object{runningPod("default", "web", 5*time.Second), crashingPod("default", "db", 45*time.Minute)},
			"" +
				"web   1/1   Running            0             5s    <none>\n" +
				"db    0/1   CrashLoopBackOff   3 (30s ago)   45m   app=db,tier=db\n",
		},
		{
			"nodes", "nodes", PrintOptions{},
			[]apiserver.Object{readyNode("node-1", 3*time.Hour+20*time.Minute), notReady},
			"" +
				"NAME     STATUS                        ROLES           AGE     VERSION\n" +
				"node-1   Ready                         control-plane   3h20m   v1.34.0-podlab\n" +
				"node-2   NotReady,SchedulingDisabled   <none>          100d    v1.34.0-podlab\n",
		},
		{
			"nodes wide, -A adds no namespace to cluster-scoped rows", "no", PrintOptions{Output: "wide", AllNamespaces: true},
			[]apiserver.Object{readyNode("node-1", 3*time.Hour+20*time.Minute), notReady},
			"" +
				"NAME     STATUS                        ROLES           AGE     VERSION          INTERNAL-IP   EXTERNAL-IP   OS-IMAGE                         KERNEL-VERSION   CONTAINER-RUNTIME\n" +
				"node-1   Ready                         control-plane   3h20m   v1.34.0-podlab   10.0.0.1      <none>        Debian GNU/Linux 12 (bookworm)   6.1.0-18-amd64   runc://1.5.3\n" +
				"node-2   NotReady,SchedulingDisabled   <none>          100d    v1.34.0-podlab   <none>        <none>        <unknown>                        6.1.0-18-amd64   runc://1.5.3\n",
		},
		{
			"namespaces", "namespaces", PrintOptions{},
			[]apiserver.Object{
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: ago(100 * 24 * time.Hour)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			},
			"" +
				"NAME      STATUS        AGE\n" +
				"default   Active        100d\n" +
				"old       Terminating   <unknown>\n",
		},
		{
			"deployments", "deploy", PrintOptions{},
			[]apiserver.Object{deployment()},
			"" +
				"NAME   READY   UP-TO-DATE   AVAILABLE   AGE\n" +
				"web    1/2     2            1           45m\n",
		},
		{
			"deployments wide", "deployments.apps", PrintOptions{Output: "wide"},
			[]apiserver.Object{deployment()},
			"" +
				"NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES               SELECTOR\n" +
				"web    1/2     2            1           45m   nginx,log    nginx:1.27,busybox   app=web\n",
		},
		{
			"replicasets wide", "rs", PrintOptions{Output: "wide"},
			[]apiserver.Object{replicaSet(deployment(), "web-7d9c", 2)},
			"" +
				"NAME       DESIRED   CURRENT   READY   AGE   CONTAINERS   IMAGES               SELECTOR\n" +
				"web-7d9c   2         2         2       45m   nginx,log    nginx:1.27,busybox   app=web,pod-template-hash=7d9c\n",
		},
		{
			"events", "events", PrintOptions{},
			[]apiserver.Object{
				&corev1.Event{
					ObjectMeta:     meta("default", "web.1", 2*time.Minute),
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
					Type:           corev1.EventTypeNormal, Reason: "Scheduled", Message: "Successfully assigned default/web to node-1",
					Source:         corev1.EventSource{Component: "default-scheduler"},
					FirstTimestamp: ago(2 * time.Minute), LastTimestamp: ago(2 * time.Minute), Count: 1,
				},
				&corev1.Event{
					ObjectMeta:     meta("default", "web.2", 5*time.Minute),
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", FieldPath: "spec.containers{nginx}"},
					Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container\nsecond line",
					Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
					FirstTimestamp: ago(5 * time.Minute), LastTimestamp: ago(10 * time.Second), Count: 7,
				},
			},
			"" +
				"LAST SEEN   TYPE      REASON      OBJECT    MESSAGE\n" +
				"2m          Normal    Scheduled   pod/web   Successfully assigned default/web to node-1\n" +
				"10s         Warning   BackOff     pod/web   Back-off restarting failed container...\n",
		},
		{
			"events wide", "ev", PrintOptions{Output: "wide"},
			[]apiserver.Object{&corev1.Event{
				ObjectMeta:     meta("default", "web.2", 5*time.Minute),
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", FieldPath: "spec.containers{nginx}"},
				Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off",
				Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
				FirstTimestamp: ago(5 * time.Minute), LastTimestamp: ago(10 * time.Second), Count: 7,
			}},
			"" +
				"LAST SEEN   TYPE      REASON    OBJECT    SUBOBJECT                SOURCE            MESSAGE    FIRST SEEN   COUNT   NAME\n" +
				"10s         Warning   BackOff   pod/web   spec.containers{nginx}   kubelet, node-1   Back-off   5m           7       web.2\n",
		},
		{
			"roles", "roles", PrintOptions{},
			[]apiserver.Object{&rbacv1.Role{ObjectMeta: meta("dev", "pod-reader", time.Hour)}},
			"" +
				"NAME         CREATED AT\n" +
				"pod-reader   2025-03-14T14:09:26Z\n",
		},
		{
			"clusterroles", "clusterrole", PrintOptions{AllNamespaces: true},
			[]apiserver.Object{&rbacv1.ClusterRole{ObjectMeta: meta("", "view", 24*time.Hour)}},
			"" +
				"NAME   CREATED AT\n" +
				"view   2025-03-13T15:09:26Z\n",
		},
		{
			"limitranges", "limits", PrintOptions{AllNamespaces: true},
			[]apiserver.Object{&corev1.LimitRange{ObjectMeta: meta("dev", "defaults", time.Minute)}},
			"" +
				"NAMESPACE   NAME       CREATED AT\n" +
				"dev         defaults   2025-03-14T15:08:26Z\n",
		},
		{
			"rolebindings", "rolebindings", PrintOptions{},
			[]apiserver.Object{binding},
			"" +
				"NAME         ROLE               AGE\n" +
				"alice-edit   ClusterRole/edit   120m\n", // kubectl counts minutes up to 3h
		},
		{
			"rolebindings wide", "rolebinding", PrintOptions{Output: "wide"},
			[]apiserver.Object{binding},
			"" +
				"NAME         ROLE               AGE    USERS        GROUPS   SERVICEACCOUNTS\n" +
				"alice-edit   ClusterRole/edit   120m   alice, bob   devs     dev/ci\n",
		},
		{
			"clusterrolebindings", "clusterrolebindings", PrintOptions{},
			[]apiserver.Object{&rbacv1.ClusterRoleBinding{
				ObjectMeta: meta("", "cluster-admin", 2*24*time.Hour+3*time.Hour),
				RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:masters"}},
			}},
			"" +
				"NAME            ROLE                        AGE\n" +
				"cluster-admin   ClusterRole/cluster-admin   2d3h\n",
		},
		{
			"resourcequotas", "quota", PrintOptions{},
			[]apiserver.Object{quota},
			// kube v1.37's order (printResourceQuota): AGE comes last.
			"" +
				"NAME      REQUEST                            LIMIT                                       AGE\n" +
				"compute   pods: 1/10, requests.cpu: 500m/1   limits.cpu: 0/2, limits.memory: 256Mi/1Gi   3h20m\n",
		},
		{"no objects print nothing", "pods", PrintOptions{}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Now = now
			var buf bytes.Buffer
			p, err := NewPrinter(&buf, mustResource(t, tt.resource), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Print(tt.objs...); err != nil {
				t.Fatalf("Print: %v", err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("Print printed\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestPodStatus(t *testing.T) {
	tests := []struct {
		name string
		pod  func() *corev1.Pod
		want string
	}{
		{"Pending, not yet scheduled", func() *corev1.Pod {
			return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		}, "Pending"},
		{"ContainerCreating", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
			return p
		}, "ContainerCreating"},
		{"ImagePullBackOff", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
			return p
		}, "ImagePullBackOff"},
		{"Running", func() *corev1.Pod { return runningPod("default", "web", time.Minute) }, "Running"},
		{"CrashLoopBackOff", func() *corev1.Pod { return crashingPod("default", "db", time.Minute) }, "CrashLoopBackOff"},
		{"Completed", func() *corev1.Pod {
			p := runningPod("default", "job", time.Minute)
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
			return p
		}, "Completed"},
		{"Error", func() *corev1.Pod {
			p := runningPod("default", "job", time.Minute)
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}
			return p
		}, "Error"},
		{"ExitCode without a reason", func() *corev1.Pod {
			p := runningPod("default", "job", time.Minute)
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}
			return p
		}, "ExitCode:2"},
		{"Signal without a reason", func() *corev1.Pod {
			p := runningPod("default", "job", time.Minute)
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9}}
			return p
		}, "Signal:9"},
		{"Terminating", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.DeletionTimestamp = ptrTo(ago(time.Second))
			return p
		}, "Terminating"},
		{"a finished pod being deleted keeps its status", func() *corev1.Pod {
			p := runningPod("default", "job", time.Minute)
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
			p.DeletionTimestamp = ptrTo(ago(time.Second))
			return p
		}, "Completed"},
		{"Init:0/1", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Status.Phase = corev1.PodPending
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
			p.Status.Conditions = nil
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
			return p
		}, "Init:0/1"},
		{"Init:1/2 after the first init container succeeded", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Status.Phase = corev1.PodPending
			p.Spec.InitContainers = []corev1.Container{{Name: "a"}, {Name: "b"}}
			p.Status.Conditions = nil
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
				{Name: "b", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			}
			return p
		}, "Init:1/2"},
		{"Init:CrashLoopBackOff", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Status.Phase = corev1.PodPending
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
			p.Status.Conditions = nil
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
			return p
		}, "Init:CrashLoopBackOff"},
		{"Init:Error", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
			p.Status.Conditions = nil
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
			return p
		}, "Init:Error"},
		{"status.reason wins over the phase", func() *corev1.Pod {
			p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}
			return p
		}, "Evicted"},
		{"one container done, one running and not ready", func() *corev1.Pod {
			p := runningPod("default", "web", time.Minute)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "once"})
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "once",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}})
			return p
		}, "NotReady"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodStatus(tt.pod()); got != tt.want {
				t.Errorf("PodStatus = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrinter_Name(t *testing.T) {
	tests := []struct {
		resource string
		obj      apiserver.Object
		want     string
	}{
		{"pods", runningPod("default", "web", time.Minute), "pod/web\n"},
		{"deployments", deployment(), "deployment.apps/web\n"},
		{"clusterroles", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"}}, "clusterrole.rbac.authorization.k8s.io/view\n"},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			var buf bytes.Buffer
			p, err := NewPrinter(&buf, mustResource(t, tt.resource), PrintOptions{Output: "name"})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Print(tt.obj); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("printed %q, want %q", buf.String(), tt.want)
			}
		})
	}
}

func TestPrinter_YAMLRoundTrip(t *testing.T) {
	pod := runningPod("default", "web", time.Minute)
	pod.ResourceVersion = "42"
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	dep := deployment()

	for _, output := range []string{"yaml", "json"} {
		t.Run(output, func(t *testing.T) {
			var buf bytes.Buffer
			p, err := NewPrinter(&buf, mustResource(t, "pods"), PrintOptions{Output: output})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Print(pod); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, want := range map[string][]string{
				"yaml": {"apiVersion: v1\nkind: Pod\nmetadata:\n", `resourceVersion: "42"`},
				"json": {"{\n    \"apiVersion\": \"v1\",\n    \"kind\": \"Pod\",\n    \"metadata\": {\n        \"creationTimestamp\": \"2025-03-14T15:08:26Z\",", `"resourceVersion": "42"`},
			}[output] {
				if !strings.Contains(out, want) {
					t.Errorf("output does not contain %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "managedFields") {
				t.Errorf("output shows managedFields, which kubectl hides:\n%s", out)
			}
			back, err := Decode(strings.NewReader(out), "printed")
			if err != nil {
				t.Fatalf("decoding what -o %s printed: %v\n%s", output, err, out)
			}
			want := pod.DeepCopy()
			want.ManagedFields = nil
			want.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			if len(back) != 1 || !equality.Semantic.DeepEqual(back[0], want) {
				t.Errorf("round trip changed the pod:\ngot  %#v\nwant %#v", back, want)
			}
			if len(pod.ManagedFields) != 1 || pod.Kind != "" {
				t.Errorf("printing modified the caller's object")
			}
		})
	}

	t.Run("several objects are a List", func(t *testing.T) {
		var buf bytes.Buffer
		p, err := NewPrinter(&buf, mustResource(t, "deployments"), PrintOptions{Output: "yaml"})
		if err != nil {
			t.Fatal(err)
		}
		other := deployment()
		other.Name = "api"
		if err := p.Print(dep, other); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if !strings.HasPrefix(out, "apiVersion: v1\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n") ||
			!strings.HasSuffix(out, "kind: List\nmetadata:\n  resourceVersion: \"\"\n") {
			t.Errorf("not kubectl's List:\n%s", out)
		}
		back, err := Decode(strings.NewReader(out), "printed")
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(back); strings.Join(got, ",") != "apps/v1/Deployment web,apps/v1/Deployment api" {
			t.Errorf("decoded %q", got)
		}
	})

	t.Run("no objects are an empty List", func(t *testing.T) {
		var buf bytes.Buffer
		p, err := NewPrinter(&buf, mustResource(t, "pods"), PrintOptions{Output: "json"})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Print(); err != nil {
			t.Fatal(err)
		}
		want := "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n"
		if buf.String() != want {
			t.Errorf("printed\n%s\nwant\n%s", buf.String(), want)
		}
	})
}

func TestPrinter_Watch(t *testing.T) {
	long := runningPod("default", "web-5f6b7c8d9-abcde", 5*time.Second)
	short := runningPod("default", "db", 5*time.Second)
	short.Status.Phase = corev1.PodPending
	short.Status.ContainerStatuses[0].Ready = false
	short.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	gone := short.DeepCopy()
	gone.DeletionTimestamp = ptrTo(ago(0))

	t.Run("rows keep the header's widths", func(t *testing.T) {
		var buf bytes.Buffer
		p, err := NewPrinter(&buf, mustResource(t, "pods"), PrintOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Print(long); err != nil {
			t.Fatal(err)
		}
		if err := p.PrintEvent(apiserver.WatchEvent{Type: apiserver.Added, Object: short}); err != nil {
			t.Fatal(err)
		}
		want := "" +
			"NAME                  READY   STATUS    RESTARTS   AGE\n" +
			"web-5f6b7c8d9-abcde   1/1     Running   0          5s\n" +
			"db                    0/1     ContainerCreating   0          5s\n"
		if buf.String() != want {
			t.Errorf("printed\n%s\nwant\n%s", buf.String(), want)
		}
	})

	t.Run("watch events", func(t *testing.T) {
		var buf bytes.Buffer
		p, err := NewPrinter(&buf, mustResource(t, "pods"), PrintOptions{Now: now, WatchEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range []apiserver.WatchEvent{
			{Type: apiserver.Added, Object: short},
			{Type: apiserver.Modified, Object: gone},
			{Type: apiserver.Deleted, Object: gone},
		} {
			if err := p.PrintEvent(ev); err != nil {
				t.Fatal(err)
			}
		}
		want := "" +
			"EVENT   NAME   READY   STATUS              RESTARTS   AGE\n" +
			"ADDED   db     0/1     ContainerCreating   0          5s\n" +
			"MODIFIED   db     0/1     Terminating         0          5s\n" +
			"DELETED    db     0/1     Terminating         0          5s\n"
		if buf.String() != want {
			t.Errorf("printed\n%s\nwant\n%s", buf.String(), want)
		}
	})

	t.Run("yaml documents", func(t *testing.T) {
		var buf bytes.Buffer
		p, err := NewPrinter(&buf, mustResource(t, "pods"), PrintOptions{Output: "yaml", WatchEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Print(short); err != nil {
			t.Fatal(err)
		}
		if err := p.PrintEvent(apiserver.WatchEvent{Type: apiserver.Deleted, Object: gone}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if !strings.HasPrefix(out, "object:\n  apiVersion: v1\n  kind: Pod\n") || !strings.Contains(out, "\ntype: ADDED\n---\nobject:\n") || !strings.HasSuffix(out, "\ntype: DELETED\n") {
			t.Errorf("not two watch events:\n%s", out)
		}
	})
}

func TestPrinter_BadInput(t *testing.T) {
	pods := mustResource(t, "pods")
	if _, err := NewPrinter(&bytes.Buffer{}, pods, PrintOptions{Output: "xml"}); err == nil ||
		!strings.Contains(err.Error(), `"xml"`) || !strings.Contains(err.Error(), "wide,yaml,json,name") {
		t.Errorf("NewPrinter(-o xml) = %v, want an error listing the formats", err)
	}

	for _, output := range []string{"", "yaml", "name"} {
		p, err := NewPrinter(&bytes.Buffer{}, pods, PrintOptions{Output: output})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Print(readyNode("node-1", time.Minute)); err == nil || !strings.Contains(err.Error(), "*v1.Node") {
			t.Errorf("-o %q: printing a node as pods = %v, want an error", output, err)
		}
		if err := p.PrintEvent(apiserver.WatchEvent{Type: apiserver.Added}); err == nil {
			t.Errorf("-o %q: PrintEvent without an object succeeded", output)
		}
	}
}

func TestNoResources(t *testing.T) {
	tests := []struct {
		namespace string
		all       bool
		want      string
	}{
		{"default", false, "No resources found in default namespace."},
		{"dev", false, "No resources found in dev namespace."},
		{"default", true, "No resources found"},
		{"", false, "No resources found"},
	}
	for _, tt := range tests {
		if got := NoResources(tt.namespace, tt.all); got != tt.want {
			t.Errorf("NoResources(%q, %v) = %q, want %q", tt.namespace, tt.all, got, tt.want)
		}
	}
}

// kubectl get deploy,rs,pods: a table per type with kind/name, or one List.
func TestPrintLists(t *testing.T) {
	dep := deployment()
	lists := []ResourceObjects{
		{mustResource(t, "deployments"), []apiserver.Object{dep}},
		{mustResource(t, "replicasets"), nil}, // nothing: no table, no blank line
		{mustResource(t, "pods"), []apiserver.Object{runningPod("default", "web-1", time.Minute), runningPod("default", "web-2", time.Minute)}},
	}
	tests := []struct {
		name   string
		lists  []ResourceObjects
		output string
		want   string
	}{
		{"tables", lists, "", "" +
			"NAME                  READY   UP-TO-DATE   AVAILABLE   AGE\n" +
			"deployment.apps/web   1/2     2            1           45m\n" +
			"\n" +
			"NAME        READY   STATUS    RESTARTS   AGE\n" +
			"pod/web-1   1/1     Running   0          60s\n" +
			"pod/web-2   1/1     Running   0          60s\n"},
		{"names", lists, "name", "deployment.apps/web\npod/web-1\npod/web-2\n"},
		{"one type keeps plain names", lists[2:], "", "" +
			"NAME    READY   STATUS    RESTARTS   AGE\n" +
			"web-1   1/1     Running   0          60s\n" +
			"web-2   1/1     Running   0          60s\n"},
		{"nothing at all", []ResourceObjects{lists[1]}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := PrintLists(&buf, tt.lists, PrintOptions{Output: tt.output, Now: now}); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("printed:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
	t.Run("yaml", func(t *testing.T) {
		var buf bytes.Buffer
		if err := PrintLists(&buf, lists, PrintOptions{Output: "yaml", Now: now}); err != nil {
			t.Fatal(err)
		}
		var list struct {
			Kind  string `json:"kind"`
			Items []struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := yaml.Unmarshal(buf.Bytes(), &list); err != nil {
			t.Fatalf("%v\n%s", err, buf.String())
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, it.Kind+"/"+it.Metadata.Name)
		}
		if list.Kind != "List" || strings.Join(got, " ") != "Deployment/web Pod/web-1 Pod/web-2" {
			t.Errorf("a %s of %v, want one List of the deployment and both pods", list.Kind, got)
		}
	})
	t.Run("a pod among the deployments", func(t *testing.T) {
		bad := []ResourceObjects{{mustResource(t, "deployments"), []apiserver.Object{runningPod("default", "web", time.Minute)}}, lists[2]}
		if err := PrintLists(&bytes.Buffer{}, bad, PrintOptions{Output: "yaml"}); err == nil {
			t.Error("no error")
		}
	})
}

// TestPrinter_ShowManagedFields: --show-managed-fields keeps them.
func TestPrinter_ShowManagedFields(t *testing.T) {
	pod := runningPod("default", "web", time.Minute)
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "podlab-run", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1"}}
	var buf bytes.Buffer
	p, err := NewPrinter(&buf, mustResource(t, "pods"), PrintOptions{Output: "yaml", ShowManagedFields: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Print(pod); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "managedFields:\n  - fieldsType: FieldsV1\n    manager: podlab-run\n    operation: Update") {
		t.Errorf("-o yaml --show-managed-fields lacks the entry:\n%s", out)
	}
}
