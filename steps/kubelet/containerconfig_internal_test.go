package kubelet

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestGenerateContainerConfig(t *testing.T) {
	yes, no := true, false
	uid, gid, grace := int64(1000), int64(2000), int64(30)
	base := func(mut func(*corev1.Pod, *corev1.Container)) (*corev1.Pod, *corev1.Container) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx",
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}}},
		}
		if mut != nil {
			mut(p, &p.Spec.Containers[0])
		}
		return p, &p.Spec.Containers[0]
	}
	in := containerInputs{ImageRef: "sha256:abc", SeccompRoot: "/s/nodes/n1/seccomp", OOMScoreAdj: 1000,
		Namespaces: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}
	labels := `labels:{key:"io.kubernetes.container.name" value:"nginx"} labels:{key:"io.kubernetes.pod.name" value:"web"} ` +
		`labels:{key:"io.kubernetes.pod.namespace" value:"shop"} labels:{key:"io.kubernetes.pod.uid" value:"uid-1"} `
	annotations := func(restart string) string {
		return `annotations:{key:"io.kubernetes.container.restartCount" value:"` + restart + `"} ` +
			`annotations:{key:"io.kubernetes.container.terminationMessagePath" value:"/dev/termination-log"} ` +
			`annotations:{key:"io.kubernetes.container.terminationMessagePolicy" value:"File"} `
	}
	for _, tc := range []struct {
		name string
		mut  func(*corev1.Pod, *corev1.Container)
		in   func(*containerInputs)
		want string
	}{
		{"a plain container", nil, nil,
			`metadata:{name:"nginx"} image:{image:"sha256:abc" user_specified_image:"nginx"} ` + labels + annotations("0") +
				`log_path:"nginx/0.log" linux:{resources:{cpu_shares:2 oom_score_adj:1000} ` +
				`security_context:{namespace_options:{pid:CONTAINER} seccomp:{profile_type:Unconfined}}}`},
		{"restart 3: command and args expanded with the env, mounts, resources, tty", func(p *corev1.Pod, c *corev1.Container) {
			c.Command, c.Args = []string{"/bin/sh", "-c"}, []string{"echo $(GREETING) $$(x)"}
			c.WorkingDir, c.TTY, c.Stdin = "/srv", true, true
			c.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}
			p.Spec.TerminationGracePeriodSeconds = &grace
		}, func(in *containerInputs) {
			in.RestartCount, in.OOMScoreAdj = 3, 968
			in.Env = []string{"GREETING=hi", "EMPTY="}
			in.Mounts = []specs.Mount{
				{Destination: "/data", Source: "/s/nodes/n1/pods/uid-1/volumes/kubernetes.io~empty-dir/data", Options: []string{"rbind", "rprivate", "rw"}},
				{Destination: "/etc/app.conf", Source: "/s/nodes/n1/pods/uid-1/volume-subpaths/cfg/nginx/1", Options: []string{"rbind", "rprivate", "ro"}}}
		}, `metadata:{name:"nginx" attempt:3} image:{image:"sha256:abc" user_specified_image:"nginx"} ` +
			`command:"/bin/sh" command:"-c" args:"echo hi $(x)" working_dir:"/srv" ` +
			`envs:{key:"GREETING" value:"hi"} envs:{key:"EMPTY"} ` +
			`mounts:{container_path:"/data" host_path:"/s/nodes/n1/pods/uid-1/volumes/kubernetes.io~empty-dir/data"} ` +
			`mounts:{container_path:"/etc/app.conf" host_path:"/s/nodes/n1/pods/uid-1/volume-subpaths/cfg/nginx/1" readonly:true} ` +
			labels + annotations("3") + `annotations:{key:"io.kubernetes.pod.terminationGracePeriod" value:"30"} ` +
			`log_path:"nginx/3.log" stdin:true tty:true ` +
			`linux:{resources:{cpu_period:100000 cpu_quota:50000 cpu_shares:256 memory_limit_in_bytes:67108864 oom_score_adj:968} ` +
			`security_context:{namespace_options:{pid:CONTAINER} seccomp:{profile_type:Unconfined}}}`},
		{"security context: the container's over the pod's", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &gid, RunAsGroup: &gid, SupplementalGroups: []int64{5},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			c.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid, RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
				Capabilities:   &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: proto.String("profiles/deny.json")}}
		}, nil,
			`metadata:{name:"nginx"} image:{image:"sha256:abc" user_specified_image:"nginx"} ` + labels + annotations("0") +
				`log_path:"nginx/0.log" linux:{resources:{cpu_shares:2 oom_score_adj:1000} ` +
				`security_context:{capabilities:{add_capabilities:"NET_ADMIN" drop_capabilities:"ALL"} namespace_options:{pid:CONTAINER} ` +
				`run_as_user:{value:1000} readonly_rootfs:true supplemental_groups:5 no_new_privs:true run_as_group:{value:2000} ` +
				`seccomp:{profile_type:Localhost localhost_ref:"/s/nodes/n1/seccomp/profiles/deny.json"}}}`},
		{"runAsNonRoot with a numeric non-root image USER", func(p *corev1.Pod, c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{RunAsNonRoot: &yes}
		}, func(in *containerInputs) { in.ImageUser, in.SeccompDefault = "101:101", true },
			`metadata:{name:"nginx"} image:{image:"sha256:abc" user_specified_image:"nginx"} ` + labels + annotations("0") +
				`log_path:"nginx/0.log" linux:{resources:{cpu_shares:2 oom_score_adj:1000} ` +
				`security_context:{namespace_options:{pid:CONTAINER} seccomp:{profile_type:RuntimeDefault}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, c := base(tc.mut)
			in := in
			if tc.in != nil {
				tc.in(&in)
			}
			got, err := generateContainerConfig(pod, c, in)
			if err != nil {
				t.Fatal(err)
			}
			want := &runtimeapi.ContainerConfig{}
			if err := prototext.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatalf("the expected config: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", prototext.MarshalOptions{}.Format(got), prototext.MarshalOptions{}.Format(want))
			}
		})
	}
}

func TestGenerateContainerConfig_BadInput(t *testing.T) {
	yes, root := true, int64(0)
	for _, tc := range []struct {
		name      string
		sc        *corev1.SecurityContext
		imageUser string
		want      error
	}{
		{"privileged", &corev1.SecurityContext{Privileged: &yes}, "", ErrPrivileged},
		{"capabilities.add ALL", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"all"}}}, "", ErrPrivileged},
		{"runAsNonRoot with runAsUser 0", &corev1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: &root}, "101", ErrRunAsNonRoot},
		{"runAsNonRoot with an image of root", &corev1.SecurityContext{RunAsNonRoot: &yes}, "", ErrRunAsNonRoot},
		{"runAsNonRoot with an image USER name", &corev1.SecurityContext{RunAsNonRoot: &yes}, "nginx", ErrRunAsNonRoot},
		{"a Localhost profile leaving the seccomp directory", &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
			Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: proto.String("../x.json")}}, "", ErrSeccompProfile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", SecurityContext: tc.sc}}}}
			_, err := generateContainerConfig(pod, &pod.Spec.Containers[0], containerInputs{ImageUser: tc.imageUser, SeccompRoot: "/s/seccomp"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
