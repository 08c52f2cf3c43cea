// Package statedir is the one place that knows how a podlab state
// directory is laid out: every other package asks a Layout (or a Node of
// it) for a path instead of joining names of its own. It imports nothing of
// podlab, so the runtime packages (pull, unpack, spec, runc) and the control
// plane (store, apiserver, kubelet, up) can all depend on it without
// depending on each other.
//
// A state directory (podlab --state-dir, default ~/.local/share/podlab):
//
//	<state>/
//	  etcd/store.db                     the API server's store (steps/store)
//	  auth/tokens.csv                   the API server's tokens
//	  pki/ca.crt ca.key NAME.crt NAME.key   the cluster CA and the certificates it signed (steps/pki)
//	  kubeconfigs/NAME.kubeconfig       one kubeconfig per identity (admin, node-1, ...)
//	  content/                          podlab pull's content store (an OCI image layout)
//	  bundles/<name>/                   podlab unpack's bundles: rootfs/ and config.json (and snapshot.json
//	                                    when rootfs/ is an overlay mount)
//	  snapshots/                        podlab unpack --snapshotter overlayfs (steps/unpack):
//	    index                           one line per snapshot: id, kind, parent, created, chain ID or key
//	    <N>/fs                          a committed layer, or a container's upper directory
//	    <N>/work                        overlay's work directory (a container's snapshot only)
//	  runc/<id>/                        runc --root of `podlab runc` containers
//	  runtimes/<handler>/               the --root of another runtime handler's (runsc, crun)
//	  containers/<id>/                  their log, exit code and shim files
//	  registry/                         the in-process registry's blobs
//	  demo-images/                      `make images` (kept by reset, removed by reset --all)
//	  cache/                            downloaded .debs (kept likewise)
//	  lab/network.json                  the lab network: CIDR, gateway, bridge (steps/machine)
//	  containerd/                       the lab containerd (podlab containerd; steps/containerd):
//	    config.toml containerd.sock crictl.yaml containerd.pid containerd.log
//	    root/ state/ runc/ opt/         its root, state, runc --root and opt plugin path
//	    cni/net.d/ cni/networks/        its CNI conflist (bridge plc<hash>) and host-local leases
//	    pods/                           its pods' logs (the sandboxes' log_directory)
//	  certs.d/<host>/hosts.toml         the registry mirrors (the lab registry) containerd pulls through
//	  last.json                         what the last by-hand stage made (steps/last): podlab unpack,
//	                                    spec and runc use it when their argument is left out
//	  nodes/<node>/                     one kubelet's runtime, as if on its own machine:
//	    content/ runc/ runtimes/ containers/   as above, the node's own
//	    pods/<pod-uid>/sandbox.json     the sandbox's runtime handler (RuntimeClass)
//	    bundles/<pod-uid>/<container>/  the pods' bundles (rootfs/ an overlay mount of snapshots/)
//	    snapshots/                      the node's snapshots, as above (containerd's
//	                                    io.containerd.snapshotter.v1.overlayfs)
//	    pods/<pod-uid>/volumes/...      the pods' volumes
//	    pods/<pod-uid>/volume-subpaths/<volume>/<container>/<index>   subPath bind mounts
//	    seccomp/                        Localhost seccomp profiles (--seccomp-profile-root)
//	    netns/ ipcns/ utsns/<pod-uid>   the pods' pinned namespaces (bind mounts)
//	    pidns/<sandbox-id>              a CRI sandbox's PID namespace (pid mode POD), pinned
//	                                    by its pause process
//	    pods/<sandbox-id>/pause.pid     that pause process's PID on the node (pause.log,
//	                                    pause-root/ the empty directory it chroots into)
//	    userns/<pod-uid>                a pod's user namespace (hostUsers: false only)
//	    pods/<pod-uid>/userns           its range of host ids (Kubernetes' format)
//	    machine/net                     a joined node's network namespace (bind mount; podlab node join)
//	    machine/address.json            its address on the lab network and its veth pair
//
// One path is outside the state directory: the machine-wide claims on user
// namespace ranges, UsernsClaimsDir (/var/lib/podlab-userns), since host ids
// are the machine's. `podlab doctor` prints it.
//
// # The cgroup root
//
// Cgroups are global to the machine, so each state directory has its own
// cgroup root, derived from the directory's absolute path:
//
//	/podlab-<first 8 hex digits of sha256(absolute state dir)>
//	  <id>                                         a `podlab runc` container
//	  nodes/<node>/kubepods/                       a node's pods, as the kubelet's cgroupfs driver names them:
//	    pod<uid>/<container-id>                    a Guaranteed pod
//	    burstable/pod<uid>/<container-id>          a Burstable pod
//	    besteffort/pod<uid>/<container-id>         a BestEffort pod
//
// A hash rather than the directory's name: any path maps to a valid,
// short cgroup name (a ':' would make runc read the path as systemd's
// slice:prefix:name), two directories with the same base name do not
// collide, and the same directory always finds its cgroups again. `podlab
// doctor` prints the root of its state directory. Two learners, or a lesson
// and a test, each see only their own root; `podlab reset` removes only it.
package statedir
