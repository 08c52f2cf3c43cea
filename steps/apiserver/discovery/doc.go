// Package discovery is what kube-apiserver serves besides the objects
// themselves: how a client finds out what the server serves, the schema of
// every kind, the server's version and its health.
//
// kubectl knows no resource by heart. `kubectl get deploy` works because
// before the GET, kubectl asks the server what "deploy" means:
//
//  1. Discovery. GET /api and /apis with
//     Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList
//     returns, in two requests, every group, version and resource: its
//     plural name (deployments), singular, kind, whether it is namespaced,
//     its verbs, short names (deploy), categories (`kubectl get all` is the
//     resources in category "all") and subresources (deployments/scale).
//     This is aggregated discovery. A server that does not know it answers
//     plain JSON, and the client falls back to the older form: /api
//     (APIVersions), /apis (APIGroupList), then one APIResourceList per
//     group version (/api/v1, /apis/apps/v1). kubectl caches the answer
//     under ~/.kube/cache/discovery and maps "deploy" to
//     /apis/apps/v1/namespaces/NS/deployments with it (a RESTMapper).
//
//  2. OpenAPI. GET /openapi/v3 returns an index: one URL per group
//     version (/openapi/v3/apis/apps/v1?hash=...), the hash changing when
//     the document does so that clients cache it for good. Each document
//     is the schema of that group version's kinds and the parameters of
//     its paths. kubectl reads it for `kubectl explain`, for the strategic
//     merge patch of `kubectl apply` (which lists merge by which key), and
//     to see whether the server takes the fieldValidation parameter: if so
//     kubectl leaves validation to the server (fieldValidation=Strict).
//     /openapi/v2 is the older single document (swagger.json, also as
//     protobuf), which kubectl reads only where v3 is missing.
//
// The documents are not written here. Kubernetes' own repository commits
// what a real kube-apiserver serves (api/discovery and api/openapi-spec in
// the k8s.io/kubernetes module), and `go run ./steps/apiserver/discovery/gen`
// filters them to the resources podlab serves (apiserver.Resources and
// apiserver.Subresources) into data/, embedded into the binary: the lists, short
// names, categories, verbs, storage version hashes and schemas are the real
// server's, byte for byte. A test checks that the embedded documents and
// podlab's resource table agree, so neither drifts from the other.
//
// Handler serves all of it, plus /version (the release of the documents,
// v1.37.2+podlab) and /healthz, /livez, /readyz (?verbose lists each check
// as kube-apiserver does). The other half of what kubectl needs from a
// server besides the objects, the Table `kubectl get` asks for, is package
// steps/apiserver/printers.
//
// Mount the Handler where the resource handlers do not answer: for paths
// below /api/v1/ and /apis/GROUP/VERSION/ it answers kube's 404 Status.
package discovery
