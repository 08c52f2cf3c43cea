package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// The names at the top of a state directory and of a node's directory.
const (
	etcdDir       = "etcd"
	storeFile     = "store.db"
	etcdDataDir   = "member-data"
	authDir       = "auth"
	tokensFile    = "tokens.csv"
	contentDir    = "content"
	bundlesDir    = "bundles"
	runcDir       = "runc"
	runtimesDir   = "runtimes"
	containersDir = "containers"
	registryDir   = "registry"
	demoImagesDir = "demo-images"
	cacheDir      = "cache"
	nodesDir      = "nodes"
	podsDir       = "pods"
	seccompDir    = "seccomp"
	subPathsDir   = "volume-subpaths"
	machineDir    = "machine"
	snapshotsDir  = "snapshots"

	// cgroupPrefix starts every state directory's cgroup root.
	cgroupPrefix = "/podlab-"
	// kubepods is the kubelet's cgroup for pods (cgroupfs driver naming).
	kubepods = "kubepods"
	// podCgroupPrefix starts a pod's cgroup: pod<uid>.
	podCgroupPrefix = "pod"
)

// The QoS tiers under kubepods, as the kubelet's cgroupfs driver names them
// (pkg/kubelet/cm/qos_container_manager_linux.go). Guaranteed pods have no
// tier of their own: their cgroups are directly under kubepods (TierNone).
const (
	TierNone       = ""
	TierBurstable  = "burstable"
	TierBestEffort = "besteffort"
)

// Tiers are the tier cgroups a node's kubepods holds.
func Tiers() []string { return []string{TierBurstable, TierBestEffort} }

// Layout is a state directory. Dir is absolute and clean.
type Layout struct {
	Dir string
}

