package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/kubelet"
	kubeletserver "github.com/podlab/podlab/steps/kubelet/server"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

var kubeletCommand = &cli.Command{
	Name:      "kubelet",
	Usage:     "run a node's kubelet: register the Node, run the pods bound to it, report their status (steps 6-8 and 14-16)",
	ArgsUsage: "[--node NAME] [--once | --next | --pod NAME --stage STAGE] [--registry-mirror URL]",
	Description: `The kubelet is the agent on every node. It is a client of the API server like
any other, over HTTPS, as the user system:node:NAME (group system:nodes),
and it is the only component that makes things happen on the machine. Its
kubeconfig (--kubeconfig, default <state-dir>/kubeconfigs/NAME.kubeconfig)
names the API server and carries the client certificate that says who it
is; it never opens the store, so "podlab apiserver" must run (lesson 02). A
node without a kubeconfig gets one now: the lab's CA signs its client
certificate, as TLS bootstrapping gives a new kubelet one. The Node
authorizer and the NodeRestriction admission plugin let it read and write
only its own Node and the pods bound to it: run with another node's
identity (--as system:node:node-2 uses node-2's kubeconfig), it is refused.

With --once, --next or --stage it fails at once when no API server
answers, and says how to start one. Running, it waits for the API server
with client-go's back-off (800ms doubling to 30s), saying so once, and
when the API server goes away later its watch retries the same way and
resumes where it was (or lists again, if the API server answers 410 Gone).

REGISTRATION. It creates its Node object with what it measures here: cpu
(the CPUs it may use), memory (MemTotal of /proc/meminfo), ephemeral-storage
(the state directory's file system) and pods (110); allocatable is that less
the default eviction thresholds (memory 100Mi, 10% of the disk). nodeInfo
says the kernel, the OS image, kubeletVersion and containerRuntimeVersion
(NAME://VERSION from the runtime's CRI Version: podlab://0.15.0, or
containerd://1.6.20); status.images lists the runtime's images (CRI
ListImages), which the scheduler's ImageLocality reads. The Ready condition
(KubeletReady, "kubelet is posting ready status") gets a new
lastHeartbeatTime every 10 seconds; a runtime that does not answer CRI
Status makes it False (KubeletNotReady, "container runtime is down"). A
Node made by "podlab node add" keeps its declared capacity.

RUNTIME. The kubelet is a CRI client: it reaches its container runtime
over gRPC on --container-runtime-endpoint (and --image-service-endpoint),
default the node's own socket unix://<state-dir>/nodes/NAME/cri.sock. When
nothing answers there it starts the node's runtime, "podlab runtime --node
NAME" (with its --runtime, --runtime-handler, --registry-mirror and
--insecure; a mirror on 127.0.0.1 is not passed into a joined node's
machine, whose loopback is not the host's: its runtime pulls as
<state-dir>/certs.d names), in a session of its own that outlives the kubelet, as
containerd outlives a kubelet restart: its log is nodes/NAME/runtime.log,
podlab reset stops it. Another endpoint nothing answers on is an error
saying how to start a runtime there. With -v every CRI call is printed
with its request and response, as crictl would show them. Everything of
the node's and of its pods goes over CRI: the kubelet finds a pod's
sandboxes and containers by the labels it put on them
(io.kubernetes.pod.uid), and keeps nothing of the runtime's itself.

LEASE. Running, it also keeps the Lease kube-node-lease/NAME (holder NAME,
leaseDurationSeconds 40, owned by its Node) and renews its renewTime every
quarter of that, 10 seconds: a small write that says "this node is alive"
(kubectl get leases -n kube-node-lease). The controller-manager's node
lifecycle controller marks a node whose Lease stopped Ready=Unknown and
taints it node.kubernetes.io/unreachable. --node-lease-duration-seconds
sets the duration (the real kubelet's flag).

WATCH (step 6). An informer lists and watches the pods with the field
selector spec.nodeName=NAME: the scheduler's Binding is how a pod reaches
its kubelet.

SYNC (steps 7-13). For each pod, what the kubelet's syncPod asks of its CRI
runtime, each stage the kubelet's own preparations, then CRI calls:
  sandbox   first the pod's cgroup in its QoS tier, as the kubelet's
            cgroupfs driver lays them out: kubepods/pod<uid> (Guaranteed),
            kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid>, with
            cpu.shares from the requests (besteffort: 2; v2: cpu.weight) and
            the pod's memory and cpu limits when every container has one;
            for hostUsers: false a range of 65,536 host ids of the pod's own
            (recorded in <node>/pods/<uid>/userns); the node's pod CIDR
            handed to the runtime (UpdateRuntimeConfig) once the node has
            one (podlab controller-manager --allocate-node-cidrs). Then
            RunPodSandbox with that cgroup as cgroup_parent: the runtime
            makes and pins the pod's network, IPC and UTS namespaces (and
            the user namespace that owns them), attaches the network through
            CNI (a veth eth0 on the node's bridge, an IP from the pod CIDR,
            hostPorts by portmap) and answers the IP in PodSandboxStatus: it
            becomes status.podIP. A failure is the event
            FailedCreatePodSandBox with the runtime's error.
  pull      ImageStatus, then PullImage as imagePullPolicy says (Always,
            IfNotPresent, Never), into the runtime's content store. Events
            Pulling, Pulled.
  create    the kubelet resolves env (downward API, $(VAR)), makes the
            volumes (emptyDir, subPath bind mounts), works out oom_score_adj
            from the QoS class (Guaranteed -997, BestEffort 1000, Burstable
            3..999), and sends the ContainerConfig: CreateContainer. The
            runtime unpacks the image into bundles/<sandbox-id>/<container-id>,
            writes its config.json and has a shim run runc create; its log
            goes to <node>/logs/pods/<ns>_<pod>_<uid>/<container>/<N>.log.
            Event Created. (Unpack and spec are no kubelet stages: podlab
            unpack and podlab spec do them by hand, outside any pod.)
  start     StartContainer: runc start. Event Started.

STATUS (steps 14-16). Pending with ContainerCreating, then Running with the
container's containerID (<runtime name>://ID, the name the runtime's CRI
Version answers: podlab://ID, containerd://ID), imageID, startedAt and the
conditions PodReadyToStartContainers, Initialized, ContainersReady and
Ready. A failed pull is ErrImagePull, then ImagePullBackOff (10s, doubling
to 5 minutes); an exit is restarted as restartPolicy says, with
CrashLoopBackOff in between (10s doubling to 5 minutes); a pod ends
Succeeded or Failed.

SECCOMP. securityContext.seccompProfile (the container's, else the pod's)
picks the container's system call filter: RuntimeDefault is containerd's
default profile (mount, unshare, keyctl, bpf... fail with EPERM), Localhost
the profile file localhostProfile names under <state-dir>/nodes/NAME/seccomp/
(a real kubelet's /var/lib/kubelet/seccomp), Unconfined none. With neither
set, a container runs unconfined, as in Kubernetes, unless --seccomp-default
makes RuntimeDefault the default (the kubelet's flag of the same name).

SYSCTLS. A pod's securityContext.sysctls are admitted as the kubelet admits
them: the safe ones (namespaced and isolated: net.ipv4.ip_unprivileged_port_start,
net.ipv4.ip_local_port_range, kernel.shm_rmid_forced, ...) and those
--allowed-unsafe-sysctls allows (names or patterns ending in *, namespaced
ones only: net.core.somaxconn, net.core.*, kernel.msg*). A pod setting any
other (kernel.sysrq, vm.overcommit_memory: the whole node's) is rejected:
it ends Failed with reason SysctlForbidden and a Warning event "forbidden
sysctl: ...", and nothing of it is made. The allowed ones go to the runtime
in the sandbox config; runc sets them in the pod's namespaces (config.json's
linux.sysctl), where the container reads them in /proc/sys.

RUNTIMECLASS. A pod's spec.runtimeClassName names a RuntimeClass; the
kubelet reads it from the API server (one that does not exist is a
FailedCreatePodSandBox event) and hands its handler, and nothing else of
the pod, to the runtime, as CRI's RunPodSandboxRequest.runtime_handler. The
runtime knows these handlers, as containerd's runtimes table: runc (the
default, for a pod with no RuntimeClass), runsc (gVisor, Debian's runsc)
and crun (Debian's crun; it refuses hosts with hybrid cgroups, and the
event says so); --runtime-handler NAME=PATH adds one or points one
elsewhere. An unknown handler fails RunPodSandbox with containerd's "no
runtime for NAME is configured", and nothing is made. The runtime keeps
the handler with the sandbox (PodSandboxStatus.runtime_handler); every
container of the pod runs with it, under its own --root.

DELETION. A pod with a deletionTimestamp is stopped (event Killing;
StopContainer with the grace period: the runtime sends SIGTERM, waits,
then SIGKILL; then StopPodSandbox), removed (RemoveContainer,
RemovePodSandbox; then the kubelet's pod cgroup, volumes, logs and user
namespace range), then deleted with a grace period of 0.

ITS OWN API (--port, --address). While it runs, the kubelet serves HTTPS
on 127.0.0.1:10250 (another free port when 10250 is taken, as on a machine
with many nodes), with its serving certificate <state-dir>/pki/kubelet-NAME.crt,
and publishes the endpoint in its Node: status.addresses (InternalIP, Hostname)
and status.daemonEndpoints.kubeletEndpoint.port. That is where the API
server sends kubectl logs (/containerLogs/NS/POD/CONTAINER) and kubectl exec
(/exec/NS/POD/CONTAINER). A caller needs a client certificate the cluster CA
signed (else 401 Unauthorized), and the kubelet asks the API server, with a
SubjectAccessReview sent with its own credentials
(<state-dir>/kubeconfigs/NAME.kubeconfig), whether that user may get (GET)
or create (POST) nodes/proxy on its Node (else 403 Forbidden). Each request
is one line of the kubelet's output.

A node that joined the lab network (podlab node join NAME) is a machine of
its own: its kubelet re-executes itself inside the node's network namespace
(same pid) before it does anything, reaches the API server at the lab
gateway (its kubeconfig says so), reports its lab address as InternalIP and
serves its API there (--address defaults to it).

Every node of podlab's cluster is on this host; each node's runtime keeps
its files in <state-dir>/nodes/NAME/ (content/, bundles/, runc/, netns/,
ipcns/, utsns/, pods/, logs/), so nodes share nothing but the API server.

  --once    register, sync every pod once, watch what started for a second,
            and exit
  --next    for each pod of the node, the stage that comes next and the
            command that does it by hand
  --pod NAME --stage STAGE
            run one stage (sandbox, pull, create, start, kill, remove) for one
            pod, exactly as the sync loop would

Without them it runs until Ctrl-C. -v prints every CRI call.

Its requests go out at most 50 a second after a burst of 100
(--kube-api-qps, --kube-api-burst: the kubelet's kubeAPIQPS and
kubeAPIBurst), so that the status of many pods starting at once is not
held back by client-go's default of 5 a second.

Examples:
  podlab kubelet --once
  podlab kubelet --next
  podlab kubelet --pod web --stage sandbox
  podlab kubelet --node node-2 --registry-mirror http://127.0.0.1:5001`,
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "node", Value: apiserver.HostNode, Usage: "the node this kubelet runs"},
		&cli.BoolFlag{Name: "once", Usage: "sync every pod of the node once, then exit"},
		&cli.BoolFlag{Name: "next", Usage: "print the next stage of each pod of the node, and the command that does it"},
		&cli.StringFlag{Name: "pod", Usage: "with --stage: the pod to run one stage for"},
		&cli.StringFlag{Name: "stage", Usage: "with --pod: sandbox, pull, create, start, kill or remove"},
		&cli.StringFlag{Name: "container", Aliases: []string{"c"}, Usage: "with --stage: the container (default: the one whose stage it is)"},
		namespaceFlag(),
		&cli.StringFlag{
			Name:    "registry-mirror",
			Usage:   "registry URL to pull docker.io images from (e.g. http://127.0.0.1:5001)",
			EnvVars: []string{pull.MirrorEnv},
		},
		&cli.BoolFlag{Name: "insecure", Usage: "allow plain HTTP and unverified TLS to registries"},
		&cli.StringFlag{Name: "runtime", Usage: "the OCI runtime binary; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH"},
		&cli.StringSliceFlag{Name: "runtime-handler", Usage: "NAME=PATH: a runtime handler (a RuntimeClass's handler) and its OCI runtime binary, repeatable; runc, runsc and crun are known"},
		&cli.StringFlag{Name: "container-runtime-endpoint", Usage: "the CRI runtime's socket, unix:///PATH (default the node's own, unix://<state-dir>/nodes/NODE/cri.sock, where podlab runtime is started when nothing answers)"},
		&cli.StringFlag{Name: "image-service-endpoint", Usage: "the CRI image service's socket (default: the runtime's)"},
		&cli.IntFlag{Name: "port", Value: kubeletserver.DefaultPort, Usage: "the port of the kubelet's HTTPS API (logs, exec); 0: any free port"},
		&cli.StringFlag{Name: "address", Value: "127.0.0.1", Usage: "the address the kubelet's API listens on, and the node's InternalIP"},
		&cli.IntFlag{Name: "node-lease-duration-seconds", Value: int(kubelet.DefaultNodeLeaseDuration / time.Second), Usage: "the node Lease's duration; it is renewed every quarter of it"},
		&cli.BoolFlag{Name: "seccomp-default", Usage: "give containers that set no seccompProfile the runtime's default filter (RuntimeDefault) instead of none"},
		&cli.StringSliceFlag{Name: "allowed-unsafe-sysctls", Usage: "namespaced sysctls, or patterns ending in *, pods may set besides the safe ones (comma-separated or repeated: net.core.somaxconn,kernel.msg*)"},
		kubeconfigFlag("NODE"),
	}, kubeAPIRateFlags(50, 100)...),
	Action: func(c *cli.Context) error {
		m, err := enterMachine(c)
		if err != nil {
			return err
		}
		var api *kubeletAPI
		if !c.Bool("next") && !c.Bool("once") && c.String("pod") == "" && c.String("stage") == "" {
			// A new node's certificates first: bootstrapping issues its
			// serving certificate with its client one.
			if err := nodeKubeconfig(c, c.String("node")); err != nil {
				return err
			}
			var err error
			if api, err = listenKubeletAPI(c, m); err != nil {
				return err
			}
			defer api.Close()
		}
		// What the API server alone can refuse is refused before the
		// kubelet connects to its runtime (which may start one).
		var stage kubelet.StageName
		if c.String("pod") != "" || c.String("stage") != "" {
			if c.String("pod") == "" || c.String("stage") == "" {
				return errors.New("--pod and --stage go together: podlab kubelet --pod web --stage pull")
			}
			if stage, err = kubelet.ParseStage(c.String("stage")); err != nil {
				return err
			}
		}
		node := c.String("node")
		client, err := kubeletClient(c)
		if err != nil {
			return err
		}
		var pod *corev1.Pod
		if stage != "" {
			obj, err := client.Get(c.Context, "pods", namespaceOf(c), c.String("pod"))
			if apierrors.IsForbidden(err) {
				return fmt.Errorf("%w\n(the kubelet of node %s may read only the pods bound to it: is pod %s there and scheduled to %s? podlab get pod %s -o wide)",
					err, node, c.String("pod"), node, c.String("pod"))
			}
			if err != nil {
				return err
			}
			pod = obj.(*corev1.Pod)
		}
		k, done, err := newKubelet(c, node, client, api.endpoint())
		if err != nil {
			return err
		}
		defer done()
		w := c.App.Writer
		switch {
		case c.Bool("next"):
			return printNext(c.Context, w, k)
		case stage != "":
			return runStageOf(c, k, pod, stage)
		case c.Bool("once"):
			fmt.Fprintf(w, "kubelet %s (as %s), once: node directory %s\n", k.Node(), kubeletUser(c), k.Layout().Dir)
			return k.SyncOnce(c.Context)
		}
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		fmt.Fprintf(w, "kubelet %s (as %s): node directory %s; watching pods with spec.nodeName=%s. Ctrl-C stops it.\n",
			k.Node(), kubeletUser(c), k.Layout().Dir, k.Node())
		apiDone, err := api.serve(ctx, c, k)
		if err != nil {
			return err
		}
		err = k.Run(ctx)
		stop()
		if aerr := apiDone(); err == nil {
			err = aerr
		}
		return err
	},
}

