package kubelet_test

import (
	"testing"

	"github.com/podlab/podlab/steps/kubelet"
)

func TestParseContainerID(t *testing.T) {
	good := []struct {
		name, in string
		want     kubelet.ContainerID
	}{
		{"podlab's runtime", "podlab://0123abcd", kubelet.ContainerID{Type: "podlab", ID: "0123abcd"}},
		{"containerd", "containerd://f00d", kubelet.ContainerID{Type: "containerd", ID: "f00d"}},
		{"an earlier kubelet's", "runc://k8s_web", kubelet.ContainerID{Type: "runc", ID: "k8s_web"}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kubelet.ParseContainerID(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseContainerID(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
	bad := []struct{ name, in string }{
		{"empty", ""},
		{"no separator", "abc"},
		{"no runtime name", "://x"},
		{"no id", "runc://"},
		{"two separators", "a://b://c"},
		{"a bare id", "0123abcd"},
	}
	for _, tt := range bad {
		t.Run("bad/"+tt.name, func(t *testing.T) {
			if got, err := kubelet.ParseContainerID(tt.in); err == nil {
				t.Fatalf("ParseContainerID(%q) = %+v, want an error", tt.in, got)
			}
		})
	}
}
