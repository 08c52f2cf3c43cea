// Package cri is podlab's container runtime as a CRI v1 server: a gRPC
// server on a unix socket (<state-dir>/nodes/NAME/cri.sock) that answers
// the RuntimeService and ImageService of k8s.io/cri-api, as containerd's
// CRI plugin answers on /run/containerd/containerd.sock. The kubelet (and
// crictl) ask it for pod sandboxes, containers and images; inside, it runs
// the same stages a learner runs by hand:
//
//	RunPodSandbox    pin the pod's net, ipc and uts namespaces (as CRI-O's
//	                 pinns: no pause process), inside a user namespace of
//	                 userns_options' mappings for hostUsers: false
//	                 (userns.go), CNI ADD through steps/cni; the
//	                 runtime_handler picks runc, runsc or crun (handlers.go).
//	                 For pid mode POD (shareProcessNamespace, and crictl's
//	                 default) a pause process is PID 1 of a PID namespace
//	                 the containers share, pinned with the others
//	                 (steps/runc's pause.go; CRI-O keeps its infra
//	                 container for this case only), in the pod's cgroup
//	                 (<cgroup_parent>/<sandbox id>, where containerd puts
//	                 its pause container); CONTAINER gives each
//	                 container its own, NODE the node's
//	PullImage        steps/pull into the node's content store
//	CreateContainer  steps/unpack into a bundle through the node's
//	                 snapshotter (rootfs.go), the OCI spec from the
//	                 ContainerConfig (steps/spec and its options), then a
//	                 shim runs `runc create` (steps/runc), writing the CRI
//	                 log at the kubelet's log_path, keeping the stdin
//	                 (stdin: true) and the terminal (tty: true)
//	StartContainer   `runc start`
//	StopContainer    SIGTERM (or the image's stop signal), the timeout, SIGKILL
//	RemoveContainer  `runc delete`, the bundle, the log
//	StopPodSandbox   stop the containers, CNI DEL, kill the pause process
//	                 and remove its cgroup
//	RemovePodSandbox remove the containers and unpin the namespaces
//
// Which containerd v2 files each part follows (internal/cri/server/...):
//
//	sandbox.go    sandbox_run.go, sandbox_stop.go, sandbox_remove.go,
//	              sandbox_status.go, sandbox_list.go, and podsandbox/ for
//	              the namespaces and CNI_ARGS (sandbox_run.go's setupPodNetwork)
//	container.go  container_create.go, container_start.go, container_stop.go,
//	              container_remove.go, container_status.go, container_list.go
//	ocispec.go    container_create_linux.go (containerSpec) and
//	              pkg/oci's spec_opts.go: env, mounts, devices, resources,
//	              capabilities, privileged, readonly rootfs, user and group,
//	              seccomp, namespaces joined from the sandbox, oom_score_adj
//	              restricted as restrict_oom_score_adj, io.kubernetes.cri.*
//	              annotations. AppArmor is ignored (with a line in the
//	              server's log): podlab's machines run no AppArmor profiles.
//	image.go      image_pull.go, image_list.go, image_status.go,
//	              image_remove.go, imagefs_info.go
//	stream.go     container_execsync.go, container_exec.go,
//	              container_attach.go, sandbox_portforward_linux.go and
//	              streaming.go (the streaming server on 127.0.0.1, port 0).
//	              Attach reaches the container's stdio through its shim's
//	              socket (steps/runc's shimio.go), as containerd's
//	              internal/cri/io: the output from then on, stdin when the
//	              container has one (stdin_once closes it at the end of the
//	              first client's stdin; otherwise, and on a terminal, the
//	              client detaches), the client's terminal size
//	container.go  also container_log_reopen.go: ReopenContainerLog has the
//	              shim close the log and open log_path again, after the
//	              kubelet renamed N.log to N.log.<time>
//	status.go     status.go, version.go, update_runtime_config.go
//	              (the pod CIDR renders the CNI conflist, as conf_template)
//	stats.go      container_stats_list_linux.go (cgroup counters)
//	namespaces.go the sandbox's namespaces, pinned by bind mounts as
//	              CRI-O's pinns pins them (containerd's sandbox keeps them
//	              with a pause process: podlab's has one only to hold a
//	              shared PID namespace, which no bind mount can keep
//	              usable: a PID namespace whose PID 1 exited takes no new
//	              process). In a pod with a user namespace of its own the
//	              pause process makes that user namespace and the others
//	              inside it (in place of userns.go's cat), so that the PID
//	              namespace is the pod's user namespace's. runsc gets no
//	              pause process: pid mode POD gives each of its containers
//	              its own namespace (the server's log says so)
//	records.go    what containerd keeps in its metadata store: one JSON
//	recover.go    file per sandbox and container under <node>/cri, written
//	              atomically, so a restarted server lists them; a record
//	              is written "creating" before anything is made, so a
//	              create killed half-way is cleaned when the server starts
//	              again (runc's container, cgroups, bundle, namespaces)
//
//	handlers.go   the runtimes table (containerd's [...runtimes.NAME]):
//	              runc.DefaultHandlers (runc, runsc, crun) or
//	              Config.Handlers; an unknown runtime_handler gets
//	              containerd's `no runtime for "NAME" is configured`
//	rootfs.go     the snapshotter (containerd's default, overlayfs,
//	              where the kernel mounts it; else native), the active
//	              snapshot of a container keyed <sandbox>/<container>
//
// RPCs the kubelet v1.37 may call that answer Unimplemented:
// StreamPodSandboxes, StreamContainers, StreamContainerStats,
// StreamPodSandboxStats, CheckpointContainer,
// GetContainerEvents, ListMetricDescriptors, ListPodSandboxMetrics,
// RuntimeConfig, UpdatePodSandboxResources, StreamImages. The kubelet
// falls back (to polling ListPodSandbox and ListContainers, as with
// containerd 1.6) where it may.
//
// The package knows nothing of the control plane: its interface is the
// CRI's own types.
package cri
