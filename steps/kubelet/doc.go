// Package kubelet is the node agent of podlab's cluster (the chain's steps
// 6-8 and 14-16): it bridges the control plane and the container runtime.
//
// A kubelet acts as the user system:node:NODE through apiserver.Interface,
// like any other client of the API server. It
//
//   - registers its Node (capacity measured on this machine, nodeInfo,
//     addresses, conditions, the images it holds) and posts a heartbeat every
//     10 seconds;
//   - keeps its node's Lease kube-node-lease/NODE (lease.go), renewed every
//     quarter of its 40 seconds: the sign of life the controller-manager's
//     node lifecycle controller watches;
//   - watches the pods bound to it (an informer with the field selector
//     spec.nodeName=NODE, the chain's step 6);
//   - for each pod, does what the kubelet's syncPod asks of the CRI runtime
//     (steps 7-13): a pod sandbox (RunPodSandbox), then per container
//     ImageStatus/PullImage, CreateContainer (the runtime unpacks, writes the
//     spec, runs runc create) and StartContainer;
//   - watches the containers and reports the pod's status back (steps 14-16):
//     Pending, Running, restarts with back-off, Succeeded or Failed;
//   - stops and removes a deleted pod's containers, then deletes the pod.
//
// While it runs, the kubelet also serves its own HTTPS API (package
// steps/kubelet/server, podlab kubelet --port): the API server proxies
// kubectl logs and kubectl exec to it. The kubelet's part is Logs (the CRI
// log file read as the kubelet's ReadLogs does: tailLines, sinceTime,
// limitBytes, timestamps, follow) and Exec (CRI ExecSync, or Exec and the
// runtime's streaming URL for stdin or -t); the Node it registers publishes
// the endpoint (Config.Address, Config.Port).
//
// The kubelet is a CRI client of its node's runtime (Config.CRI, made by
// ConnectRuntime, package criremote: the RuntimeService and ImageService
// clients over --container-runtime-endpoint and --image-service-endpoint,
// each call narrated with its request and response, and the node's own
// runtime, podlab runtime --node NAME, started as a process of its own
// when nothing answers on <node>/cri.sock). The node's status comes over
// it: Version (nodeInfo.containerRuntimeVersion), Status (a runtime down
// makes the node NotReady), ListImages (status.images); so do the pod
// stages, in kuberuntime's terms (kuberuntime.go: createPodSandbox,
// ensureImageExists, podStatus by the pod's labels, removePod), with the
// configs the real kubelet sends (sandboxconfig.go's
// generatePodSandboxConfig, containerconfig.go's generateContainerConfig)
// and what the kubelet prepares itself first (prepare.go). The kubelet
// imports none of podlab's runtime packages (steps/pull, unpack, spec,
// runc, cni): go list -deps shows it.
//
// # One directory per node
//
// Every node of podlab's cluster is this one machine. Each node (its
// kubelet, podlab kubelet --node NAME, and its runtime, podlab runtime
// --node NAME) keeps its files under <state>/nodes/<node>/, so that nodes
// share nothing but the API server, as separate machines would. The
// kubelet's own:
//
//	nodes/<node>/pods/<pod-uid>/volumes/kubernetes.io~empty-dir/<name>   emptyDir volumes
//	nodes/<node>/pods/<pod-uid>/volume-subpaths/<volume>/<container>/<index>   subPath bind mounts
//	nodes/<node>/pods/<pod-uid>/userns    the pod's user namespace range (hostUsers: false)
//	nodes/<node>/logs/pods/<ns>_<pod>_<uid>/<container>/<N>.log   the CRI logs (the runtime writes them where the kubelet says)
//	nodes/<node>/seccomp/                 Localhost seccomp profiles (the kubelet's --seccomp-profile-root)
//
// The runtime's (steps/cri; the kubelet learns them from the verbose
// PodSandboxStatus and ContainerStatus, as crictl inspectp and inspect show
// them): its records cri/, the bundles bundles/<sandbox-id>/<container-id>
// (rootfs/ and config.json), runc's state runc/, the namespace pins netns/,
// ipcns/, utsns/, userns/ (by sandbox id), pods/<sandbox-id>/ (hosts,
// hostname, resolv.conf), the content store content/, the CNI network cni/.
//
// A volumeMount with a subPath is never given to the runtime as
// <volume>/<subPath>: a container sharing the volume could have made that a
// symlink to the host's / (CVE-2017-1002101). The kubelet resolves the
// subPath inside the volume (package subpath), bind-mounts what it opened
// onto volume-subpaths/..., and gives the runtime that path. A subPath that
// leaves its volume leaves the container waiting in
// CreateContainerConfigError. The bind mounts are unmounted before the pod's
// directory is removed.
//
// Containers and sandboxes have the runtime's ids (64 hex digits); the
// kubelet finds them by their labels and metadata (name, attempt = restart
// count). A container's cgroup is
// <state cgroup root>/nodes/<node>/kubepods/[burstable/|besteffort/]pod<pod-uid>/<container-id>:
// the kubelet makes the pod's, the runtime the container's under it.
//
// # Pod network
//
// The kubelet learns its Node's spec.podCIDR (the controller-manager's node
// IPAM sets it) when it registers, on every heartbeat, and before a sandbox
// when the runtime has no network yet, and hands it to the runtime (CRI
// UpdateRuntimeConfig); the runtime renders its CNI conflist from it
// (package steps/cni: bridge plb<hash> with host-local IPAM, portmap,
// firewall). The runtime attaches each sandbox it makes (CNI ADD into the
// pinned network namespace, eth0, with containerd's K8S_POD_* args and the
// pod's hostPorts, which the kubelet sends as the sandbox config's
// port_mappings) and detaches it when the sandbox stops (CNI DEL). A
// failed ADD is undone by the runtime, and the kubelet records its error
// as the Warning FailedCreatePodSandBox; the pod worker tries again 10 to
// 15 s later (the kubelet's backOffPeriod, jittered), not at every poll.
// The pod's IPs are PodSandboxStatus's: status.podIP and podIPs. A node
// with no pod CIDR keeps loopback-only pods, and the sandbox stage says
// why, once.
//
// # QoS
//
// The pod's QoS class (status.qosClass) places its cgroup as the kubelet's
// cgroupfs driver does: Guaranteed pods directly under kubepods, Burstable
// under kubepods/burstable, BestEffort under kubepods/besteffort. The kubelet
// makes the pod's cgroup, in every hierarchy, before the sandbox, with its
// settings (qos.go, podcgroup.go): cpu.shares from the requests (2 for
// BestEffort; cpu.weight on cgroup v2), the pod's memory limit and cpu quota
// when every container has one; and it keeps the tiers' own (besteffort 2,
// burstable the sum of its pods' cpu requests), and gives the pod's cgroup
// to the runtime as the sandbox's cgroup_parent. The runtime puts each
// container under it and removes only the container's own; the kubelet
// removes the pod's when the pod goes, and keeps the tiers. Each container's
// oom_score_adj follows the class too (Guaranteed -997, BestEffort 1000,
// Burstable 3..999 from its memory request), never below what the kernel
// lets the kubelet set: without CAP_SYS_RESOURCE, its own oom_score_adj
// (containerd's restrict_oom_score_adj); the create stage's result says so.
//
// # Seccomp
//
// A container's seccomp filter is chosen as the kubelet chooses it: the
// container's securityContext.seccompProfile, else the pod's. RuntimeDefault
// is containerd's default profile; Localhost is the file localhostProfile
// names under nodes/<node>/seccomp/ (a relative path without ".."); Unconfined
// is no filter. With neither set a container runs unconfined, as Kubernetes
// does, unless the kubelet runs with --seccomp-default (Config.SeccompDefault).
// The kubelet sends the choice as CRI's SecurityProfile; the runtime loads
// the profile (a missing file is CreateContainerError).
//
// # Sysctls
//
// A pod's securityContext.sysctls are admitted as the kubelet's sysctl
// admission handler admits them (sysctl.go): each must be on the allowlist
// of the safe sysctls (SafeSysctls, v1.37's) and the patterns of
// --allowed-unsafe-sysctls (Config.AllowedUnsafeSysctls, namespaced ones
// only), and not of a namespace the pod shares with the node (hostNetwork,
// hostIPC). A pod that sets another is rejected before anything is made:
// Failed, reason SysctlForbidden, message "Pod was rejected: forbidden
// sysctl: ...", and a Warning event. The allowed ones go in the sandbox
// config (LinuxPodSandboxConfig.sysctls); the runtime writes them into
// every container's spec (linux.sysctl), and runc sets them in the pod's
// namespaces.
//
// # Fields not honoured yet
//
// A pod that sets a field Kubernetes' kubelet acts on and podlab's does
// not (probes, lifecycle hooks, hostAliases, imagePullSecrets, fsGroup,
// ...: unsupported.go) still runs, without it; the kubelet says so once
// per pod with a Warning event, reason Unsupported, naming the fields and
// where the pod sets them.
//
// # RuntimeClass
//
// A pod's spec.runtimeClassName is resolved to its RuntimeClass's handler
// through the API server, as the kubelet's runtimeclass manager does (a
// RuntimeClass that does not exist is a FailedCreatePodSandBox event); the
// runtime receives only the handler's name, as CRI's
// RunPodSandboxRequest.runtime_handler, and looks it up in its own handlers
// (podlab runtime --runtime-handler; runc, runsc, crun). An unknown
// handler, a missing binary or a host the runtime refuses fails the sandbox
// before anything is made, with containerd's text. The runtime keeps the
// handler with the sandbox, and every container of the pod, its kill and
// its removal use it. See runtimeclass.go.
//
// # Stages
//
// Nothing about a pod's progress is kept in a private database: it is
// derived from the API server (the pod's status) and from the runtime, over
// CRI (the pod's sandboxes and containers by its uid label, their states,
// attempts and exits; ImageStatus). Observe reads it; NextStage says which
// stage comes next; one exported method per stage (SandboxStage,
// PullStage, CreateStage, StartStage, KillStage, RemoveStage) does exactly
// what the sync loop does for that stage and records it in the pod's
// status and events. The sync loop calls the same methods, so walking a pod
// by hand, stage by stage, ends in the same state as letting the kubelet
// run. Unpacking the image and writing the OCI spec are the runtime's,
// inside CreateContainer: no kubelet stage (podlab unpack and podlab spec
// do them by hand).
//
// # User namespaces
//
// A pod with hostUsers: false runs in a user namespace of its own: its ids
// 0-65535 are a range of 65,536 host ids (65536-131071 for the first such
// pod), so its root is root only inside. The range is recorded in
// nodes/<node>/pods/<pod-uid>/userns (Kubernetes' format), and claimed
// machine-wide in statedir.UsernsClaimsDir (/var/lib/podlab-userns/<base>),
// under that directory's lock: host ids are the machine's, so no two state
// directories (two learners, a lesson and a test) hand out one range. The
// kubelet sends it as the sandbox's userns_options; the runtime pins the
// namespaces and shifts the rootfs. See userns.go.
package kubelet
