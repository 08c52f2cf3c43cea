package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"
)

// IfName is the pod's interface, as containerd names it.
const IfName = "eth0"

// DefaultBinDirs are where the plugins are looked for: Debian's
// containernetworking-plugins, then the upstream release's place.
func DefaultBinDirs() []string { return []string{"/usr/lib/cni", "/opt/cni/bin"} }

// Config is where a node's runtime finds its network.
type Config struct {
	// ConfDir holds the network configuration (statedir.Node.CNIConfDir).
	ConfDir string
	// CacheDir is libcni's cache (statedir.Node.CNICacheDir).
	CacheDir string
	// BinDirs are searched for the plugins; default DefaultBinDirs.
	BinDirs []string
}

// Network is a node's pod network, as its container runtime sees it.
type Network struct {
	cfg Config
	cni *libcni.CNIConfig
}

// New is the network of cfg. It reads nothing yet.
func New(cfg Config) (*Network, error) {
	if !filepath.IsAbs(cfg.ConfDir) || !filepath.IsAbs(cfg.CacheDir) {
		return nil, fmt.Errorf("%w: the conf_dir %q and the cache directory %q must be absolute", ErrBadTemplate, cfg.ConfDir, cfg.CacheDir)
	}
	if len(cfg.BinDirs) == 0 {
		cfg.BinDirs = DefaultBinDirs()
	}
	return &Network{cfg: cfg, cni: libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, nil)}, nil
}

// ConfDir is where the network configuration is read.
func (n *Network) ConfDir() string { return n.cfg.ConfDir }

// Load reads the network configuration: the first *.conflist, *.conf or
// *.json of the conf_dir in lexical order, as containerd does. It returns
// the list and its file; an error wrapping ErrNoNetwork when there is none.
func (n *Network) Load() (*libcni.NetworkConfigList, string, error) {
	files, err := libcni.ConfFiles(n.cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, "", fmt.Errorf("reading the network configuration in %s: %w", n.cfg.ConfDir, err)
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("%w in %s: the node has no pod CIDR yet, or nothing wrote its network", ErrNoNetwork, n.cfg.ConfDir)
	}
	path := files[0]
	var list *libcni.NetworkConfigList
	if strings.HasSuffix(path, ".conflist") {
		list, err = libcni.ConfListFromFile(path)
	} else {
		var c *libcni.PluginConfig
		if c, err = libcni.ConfFromFile(path); err == nil {
			list, err = libcni.ConfListFromConf(c)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the network configuration %s: %w", path, err)
	}
	return list, path, nil
}

// Configured reports whether the conf_dir holds a network configuration.
func (n *Network) Configured() bool {
	files, err := libcni.ConfFiles(n.cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	return err == nil && len(files) > 0
}

// PortMapping is a container's hostPort, as CRI's PortMapping: portmap's
// portMappings runtime config.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"` // tcp, udp or sctp
	HostIP        string `json:"hostIP,omitempty"`
}

// Attachment is a sandbox to attach to the network.
type Attachment struct {
	// ID is the sandbox's id (K8S_POD_INFRA_CONTAINER_ID, libcni's
	// ContainerID).
	ID string
	// NetNS is the bind mount that pins the sandbox's network namespace.
	NetNS string
	// PodNamespace, PodName and PodUID are the pod's, for the plugins'
	// K8S_POD_* args.
	PodNamespace, PodName, PodUID string
	// PortMappings are the pod's hostPorts.
	PortMappings []PortMapping
}

// Result is a sandbox's attachment to the network.
type Result struct {
	// Network is the network's name; ConfList the file it was read from
	// (empty when read back from the cache).
	Network, ConfList string
	// Interface is the pod's interface (eth0); IPs its addresses, in the
	// result's order (the first is status.podIP).
	Interface string
	IPs       []net.IP
	// Gateways are the pod's default gateways (the bridge's address).
	Gateways []net.IP
	// ResultPath is libcni's cache file of the attachment: the CNI result
	// JSON, with the configuration and args it was made with.
	ResultPath string
	// Result is the plugins' result.
	Result *types100.Result
	Took   time.Duration
}

// rtConf is libcni's RuntimeConf of a, with containerd's CNI args.
func (a Attachment) rtConf() *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: a.ID,
		NetNS:       a.NetNS,
		IfName:      IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", a.PodNamespace},
			{"K8S_POD_NAME", a.PodName},
			{"K8S_POD_INFRA_CONTAINER_ID", a.ID},
			{"K8S_POD_UID", a.PodUID},
		},
	}
	if len(a.PortMappings) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": a.PortMappings}
	}
	return rt
}

