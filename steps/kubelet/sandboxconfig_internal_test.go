package kubelet

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestGeneratePodSandboxConfig(t *testing.T) {
	yes, no := true, false
	root, group := int64(0), int64(1000)
	base := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1",
				Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
		}
		if mut != nil {
			mut(p)
		}
		return p
	}
	in := sandboxInputs{LogRoot: "/s/nodes/n1/logs/pods", CgroupParent: "/podlab-1/nodes/n1/kubepods/besteffort/poduid-1", SeccompRoot: "/s/nodes/n1/seccomp"}
	// The expected configs in protobuf text, as the runtime's -v shows them.
	common := `metadata:{name:"web" uid:"uid-1" namespace:"shop"} log_directory:"/s/nodes/n1/logs/pods/shop_web_uid-1" ` +
		`labels:{key:"app" value:"web"} labels:{key:"io.kubernetes.pod.name" value:"web"} labels:{key:"io.kubernetes.pod.namespace" value:"shop"} labels:{key:"io.kubernetes.pod.uid" value:"uid-1"} ` +
		`annotations:{key:"note" value:"x"} `
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		in   func(*sandboxInputs)
		want string
	}{
		{"a plain pod", base(nil), nil, common + `hostname:"web" linux:{cgroup_parent:"/podlab-1/nodes/n1/kubepods/besteffort/poduid-1" ` +
			`security_context:{namespace_options:{pid:CONTAINER userns_options:{mode:NODE}} seccomp:{profile_type:Unconfined}}}`},
		{"hostNetwork with a hostPort, hostPID, hostIPC", base(func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}
		}), nil, common + `port_mappings:{container_port:80 host_port:8080} port_mappings:{protocol:UDP container_port:53} ` +
			`linux:{cgroup_parent:"/podlab-1/nodes/n1/kubepods/besteffort/poduid-1" ` +
			`security_context:{namespace_options:{network:NODE pid:NODE ipc:NODE userns_options:{mode:NODE}} seccomp:{profile_type:Unconfined}}}`},
		{"hostUsers false, shareProcessNamespace, sysctls, run as, Localhost seccomp, a privileged container", base(func(p *corev1.Pod) {
			p.Spec.HostUsers, p.Spec.ShareProcessNamespace = &no, &yes
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &root, RunAsGroup: &group, SupplementalGroups: []int64{5},
				Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: proto.String("profiles/deny.json")}}
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
		}), func(in *sandboxInputs) {
			in.Attempt = 2
			in.UserNamespace = &UserNamespace{UIDMappings: []IDMapping{{HostID: 65536, Length: 65536}}, GIDMappings: []IDMapping{{HostID: 65536, Length: 65536}}}
		}, `metadata:{name:"web" uid:"uid-1" namespace:"shop" attempt:2} hostname:"web" log_directory:"/s/nodes/n1/logs/pods/shop_web_uid-1" ` +
			`labels:{key:"app" value:"web"} labels:{key:"io.kubernetes.pod.name" value:"web"} labels:{key:"io.kubernetes.pod.namespace" value:"shop"} labels:{key:"io.kubernetes.pod.uid" value:"uid-1"} ` +
			`annotations:{key:"note" value:"x"} linux:{cgroup_parent:"/podlab-1/nodes/n1/kubepods/besteffort/poduid-1" ` +
			`security_context:{namespace_options:{pid:POD userns_options:{mode:POD uids:{host_id:65536 length:65536} gids:{host_id:65536 length:65536}}} ` +
			`run_as_user:{} privileged:true supplemental_groups:5 run_as_group:{value:1000} ` +
			`seccomp:{profile_type:Localhost localhost_ref:"/s/nodes/n1/seccomp/profiles/deny.json"}} ` +
			`sysctls:{key:"net.ipv4.ip_unprivileged_port_start" value:"0"}}`},
		{"--seccomp-default", base(nil), func(in *sandboxInputs) { in.SeccompDefault = true },
			common + `hostname:"web" linux:{cgroup_parent:"/podlab-1/nodes/n1/kubepods/besteffort/poduid-1" ` +
				`security_context:{namespace_options:{pid:CONTAINER userns_options:{mode:NODE}} seccomp:{profile_type:RuntimeDefault}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := in
			if tc.in != nil {
				tc.in(&in)
			}
			got, err := generatePodSandboxConfig(tc.pod, in)
			if err != nil {
				t.Fatal(err)
			}
			want := &runtimeapi.PodSandboxConfig{}
			if err := prototext.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatalf("the expected config: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", prototext.MarshalOptions{}.Format(got), prototext.MarshalOptions{}.Format(want))
			}
		})
	}
}

func TestGeneratePodSandboxConfig_BadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		sp   *corev1.SeccompProfile
	}{
		{"Localhost without a profile", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}},
		{"Localhost leaving the seccomp directory", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: proto.String("../../etc/x.json")}},
		{"Localhost absolute", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: proto.String("/etc/x.json")}},
		{"an unknown type", &corev1.SeccompProfile{Type: "Strict"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"},
				Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SeccompProfile: tc.sp}}}
			if _, err := generatePodSandboxConfig(pod, sandboxInputs{SeccompRoot: "/s/seccomp"}); !errors.Is(err, ErrSeccompProfile) {
				t.Errorf("generatePodSandboxConfig = %v; want ErrSeccompProfile", err)
			}
		})
	}
}
