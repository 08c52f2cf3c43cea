package kubelet

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxNamesPerImage is how many names of an image a node status lists
// (the kubelet's maxNamesPerImageInNodeStatus).
const maxNamesPerImage = 5

// nodeImagesFrom is a node status's images from the runtime's ListImages,
// as the kubelet's nodestatus Images setter makes it: each image by its
// repo digests then its tags (at most 5 names), largest first, at most
// max images. An image with no name (a dangling one) is left out.
func nodeImagesFrom(list []*runtimeapi.Image, max int) []corev1.ContainerImage {
	sorted := append([]*runtimeapi.Image(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Size > sorted[j].Size })
	var out []corev1.ContainerImage
	for _, im := range sorted {
		names := append(append([]string(nil), im.RepoDigests...), im.RepoTags...)
		if len(names) == 0 {
			continue
		}
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, corev1.ContainerImage{Names: names, SizeBytes: int64(im.Size)})
		if len(out) == max {
			break
		}
	}
	return out
}
