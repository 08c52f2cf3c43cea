package kubelet

// What the kubelet prepares itself before it asks the runtime, as
// Kubernetes splits the work: the pod's cgroup, its user namespace range,
// its log directory, its volumes, its environment and its oom_score_adj
// are the kubelet's; the namespaces, the rootfs, the spec and runc are the
// runtime's. These become the inputs of generatePodSandboxConfig and
// generateContainerConfig (criRuntime's createPodSandbox and
// the create stage); SandboxStage and CreateStage call them.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// prepareSandbox makes what RunPodSandbox needs of the kubelet, as its
// syncPod does before it asks for a sandbox: the pod's cgroup in its QoS
// tier (made now, or found), the pod's user namespace range for
// hostUsers: false (allocated and recorded now, or the one recorded: the
// runtime pins the namespace with it), and the node's pod log root.
// attempt counts the pod's sandboxes before this one.
func (k *Kubelet) prepareSandbox(ctx context.Context, pod *corev1.Pod, attempt uint32) (sandboxInputs, *PodCgroup, error) {
	if usesUserNamespace(pod) && (pod.Spec.HostNetwork || pod.Spec.HostIPC || pod.Spec.HostPID) {
		return sandboxInputs{}, nil, fmt.Errorf("%w: pod %s has hostUsers: false with hostNetwork, hostIPC or hostPID: the host's namespaces are not the pod's user namespace's (the API server refuses this)", ErrUnsupported, podKey(pod))
	}
	pc, err := k.ensurePodCgroup(ctx, pod)
	if err != nil {
		return sandboxInputs{}, nil, err
	}
	in := sandboxInputs{Attempt: attempt, LogRoot: k.layout.PodLogsDir(), CgroupParent: pc.Pod.Path,
		SeccompRoot: k.layout.SeccompDir(), SeccompDefault: k.cfg.SeccompDefault}
	if usesUserNamespace(pod) {
		u, err := k.layout.allocateUserNamespace(pod.UID, defaultUsernsRanges)
		if err != nil {
			return sandboxInputs{}, pc, err
		}
		in.UserNamespace = &u
	}
	return in, pc, nil
}

// prepareContainer makes what CreateContainer needs of the kubelet for run
// restart of container c: its environment resolved (envFrom, env, the
// downward API, configMaps and secrets read from the API server), its
// volumes made (emptyDir) or checked (hostPath) and its subPaths
// bind-mounted, its oom_score_adj for the pod's QoS class; with the image
// as the runtime reported it (id and USER) and the sandbox's namespaces.
// An error here is the PodSpec's (CreateContainerConfigError).
func (k *Kubelet) prepareContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, restart int, imageRef string, img *runtimeapi.Image, ns *runtimeapi.NamespaceOption) (containerInputs, OOMScoreAdj, error) {
	env, err := k.containerEnv(ctx, pod, c)
	if err != nil {
		return containerInputs{}, OOMScoreAdj{}, err
	}
	mounts, err := k.volumeMounts(pod, c)
	if err != nil {
		return containerInputs{}, OOMScoreAdj{}, err
	}
	oom, err := k.oomScoreAdj(ctx, pod, c)
	if err != nil {
		return containerInputs{}, OOMScoreAdj{}, err
	}
	return containerInputs{RestartCount: restart, ImageRef: imageRef, ImageUser: imageUser(img), Env: env,
		Mounts: mounts, OOMScoreAdj: oom.Set, SeccompRoot: k.layout.SeccompDir(), SeccompDefault: k.cfg.SeccompDefault,
		Namespaces: ns}, oom, nil
}
