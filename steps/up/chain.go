package up

// The chain's description (lessons/README.md, "The chain") in English, its
// two chains numbered as it numbers them: 16 steps for a bare pod (kubectl
// run), 18 for a Deployment (kubectl create deployment), whose steps 4 and
// 5 are the controller-manager's and whose steps 6 to 18 are the bare pod's
// 4 to 16.

// PodChain is the chain for a bare pod, step 1 first.
var PodChain = [...]string{
	"The user sends a request to create a pod with the kubectl run command.",
	"The API server receives the request to create the pod and, after authentication, authorization and the admission phase, stores it in etcd.",
	"The API server answers the user that a pod was created, but at this point the pod does not really exist yet.",
	"The scheduler keeps watching the API server through the watch mechanism, finds a new pod that has no node yet, and decides, from its resource requests and the scheduling policies, which worker node the pod goes to.",
	"The scheduler sends its decision back to the API server, which writes the node binding into etcd.",
	"The kubelet of the target node keeps watching the API server through the watch mechanism, and finds a new pod assigned to its node.",
	"The kubelet starts creating the pod.",
	"The kubelet calls the container runtime (docker, containerd or CRI-O) to create the container, and makes sure the container is created inside the pod.",
	"The container runtime finds the image registry and downloads the image.",
	"The container runtime unpacks the downloaded image onto the worker (the image becomes a bundle).",
	"The container runtime uses the OCI runtime (runc, crun, ...) to start the container.",
	"runc sets up the container's namespaces, cgroups, chroot and capabilities.",
	"runc runs the command of the app container.",
	"The kubelet keeps monitoring the pod's running state.",
	"The kubelet reports the pod's status (Running, Failed, ...) to the API server.",
	"The API server keeps storing the pod's latest status in etcd.",
}

// DeploymentChain is the chain for a Deployment, step 1 first.
var DeploymentChain = [...]string{
	"The user sends a request to create a deployment with the kubectl create deploy command.",
	"The API server receives the request to create the deployment and, after authentication, authorization and the admission phase, stores it in etcd.",
	"The API server answers the user that a deployment was created, but at this point no pod really exists yet.",
	"The controller-manager keeps watching the API server through the watch mechanism and finds a new deployment to create; the deployment then creates its own ReplicaSet.",
	"The controller-manager sends what it created back to the API server, which updates etcd.",
	PodChain[3],
	PodChain[4],
	PodChain[5],
	"The kubelet creates a pod.",
	PodChain[7],
	PodChain[8],
	PodChain[9],
	PodChain[10],
	PodChain[11],
	PodChain[12],
	PodChain[13],
	PodChain[14],
	PodChain[15],
}

// Chain is the chain for a bare pod, or for a Deployment.
func Chain(deployment bool) []string {
	if deployment {
		return DeploymentChain[:]
	}
	return PodChain[:]
}

// Step is one step of the chain as Up did it: the description's number and
// sentence, the component that did it, and what happened for real.
type Step struct {
	// N is the description's number of the step (1 to Of); 0 for a note outside
	// the chain (what Up did before step 1 and after the last step).
	N, Of int
	// Sentence is the description's sentence for the step; for a note, its title.
	Sentence string
	// Component is who did it, with the identity it acted as.
	Component string
	// Did says what happened, one line each: the revision written, the
	// node chosen, the bundle path, the container id...
	Did []string
	// Detail is the component's own result, when there is one
	// (*kubelet.PullResult, scheduler.Decision, ...).
	Detail any
}

// podStep maps a bare pod's step number to the chain's: the same for a
// bare pod, two more for a Deployment (whose steps 4 and 5 are the
// controller-manager's).
func podStep(deployment bool, n int) int {
	if deployment && n >= 4 {
		return n + 2
	}
	return n
}
