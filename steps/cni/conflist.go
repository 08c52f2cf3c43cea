package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// NetworkName is the name of podlab's pod network: libcni's cache and
// host-local's dataDir name their files after it.
const NetworkName = "podlab"

// ConfListName is the file WriteConfList writes in the conf_dir. A runtime
// uses the first configuration of its conf_dir in lexical order: "10-" as
// containerd's and kubeadm's add-ons name theirs.
const ConfListName = "10-podlab.conflist"

// CNIVersion is the CNI spec version of the configuration: the newest that
// Debian's containernetworking-plugins 1.1.1 speak.
const CNIVersion = "1.0.0"

// maxLinkName is the longest Linux network interface name (IFNAMSIZ-1).
const maxLinkName = 15

// Template is what the runtime renders its configuration from, as
// containerd's conf_template is rendered from the pod CIDR the kubelet hands
// it (CRI UpdateRuntimeConfig).
type Template struct {
	// PodCIDR is the node's spec.podCIDR, from the controller-manager's
	// node IPAM.
	PodCIDR string
	// Bridge is the node's bridge (statedir.Node.BridgeName).
	Bridge string
	// DataDir is host-local's dataDir, an absolute path
	// (statedir.Node.CNIIPAMDir).
	DataDir string
}

// Render is the conflist of t: bridge with host-local IPAM on the pod CIDR,
// portmap, firewall (see the package doc).
func Render(t Template) ([]byte, error) {
	_, cidr, err := net.ParseCIDR(t.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v (the node's spec.podCIDR, e.g. 10.244.1.0/24)", ErrBadPodCIDR, t.PodCIDR, err)
	}
	if cidr.String() != t.PodCIDR {
		return nil, fmt.Errorf("%w %q: not a network address (did you mean %s?)", ErrBadPodCIDR, t.PodCIDR, cidr)
	}
	if t.Bridge == "" || len(t.Bridge) > maxLinkName {
		return nil, fmt.Errorf("%w: bridge name %q: want 1 to %d bytes (a Linux interface name)", ErrBadTemplate, t.Bridge, maxLinkName)
	}
	if !filepath.IsAbs(t.DataDir) {
		return nil, fmt.Errorf("%w: host-local dataDir %q: want an absolute path", ErrBadTemplate, t.DataDir)
	}
	defaultRoute := "0.0.0.0/0"
	if cidr.IP.To4() == nil {
		defaultRoute = "::/0"
	}
	type obj = map[string]any
	conf := obj{
		"cniVersion": CNIVersion,
		"name":       NetworkName,
		"plugins": []obj{
			{
				"type":        "bridge",
				"bridge":      t.Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": obj{
					"type":    "host-local",
					"dataDir": t.DataDir,
					"ranges":  [][]obj{{{"subnet": t.PodCIDR}}},
					"routes":  []obj{{"dst": defaultRoute}},
				},
			},
			{"type": "portmap", "capabilities": obj{"portMappings": true}},
			{"type": "firewall"},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(conf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteConfList renders t into dir/10-podlab.conflist, atomically, unless
// the file says that already. It returns the file's path and whether it
// changed.
func WriteConfList(dir string, t Template) (string, bool, error) {
	data, err := Render(t)
	if err != nil {
		return "", false, err
	}
	path := filepath.Join(dir, ConfListName)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return path, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("writing the network configuration: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", false, fmt.Errorf("writing the network configuration: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	return path, true, nil
}