// enterMachine runs the kubelet of a joined node inside its machine: it
// re-executes this very command there (machine.Exec: same pid, every
// thread in the node's network namespace), before anything is started.
// Back in it, or for a node that never joined, it returns the machine (nil
// for none) and the kubelet goes on.
func enterMachine(c *cli.Context) (*machine.Machine, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return nil, err
	}
	if pki.CheckNodeName(c.String("node")) != nil {
		return nil, nil // not a node the lab could have joined: the kubelet says what is wrong
	}
	m, err := machine.Load(l.Node(c.String("node")))
	if errors.Is(err, machine.ErrNotJoined) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	in, err := machine.Inside(m.Netns)
	if err != nil {
		return nil, fmt.Errorf("the machine of node %s: %w (podlab node leave %s, then join again)", m.Node, err, m.Node)
	}
	if in {
		return &m, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.App.Writer, "node %s is a machine of its own: the kubelet enters its network namespace %s (InternalIP %s)\n", m.Node, m.Netns, m.IP())
	return nil, machine.Exec(m.Netns, exe, os.Args, os.Environ())
}

// kubeletUser is who the kubelet acts as: system:node:NODE, unless --as
// or --token says otherwise (and then the API server's Node authorizer
// refuses it the node's objects, unless that identity is the node's).
func kubeletUser(c *cli.Context) string {
	switch {
	case c.String("as") != "":
		return c.String("as")
	case c.String("token") != "":
		return "the user of --token"
	}
	return "system:node:" + c.String("node")
}

