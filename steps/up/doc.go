// Package up is the whole chain at once: `podlab up`, what `make demo` runs.
// It creates a pod (or a Deployment) through the API server, then has the
// real components, in-process and each as its own user, do their part,
// and reports every step as the chain's description (lessons/README.md)
// numbers it: the description's sentence, the
// component that did it, and what happened for real.
//
// Every component is a client of kube-apiserver over HTTPS, as on a
// cluster and as in the lessons done by hand: the same clients
// (remote.Client, each with its own kubeconfig and so its own client
// certificate), the same server code (rest.NewKubeAPIServer). One chain,
// whether typed by hand or run by up.
//
// # Before step 1
//
// A cluster needs a control plane (apiserver.Init and pki.Ensure, what
// `podlab init` does, when the state directory has none or lacks a part),
// a kube-apiserver (the podlab apiserver that serves the state directory,
// found through its claim on the store, rest.Serving; else up serves the
// store itself, in-process, on 127.0.0.1 and a port the kernel picks,
// claiming it as podlab apiserver does, until Up returns), an image
// registry (unless a
// mirror is given, the demo images of <state>/demo-images, served by
// steps/registry from a goroutine on 127.0.0.1 and a port the kernel
// picks, used as the docker.io mirror), a Node (the kubelet of node-1
// registers it), and components that watch: kube-scheduler, and for a
// Deployment kube-controller-manager, run from goroutines until Up returns.
//
// # A bare pod: the chain's 16 steps
//
//  1. The user sends a request to create a pod with kubectl run: a POST of
//     a Pod with one container, over HTTPS, as the user admin (the client
//     certificate of kubeconfigs/admin.kubeconfig).
//  2. The API server authenticates it (token file), authorizes it (RBAC),
//     admits it (defaults, LimitRanger, PodSecurity, ResourceQuota),
//     validates it, and stores it in etcd (bbolt) at a new revision. The
//     in-process server hands up the gate's phases as it runs them (the
//     lines `podlab apiserver -v` logs); a podlab apiserver logs them.
//  3. It answers 201 Created: the pod exists as an object, Pending, with no
//     node; nothing runs it.
//  4. The scheduler's informer, watching pods, is handed the new pod with
//     no spec.nodeName; a scheduling cycle filters and scores the nodes
//     (scheduler.Result's table) and chooses one.
//  5. It binds the pod (the pods/binding subresource, as
//     system:kube-scheduler): the API server sets spec.nodeName and
//     PodScheduled=True, and stores the pod at the next revision.
//  6. The kubelet of that node watches pods with the field selector
//     spec.nodeName=NODE: the binding makes the pod match, and the watch
//     says ADDED.
//  7. syncPod begins: the kubelet looks at what the node holds of the pod
//     (kubelet.Observe) and plans its stages (kubelet.NextStage). Steps 8
//     to 13 are then the kubelet's own syncPod (Kubelet.SyncPod, the sync
//     loop podlab kubelet runs), each stage rendered by kubelet.WriteReport,
//     as podlab kubelet prints it; up adds what the registry served and
//     what it reads back from the kernel (its Config.OnStage is called
//     between the stages, so step 12 is read before runc start). The
//     node's kubelet is a CRI client of the node's runtime, which up starts
//     (Options.RuntimeCommand) when nothing answers on the node's socket,
//     or restarts when the runtime there pulls through another registry
//     (an earlier up's, stopped with it).
//  8. RunPodSandbox: the pod's network, IPC and UTS namespaces, pinned by
//     bind mounts; every container of the pod joins them.
//  9. PullImage: the kubelet asks the runtime over CRI (ImageStatus, then
//     PullImage as the pull policy says); the runtime fetches the manifest,
//     config and layers from
//     the registry (its request log shows each GET) into the node's content
//     store.
//  10. The layers are unpacked, in order and verified, into the container's
//     bundle: <node>/bundles/<pod-uid>/<container>/rootfs.
//  11. config.json is written from the PodSpec and the image config, then
//     runc create runs under podlab's shim.
//  12. What runc create did, read back from the kernel while its process
//     waits on the exec fifo: /proc/<pid>/ns/* (new pid, mount and cgroup
//     namespaces; the pod's net, ipc and uts, the same inodes as the
//     sandbox's bind mounts), /proc/<pid>/root (the rootfs: pivot_root),
//     /proc/<pid>/cgroup, and the capabilities of /proc/<pid>/status.
//  13. runc start opens the exec fifo: runc init execs the app, pid 1 of its
//     PID namespace.
//  14. The kubelet watches the container (the PLEG's relist) and runc ps
//     lists its processes.
//  15. It reports the pod's status (pods/status, as system:node:NODE):
//     after the sandbox, the pull and the create (Pending,
//     ContainerCreating), after the start (Running, Ready).
//  16. The API server stored each of those as a revision of the pod: a
//     watch from before step 1 replays them all, the latest being what
//     `podlab get pod` reads.
//
// # A Deployment: the chain's 18 steps
//
// Steps 1 to 3 are the same for a Deployment. Then the controller-manager
// (step 4) is handed the Deployment by its informers: the Deployment
// controller creates a ReplicaSet named after the pod template's hash,
// whose controller creates the pod; (step 5) each object is a write
// through the API server, as system:kube-controller-manager, stored at its
// revision. Steps 6 to 18 are the bare pod's 4 to 16, for that pod.
//
// # After the last step
//
// GetInPod sends an HTTP GET to the container's port from inside the
// pod's network namespace, as curl run in the pod would (nginx's image has
// none): a goroutine locks its OS thread and setns(2)s into
// <node>/netns/<pod-uid>. The container's log follows, then
// what the in-process kube-apiserver answered, client by client. The pod
// keeps running under its shim; the registry, the scheduler, the
// controller-manager and the in-process kube-apiserver stop when Up
// returns.
//
// Up never prints: every step goes to Options.OnStep as it is done.
//
// The package also holds the commands around `up`: Exec runs a command in
// a pod's container (kubectl exec: pods/exec authorized, then runc exec in
// the node's runtime), and Reset removes everything podlab made under a
// state directory.
package up
