package kubelet

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNodeImagesFrom(t *testing.T) {
	many := &runtimeapi.Image{Id: "sha256:m", Size: 5, RepoDigests: []string{"r/m@sha256:1", "q/m@sha256:1"},
		RepoTags: []string{"r/m:1", "r/m:2", "r/m:3", "r/m:4"}}
	for _, tc := range []struct {
		name string
		list []*runtimeapi.Image
		max  int
		want []corev1.ContainerImage
	}{
		{"largest first, digests then tags", []*runtimeapi.Image{
			{Id: "sha256:a", Size: 10, RepoTags: []string{"lab/hello:1.0"}, RepoDigests: []string{"lab/hello@sha256:aa"}},
			{Id: "sha256:b", Size: 30, RepoTags: []string{"lab/nginx:latest"}},
		}, 50, []corev1.ContainerImage{
			{Names: []string{"lab/nginx:latest"}, SizeBytes: 30},
			{Names: []string{"lab/hello@sha256:aa", "lab/hello:1.0"}, SizeBytes: 10},
		}},
		{"at most 5 names", []*runtimeapi.Image{many}, 50, []corev1.ContainerImage{
			{Names: []string{"r/m@sha256:1", "q/m@sha256:1", "r/m:1", "r/m:2", "r/m:3"}, SizeBytes: 5},
		}},
		{"a dangling image is left out", []*runtimeapi.Image{{Id: "sha256:d", Size: 99}}, 50, nil},
		{"at most max images", []*runtimeapi.Image{
			{Id: "1", Size: 1, RepoTags: []string{"one"}}, {Id: "2", Size: 2, RepoTags: []string{"two"}}, {Id: "3", Size: 3, RepoTags: []string{"three"}},
		}, 2, []corev1.ContainerImage{{Names: []string{"three"}, SizeBytes: 3}, {Names: []string{"two"}, SizeBytes: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeImagesFrom(tc.list, tc.max)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
	// The runtime's list is not reordered in place.
	list := []*runtimeapi.Image{{Id: "s", Size: 1, RepoTags: []string{"s"}}, {Id: "l", Size: 2, RepoTags: []string{"l"}}}
	nodeImagesFrom(list, 50)
	if got := fmt.Sprint(list[0].Id, list[1].Id); got != "sl" {
		t.Errorf("the caller's list was reordered: %s", got)
	}
}