// kubeletClient is the API server client of the kubelet of --node, a
// client of `podlab apiserver` with the node's kubeconfig (nodeKubeconfig).
func kubeletClient(c *cli.Context) (apiserver.Interface, error) {
	node := c.String("node")
	if err := nodeKubeconfig(c, node); err != nil {
		return nil, err
	}
	return componentClient(c, node, !c.Bool("once") && !c.Bool("next") && c.String("stage") == "")
}

// nodeKubeconfig makes sure node has a kubeconfig when the kubelet will
// use the state directory's: a node `podlab init` or `podlab node add` did
// not make gets its client certificate (CN=system:node:NODE,
// O=system:nodes) signed by the lab's CA now, as TLS bootstrapping gives a
// new kubelet one.
func nodeKubeconfig(c *cli.Context, node string) error {
	if c.String("kubeconfig") != "" || c.String("as") != "" || c.String("token") != "" {
		return nil
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	l := statedir.Layout{Dir: dir}
	if _, err := os.Stat(l.Kubeconfig(node)); err == nil {
		return nil
	}
	if _, err := pki.IssueNode(pki.Options{Layout: l}, pki.Node{Name: node, Hosts: pki.MachineHosts()}); err != nil {
		return fmt.Errorf("giving the kubelet of node %s its client certificate: %w", node, err)
	}
	fmt.Fprintf(c.App.Writer, "bootstrap: the lab CA signed %s's client certificate (CN=%s%s, O=%s) into %s, as TLS bootstrapping gives a new kubelet one\n",
		node, pki.NodeUserPrefix, node, pki.GroupNodes, l.Kubeconfig(node))
	return nil
}

// newKubelet sets up node's kubelet, acting through client, with the
// command's flags where it has them (--runtime, --registry-mirror,
// --insecure, --debug), connected to its runtime (connectRuntime). Call
// close when done with it.
func newKubelet(c *cli.Context, node string, client apiserver.Interface, ep kubeletEndpoint) (k *kubelet.Kubelet, close func(), err error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, nil, err
	}
	bin, err := runc.FindRuntime(c.String("runtime"))
	if err != nil {
		return nil, nil, err
	}
	// the runtime's handlers, checked before it is started with them
	if _, err := runtimeHandlers(bin, c.StringSlice("runtime-handler")); err != nil {
		return nil, nil, err
	}
	w := c.App.Writer
	mirror := c.String("registry-mirror")
	if mirror == "" {
		mirror = os.Getenv(pull.MirrorEnv)
	}
	mirror = machineMirror(w, statedir.Layout{Dir: dir}, node, mirror)
	conn, err := connectRuntime(c, dir, node, bin, mirror)
	if err != nil {
		return nil, nil, err
	}
	cfg := kubelet.Config{
		Node:     node,
		StateDir: dir,
		Client:   client,
		CRI:      conn.Client,
		// Only the kubelet command has the flag; the stage commands
		// (podlab spec --pod) run with Kubernetes' default.
		SeccompDefault:       c.Bool("seccomp-default"),
		AllowedUnsafeSysctls: c.StringSlice("allowed-unsafe-sysctls"),
		Address:              ep.Address,
		Port:                 ep.Port,
		OnStage:              func(r kubelet.Report) { kubelet.WriteReport(w, r) },
		OnNode:               func(r *kubelet.NodeResult, err error) { printNodeResult(w, r, err) },
		OnLease:              func(r *kubelet.LeaseResult, err error) { printLeaseResult(w, r, err) },
		// Only the kubelet command has the flag (0 elsewhere: the default).
		NodeLeaseDuration: time.Duration(c.Int("node-lease-duration-seconds")) * time.Second,
	}
	if k, err = kubelet.New(cfg); err != nil {
		conn.Client.Close()
		return nil, nil, err
	}
	return k, func() { conn.Client.Close() }, nil
}

