package statedir

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestLayout_CgroupRoot(t *testing.T) {
	a, b := Layout{Dir: "/var/lib/podlab"}, Layout{Dir: "/home/ana/.local/share/podlab"}
	re := regexp.MustCompile(`^/podlab-[0-9a-f]{8}$`)
	for _, l := range []Layout{a, b} {
		if !re.MatchString(l.CgroupRoot()) {
			t.Errorf("CgroupRoot(%s) = %q, want /podlab-<8 hex>", l.Dir, l.CgroupRoot())
		}
	}
	if a.CgroupRoot() == b.CgroupRoot() {
		t.Errorf("two state directories share the cgroup root %s", a.CgroupRoot())
	}
	// `printf %s /var/lib/podlab | sha256sum` starts with 7ff62cdc.
	if got, want := a.CgroupRoot(), "/podlab-7ff62cdc"; got != want {
		t.Errorf("CgroupRoot = %s, want %s", got, want)
	}
	if (Layout{Dir: "/var/lib/podlab/"}).CgroupRoot() != a.CgroupRoot() {
		t.Error("a trailing slash changed the cgroup root")
	}
}

func TestLayout_Paths(t *testing.T) {
	l := Layout{Dir: "/s"}
	n := l.Node("node-1")
	root := l.CgroupRoot()
	tests := []struct{ name, got, want string }{
		{"store", l.StoreFile(), "/s/etcd/store.db"},
		{"etcd data", l.EtcdDataDir(), "/s/etcd/member-data"},
		{"tokens", l.TokensFile(), "/s/auth/tokens.csv"},
		{"content", l.ContentDir(), "/s/content"},
		{"bundle", l.Bundle("web"), "/s/bundles/web"},
		{"snapshots", l.SnapshotsDir(), "/s/snapshots"},
		{"registry", l.RegistryDir(), "/s/registry"},
		{"demo images", l.DemoImagesDir(), "/s/demo-images"},
		{"runc root", l.Runtime().RuncRoot(), "/s/runc"},
		{"container dir", l.Runtime().ContainerDir("web"), "/s/containers/web"},
		{"runtime cgroup parent", l.Runtime().CgroupParent, root},
		{"node dir", n.Dir, "/s/nodes/node-1"},
		{"node content", n.ContentDir(), "/s/nodes/node-1/content"},
		{"node runc root", n.RuncRoot(), "/s/nodes/node-1/runc"},
		{"node runc handler root", n.Runtime().HandlerRoot("runc"), "/s/nodes/node-1/runc"},
		{"node default handler root", n.Runtime().HandlerRoot(""), "/s/nodes/node-1/runc"},
		{"node runsc root", n.Runtime().HandlerRoot("runsc"), "/s/nodes/node-1/runtimes/runsc"},
		{"runsc root", l.Runtime().HandlerRoot("runsc"), "/s/runtimes/runsc"},
		{"sandbox record", n.SandboxRecord("u1"), "/s/nodes/node-1/pods/u1/sandbox.json"},
		{"node containers", n.ContainersDir(), "/s/nodes/node-1/containers"},
		{"pod bundles", n.PodBundles("u1"), "/s/nodes/node-1/bundles/u1"},
		{"node snapshots", n.SnapshotsDir(), "/s/nodes/node-1/snapshots"},
		{"pod bundle", n.Bundle("u1", "c"), "/s/nodes/node-1/bundles/u1/c"},
		{"pod dir", n.PodDir("u1"), "/s/nodes/node-1/pods/u1"},
		{"empty dir", n.EmptyDir("u1", "v"), "/s/nodes/node-1/pods/u1/volumes/kubernetes.io~empty-dir/v"},
		{"netns dir", n.NamespaceDir("net"), "/s/nodes/node-1/netns"},
		{"userns file", n.NamespaceFile("user", "u1"), "/s/nodes/node-1/userns/u1"},
		{"pidns file", n.NamespaceFile("pid", "sb1"), "/s/nodes/node-1/pidns/sb1"},
		{"pause pid file", n.PausePidFile("sb1"), "/s/nodes/node-1/pods/sb1/pause.pid"},
		{"pause log", n.PauseLog("sb1"), "/s/nodes/node-1/pods/sb1/pause.log"},
		{"pause root", n.PauseRoot("sb1"), "/s/nodes/node-1/pods/sb1/pause-root"},
		{"userns record", n.UsernsRecord("u1"), "/s/nodes/node-1/pods/u1/userns"},
		{"node's state dir", n.State().Dir, "/s"},
		{"lab record", l.LabRecord(), "/s/lab/network.json"},
		{"lab lock", l.LabLock(), "/s/lab/lock"},
		{"machine netns", n.MachineNetns(), "/s/nodes/node-1/machine/net"},
		{"machine record", n.MachineRecord(), "/s/nodes/node-1/machine/address.json"},
		{"userns claim", MachineUsernsClaims().Claim(65536), "/var/lib/podlab-userns/65536"},
		{"userns claims lock", MachineUsernsClaims().Lock(), "/var/lib/podlab-userns/lock"},
		{"cni net.d", n.CNIConfDir(), "/s/nodes/node-1/cni/net.d"},
		{"cni cache", n.CNICacheDir(), "/s/nodes/node-1/cni/cache"},
		{"host-local dataDir", n.CNIIPAMDir(), "/s/nodes/node-1/cni/networks"},
		{"bridge", n.BridgeName(), "plb883283ec"},
		{"node cgroup root", n.CgroupRoot, root + "/nodes/node-1"},
		{"kubepods", n.KubepodsCgroup(), root + "/nodes/node-1/kubepods"},
		{"node runtime cgroup parent", n.Runtime().CgroupParent, root + "/nodes/node-1/kubepods"},
		{"guaranteed pod cgroup", n.PodCgroup(TierNone, "u1"), root + "/nodes/node-1/kubepods/podu1"},
		{"burstable tier", n.TierCgroup(TierBurstable), root + "/nodes/node-1/kubepods/burstable"},
		{"burstable pod cgroup", n.PodCgroup(TierBurstable, "u1"), root + "/nodes/node-1/kubepods/burstable/podu1"},
		{"besteffort pod cgroup", n.PodCgroup(TierBestEffort, "u1"), root + "/nodes/node-1/kubepods/besteffort/podu1"},
		{"pod cgroups", strings.Join(n.PodCgroups("u1"), " "), root + "/nodes/node-1/kubepods/podu1 " +
			root + "/nodes/node-1/kubepods/burstable/podu1 " + root + "/nodes/node-1/kubepods/besteffort/podu1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	// `printf %s /s/nodes/node-1 | sha256sum` starts with the bridge's hex.
	if !regexp.MustCompile(`^plb[0-9a-f]{8}$`).MatchString(n.BridgeName()) {
		t.Errorf("BridgeName = %q, want plb<8 hex> (at most 15 bytes)", n.BridgeName())
	}
	for _, other := range []Node{l.Node("node-2"), (Layout{Dir: "/t"}).Node("node-1")} {
		if other.BridgeName() == n.BridgeName() {
			t.Errorf("%s and %s share the bridge %s", other.Dir, n.Dir, n.BridgeName())
		}
	}
	if l.Node("node-2").CgroupRoot == n.CgroupRoot {
		t.Error("two nodes share a cgroup root")
	}
}

func TestLayout_PKIPaths(t *testing.T) {
	l := Layout{Dir: "/s"}
	tests := []struct{ name, got, want string }{
		{"pki dir", l.PKIDir(), "/s/pki"},
		{"ca cert", l.CACert(), "/s/pki/ca.crt"},
		{"ca key", l.CAKey(), "/s/pki/ca.key"},
		{"cert", l.PKICert("admin"), "/s/pki/admin.crt"},
		{"key", l.PKIKey("kubelet-node-1"), "/s/pki/kubelet-node-1.key"},
		{"kubeconfigs dir", l.KubeconfigsDir(), "/s/kubeconfigs"},
		{"kubeconfig", l.Kubeconfig("node-1"), "/s/kubeconfigs/node-1.kubeconfig"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	for _, e := range []string{"pki", "kubeconfigs"} {
		if !slices.Contains(ResetEntries(), e) {
			t.Errorf("reset keeps %s: a new cluster would trust the old CA's credentials", e)
		}
	}
}

func TestNew(t *testing.T) {
	wd, _ := os.Getwd()
	tests := []struct{ name, in, want string }{
		{"absolute", "/var/lib/podlab", "/var/lib/podlab"},
		{"cleaned", "/var/lib//podlab/", "/var/lib/podlab"},
		{"relative", "state", filepath.Join(wd, "state")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.in)
			if err != nil || l.Dir != tt.want {
				t.Fatalf("New(%q) = %q, %v; want %q", tt.in, l.Dir, err, tt.want)
			}
		})
	}
	if _, err := New(""); err == nil {
		t.Error("New(\"\") accepted an empty state directory")
	}
}

func TestLayout_Nodes(t *testing.T) {
	l := Layout{Dir: t.TempDir()}
	if ns, err := l.Nodes(); err != nil || len(ns) != 0 {
		t.Fatalf("Nodes of a fresh directory = %v, %v; want none", ns, err)
	}
	for _, n := range []string{"node-2", "node-1"} {
		os.MkdirAll(l.Node(n).Dir, 0o700)
	}
	os.WriteFile(filepath.Join(l.NodesDir(), "stray"), nil, 0o600)
	ns, err := l.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range ns {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"node-1", "node-2"}) {
		t.Errorf("Nodes = %v, want [node-1 node-2]", names)
	}
}

func TestEntries(t *testing.T) {
	for _, m := range Markers() {
		if !slices.Contains(ResetEntries(), m) {
			t.Errorf("marker %s is not removed by reset: a reset directory would still look like podlab's", m)
		}
	}
	for _, k := range KeptEntries() {
		if slices.Contains(ResetEntries(), k) {
			t.Errorf("%s is both kept and removed", k)
		}
	}
}

// Every kind of namespace a sandbox may pin is listed, the CRI runtime's
// pid with the kubelet's, each with a directory of its own.
func TestNamespaceKinds(t *testing.T) {
	n := Layout{Dir: "/s"}.Node("node-1")
	seen := map[string]bool{}
	for _, k := range NamespaceKinds() {
		d := n.NamespaceDir(k)
		if seen[d] {
			t.Errorf("kind %s shares %s", k, d)
		}
		seen[d] = true
	}
	for _, want := range []string{"user", "net", "ipc", "uts", "pid"} {
		if !seen[n.NamespaceDir(want)] {
			t.Errorf("NamespaceKinds() = %q: no %s", NamespaceKinds(), want)
		}
	}
	if NamespaceKinds()[0] != "user" {
		t.Errorf("NamespaceKinds() = %q: user first (it owns the others)", NamespaceKinds())
	}
}
