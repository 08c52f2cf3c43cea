package kubelet

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/pull"
)

// CgroupParent is the cgroup under which every pod of every podlab node
// lives, as /kubepods does under a real kubelet: a pod's containers are in
// /podlab/kubepods/pod<uid>/<container-id>.
const CgroupParent = "/podlab/kubepods"

// Annotations on a container's config.json, with the names the kubelet gives
// its containers' labels: they tie the bundle to the pod and to the restart
// it was written for.
const (
	AnnotationPodName      = "io.kubernetes.pod.name"
	AnnotationPodNamespace = "io.kubernetes.pod.namespace"
	AnnotationPodUID       = "io.kubernetes.pod.uid"
	AnnotationContainer    = "io.kubernetes.container.name"
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
	// AnnotationImageID is the image the bundle was unpacked from
	// (repository@digest), reported as the container's imageID.
	AnnotationImageID = "io.podlab.image.id"
)

// NodeDir is the directory of node's runtime under podlab's state directory.
func NodeDir(stateDir, node string) string {
	return filepath.Join(stateDir, "nodes", node)
}

// Layout is where a node's runtime keeps its files (see the package doc).
type Layout struct {
	Dir string // <state>/nodes/<node>
}

// ContentDir is the node's content store.
func (l Layout) ContentDir() string { return pull.StoreDir(l.Dir) }

// RuncRoot is runc's --root for the node's containers.
func (l Layout) RuncRoot() string { return filepath.Join(l.Dir, "runc") }

// ContainersDir holds podlab's per-container files (log, exit code).
func (l Layout) ContainersDir() string { return filepath.Join(l.Dir, "containers") }

// PodBundles is the directory of a pod's bundles.
func (l Layout) PodBundles(uid types.UID) string {
	return filepath.Join(l.Dir, "bundles", string(uid))
}

// Bundle is the bundle of one of a pod's containers.
func (l Layout) Bundle(uid types.UID, container string) string {
	return filepath.Join(l.PodBundles(uid), container)
}

// PodDir holds a pod's volumes, as /var/lib/kubelet/pods/<uid>.
func (l Layout) PodDir(uid types.UID) string {
	return filepath.Join(l.Dir, "pods", string(uid))
}

// EmptyDir is the directory of an emptyDir volume.
func (l Layout) EmptyDir(uid types.UID, volume string) string {
	return filepath.Join(l.PodDir(uid), "volumes", "kubernetes.io~empty-dir", volume)
}

// Namespace kinds a pod sandbox pins, and the directories their bind
// mounts are in (CRI-O's pinns uses /var/run/{netns,ipcns,utsns}).
var sandboxNamespaces = []struct {
	kind string // the name under /proc/<pid>/ns/
	dir  string
}{
	{"user", "userns"}, // hostUsers: false only
	{"net", "netns"},
	{"ipc", "ipcns"},
	{"uts", "utsns"},
}

// NamespacePath is the bind mount that pins one of a pod's namespaces: kind
// is user (hostUsers: false), net, ipc or uts.
func (l Layout) NamespacePath(kind string, uid types.UID) string {
	for _, ns := range sandboxNamespaces {
		if ns.kind == kind {
			return filepath.Join(l.Dir, ns.dir, string(uid))
		}
	}
	return ""
}

// ContainerID is the runtime's name for a container of a pod, one per
// restart: k8s_<container>_<pod>_<namespace>_<pod-uid>_<restartCount>.
// Container, pod and namespace names cannot hold '_', so the ID splits back
// (see ParseContainerID). The ID names directories (runc's state, the
// cgroup), which hold at most 255 bytes: a pod name longer than
// maxPodNameInID is cut there (the uid still tells pods apart).
func ContainerID(pod *corev1.Pod, container string, restartCount int) string {
	name := pod.Name
	if len(name) > maxPodNameInID {
		name = strings.TrimRight(name[:maxPodNameInID], "-.")
	}
	return fmt.Sprintf("k8s_%s_%s_%s_%s_%d", container, name, pod.Namespace, pod.UID, restartCount)
}

// maxPodNameInID keeps a container ID under 255 bytes: "k8s_", a
// container name and a namespace of at most 63, a uid of 36, the count.
const maxPodNameInID = 60

// ContainerName is what a container ID says about its pod and container.
type ContainerName struct {
	Container, Pod, Namespace string
	UID                       types.UID
	RestartCount              int
}

// ParseContainerID splits an ID made by ContainerID; ok is false for any
// other name (a container podlab's kubelet did not make).
func ParseContainerID(id string) (ContainerName, bool) {
	f := strings.Split(id, "_")
	if len(f) != 6 || f[0] != "k8s" {
		return ContainerName{}, false
	}
	n, err := strconv.Atoi(f[5])
	if err != nil || n < 0 {
		return ContainerName{}, false
	}
	return ContainerName{Container: f[1], Pod: f[2], Namespace: f[3], UID: types.UID(f[4]), RestartCount: n}, true
}

// CgroupsPath is a container's cgroup.
func CgroupsPath(uid types.UID, containerID string) string {
	return CgroupParent + "/pod" + string(uid) + "/" + containerID
}

// RuntimeContainerID is the status's containerID: runc://<id>, as
// containerd's is containerd://<id>.
func RuntimeContainerID(id string) string { return "runc://" + id }

// podKey is namespace/name.
func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// podDesc is how the kubelet names a pod in messages: name_namespace(uid).
func podDesc(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
