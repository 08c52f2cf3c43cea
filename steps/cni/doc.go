// Package cni is the container runtime's pod network: what containerd's CRI
// plugin (and CRI-O) do with CNI when a pod sandbox is made and removed,
// through the library github.com/containernetworking/cni (libcni) and real
// CNI plugins (Debian's containernetworking-plugins, in /usr/lib/cni).
//
// It knows nothing of the control plane: it takes values (a pod CIDR, a
// sandbox's id and network namespace, its pod's name and port mappings) and
// returns domain values (the pod's IPs, the result JSON's path).
//
// # The configuration
//
// A runtime reads its network from the first *.conflist (or *.conf, *.json)
// of its conf_dir, /etc/cni/net.d on a real node and
// <state>/nodes/NODE/cni/net.d in podlab. Where does it come from? On a
// kubeadm cluster a network add-on writes it; without one, containerd renders
// its conf_template once the kubelet calls UpdateRuntimeConfig with the
// node's spec.podCIDR (which the controller-manager's node IPAM gave it).
// podlab does the latter (Render, WriteConfList): 10-podlab.conflist, CNI
// 1.0.0, a chain of plugins each handed the previous one's result:
//
//   - bridge: a veth pair per pod, one end eth0 in the pod, the other on
//     the node's bridge (BridgeName, derived from the state directory and the
//     node: link names are global). isGateway gives the bridge the subnet's
//     first address, the pods' default gateway; ipMasq is off, since
//     masquerading would SNAT pod-to-pod traffic between nodes; hairpinMode
//     lets a pod reach itself through a Service-like DNAT.
//   - host-local IPAM: addresses from the pod CIDR, one file per address
//     under its dataDir (per node; the default /var/lib/cni/networks would be
//     shared by every runtime on the machine).
//   - portmap with capabilities {portMappings: true}: a container's hostPort
//     becomes a DNAT rule from the node's addresses to the pod.
//   - firewall: with br_netfilter loaded (bridge-nf-call-iptables=1),
//     bridged traffic goes through the host's FORWARD chain, whose policy
//     may be DROP (Docker sets it); the firewall plugin adds the pod's
//     address to a CNI-FORWARD chain that accepts its traffic.
//
// # ADD and DEL
//
// Setup runs ADD once the sandbox's network namespace is pinned, with
// containerd's CNI args (K8S_POD_NAMESPACE, K8S_POD_NAME,
// K8S_POD_INFRA_CONTAINER_ID, K8S_POD_UID, IgnoreUnknown=1) and eth0 as the
// interface; a failed ADD is undone with DEL before the error returns, so
// nothing is left half-made (no veth, no address held). libcni caches what
// each ADD returned under its cache directory (ResultPath): that file is
// the CNI result JSON a learner can cat. Teardown runs DEL from that cache,
// as containerd's StopPodSandbox does: it tolerates a network namespace
// that is gone already, and a second DEL does nothing. Nobody calls CHECK
// (containerd never does).
package cni
