package kubelet_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/kubelet"
)

func sysctlPod(hostNet, hostIPC bool, names ...string) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &corev1.PodSecurityContext{}}}
	for _, n := range names {
		p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
	}
	return p
}

// The kubelet's sysctl admission, message for message
// (pkg/kubelet/sysctl/allowlist.go of v1.37.2).
func TestSysctlAllowlist_Admit(t *testing.T) {
	cases := []struct {
		name    string
		allowed []string // --allowed-unsafe-sysctls
		pod     *corev1.Pod
		want    string // "" admitted
	}{
		{"no sysctls", nil, &corev1.Pod{}, ""},
		{"safe", nil, sysctlPod(false, false, "net.ipv4.ip_unprivileged_port_start", "kernel.shm_rmid_forced"), ""},
		{"safe since v1.37", nil, sysctlPod(false, false, "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"), ""},
		{"safe, slash-separated", nil, sysctlPod(false, false, "net/ipv4/ip_local_port_range"), ""},
		{"unsafe", nil, sysctlPod(false, false, "net.core.somaxconn"), `forbidden sysctl: "net.core.somaxconn" not allowlisted`},
		{"not namespaced", nil, sysctlPod(false, false, "vm.overcommit_memory"), `forbidden sysctl: "vm.overcommit_memory" not allowlisted`},
		{"the issue's pod: the first refused is named", nil, sysctlPod(false, false, "kernel.sysrq", "vm.overcommit_memory", "net.core.somaxconn"),
			`forbidden sysctl: "kernel.sysrq" not allowlisted`},
		{"allowed unsafe", []string{"net.core.somaxconn"}, sysctlPod(false, false, "net.core.somaxconn"), ""},
		{"allowed unsafe pattern", []string{"net.core.*"}, sysctlPod(false, false, "net.core.somaxconn", "net/core/rmem_max"), ""},
		{"allowed IPC pattern", []string{"kernel.msg*"}, sysctlPod(false, false, "kernel.msgmax"), ""},
		{"a pattern allows only its prefix", []string{"net.core.*"}, sysctlPod(false, false, "net.ipv4.tcp_rmem", "net.ipv6.conf.all.forwarding"),
			`forbidden sysctl: "net.ipv6.conf.all.forwarding" not allowlisted`},
		{"safe net sysctl with hostNetwork", nil, sysctlPod(true, false, "net.ipv4.ip_unprivileged_port_start"),
			`forbidden sysctl: "net.ipv4.ip_unprivileged_port_start" not allowed with host Net enabled`},
		{"allowed net pattern with hostNetwork", []string{"net.core.*"}, sysctlPod(true, false, "net.core.somaxconn"),
			`forbidden sysctl: "net.core.somaxconn" not allowed with host Net enabled`},
		{"safe IPC sysctl with hostIPC", nil, sysctlPod(false, true, "kernel.shm_rmid_forced"),
			`forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{"net sysctl with hostIPC only", nil, sysctlPod(false, true, "net.ipv4.ping_group_range"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := kubelet.NewSysctlAllowlist(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Admit(tc.pod); got != tc.want {
				t.Errorf("Admit = %q, want %q", got, tc.want)
			}
		})
	}
}

// --allowed-unsafe-sysctls refuses what is not a namespaced sysctl
// pattern, with the kubelet's own text: the kubelet does not start.
func TestNewSysctlAllowlist_BadPatterns(t *testing.T) {
	cases := []struct {
		name, pattern, want string
	}{
		{"not namespaced", "kernel.sysrq", `the sysctls "kernel.sysrq" are not known to be namespaced`},
		{"not namespaced pattern", "vm.*", `the sysctls "vm." are not known to be namespaced`},
		{"everything", "*", `the sysctls "" are not known to be namespaced`},
		{"upper case", "Net.Core.Somaxconn", `sysctl "Net.Core.Somaxconn" must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`},
		{"a star inside", "net.*.somaxconn", `sysctl "net.*.somaxconn" must have at most 253 characters`},
		{"empty", "", `sysctl "" must have at most 253 characters`},
		{"too long", "net." + strings.Repeat("a", 250), `must have at most 253 characters`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kubelet.NewSysctlAllowlist([]string{"net.core.somaxconn", tc.pattern})
			if !errors.Is(err, kubelet.ErrBadSysctlPattern) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewSysctlAllowlist(%q) = %v, want ErrBadSysctlPattern saying %q", tc.pattern, err, tc.want)
			}
		})
	}
}

// TestKubelet_SysctlForbidden: the pod (kernel.sysrq, not
// namespaced; vm.overcommit_memory, not namespaced; net.core.somaxconn,
// unsafe) is rejected as the kubelet rejects it: Failed, reason
// SysctlForbidden, the Warning event, nothing made on the node, and it
// stays so.
func TestKubelet_SysctlForbidden(t *testing.T) {
	c := newCluster(t)
	p := helloPod(t, "sysctls")
	p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
		{Name: "kernel.sysrq", Value: "1"}, {Name: "vm.overcommit_memory", Value: "1"}, {Name: "net.core.somaxconn", Value: "1024"}}}
	pod := c.create(t, p)
	for range 2 { // a second sync changes nothing
		got := c.sync(t, "sysctls")
		const msg = `forbidden sysctl: "kernel.sysrq" not allowlisted`
		if got.Status.Phase != corev1.PodFailed || got.Status.Reason != kubelet.ReasonSysctlForbidden || got.Status.Message != "Pod was rejected: "+msg {
			t.Errorf("status: phase %s reason %q message %q; want Failed, SysctlForbidden, %q", got.Status.Phase, got.Status.Reason, got.Status.Message, "Pod was rejected: "+msg)
		}
		if ev := c.events(t, pod); !hasEvent(ev, "Warning SysctlForbidden: "+msg) {
			t.Errorf("events %q, want Warning SysctlForbidden %q", ev, msg)
		}
	}
	st, err := c.kubelet.Observe(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sandbox.ID != "" || st.Leftovers {
		t.Errorf("the rejected pod has a sandbox %q (leftovers %v)", st.Sandbox.ID, st.Leftovers)
	}
	if _, err := c.kubelet.SandboxStage(context.Background(), pod); !errors.Is(err, kubelet.ErrSysctlForbidden) {
		t.Errorf("SandboxStage of the rejected pod: %v, want ErrSysctlForbidden", err)
	}
}

// TestKubelet_Sysctls_Applied: a safe sysctl and one --allowed-unsafe-sysctls
// allows are set in the pod's namespaces: the container reads them back
// from /proc/sys, while the node keeps its own values.
func TestKubelet_Sysctls_Applied(t *testing.T) {
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.AllowedUnsafeSysctls = []string{"net.core.*"} })
	probe := buildKernelProbe(t)
	host := func(name string) string {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	want := map[string]string{"net.ipv4.ip_unprivileged_port_start": "79", "net.core.somaxconn": "1234"}
	before := map[string]string{}
	for n, v := range want {
		if before[n] = host(n); before[n] == v {
			t.Fatalf("the node's %s is %s already: pick another value", n, v)
		}
	}
	p := probePod(t, "sysctls", probe, "")
	p.Spec.Containers[0].Command = []string{"/probe/kernelprobe", "--sysctl=net.ipv4.ip_unprivileged_port_start", "--sysctl=net.core.somaxconn", "--wait"}
	p.Spec.SecurityContext = &corev1.PodSecurityContext{}
	for n, v := range want {
		p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: v})
	}
	c.create(t, p)
	got := c.syncUntil(t, "sysctls", 30*time.Second, "Running", running)
	waitFor(t, 10*time.Second, "the probe's output", func() bool { return strings.Contains(c.logs(t, got), "sysctl.net.core.somaxconn=") })
	out := c.logs(t, got)
	for n, v := range want {
		if !strings.Contains(out, "sysctl."+n+"="+v+"\n") {
			t.Errorf("in the container %s is not %s:\n%s", n, v, out)
		}
		if h := host(n); h != before[n] {
			t.Errorf("the node's %s changed: %s, was %s", n, h, before[n])
		}
	}
}
