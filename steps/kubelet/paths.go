package kubelet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/statedir"
)

// AnnotationRestartCount is the container config's annotation with the
// restart count, as the kubelet writes it (the metadata's attempt says the
// same to the runtime).
const AnnotationRestartCount = "io.kubernetes.container.restartCount"

// NodeLayout is the layout of node's runtime under the state directory
// stateDir (made absolute, so the cgroup root does not depend on the
// working directory).
func NodeLayout(stateDir, node string) (Layout, error) {
	l, err := statedir.New(stateDir)
	if err != nil {
		return Layout{}, err
	}
	return Layout{Node: l.Node(node), Claims: statedir.MachineUsernsClaims()}, nil
}

// Layout is the node's directory (steps/statedir): the kubelet's own files
// in it (pods/<uid>: volumes, subPath mounts, the user namespace record;
// logs/pods; seccomp/) and its cgroup root; the runtime's files are the
// runtime's, and the kubelet learns them over CRI.
type Layout struct {
	statedir.Node
	// Claims are the machine-wide claims on user namespace ranges
	// (statedir.MachineUsernsClaims; another directory only in tests).
	Claims statedir.UsernsClaims
}

// PodDir holds a pod's volumes, as /var/lib/kubelet/pods/<uid>.
func (l Layout) PodDir(uid types.UID) string { return l.Node.PodDir(string(uid)) }

// EmptyDir is the directory of an emptyDir volume.
func (l Layout) EmptyDir(uid types.UID, volume string) string {
	return l.Node.EmptyDir(string(uid), volume)
}

// SubPathsDir holds the bind mounts of a pod's volumeMounts with a subPath,
// as /var/lib/kubelet/pods/<uid>/volume-subpaths.
func (l Layout) SubPathsDir(uid types.UID) string { return l.Node.SubPathsDir(string(uid)) }

// SubPath is where the kubelet bind-mounts the subPath of a container's
// index-th volumeMount, resolved inside its volume: the runtime is given
// this path, never the volume's own path joined with the subPath.
func (l Layout) SubPath(uid types.UID, volume, container string, index int) string {
	return l.Node.SubPath(string(uid), volume, container, index)
}

// UserNamespaceFile is where the pod's range is recorded.
func (l Layout) UserNamespaceFile(uid types.UID) string { return l.UsernsRecord(string(uid)) }

// podKey is namespace/name.
func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// podDesc is how the kubelet names a pod in messages: name_namespace(uid).
func podDesc(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
