package kubelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/spec"
)

// The kubelet chooses the seccomp filter from the pod's and the container's
// securityContext, as getSeccompProfile does; the filter that reaches the
// spec is checked by its default action (containerd's profile: ERRNO, the
// test profile: LOG).
func TestSeccompOption(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "profiles", "audit.json"), []byte(`{"defaultAction": "SCMP_ACT_LOG"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	localhost := func(p *string) *corev1.SeccompProfile {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: p}
	}

	tests := []struct {
		name            string
		pod, container  *corev1.SeccompProfile
		fallbackDefault bool // the kubelet's --seccomp-default
		want            specs.LinuxSeccompAction
	}{
		{name: "none: unconfined", want: ""},
		{name: "none with --seccomp-default: RuntimeDefault", fallbackDefault: true, want: specs.ActErrno},
		{name: "pod RuntimeDefault applies to the container", pod: runtimeDefault, want: specs.ActErrno},
		{name: "container RuntimeDefault", container: runtimeDefault, want: specs.ActErrno},
		{name: "container Unconfined overrides the pod's RuntimeDefault", pod: runtimeDefault, container: unconfined, want: ""},
		{name: "container RuntimeDefault overrides the pod's Unconfined", pod: unconfined, container: runtimeDefault, want: specs.ActErrno},
		{name: "Unconfined beats --seccomp-default", pod: unconfined, fallbackDefault: true, want: ""},
		{name: "pod Localhost, a file in the node's seccomp directory", pod: localhost(str("profiles/audit.json")), want: specs.ActLog},
		{name: "container Localhost over the pod's RuntimeDefault", pod: runtimeDefault, container: localhost(str("profiles/audit.json")), want: specs.ActLog},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := choose(t, tc.pod, tc.container, root, tc.fallbackDefault)
			var got specs.LinuxSeccompAction
			if s.Linux != nil && s.Linux.Seccomp != nil {
				got = s.Linux.Seccomp.DefaultAction
			}
			if got != tc.want {
				t.Errorf("filter default action %q, want %q (\"\": no filter)", got, tc.want)
			}
		})
	}
}

func TestSeccompOption_BadInput(t *testing.T) {
	root := t.TempDir()
	// A profile next to the seccomp directory, which ".." would reach.
	outside := filepath.Join(filepath.Dir(root), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(outside) })
	str := func(s string) *string { return &s }
	localhost := func(p *string) *corev1.SeccompProfile {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: p}
	}
	tests := []struct {
		name    string
		profile *corev1.SeccompProfile
		want    error  // from seccompOption (CreateContainerConfigError) or, for the runtime, from applying it
		text    string // in the error
	}{
		{name: "Localhost, missing file", profile: localhost(str("profiles/missing.json")), want: spec.ErrSeccompProfile,
			text: "failed to generate seccomp spec opts: cannot load seccomp profile \"" + filepath.Join(root, "profiles", "missing.json") + "\": the file does not exist"},
		{name: "Localhost with .. out of the directory", profile: localhost(str("../" + filepath.Base(outside))), want: ErrSeccompProfile, text: "must not contain '..'"},
		{name: "Localhost with .. inside the path", profile: localhost(str("profiles/../../x.json")), want: ErrSeccompProfile, text: "must not contain '..'"},
		{name: "Localhost, absolute path", profile: localhost(str(outside)), want: ErrSeccompProfile, text: "must be relative"},
		{name: "Localhost without localhostProfile", profile: localhost(nil), want: ErrSeccompProfile, text: "localhostProfile must be set"},
		{name: "Localhost with an empty localhostProfile", profile: localhost(str("")), want: ErrSeccompProfile, text: "localhostProfile must be set"},
		{name: "unknown type", profile: &corev1.SeccompProfile{Type: "runtime/default"}, want: ErrSeccompProfile, text: "unknown seccompProfile type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := seccompOption(tc.profile, root, false)
			s := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
			if err == nil {
				err = opt(context.Background(), nil, nil, s)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q lacks %q", err, tc.text)
			}
			if s.Linux != nil && s.Linux.Seccomp != nil {
				t.Errorf("a filter was set: %+v", s.Linux.Seccomp)
			}
		})
	}
}

// choose merges the pod's and container's profiles as containerSpec does
// and applies the chosen option to a spec with containerd's default
// capabilities.
func choose(t *testing.T, pod, container *corev1.SeccompProfile, root string, fallbackDefault bool) *specs.Spec {
	t.Helper()
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	if pod != nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: pod}
	}
	if container != nil {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: container}
	}
	sc := effectiveSecurityContext(p, &p.Spec.Containers[0])
	opt, err := seccompOption(sc.SeccompProfile, root, fallbackDefault)
	if err != nil {
		t.Fatal(err)
	}
	s := &specs.Spec{
		Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE"}}},
		// What a spec before the option may hold: Unconfined must remove it.
		Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{DefaultAction: specs.ActKill}},
	}
	if err := opt(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	return s
}
