// Package server is the kubelet's own HTTPS API, as the real kubelet serves
// it on port 10250: what the API server calls when a user types `kubectl
// logs` or `kubectl exec`.
//
//	GET  /containerLogs/NAMESPACE/POD/CONTAINER?follow&previous&tailLines=N&timestamps&sinceSeconds=S&sinceTime=T&limitBytes=B
//	GET|POST /exec/NAMESPACE/POD/CONTAINER?command=CMD&command=ARG...&input=1&output=1&error=1&tty=1
//
// The chain of `kubectl exec web -- cat /etc/hostname`:
//
//  1. kubectl asks the API server for pods/exec (a WebSocket, v5.channel.k8s.io,
//     or SPDY when that fails); the API server authorizes "create pods/exec"
//     and finds the pod's node, and the kubelet's address and port in the
//     Node's status (addresses, daemonEndpoints.kubeletEndpoint.port);
//  2. it connects to the kubelet with its own client certificate
//     (CN kube-apiserver-kubelet-client) and proxies the upgrade;
//  3. the kubelet authenticates that certificate against the cluster CA
//     (none, or another CA's: 401 Unauthorized), then authorizes the user as
//     the real kubelet's webhook mode does: it asks the API server with a
//     SubjectAccessReview whether the user may "create" (POST) or "get"
//     (GET) the subresource "proxy" of its Node object (403 Forbidden
//     (user=..., verb=..., resource=nodes, subresource(s)=[proxy]) when
//     not). kubeadm binds kube-apiserver-kubelet-client to the ClusterRole
//     system:kubelet-api-admin, which allows it;
//  4. the kubelet speaks the remote command protocol (the streams stdin,
//     stdout, stderr, error and resize, from k8s.io/cri-streaming) and runs
//     the command in the container with `runc exec`; its exit code goes back
//     on the error stream, and kubectl exits with it.
//
// Logs are a plain chunked response: the kubelet reads the CRI log file the
// runtime wrote (steps/kubelet's Logs) and, with follow, keeps writing until
// the container exits.
//
// The package knows the kubelet only through Host and the API server only
// through Authorizer: the command fills the first with a *kubelet.Kubelet
// and the second with a SubjectAccessReview sent with the node's own
// credentials (its kubeconfig).
package server