// machineMirror is the registry mirror node's runtime is started with:
// mirror, but none for a node that is a machine of its own (podlab node
// join) when mirror is on a loopback address, saying so. Its runtime runs
// inside the machine, where 127.0.0.1 is the machine's own loopback, not
// the host's, which PODLAB_REGISTRY_MIRROR (set for the host's kubelet in
// lesson 01) names: the runtime then pulls as <state-dir>/certs.d names,
// where podlab registry serve --addr GATEWAY:PORT writes the gateway's
// address.
func machineMirror(w io.Writer, l statedir.Layout, node, mirror string) string {
	u, err := url.Parse(mirror)
	if mirror == "" || err != nil {
		return mirror
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return mirror
	}
	m, err := machine.Load(l.Node(node))
	if err != nil {
		return mirror
	}
	fmt.Fprintf(w, "registry mirror: %s is not passed on: node %s is a machine of its own, whose loopback is not the host's; its runtime pulls as %s names (podlab registry serve --addr %s:PORT names itself there)\n",
		mirror, node, pull.HostsFile(l.CertsDir(), "docker.io"), m.Gateway)
	return ""
}

// connectRuntime connects node's kubelet to its container runtime, at
// --container-runtime-endpoint and --image-service-endpoint (default the
// node's own socket, where nothing answering means `podlab runtime --node
// NODE` is started, with the kubelet's --runtime, --runtime-handler,
// --registry-mirror and --insecure, as systemd starts containerd.service
// before kubelet.service). With -v each CRI call is printed with its
// request and response.
func connectRuntime(c *cli.Context, dir, node, bin, mirror string) (*kubelet.RuntimeConnected, error) {
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return nil, fmt.Errorf("node name %q: %s", node, errs[0])
	}
	l, err := statedir.New(dir)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	start := []string{exe, "--state-dir", dir, "runtime", "--node", node, "--runtime", bin}
	for _, h := range c.StringSlice("runtime-handler") {
		start = append(start, "--runtime-handler", h)
	}
	if mirror != "" {
		start = append(start, "--registry-mirror", mirror)
	}
	if c.Bool("insecure") {
		start = append(start, "--insecure")
	}
	w := c.App.Writer
	rc := kubelet.RuntimeConnection{Node: l.Node(node), Start: start,
		RuntimeEndpoint: c.String("container-runtime-endpoint"), ImageEndpoint: c.String("image-service-endpoint")}
	if c.Bool("v") {
		rc.Log = w
	}
	conn, err := kubelet.ConnectRuntime(c.Context, rc)
	if err != nil {
		return nil, err
	}
	endpoint := conn.Client.RuntimeEndpoint
	if conn.Started != nil {
		fmt.Fprintf(w, "runtime: nothing answered on %s: started node %s's runtime (pid %d, its log %s): %s\n",
			endpoint, node, conn.Started.Pid, rc.Node.RuntimeLog(), conn.Version)
	} else if c.Bool("v") || endpoint != kubelet.DefaultRuntimeEndpoint(rc.Node) {
		fmt.Fprintf(w, "runtime: %s on %s\n", conn.Version, endpoint)
	}
	return conn, nil
}

