// Package rest is kube-apiserver's HTTP front: the Kubernetes REST API
// (/api/v1/..., /apis/GROUP/VERSION/...) served in front of podlab's gate
// (package apiserver), so that kubectl, client-go and curl talk to podlab
// as to a cluster.
//
// # A request's path through kube-apiserver
//
// kube-apiserver wraps its REST handlers in a chain of filters
// (k8s.io/apiserver/pkg/server/config.go, DefaultBuildHandlerChain). Read
// from the outside in, a request meets:
//
//  1. Authentication: who is this? Each authenticator looks at the
//     request (a client certificate verified against --client-ca-file,
//     a bearer token from --token-auth-file, ...); the first that
//     recognizes its kind of credentials decides. Credentials that prove
//     nothing are 401 Unauthorized. A request with no credentials at all
//     is, by default (--anonymous-auth=true), the user system:anonymous
//     in the group system:unauthenticated, which RBAC lets read /healthz,
//     /livez, /readyz and /version and nothing else: a bare curl of
//     /api/v1/pods gets 403 Forbidden, not 401. podlab does the same: the
//     Authenticator interface is what each authenticator implements, and
//     the handler tries them in order.
//  2. Impersonation: the headers Impersonate-User and Impersonate-Group
//     (kubectl --as, --as-group) replace the user, if RBAC grants the
//     authenticated user the verb "impersonate" on those users and
//     groups. From here on, the request is the impersonated user's; the
//     narration says "admin impersonating developer".
//  3. Authorization: may this user do this verb on this resource? The
//     verb comes from the HTTP method and the path: GET of one object is
//     "get", of a collection "list", with ?watch=true "watch"; POST is
//     "create", PUT "update", PATCH "patch", DELETE "delete" (of a
//     collection, "deletecollection"). podlab's
//     gate asks RBAC (package rbac); 403 Forbidden, in kube's words, if
//     no rule allows it.
//  4. Admission, mutating then validating, and validation of the object
//     (package admission, the gate's own checks): 422 Invalid, 403 from a
//     policy such as PodSecurity or a ResourceQuota.
//  5. Storage: the write, in one transaction of the store (etcd's role,
//     package store), acknowledged once it is durable.
//
// In podlab, steps 1 and 2 happen here, on the HTTP request; the gate
// (apiserver.Client, made for the authenticated user with ClientFor and
// Impersonate) does 3 to 5 on every call, exactly as when a podlab command
// calls it in-process. This package adds what only the wire has: the URL
// layout, content negotiation, request bodies (kube's 3 MiB limit, 413
// beyond it; 400 with kube's text for a body that does not decode), the
// watch stream, and metav1.Status bodies for every error, so that kubectl
// prints `Error from server (Forbidden): ...` exactly as against a cluster.
//
// # What is served
//
// Every resource of apiserver.Resources(), namespaced and cluster-scoped:
// GET (get; list with labelSelector, fieldSelector, limit, continue,
// resourceVersion and resourceVersionMatch; watch), POST (create), PUT
// (update), PATCH (strategic merge, JSON merge,
// JSON patch, and server-side apply: application/apply-patch+yaml with
// fieldManager and force, `kubectl apply --server-side`), DELETE of an
// object (gracePeriodSeconds; propagationPolicy is accepted: podlab has no
// garbage collector to hand it to) and of a collection (labelSelector,
// fieldSelector; the answer lists what was deleted). Every write records
// metadata.managedFields under the request's manager: ?fieldManager=, else
// the User-Agent's first segment (kubectl-create, kubectl-client-side-apply),
// as kube-apiserver names it. Subresources:
// pods/binding, pods/status, deployments/scale and replicasets/scale (an
// autoscaling/v1 Scale), namespaces/status. SelfSubjectAccessReview and
// SelfSubjectRulesReview (kubectl auth can-i, can-i --list), and
// SubjectAccessReview (what a kubelet asks about its callers; nodes may
// create them through the Node authorizer).
//
// pods/log and pods/exec are proxied to the pod's kubelet, as kube-apiserver
// does (kubelet.go): authorized as "get pods/log" and "create pods/exec" (a
// WebSocket exec is a GET: kube asks "create" for it too), the pod read and
// its container checked (400 "container X is not valid for pod P"; exec in
// a pod without a node is 400 "pod P does not have a host assigned"), the
// kubelet found from the Node's status (an address of the preferred types
// InternalIP, ExternalIP, Hostname, and daemonEndpoints.kubeletEndpoint.port,
// 10250 when unset), and called with WithKubeletTransport's client
// certificate. Logs are streamed back as the kubelet sends them (a kubelet
// error's text becomes the Status message; a kubelet that does not answer
// is a 500 with the dial error, as kube says it). Exec goes through
// apimachinery's upgrade-aware proxy (SPDY, and WebSocket channel
// protocols up to v4); a WebSocket speaking v5.channel.k8s.io, what kubectl
// 1.30+ tries first, is answered by the API server and translated to SPDY
// towards the kubelet with k8s.io/apiserver's StreamTranslator, exactly as
// kube-apiserver does. Other pod subresources (attach, portforward, proxy,
// eviction...) are 501.
//
// Watches stream newline-separated JSON events, {"type":"ADDED",
// "object":{...}}. A watch from a resourceVersion the store has compacted
// gets one ERROR event with a 410 Expired Status, as kube-apiserver sends
// it, and the client lists again. With allowWatchBookmarks, BOOKMARK
// events carry only a resourceVersion the client may resume from. With
// sendInitialEvents=true and resourceVersionMatch=NotOlderThan (client-go
// v0.37's informers ask for this "WatchList" first), the watch starts
// with an ADDED event per existing object, then a BOOKMARK annotated
// k8s.io/initial-events-end: "true". A watch without a resourceVersion
// (or "0") starts with the existing objects too, as kube's does.
//
// # One API server per store, and how clients find it
//
// ClaimStore takes an flock on the state directory's claim file before
// the store is opened; a second server is refused (ErrStoreServed).
// Advertise writes the URL served next to the pid, and Serving reads both
// back, asking the kernel whether the lock is held (a dead server's file
// says nothing): podlab's own commands use it to become clients of the
// server instead of opening the store. NewKubeAPIServer is the handler
// both `podlab apiserver` and `podlab up` serve.
//
// Paths that name no resource (/api, /apis, /version, /healthz, /openapi)
// are authorized as non-resource URLs and handed to the Fallback handler
// (discovery and OpenAPI live in package discovery); server-side printing
// (Accept: application/json;as=Table;g=meta.k8s.io;v=v1) goes to a
// TableConvertor, with the TableOptions of the query (includeObject=None,
// Metadata, the default, or Object, which kubectl --sort-by asks for; any
// other value is a 400, in kube's words). Without them, those paths are 404 and tables are not
// offered: kubectl asks for a Table or plain JSON, and gets JSON.
//
// Lists in pages are read as kube-apiserver reads them from etcd: the
// continue token holds the first page's revision, and every later page is
// read at it, so the pages are one snapshot (410 Expired once compaction
// passes it); resourceVersion with resourceVersionMatch=Exact reads the
// state at that revision (see apiserver's paging.go).
//
// Differences from kube-apiserver, on purpose or for now: only JSON (and
// YAML request bodies).
package rest
