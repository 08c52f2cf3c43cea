package kubelet

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet chooses the seccomp profile from the pod's and the
// container's securityContext, as getSeccompProfile does, and hands it to
// the runtime as CRI's SecurityProfile (a Localhost profile by its path
// under the node's seccomp directory; the runtime reads the file).
func TestSecurityProfile(t *testing.T) {
	root := t.TempDir()
	str := func(s string) *string { return &s }
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	localhost := func(p *string) *corev1.SeccompProfile {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: p}
	}
	audit := filepath.Join(root, "profiles", "audit.json")
	tests := []struct {
		name            string
		pod, container  *corev1.SeccompProfile
		fallbackDefault bool // the kubelet's --seccomp-default
		want            runtimeapi.SecurityProfile_ProfileType
		ref             string
	}{
		{name: "none: unconfined", want: runtimeapi.SecurityProfile_Unconfined},
		{name: "none with --seccomp-default: RuntimeDefault", fallbackDefault: true, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "pod RuntimeDefault applies to the container", pod: runtimeDefault, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "container RuntimeDefault", container: runtimeDefault, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "container Unconfined overrides the pod's RuntimeDefault", pod: runtimeDefault, container: unconfined, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "container RuntimeDefault overrides the pod's Unconfined", pod: unconfined, container: runtimeDefault, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "Unconfined beats --seccomp-default", pod: unconfined, fallbackDefault: true, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "pod Localhost, a file in the node's seccomp directory", pod: localhost(str("profiles/audit.json")), want: runtimeapi.SecurityProfile_Localhost, ref: audit},
		{name: "container Localhost over the pod's RuntimeDefault", pod: runtimeDefault, container: localhost(str("profiles/audit.json")), want: runtimeapi.SecurityProfile_Localhost, ref: audit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
			if tc.pod != nil {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: tc.pod}
			}
			if tc.container != nil {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: tc.container}
			}
			sc := effectiveSecurityContext(p, &p.Spec.Containers[0])
			got, err := securityProfile(sc.SeccompProfile, root, tc.fallbackDefault)
			if err != nil {
				t.Fatal(err)
			}
			if got.ProfileType != tc.want || got.LocalhostRef != tc.ref {
				t.Errorf("profile %s %q, want %s %q", got.ProfileType, got.LocalhostRef, tc.want, tc.ref)
			}
		})
	}
}

// What the kubelet refuses of a seccompProfile (CreateContainerConfigError);
// a missing or invalid file is the runtime's to find.
func TestSecurityProfile_BadInput(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(filepath.Dir(root), "outside.json")
	str := func(s string) *string { return &s }
	localhost := func(p *string) *corev1.SeccompProfile {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: p}
	}
	tests := []struct {
		name    string
		profile *corev1.SeccompProfile
		text    string // in the error
	}{
		{name: "Localhost with .. out of the directory", profile: localhost(str("../" + filepath.Base(outside))), text: "must not contain '..'"},
		{name: "Localhost with .. inside the path", profile: localhost(str("profiles/../../x.json")), text: "must not contain '..'"},
		{name: "Localhost, absolute path", profile: localhost(str(outside)), text: "must be relative"},
		{name: "Localhost without localhostProfile", profile: localhost(nil), text: "localhostProfile must be set"},
		{name: "Localhost with an empty localhostProfile", profile: localhost(str("")), text: "localhostProfile must be set"},
		{name: "unknown type", profile: &corev1.SeccompProfile{Type: "runtime/default"}, text: "unknown seccompProfile type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := securityProfile(tc.profile, root, false)
			if !errors.Is(err, ErrSeccompProfile) {
				t.Fatalf("profile %v, error %v, want %v", p, err, ErrSeccompProfile)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q lacks %q", err, tc.text)
			}
		})
	}
}
