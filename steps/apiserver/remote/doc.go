// Package remote is apiserver.Interface over the network: the same calls
// (Create, Get, List, Update, UpdateStatus, Patch, Bind, Delete, Watch)
// sent as the Kubernetes REST API to `podlab apiserver` (or any
// kube-apiserver) over HTTPS, with client-go's REST client.
//
// This is the step from "every component opens the store" to "every
// component is a client": the scheduler, the controller-manager and the
// kubelets keep talking to apiserver.Interface, and only the process
// behind it changes. The boundary stays; the interface moves to the wire.
//
// # What a call becomes
//
//	Get("pods", "default", "web")        GET    /api/v1/namespaces/default/pods/web
//	List("deployments", "", opts)        GET    /apis/apps/v1/deployments?labelSelector=...
//	Create(pod)                          POST   /api/v1/namespaces/default/pods
//	Update(pod)                          PUT    /api/v1/namespaces/default/pods/web
//	UpdateStatus(pod)                    PUT    /api/v1/namespaces/default/pods/web/status
//	Patch(..., "scale")                  PATCH  /apis/apps/v1/namespaces/default/deployments/web/scale
//	Bind(binding)                        POST   /api/v1/namespaces/default/pods/web/binding
//	Delete(..., {Force: true})           DELETE /api/v1/namespaces/default/pods/web  {"gracePeriodSeconds":0}
//	Watch("pods", "", {ResourceVersion}) GET    /api/v1/pods?watch=true&resourceVersion=...
//
// Objects come back typed (*corev1.Pod, *appsv1.Deployment, ...) with
// apiVersion and kind set, as the in-process client returns them. Errors
// the server answers with a metav1.Status are the same status errors the
// in-process gate returns (test them with k8s.io/apimachinery/pkg/api/errors:
// IsNotFound, IsConflict, IsForbidden, IsInvalid, IsResourceExpired...);
// errors of the transport (no server listening, a certificate the client
// does not trust) name the server and wrap ErrUnreachable.
//
// # Watches
//
// A watch without a resourceVersion ("" or "0") starts from now, as the
// in-process one does: the client asks for sendInitialEvents=false, so the
// server sends no ADDED event per existing object. BOOKMARK events are
// asked for and not delivered: they only move the resourceVersion the
// watch resumes from. When the server ends the stream (a restart, its
// timeout), the watch resumes from the last resourceVersion it saw, so a
// caller sees one unbroken stream. A watch from a compacted revision ends
// with the 410 Expired the server sends as an ERROR event: over the wire
// it is the Watcher's Err (the stream has already begun), where the
// in-process client may return it from Watch itself; callers check both,
// as apiserver.Informer does, and list again.
//
// # When the API server goes away
//
// A component runs longer than any one API server process: it is
// restarted, upgraded, moved. A client made WithReconnect (what the
// long-running scheduler, controller-manager and kubelets use) keeps its
// watches through that, as client-go's reflectors do: a watch that cannot
// be resumed because nothing answers tries again with back-off (800ms
// doubling to 30s, with jitter), then resumes from the last resourceVersion
// it saw, or ends with 410 Expired when the server no longer has that
// revision, and apiserver.Informer lists again. Single calls still fail at
// once with ErrUnreachable; their callers retry as they always do. Its
// notice hears "lost" once when the server stops answering and "back" once
// when it answers again, however many tries failed between. Ping tells
// whether anything answers at all (a one-shot command fails fast with it);
// WaitForServer waits for it with the same back-off.
//
// # Beyond apiserver.Interface
//
// AccessReview and RulesReview ask what kubectl auth can-i asks
// (SelfSubjectAccessReview, SelfSubjectRulesReview). LoadKubeconfig gives
// the rest config of a kubeconfig to adjust before New: its Host (the port
// a server really listens on), Impersonate (kubectl --as), WrapTransport
// (RequestLog narrates each request as kubectl -v=6 does).
//
// Differences from the in-process client: narration of the gate's phases
// happens in the server's process (`podlab apiserver -v`), not in the
// client's.
package remote
