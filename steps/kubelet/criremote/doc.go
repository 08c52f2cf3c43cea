// Package criremote is the kubelet's side of the CRI: a gRPC client of a
// container runtime's RuntimeService and ImageService (k8s.io/cri-api) over
// a unix socket, as Kubernetes' pkg/kubelet/cri/remote is. The runtime may
// be podlab's own (steps/cri, <state>/nodes/NAME/cri.sock), the lab
// containerd (<state>/containerd/containerd.sock) or any other that
// answers CRI v1.
//
//	Dial      the two clients (--container-runtime-endpoint and
//	          --image-service-endpoint, which may be one socket); with
//	          Options.Log every call is narrated with its request and its
//	          response in protobuf text, as crictl --debug shows them
//	Probe     whether a runtime answers on an endpoint (CRI Version)
//	Start     the runtime as a process of its own, detached from the
//	          caller (its own session), its output in a log file and its
//	          pid and start time in a pid file, as a node's systemd starts
//	          containerd.service before kubelet.service
//	Stop      that process, by its pid file: SIGTERM, then SIGKILL
//
// The package knows nothing of the control plane, and nothing of the
// runtime but its CRI: what crosses the socket is the CRI's own types.
package criremote