func (a Attachment) validate() error {
	if a.ID == "" || strings.ContainsAny(a.ID, "/ ") {
		return fmt.Errorf("%w: sandbox id %q", ErrBadAttachment, a.ID)
	}
	if !isNetns(a.NetNS) {
		return fmt.Errorf("%w: %q is not a network namespace (a bind mount of /proc/PID/ns/net): the sandbox's namespace comes first", ErrBadAttachment, a.NetNS)
	}
	for _, pm := range a.PortMappings {
		switch pm.Protocol {
		case "tcp", "udp", "sctp":
		default:
			return fmt.Errorf("%w: hostPort %d: protocol %q, want tcp, udp or sctp", ErrBadAttachment, pm.HostPort, pm.Protocol)
		}
		if pm.HostPort < 1 || pm.HostPort > 65535 || pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
			return fmt.Errorf("%w: hostPort %d to containerPort %d: ports are 1 to 65535", ErrBadAttachment, pm.HostPort, pm.ContainerPort)
		}
	}
	return nil
}

// isNetns reports whether path is a network namespace file (nsfs).
func isNetns(path string) bool {
	var st unix.Statfs_t
	return path != "" && unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// Setup attaches the sandbox a to the network: CNI ADD of every plugin of
// the configuration, in order (containerd's setupPodNetwork). When ADD
// fails, what it made is undone with DEL, and the error has containerd's
// shape: failed to setup network for sandbox "ID": plugin type="bridge"
// failed (add): ...
func (n *Network) Setup(ctx context.Context, a Attachment) (*Result, error) {
	start := time.Now()
	if err := a.validate(); err != nil {
		return nil, err
	}
	list, path, err := n.Load()
	if err != nil {
		return nil, fmt.Errorf("failed to setup network for sandbox %q: %w", a.ID, err)
	}
	rt := a.rtConf()
	res, err := n.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		err = fmt.Errorf("failed to setup network for sandbox %q: %w%s", a.ID, err, hint(err))
		// DEL what ADD made, with the plugins that exist: nothing of a
		// missing one ran.
		if derr := n.cni.DelNetworkList(context.WithoutCancel(ctx), present(list, n.cfg.BinDirs), rt); derr != nil {
			err = fmt.Errorf("%w; and undoing it: %v", err, derr)
		}
		return nil, err
	}
	out, err := n.result(list.Name, a.ID, res)
	if err != nil {
		_ = n.cni.DelNetworkList(context.WithoutCancel(ctx), list, rt)
		return nil, fmt.Errorf("failed to setup network for sandbox %q: %w", a.ID, err)
	}
	out.ConfList = path
	out.Took = time.Since(start)
	return out, nil
}

// hint says what to do about an error of ADD, when that is known.
func hint(err error) string {
	switch msg := err.Error(); {
	case strings.Contains(msg, "failed to find plugin"):
		return " (install Debian's containernetworking-plugins: apt-get install containernetworking-plugins, or make deps)"
	case strings.Contains(msg, "no IP addresses available"):
		return " (the node's pod CIDR is exhausted: delete pods, or give nodes larger ones with podlab controller-manager --node-cidr-mask-size)"
	}
	return ""
}

// present is list without the plugins whose binaries are missing.
func present(list *libcni.NetworkConfigList, dirs []string) *libcni.NetworkConfigList {
	out := *list
	out.Plugins = nil
	for _, p := range list.Plugins {
		if _, err := invoke.FindInPath(p.Network.Type, dirs); err == nil {
			out.Plugins = append(out.Plugins, p)
		}
	}
	return &out
}