// runPodStage runs one stage of the pod --pod names (in -n), on the node
// its spec.nodeName says, as that node's kubelet, and prints it with what
// comes next: what `podlab pull --pod NAME` and `podlab runc
// create|start|kill|delete --pod NAME` do. It reads -c/--container,
// --registry-mirror, --insecure and --runtime where the command has them.
// `podlab unpack|spec --pod NAME` have no kubelet stage: ParseStage's
// error says so, naming --stage create.
func runPodStage(c *cli.Context, stage kubelet.StageName) error {
	if _, err := kubelet.ParseStage(string(stage)); err != nil {
		return fmt.Errorf("%s --pod %s: %w", c.Command.Name, c.String("pod"), err)
	}
	admin, err := componentClient(c, "admin", false)
	if err != nil {
		return err
	}
	obj, err := admin.Get(c.Context, "pods", namespaceOf(c), c.String("pod"))
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	node := pod.Spec.NodeName
	if node == "" {
		return fmt.Errorf("%w: pod %s is not scheduled yet: no kubelet runs it (run podlab scheduler --once)", kubelet.ErrNotOnThisNode, pod.Name)
	}
	if err := nodeKubeconfig(c, node); err != nil {
		return err
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	client, err := remote.FromKubeconfig(statedir.Layout{Dir: dir}.Kubeconfig(node))
	if err != nil {
		return fmt.Errorf("acting as node %s's kubelet: %w", node, err)
	}
	k, done, err := newKubelet(c, node, client, kubeletEndpoint{})
	if err != nil {
		return err
	}
	defer done()
	if stage == kubelet.StagePull {
		fmt.Fprintf(c.App.Writer, "kubelet of %s: asks its runtime on %s over CRI: ImageStatus, then PullImage as imagePullPolicy says (podlab -v pull --pod %s shows each call)\n",
			node, k.ImageEndpoint(), pod.Name)
	}
	return runStageOf(c, k, pod, stage)
}

// runStageOf runs stage for pod with k, as the sync loop would, and prints
// it and the stage that comes next.
func runStageOf(c *cli.Context, k *kubelet.Kubelet, pod *corev1.Pod, stage kubelet.StageName) error {
	res, err := k.RunStage(c.Context, pod, stage, c.String("container"))
	if res != nil {
		kubelet.WriteReport(c.App.Writer, kubelet.Report{Pod: pod, Stage: kubelet.Stage{Name: stage, Container: c.String("container")}, Result: res, Err: err})
	}
	if err != nil {
		return err
	}
	if p, err := k.Pod(c.Context, pod.Namespace, pod.Name); err == nil {
		if st, err := k.Observe(c.Context, p); err == nil {
			printNextStage(c.App.Writer, k, p, kubelet.NextStage(p, st))
		}
	}
	return nil
}

// printNext prints, for each pod of the node, its next stage and the
// command that does it by hand.
func printNext(ctx context.Context, w io.Writer, k *kubelet.Kubelet) error {
	pods, err := k.Pods(ctx)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		fmt.Fprintf(w, "no pod is bound to node %s: create one (podlab run web --image ...) and schedule it (podlab scheduler --once)\n", k.Node())
		return nil
	}
	for _, p := range pods {
		st, err := k.Observe(ctx, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "pod %s/%s (uid %s): phase %s\n", p.Namespace, p.Name, p.UID, p.Status.Phase)
		for _, s := range kubelet.Plan(p, st) {
			printNextStage(w, k, p, s)
		}
	}
	return nil
}

