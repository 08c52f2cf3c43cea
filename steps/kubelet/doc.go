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
//     (steps 7-13): a pod sandbox (RunPodSandbox), then per container PullImage,
//     CreateContainer (unpack, spec, runc create) and StartContainer;
//   - watches the containers and reports the pod's status back (steps 14-16):
//     Pending, Running, restarts with back-off, Succeeded or Failed;
//   - stops and removes a deleted pod's containers, then deletes the pod.
//
// While it runs, the kubelet also serves its own HTTPS API (package
// steps/kubelet/server, podlab kubelet --port): the API server proxies
// kubectl logs and kubectl exec to it. The kubelet's part is Logs (the CRI
// log file read as the kubelet's ReadLogs does: tailLines, sinceTime,
// limitBytes, timestamps, follow) and Exec (runc exec in the running
// container, on a pseudo-terminal the kubelet holds for -t); the Node it
// registers publishes the endpoint (Config.Address, Config.Port).
//
// The kubelet is a CRI client of its node's runtime (Config.CRI, made by
// ConnectRuntime, package criremote: the RuntimeService and ImageService
// clients over --container-runtime-endpoint and --image-service-endpoint,
// each call narrated with its request and response, and the node's own
// runtime, podlab runtime --node NAME, started as a process of its own
// when nothing answers on <node>/cri.sock). The node's status comes over
// it: Version (nodeInfo.containerRuntimeVersion), Status (a runtime down
// makes the node NotReady), ListImages (status.images). The pod stages
// still call podlab's runtime packages (steps/pull, steps/unpack,
// steps/spec, steps/runc) in-process, where a real kubelet makes CRI
// calls; they move onto the client next. What they will call is in place,
// in kuberuntime's terms (kuberuntime.go: createPodSandbox,
// ensureImageExists, startContainer, podStatus by the pod's labels,
// killPod, removePod), with the configs the real kubelet sends
// (sandboxconfig.go's generatePodSandboxConfig, containerconfig.go's
// generateContainerConfig).
//
// # One directory per node
//
// Every node of podlab's cluster is this one machine. Each kubelet (one per
// node, podlab kubelet --node NAME) keeps its own runtime under
// <state>/nodes/<node>/, so that nodes share nothing but the API server, as
// separate machines would:
//
//	nodes/<node>/content/                 the node's content store (an OCI image layout)
//	nodes/<node>/bundles/<pod-uid>/<container>/   rootfs/ and config.json
//	nodes/<node>/runc/<container-id>/     runc's --root: state.json, exec.fifo
//	nodes/<node>/containers/<container-id>/   container.log (CRI format), exit.json, shim.pid
//	nodes/<node>/netns/<pod-uid>          the pod's network namespace, pinned by a bind mount
//	nodes/<node>/userns/<pod-uid>         its user namespace (hostUsers: false only), owner of the others
//	nodes/<node>/ipcns/<pod-uid>          its IPC namespace
//	nodes/<node>/utsns/<pod-uid>          its UTS namespace (hostname = pod name)
//	nodes/<node>/pods/<pod-uid>/volumes/kubernetes.io~empty-dir/<name>   emptyDir volumes
//	nodes/<node>/seccomp/                 Localhost seccomp profiles (the kubelet's --seccomp-profile-root)
//	nodes/<node>/pods/<pod-uid>/volume-subpaths/<volume>/<container>/<index>   subPath bind mounts
//	nodes/<node>/cni/net.d/10-podlab.conflist   the runtime's CNI network, rendered from the node's podCIDR
//	nodes/<node>/cni/cache/results/podlab-<pod-uid>-eth0   libcni's cache: each pod's CNI result JSON
//	nodes/<node>/cni/networks/podlab/<ip>   host-local's leases: the pod (sandbox id) holding each IP
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
// A container's ID names what it runs, as the kubelet's Docker names did:
// k8s_<container>_<pod>_<namespace>_<pod-uid>_<restartCount>. Its cgroup is
// <state cgroup root>/nodes/<node>/kubepods/[burstable/|besteffort/]pod<pod-uid>/<container-id>.
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
// pod's hostPorts as portmap's portMappings) and detaches it when the pod
// is removed (CNI DEL); a sandbox's id is its pod's uid. A failed ADD is
// undone (DEL, then the namespaces) and recorded as the Warning
// FailedCreatePodSandBox; the kubelet tries again on the next sync. The
// pod's IPs, read from libcni's cache as containerd's PodSandboxStatus
// reads them, are status.podIP and podIPs. A node with no pod CIDR keeps
// loopback-only pods, and the sandbox stage says why, once.
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
// burstable the sum of its pods' cpu requests). runc puts each container
// under its pod's cgroup and removes only the container's own; the kubelet
// removes the pod's when the pod goes, and keeps the tiers. Each container's
// oom_score_adj follows the class too (Guaranteed -997, BestEffort 1000,
// Burstable 3..999 from its memory request), never below what the kernel
// lets the kubelet set: without CAP_SYS_RESOURCE, its own oom_score_adj
// (containerd's restrict_oom_score_adj); the spec stage's result says so.
//
// # Seccomp
//
// A container's seccomp filter is chosen as the kubelet chooses it: the
// container's securityContext.seccompProfile, else the pod's. RuntimeDefault
// is containerd's default profile; Localhost is the file localhostProfile
// names under nodes/<node>/seccomp/ (a relative path without ".."); Unconfined
// is no filter. With neither set a container runs unconfined, as Kubernetes
// does, unless the kubelet runs with --seccomp-default (Config.SeccompDefault).
//
// # RuntimeClass
//
// A pod's spec.runtimeClassName is resolved to its RuntimeClass's handler
// through the API server, as the kubelet's runtimeclass manager does (a
// RuntimeClass that does not exist is a FailedCreatePodSandBox event); the
// runtime side receives only the handler's name, as CRI's
// RunPodSandboxRequest.runtime_handler, and looks it up in the node's
// handlers (Config.Handlers; runc.DefaultHandlers: runc, runsc, crun). An
// unknown handler, a missing binary or a host the runtime refuses fails the
// sandbox before anything is made, with containerd's text. The sandbox
// records its handler in nodes/<node>/pods/<pod-uid>/sandbox.json, and
// every container of the pod, its kill and its removal use that runtime,
// each handler under its own --root (nodes/<node>/runtimes/<handler>;
// runc's is nodes/<node>/runc). See runtimeclass.go.
//
// # Stages
//
// Nothing about a pod's progress is kept in a private database: it is
// derived from the API server (the pod's status) and from the node
// directory (the sandbox's mounts, the bundle, config.json and its
// restartCount annotation, runc's state, the shim's exit.json). Observe reads
// it; NextStage says which stage comes next; one exported method per stage
// (SandboxStage, PullStage, UnpackStage, SpecStage, CreateStage, StartStage,
// KillStage, RemoveStage) does exactly what the sync loop does for that
// stage and records it in the pod's status and events. The sync loop calls
// the same methods, so walking a pod by hand, stage by stage, ends in the
// same state as letting the kubelet run.
//
// # User namespaces
//
// A pod with hostUsers: false runs in a user namespace of its own: its ids
// 0-65535 are a range of 65,536 host ids (65536-131071 for the first such
// pod), so its root is root only inside. The range is recorded in
// nodes/<node>/pods/<pod-uid>/userns (Kubernetes' format), and claimed
// machine-wide in statedir.UsernsClaimsDir (/var/lib/podlab-userns/<base>),
// under that directory's lock: host ids are the machine's, so no two state
// directories (two learners, a lesson and a test) hand out one range. See
// userns.go for the range, the claims, the sandbox, the rootfs and the
// volumes.
package kubelet