// result reads the pod's interface and addresses from a result: the
// addresses of the interface called eth0 inside the sandbox, as containerd
// picks the pod's IPs.
func (n *Network) result(network, id string, r types.Result) (*Result, error) {
	if r == nil {
		return nil, errors.New("the plugins returned no result")
	}
	cur, err := types100.NewResultFromResult(r)
	if err != nil {
		return nil, fmt.Errorf("reading the plugins' result: %w", err)
	}
	out := &Result{Network: network, Interface: IfName, ResultPath: n.ResultPath(network, id), Result: cur}
	for _, ip := range cur.IPs {
		if ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(cur.Interfaces) {
			continue
		}
		if iface := cur.Interfaces[*ip.Interface]; iface.Name != IfName || iface.Sandbox == "" {
			continue
		}
		out.IPs = append(out.IPs, ip.Address.IP)
		if ip.Gateway != nil {
			out.Gateways = append(out.Gateways, ip.Gateway)
		}
	}
	if len(out.IPs) == 0 {
		return nil, fmt.Errorf("the plugins' result gives %s in the sandbox no address", IfName)
	}
	return out, nil
}

// Teardown detaches the sandbox id from the network: CNI DEL of every
// attachment libcni's cache holds for it, with the configuration and args
// it was added with (containerd's teardownPodNetwork). A network namespace
// that is gone already is tolerated (the plugins release what is outside
// it: the address, the port mappings); with nothing cached, Teardown does
// nothing, so calling it again is safe. It returns the attachments it
// removed.
func (n *Network) Teardown(ctx context.Context, id string) ([]Result, error) {
	atts, err := n.cni.GetCachedAttachments(id)
	if err != nil {
		return nil, fmt.Errorf("reading the network attachments of sandbox %q in %s: %w", id, n.cfg.CacheDir, err)
	}
	var out []Result
	var errs []error
	for _, att := range atts {
		r, err := n.del(ctx, att)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to destroy network for sandbox %q: %w", id, err))
			continue
		}
		out = append(out, *r)
	}
	return out, errors.Join(errs...)
}

func (n *Network) del(ctx context.Context, att *libcni.NetworkAttachment) (*Result, error) {
	start := time.Now()
	list, err := libcni.ConfListFromBytes(att.Config)
	if err != nil {
		return nil, fmt.Errorf("reading the cached configuration of %s: %w", att.Network, err)
	}
	rt := &libcni.RuntimeConf{ContainerID: att.ContainerID, NetNS: att.NetNS, IfName: att.IfName,
		Args: att.CniArgs, CapabilityArgs: att.CapabilityArgs}
	if !isNetns(rt.NetNS) {
		rt.NetNS = "" // gone: the plugins skip what was inside it
	}
	r, _ := n.cached(list, rt)
	if err := n.cni.DelNetworkList(ctx, list, rt); err != nil {
		return nil, err
	}
	if r == nil {
		r = &Result{Network: list.Name, Interface: att.IfName}
	}
	r.Took = time.Since(start)
	return r, nil
}

// cached is what libcni's cache holds for one attachment.
func (n *Network) cached(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (*Result, error) {
	res, err := n.cni.GetNetworkListCachedResult(list, rt)
	if err != nil || res == nil {
		return nil, err
	}
	return n.result(list.Name, rt.ContainerID, res)
}

// Status is the sandbox id's attachment as libcni's cache records it (what
// containerd's PodSandboxStatus reports the pod's IPs from); ok is false
// when the sandbox is not attached.
func (n *Network) Status(id string) (r *Result, ok bool, err error) {
	atts, err := n.cni.GetCachedAttachments(id)
	if err != nil || len(atts) == 0 {
		return nil, false, err
	}
	att := atts[0]
	list, err := libcni.ConfListFromBytes(att.Config)
	if err != nil {
		return nil, false, fmt.Errorf("reading the cached configuration of sandbox %q: %w", id, err)
	}
	r, err = n.cached(list, &libcni.RuntimeConf{ContainerID: id, IfName: att.IfName})
	if err != nil || r == nil {
		return nil, false, err
	}
	return r, true, nil
}

// Sandboxes are the ids of the sandboxes the cache holds attachments of.
func (n *Network) Sandboxes() ([]string, error) {
	atts, err := n.cni.GetCachedAttachments("")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, a := range atts {
		ids = append(ids, a.ContainerID)
	}
	return ids, nil
}

// ResultPath is libcni's cache file of the sandbox id's attachment.
func (n *Network) ResultPath(network, id string) string {
	return filepath.Join(n.cfg.CacheDir, "results", network+"-"+id+"-"+IfName)
}