func printNextStage(w io.Writer, k *kubelet.Kubelet, p *corev1.Pod, s kubelet.Stage) {
	who := ""
	if s.Container != "" {
		who = " for container " + s.Container
	}
	what := string(s.Name)
	if cri := s.Name.CRI(); cri != "" {
		what += " (" + cri + ")"
	}
	fmt.Fprintf(w, "  next: %s%s: %s\n", what, who, s.Why)
	switch {
	case s.Name == kubelet.StageBackOff:
		fmt.Fprintf(w, "    %s until %s (in %s); the kubelet then goes on by itself\n", s.Reason, s.Until.Format(time.RFC3339), time.Until(s.Until).Round(time.Millisecond))
	case s.Name.Actionable():
		by, same := stageCommand(k.Node(), p, s)
		fmt.Fprintf(w, "    by hand: %s\n", by)
		if same != by {
			fmt.Fprintf(w, "    (the same: %s)\n", same)
		}
	}
}

// stageCommand is the command that runs stage s of pod p by hand, and the
// kubelet command that does the same.
func stageCommand(node string, p *corev1.Pod, s kubelet.Stage) (string, string) {
	var flags string
	if p.Namespace != apiserver.DefaultNamespace {
		flags += " -n " + p.Namespace
	}
	if s.Container != "" && len(p.Spec.Containers) > 1 {
		flags += " -c " + s.Container
	}
	same := fmt.Sprintf("podlab kubelet --node %s --pod %s --stage %s%s", node, p.Name, s.Name, flags)
	by := map[kubelet.StageName]string{
		kubelet.StagePull:   "podlab pull",
		kubelet.StageCreate: "podlab runc create",
		kubelet.StageStart:  "podlab runc start",
		kubelet.StageKill:   "podlab runc kill",
		kubelet.StageRemove: "podlab runc delete",
	}[s.Name]
	if by == "" {
		return same, same
	}
	return fmt.Sprintf("%s --pod %s%s", by, p.Name, flags), same
}

