// Package containerd runs a real containerd beside podlab's own runtime:
// Debian's containerd 1.6 (package containerd), whose CRI plugin speaks
// CRI v1, so that crictl, and a kubelet, can drive it through the same
// RuntimeService and ImageService a podlab node's runtime implements.
//
// Everything it writes lives under the state directory's containerd/
// (steps/statedir's Containerd):
//
//	<state>/containerd/
//	  config.toml                     rendered by Render (version 2)
//	  containerd.sock(.ttrpc)         its gRPC (and ttrpc) address: the CRI endpoint
//	  containerd.pid                  held locked by the running `podlab containerd`
//	  root/                           /var/lib/containerd on a node:
//	    io.containerd.content.v1.content/blobs/sha256/<hex>   the content store
//	    io.containerd.snapshotter.v1.overlayfs/snapshots/N/fs  one snapshot per layer
//	    io.containerd.metadata.v1.bolt/meta.db                 images, containers, leases (bbolt)
//	  state/                          /run/containerd on a node:
//	    io.containerd.runtime.v2.task/k8s.io/<id>/             each task's bundle: config.json, rootfs
//	    io.containerd.grpc.v1.cri/netns/cni-<uuid>             the pods' network namespaces
//	  runc/k8s.io/<id>/               runc's --root (the shim option Root)
//	  opt/                            the opt plugin's path
//	  cni/net.d/10-podlab.conflist    its pod network (steps/cni), bridge plc<hash>
//	  cni/networks/                   host-local's leases
//	  pods/                           where a CRI client may put its pods' logs
//	<state>/certs.d/<host>/hosts.toml the registry mirrors (the lab registry)
//
// # What it still writes outside
//
// containerd 1.6 has no setting for three things, so they are outside
// the state directory; Outside lists them and Cleanup removes this
// directory's share of them (podlab reset):
//
//   - /run/containerd/s/<sha256>: each shim's ttrpc socket. The runc shim
//     v2 puts it under containerd's compiled-in state directory, named by
//     a hash of containerd's address, namespace and the task's id; the
//     task's bundle records it in its "address" file.
//   - /var/lib/cni/results/podlab-<sandbox id>-eth0 and
//     cni-loopback-<sandbox id>-lo: libcni's cache of each pod's CNI ADD
//     results, of the conflist and of the loopback network the CRI plugin
//     adds (go-cni's cache directory is not configurable in 1.6); CNI DEL
//     removes them. The directory /var/lib/cni/results stays, empty, as
//     does /run/containerd/s.
//   - cgroups: a pod's cgroup is the cgroup_parent its CRI client gives
//     (the lab's clients give Containerd.CgroupParent, under the state
//     directory's cgroup root); without one, runc puts it at /k8s.io/<id>.
//
// Containers outlive containerd: their shims are their parents, so a
// stopped containerd leaves its pods running until CRI StopPodSandbox and
// RemovePodSandbox (crictl stopp, rmp) or Cleanup.
package containerd
