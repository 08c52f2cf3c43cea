package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strconv"
)

// The lab containerd's directory (podlab containerd; see steps/containerd)
// and the registry hosts directory it shares with the runtime.
const (
	containerdDir    = "containerd"
	certsDir         = "certs.d"
	containerdBridge = "plc"
)

// CertsDir is the registry hosts directory, as containerd's
// /etc/containerd/certs.d: <certs.d>/<registry host>/hosts.toml names the
// mirrors a runtime pulls that registry's images from (the lab registry).
func (l Layout) CertsDir() string { return filepath.Join(l.Dir, certsDir) }

// Containerd is the layout of the lab containerd: a real containerd
// (Debian's 1.6) beside podlab's own runtime, with everything it writes
// under <state>/containerd.
func (l Layout) Containerd() Containerd {
	return Containerd{Dir: filepath.Join(l.Dir, containerdDir), CgroupParent: l.CgroupRoot() + "/" + containerdDir}
}

// Containerd is the lab containerd's directory and cgroup.
type Containerd struct {
	// Dir is <state>/containerd.
	Dir string
	// CgroupParent is <state cgroup root>/containerd: what a CRI client
	// gives as its pods' cgroup_parent, so that they stay under the state
	// directory's cgroup root.
	CgroupParent string
}

// Config is containerd's --config: config.toml, version 2.
func (c Containerd) Config() string { return filepath.Join(c.Dir, "config.toml") }

// Socket is containerd's gRPC address, which serves its own API and the
// CRI (RuntimeService and ImageService): what crictl's --runtime-endpoint
// and a kubelet's --container-runtime-endpoint name (unix://<Socket>).
func (c Containerd) Socket() string { return filepath.Join(c.Dir, "containerd.sock") }

// CrictlConfig is a crictl configuration naming Socket as both its
// runtime and image endpoint: crictl --config <it>, or CRI_CONFIG_FILE.
func (c Containerd) CrictlConfig() string { return filepath.Join(c.Dir, "crictl.yaml") }

// Log is containerd's own log, when it runs in the background.
func (c Containerd) Log() string { return filepath.Join(c.Dir, "containerd.log") }

// Lock is the file a running `podlab containerd` holds locked (flock) and
// writes its pid into: one lab containerd per state directory.
func (c Containerd) Lock() string { return filepath.Join(c.Dir, "containerd.pid") }

// Root is containerd's root (/var/lib/containerd on a node): the content
// store, snapshots and the metadata database, one directory per plugin.
func (c Containerd) Root() string { return filepath.Join(c.Dir, "root") }

// State is containerd's state (/run/containerd on a node): the bundles of
// running tasks, the pods' network namespaces, the containers' FIFOs.
func (c Containerd) State() string { return filepath.Join(c.Dir, "state") }

// RuncRoot is runc's --root for containerd's containers (the runc shim's
// option Root; its default is /run/containerd/runc): runc keeps them under
// RuncRoot/<containerd namespace>/<id>.
func (c Containerd) RuncRoot() string { return filepath.Join(c.Dir, "runc") }

// OptDir is the opt plugin's path (its default is /opt/containerd).
func (c Containerd) OptDir() string { return filepath.Join(c.Dir, "opt") }

// CNIConfDir is the CRI plugin's CNI conf_dir (its default is
// /etc/cni/net.d).
func (c Containerd) CNIConfDir() string { return filepath.Join(c.Dir, cniDir, cniNetDir) }

// CNIIPAMDir is host-local's dataDir in the lab containerd's conflist.
func (c Containerd) CNIIPAMDir() string { return filepath.Join(c.Dir, cniDir, cniIPAMDir) }

// PodLogsDir is where a CRI client asks the lab containerd to write its
// pods' logs (the sandbox's log_directory; the kubelet's is /var/log/pods).
func (c Containerd) PodLogsDir() string { return filepath.Join(c.Dir, "pods") }

// BridgeName is the lab containerd's pod bridge: "plc" and 8 hex digits of
// sha256 of its directory, so that it never shares a bridge with a node of
// podlab's (plb...) or another state directory.
func (c Containerd) BridgeName() string {
	sum := sha256.Sum256([]byte(filepath.Clean(c.Dir)))
	return containerdBridge + hex.EncodeToString(sum[:4])
}

// PodCIDR is the lab containerd's pod network: a /24 of 10.88.0.0/16
// (containerd's own default network), chosen by the hash of its directory
// so that two state directories on one machine rarely share one.
func (c Containerd) PodCIDR() string {
	sum := sha256.Sum256([]byte(filepath.Clean(c.Dir)))
	return "10.88." + strconv.Itoa(int(sum[4])) + ".0/24"
}
