// Package admission is the part of podlab's API server that decides whether a
// write may happen and what the stored object looks like: defaulting, field
// validation and the admission plugins of kube-apiserver, reimplemented over
// the real k8s.io/api types with kube-apiserver's own error texts.
//
// # Where admission sits
//
// Every write to kube-apiserver goes through the same chain:
//
//  1. Authentication: who is asking (a token, a client certificate).
//  2. Authorization: may this user do this verb on this resource (RBAC).
//  3. Decoding and defaulting: the object is read into its Go type and
//     SetDefaults_* fill what the client left empty (restartPolicy: Always,
//     a Deployment's 25% maxSurge, ...). DefaultPod, DefaultDeployment and
//     friends, or Default for any kind, do that here.
//  4. Mutating admission: plugins that may change the object. It opens
//     with NamespaceLifecycle, first in kube-apiserver's plugin order, which
//     changes nothing but refuses new objects in a missing or terminating
//     namespace (NamespaceLifecycle). ServiceAccount sets
//     serviceAccountName and Priority sets spec.priority (both folded into
//     DefaultPod, and its notes say which plugin did what),
//     DefaultTolerationSeconds adds the not-ready and unreachable
//     NoExecute tolerations for the API server's configured seconds
//     (DefaultTolerationSeconds, 300 unless set shorter), and
//     LimitRanger fills resources from the namespace's LimitRanges
//     (LimitRangerMutate). NodeRestriction changes nothing but refuses a
//     kubelet's writes to what is not its own node's (NodeRestriction).
//     RuntimeClass refuses a pod naming a RuntimeClass that does not exist
//     and copies the class's overhead and scheduling constraints onto the
//     pod (RuntimeClassAdmit).
//     Then the registry strategy prepares the object (PrepareForCreate): a
//     new object's status is the API server's, not the client's, so
//     whatever status a client sent is dropped (a pod is Pending, its QoS
//     class computed). podlab runs it before the defaults, which then set
//     that first status.
//  5. Validation of the object's fields: names, enums, requests <= limits,
//     a Deployment's selector matching its template, paths that stay
//     inside their volume (subPath) or never climb (hostPath), ids in
//     range, seccomp and AppArmor profiles, sysctl names (Validate, and
//     ValidateUpdate for an update, which also knows what is immutable,
//     such as a pod's AppArmor annotations).
//  6. Validating admission: plugins that may only say yes or no.
//     LimitRanger's min/max checks (LimitRangerValidate),
//     ResourceQuota (would this pod exceed the namespace's quota?),
//     PodSecurity (does the pod meet the namespace's Pod Security Standard?)
//     and RuntimeClass (is spec.overhead the class's? RuntimeClassValidate).
//  7. Storage: only now is the object written to etcd.
//
// A rejection at any step stores nothing: the client gets a Status error
// (403 Forbidden from admission, 422 Invalid from validation, 404 when the
// namespace is missing) and etcd never sees the object.
//
// A pod create therefore runs:
//
//	NamespaceLifecycle -> PrepareForCreate -> DefaultPod -> DefaultTolerationSeconds -> LimitRangerMutate ->
//	NodeRestriction -> RuntimeClassAdmit -> Validate -> LimitRangerValidate -> (*PodSecurityAdmission).Admit ->
//	RuntimeClassValidate -> ResourceQuota
//
// Each function returns notes, one human sentence per decision or change
// ("set spec.restartPolicy=Always", `quota "compute": requests.cpu 600m of 1
// used after this pod`), so the API server can narrate the chain with -v.
//
// # What the caller provides
//
// The package never touches the store. The API server passes what a plugin
// needs — the namespace object, the namespace's LimitRanges, ResourceQuotas
// and pods — read in the same store transaction as the write. ResourceQuota
// returns the quotas with their new status, to be written in that same
// transaction: that is how two creates racing for the last unit of quota
// cannot both succeed (kube-apiserver gets the same effect from an optimistic
// compare-and-swap on the quota object, retrying on conflict).
//
// Everything here is pure logic over k8s.io/api types; nothing is read from
// disk or the network, and nothing is kept between calls except the Pod
// Security evaluator, built once by NewPodSecurity.
package admission
