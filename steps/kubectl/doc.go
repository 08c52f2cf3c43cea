// Package kubectl is kubectl's client side: what happens on the user's
// machine before a request leaves and after an answer comes back. It plays
// step 1 and step 2 of the chain that creates a Pod: "kubectl apply: the
// manifest is read and sent to the API server" and "kubectl get: the API
// server reads the object back, kubectl formats it".
//
// kubectl is only a client. It stores nothing and decides nothing: every
// object it shows came from the API server (apiserver.Interface here), and
// every change it makes is a request the API server may refuse. What kubectl
// itself does is the text on both ends:
//
//   - Decode reads a manifest (YAML or JSON, several documents separated by
//     "---", or a kind: List) into typed objects, the way `kubectl apply -f`
//     does. Each document's apiVersion and kind choose the Go type, and the
//     decoding is strict, as kubectl's default --validate=strict asks of the
//     API server: a misspelt field is an error naming the field's path, not a
//     field silently dropped.
//
//   - Printer formats what `kubectl get` shows. The table (NAME READY STATUS
//     RESTARTS AGE for pods) is computed here, client-side, from the objects.
//     Real kubectl asks the API server for the Table format instead
//     (Accept: application/json;as=Table;g=meta.k8s.io;v=v1), and the server
//     runs the very same printing code (kubernetes/pkg/printers); podlab's
//     API server returns objects only, so this package holds those
//     functions. The pod's STATUS column is one of them: it is not a field
//     of the pod but a summary of its phase and its containers' states
//     (ContainerCreating, CrashLoopBackOff, Init:0/1, Terminating).
//
//   - -o yaml and -o json show the object exactly as the API server stored
//     it, server-filled fields included: uid, creationTimestamp, and the
//     resourceVersion, which is the store revision of the object's last
//     write (the etcd revision in Kubernetes) and what an update must send
//     back to prove it is not overwriting a newer change.
//
//   - Describe is `kubectl describe`: a human-oriented report of one object
//     plus the Events that name it. Events are separate objects; kubectl
//     lists them with a field selector on involvedObject and merges them in.
//
//   - Apply is `kubectl apply` once the manifest is read: a three-way
//     strategic merge patch of the last-applied configuration (the
//     annotation kubectl.kubernetes.io/last-applied-configuration), the
//     manifest and the live object, sent as a PATCH; Scale is `kubectl
//     scale`, a merge patch of the scale subresource.
//
// The package never prints on its own: the caller passes an io.Writer. Only
// Apply and Scale talk to the API server, through apiserver.Interface, as
// kubectl talks to kube-apiserver; everything else works on objects the
// caller fetched.
package kubectl