// printLeaseResult prints the creation of the node's Lease, and a renewal
// that failed; a renewal every 10s that worked is not worth a line.
func printLeaseResult(w io.Writer, r *kubelet.LeaseResult, err error) {
	if errors.Is(err, remote.ErrUnreachable) {
		return
	}
	if err != nil {
		fmt.Fprintf(w, "lease: %v\n", err)
		return
	}
	if !r.Created {
		return
	}
	l := r.Lease
	fmt.Fprintf(w, "node %s: created Lease %s/%s (holder %s, leaseDurationSeconds %d); renewing it every %s\n",
		l.Name, l.Namespace, l.Name, *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds,
		time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second/4)
}

// printNodeResult prints a registration or heartbeat.
func printNodeResult(w io.Writer, r *kubelet.NodeResult, err error) {
	if errors.Is(err, remote.ErrUnreachable) {
		return // the client has said once that it waits for the API server
	}
	if err != nil {
		fmt.Fprintf(w, "node: %v\n", err)
		return
	}
	kubelet.WriteRuntimeConfig(w, r.Node.Name, r.RuntimeConfig, r.RuntimeConfigErr)
	n := r.Node
	ready := ""
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			ready = fmt.Sprintf("%s=%s (%s), lastHeartbeatTime %s", cd.Type, cd.Status, cd.Reason, cd.LastHeartbeatTime.UTC().Format(time.RFC3339))
			if cd.Status != corev1.ConditionTrue {
				ready = fmt.Sprintf("%s=%s (%s: %s)", cd.Type, cd.Status, cd.Reason, cd.Message)
			}
		}
	}
	if r.Heartbeat {
		// every 10s: only a failure is worth a line
		for _, cd := range n.Status.Conditions {
			if cd.Type == corev1.NodeReady && cd.Status != corev1.ConditionTrue {
				fmt.Fprintf(w, "node %s: %s=%s (%s): %s\n", n.Name, cd.Type, cd.Status, cd.Reason, cd.Message)
			}
		}
		return
	}
	how := "updated Node"
	if r.Created {
		how = "registered Node (created)"
	}
	capNote := "measured on this machine"
	if r.Declared {
		capNote = "declared by podlab node add, kept"
	}
	cp := n.Status.Capacity
	fmt.Fprintf(w, "node %s: %s: cpu %s, memory %s, ephemeral-storage %s, pods %s (%s); %s; %s\n",
		n.Name, how, qty(cp, corev1.ResourceCPU), qty(cp, corev1.ResourceMemory), qty(cp, corev1.ResourceEphemeralStorage),
		qty(cp, corev1.ResourcePods), capNote, count(len(n.Status.Images), "image"), ready)
}

func qty(l corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := l[name]; ok {
		return q.String()
	}
	return "-"
}