// New is the Layout of dir, made absolute.
func New(dir string) (Layout, error) {
	if dir == "" {
		return Layout{}, errors.New("no state directory given (set --state-dir or PODLAB_STATE_DIR)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Layout{}, fmt.Errorf("making the state directory %q absolute: %w", dir, err)
	}
	return Layout{Dir: abs}, nil
}

// CgroupRoot is the cgroup under which everything of this state directory
// runs: /podlab-<8 hex digits of sha256(Dir)> (see the package doc).
func (l Layout) CgroupRoot() string {
	sum := sha256.Sum256([]byte(filepath.Clean(l.Dir)))
	return cgroupPrefix + hex.EncodeToString(sum[:4])
}

// APIServerLock is the file a running `podlab apiserver` holds locked
// (flock) and writes its pid into: one API server per store.
func (l Layout) APIServerLock() string { return filepath.Join(l.Dir, etcdDir, "apiserver.lock") }

// StoreFile is the API server's bbolt file.
func (l Layout) StoreFile() string { return filepath.Join(l.Dir, etcdDir, storeFile) }

// EtcdDataDir is where `podlab etcd` keeps a real etcd's data (its
// --data-dir): <state>/etcd/member-data, beside the bbolt store, which
// plays etcd's role when there is no etcd.
func (l Layout) EtcdDataDir() string { return filepath.Join(l.Dir, etcdDir, etcdDataDir) }

// TokensFile is the API server's token file.
func (l Layout) TokensFile() string { return filepath.Join(l.Dir, authDir, tokensFile) }

// ContentDir is the content store of podlab pull.
func (l Layout) ContentDir() string { return filepath.Join(l.Dir, contentDir) }

// SnapshotsDir is the snapshots directory of podlab unpack --snapshotter
// overlayfs (steps/unpack.Snapshots): snapshots/<N>/fs, snapshots/index.
func (l Layout) SnapshotsDir() string { return filepath.Join(l.Dir, snapshotsDir) }

// BundlesDir holds the bundles podlab unpack makes by default.
func (l Layout) BundlesDir() string { return filepath.Join(l.Dir, bundlesDir) }

// Bundle is the default bundle of name.
func (l Layout) Bundle(name string) string { return filepath.Join(l.BundlesDir(), name) }

// RegistryDir holds the in-process registry's blobs.
func (l Layout) RegistryDir() string { return filepath.Join(l.Dir, registryDir) }

// DemoImagesDir is the OCI layout `make images` writes.
func (l Layout) DemoImagesDir() string { return filepath.Join(l.Dir, demoImagesDir) }

// Runtime is where `podlab runc` keeps its containers.
func (l Layout) Runtime() Runtime {
	return Runtime{Dir: l.Dir, CgroupParent: l.CgroupRoot()}
}

// NodesDir holds one directory per node.
func (l Layout) NodesDir() string { return filepath.Join(l.Dir, nodesDir) }

// Node is the layout of one node's runtime.
func (l Layout) Node(name string) Node {
	return Node{
		Name:       name,
		Dir:        filepath.Join(l.NodesDir(), name),
		CgroupRoot: l.CgroupRoot() + "/" + nodesDir + "/" + name,
	}
}

// Nodes are the nodes that have a directory, by name.
func (l Layout) Nodes() ([]Node, error) {
	ents, err := os.ReadDir(l.NodesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of %s: %w", l.Dir, err)
	}
	var out []Node
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, l.Node(e.Name()))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ResetEntries are the top-level entries podlab reset removes.
func ResetEntries() []string {
	return []string{nodesDir, containersDir, runcDir, runtimesDir, bundlesDir, snapshotsDir, contentDir, registryDir, etcdDir, authDir, pkiDir, kubeconfigsDir, labDir, containerdDir, certsDir, lastFile}
}

// KeptEntries are the top-level entries reset keeps unless --all: they
// take a while to make again (make images, the .deb downloads).
func KeptEntries() []string { return []string{demoImagesDir, cacheDir} }

// Markers are the entries of which one must exist for a directory to be
// podlab's.
func Markers() []string { return []string{etcdDir, nodesDir, contentDir, containerdDir} }

// The lab network's directory (see steps/machine).
const (
	labDir        = "lab"
	labRecordFile = "network.json"
	labLockFile   = "lock"
	machineRecord = "address.json"
)

// LabDir holds the record of the state directory's lab network (podlab
// init chooses it; steps/machine): the network every joined node's machine
// is on, and the API server's address there.
func (l Layout) LabDir() string { return filepath.Join(l.Dir, labDir) }

// LabRecord is the lab network as it was chosen, which every command reads
// so that all agree: its CIDR, gateway and bridge.
func (l Layout) LabRecord() string { return filepath.Join(l.LabDir(), labRecordFile) }

// LabLock is the file podlab node join and leave hold locked (flock) while
// they change the lab network: one address per machine.
func (l Layout) LabLock() string { return filepath.Join(l.LabDir(), labLockFile) }

// The cluster's PKI and kubeconfigs (podlab init; see steps/pki).
const (
	pkiDir         = "pki"
	kubeconfigsDir = "kubeconfigs"
	caName         = "ca"
)

// PKIDir holds the cluster's certificates and keys, as kubeadm's
// /etc/kubernetes/pki: NAME.crt (mode 0644) and NAME.key (mode 0600).
func (l Layout) PKIDir() string { return filepath.Join(l.Dir, pkiDir) }

// CACert is the cluster CA's certificate, which every component trusts.
func (l Layout) CACert() string { return l.PKICert(caName) }

// CAKey is the cluster CA's private key, which signs every other
// certificate.
func (l Layout) CAKey() string { return l.PKIKey(caName) }

// PKICert is the certificate called name: pki/<name>.crt.
func (l Layout) PKICert(name string) string { return filepath.Join(l.PKIDir(), name+".crt") }

// PKIKey is the private key of the certificate called name: pki/<name>.key.
func (l Layout) PKIKey(name string) string { return filepath.Join(l.PKIDir(), name+".key") }

// KubeconfigsDir holds one kubeconfig per identity of the lab.
func (l Layout) KubeconfigsDir() string { return filepath.Join(l.Dir, kubeconfigsDir) }

// Kubeconfig is the kubeconfig called name: kubeconfigs/<name>.kubeconfig.
func (l Layout) Kubeconfig(name string) string {
	return filepath.Join(l.KubeconfigsDir(), name+".kubeconfig")
}

// Runtime is a directory where a runc runtime keeps its containers: the
// state directory itself (podlab runc) or a node's directory (a kubelet).
type Runtime struct {
	Dir string
	// CgroupParent is the cgroup the runtime's containers are under; a
	// container delete removes nothing at or above it.
	CgroupParent string
}

// RuncRoot is runc's --root: runc/<id>/state.json.
func (r Runtime) RuncRoot() string { return filepath.Join(r.Dir, runcDir) }

// HandlerRoot is the --root of the OCI runtime of a runtime handler: runc's
// is RuncRoot; another's, runtimes/<handler> (runsc keeps
// <id>_sandbox:<id>.state there, crun <id>/status), so no two runtimes
// read each other's state.
func (r Runtime) HandlerRoot(handler string) string {
	if handler == "" || handler == "runc" {
		return r.RuncRoot()
	}
	return filepath.Join(r.Dir, runtimesDir, handler)
}

// ContainersDir holds podlab's per-container files.
func (r Runtime) ContainersDir() string { return filepath.Join(r.Dir, containersDir) }

// ContainerDir is podlab's directory of one container: log, exit code, shim.
func (r Runtime) ContainerDir(id string) string { return filepath.Join(r.ContainersDir(), id) }

// Node is one node's runtime directory and cgroups.
type Node struct {
	Name string
	// Dir is <state>/nodes/<name>.
	Dir string
	// CgroupRoot is <state cgroup root>/nodes/<name>: the node's own
	// cgroups, so that nodes on one machine share no kubepods.
	CgroupRoot string
}

// Runtime is where the node's runc keeps its containers.
func (n Node) Runtime() Runtime { return Runtime{Dir: n.Dir, CgroupParent: n.KubepodsCgroup()} }

// MachineDir holds what makes the node a machine of its own (podlab node
// join): its network namespace, pinned by a bind mount at MachineNetns, and
// the records of its link to the lab network.
func (n Node) MachineDir() string { return filepath.Join(n.Dir, machineDir) }

// MachineNetns is the node's own network namespace (its "machine"), a bind
// mount made by podlab node join. A node that never joined has none: its
// kubelet runs in the host's network namespace.
func (n Node) MachineNetns() string { return filepath.Join(n.MachineDir(), "net") }

// The node's pod network (see steps/cni): its container runtime's CNI
// configuration, libcni's cache and host-local's leases, each per node,
// since libcni and host-local default to paths under /var/lib/cni that
// every runtime on the machine would share.
const (
	cniDir       = "cni"
	cniNetDir    = "net.d"
	cniCacheDir  = "cache"
	cniIPAMDir   = "networks"
	bridgePrefix = "plb"
)

// CNIConfDir is where the node's runtime reads its CNI network
// configuration, as containerd's conf_dir (/etc/cni/net.d).
func (n Node) CNIConfDir() string { return filepath.Join(n.Dir, cniDir, cniNetDir) }

// CNICacheDir is libcni's cache (its default is /var/lib/cni): each
// attachment's result JSON is results/<network>-<sandbox id>-<ifname>.
func (n Node) CNICacheDir() string { return filepath.Join(n.Dir, cniDir, cniCacheDir) }

// CNIIPAMDir is host-local's dataDir (its default is /var/lib/cni/networks):
// <network>/<ip> names the sandbox that holds the address.
func (n Node) CNIIPAMDir() string { return filepath.Join(n.Dir, cniDir, cniIPAMDir) }

// BridgeName is the Linux bridge of the node's pods: network interface
// names are global to a network namespace and at most 15 bytes, so it is
// "plb" and 8 hex digits of sha256 of the node's directory (two state
// directories, or two nodes of one, never share a bridge).
func (n Node) BridgeName() string {
	sum := sha256.Sum256([]byte(filepath.Clean(n.Dir)))
	return bridgePrefix + hex.EncodeToString(sum[:4])
}

// MachineRecord is the record of a joined node's link to the lab network:
// its address and its veth pair's names.
func (n Node) MachineRecord() string { return filepath.Join(n.MachineDir(), machineRecord) }

// ContentDir is the node's content store.
func (n Node) ContentDir() string { return filepath.Join(n.Dir, contentDir) }

// SnapshotsDir is the node's snapshots directory (steps/unpack.Snapshots),
// as containerd's /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs:
// one committed snapshot per layer chain ID (snapshots/<N>/fs), and one
// active snapshot per container (its upper and work directories).
func (n Node) SnapshotsDir() string { return filepath.Join(n.Dir, snapshotsDir) }

// RuncRoot is runc's --root for the node's containers.
func (n Node) RuncRoot() string { return n.Runtime().RuncRoot() }

// ContainersDir holds podlab's per-container files (log, exit code).
func (n Node) ContainersDir() string { return n.Runtime().ContainersDir() }

// BundlesDir holds the node's pods' bundles.
func (n Node) BundlesDir() string { return filepath.Join(n.Dir, bundlesDir) }

// PodBundles is the directory of a pod's bundles.
func (n Node) PodBundles(uid string) string { return filepath.Join(n.BundlesDir(), uid) }

// Bundle is the bundle of one of a pod's containers.
func (n Node) Bundle(uid, container string) string {
	return filepath.Join(n.PodBundles(uid), container)
}

// PodsDir holds the pods' directories.
func (n Node) PodsDir() string { return filepath.Join(n.Dir, podsDir) }

// PodDir holds a pod's volumes, as /var/lib/kubelet/pods/<uid>.
func (n Node) PodDir(uid string) string { return filepath.Join(n.PodsDir(), uid) }

// SandboxRecord is what the runtime records of a pod's sandbox: the
// runtime handler it was made with, which every container of the pod, and
// their kill and removal, use too.
func (n Node) SandboxRecord(uid string) string { return filepath.Join(n.PodDir(uid), "sandbox.json") }

// EmptyDir is the directory of an emptyDir volume.
func (n Node) EmptyDir(uid, volume string) string {
	return filepath.Join(n.PodDir(uid), "volumes", "kubernetes.io~empty-dir", volume)
}

// SubPathsDir holds the bind mounts of a pod's volumeMounts with a subPath,
// as /var/lib/kubelet/pods/<uid>/volume-subpaths.
func (n Node) SubPathsDir(uid string) string { return filepath.Join(n.PodDir(uid), subPathsDir) }

// SubPath is where the kubelet bind-mounts the subPath of a container's
// index-th volumeMount, resolved inside its volume.
func (n Node) SubPath(uid, volume, container string, index int) string {
	return filepath.Join(n.SubPathsDir(uid), volume, container, strconv.Itoa(index))
}

// SeccompDir holds the node's seccomp profiles, as the kubelet's
// --seccomp-profile-root (/var/lib/kubelet/seccomp): a pod's Localhost
// profile "profiles/audit.json" is <SeccompDir>/profiles/audit.json.
func (n Node) SeccompDir() string { return filepath.Join(n.Dir, seccompDir) }

// NamespaceKinds are the kinds of namespace a pod sandbox may pin under
// the node's directory, by their names under /proc/<pid>/ns/: user
// (hostUsers: false only, first: it owns the others), net, ipc, uts, and
// pid. The kubelet's own sandbox pins user, net, ipc and uts; the node's CRI
// runtime (steps/cri) pins pid too, for a sandbox of pid mode POD
// (shareProcessNamespace), where its pause process is PID 1
// (PausePidFile). Whoever removes a sandbox's pins, or looks for what is
// left of one, goes through all of them.
func NamespaceKinds() []string { return []string{"user", "net", "ipc", "uts", "pid"} }

// NamespaceDir is the directory of the bind mounts that pin one kind of
// namespace of the pods (a kind of NamespaceKinds): userns, netns, ipcns,
// utsns or pidns, as CRI-O's pinns names them under /var/run.
func (n Node) NamespaceDir(kind string) string { return filepath.Join(n.Dir, kind+"ns") }

// NamespaceFile is the bind mount that pins a pod's namespace of kind.
func (n Node) NamespaceFile(kind, uid string) string {
	return filepath.Join(n.NamespaceDir(kind), uid)
}

// KubepodsCgroup is the node's kubepods cgroup.
func (n Node) KubepodsCgroup() string { return n.CgroupRoot + "/" + kubepods }

// TierCgroup is a QoS tier's cgroup: kubepods/burstable,
// kubepods/besteffort, or kubepods itself for TierNone (Guaranteed).
func (n Node) TierCgroup(tier string) string {
	if tier == TierNone {
		return n.KubepodsCgroup()
	}
	return n.KubepodsCgroup() + "/" + tier
}

// PodCgroup is a pod's cgroup in its tier: kubepods/pod<uid> (Guaranteed),
// kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid>.
func (n Node) PodCgroup(tier, uid string) string {
	return n.TierCgroup(tier) + "/" + podCgroupPrefix + uid
}

// PodCgroups are the places a pod's cgroup can be, one per tier: what the
// kubelet looks at when it removes a pod whose QoS class it no longer knows.
func (n Node) PodCgroups(uid string) []string {
	out := []string{n.PodCgroup(TierNone, uid)}
	for _, t := range Tiers() {
		out = append(out, n.PodCgroup(t, uid))
	}
	return out
}
