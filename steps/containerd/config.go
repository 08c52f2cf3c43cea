package containerd

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/statedir"
)

// SandboxImage is the pause image of Kubernetes v1.37 (kubeadm 1.37's
// constants.PauseVersion is "3.10.2"): the image of every pod's sandbox
// container, which only holds the pod's namespaces. The lab registry
// serves it (images.PauseRef) as registry.k8s.io's mirror.
const SandboxImage = "registry.k8s.io/pause:3.10.2"

// Namespace is the containerd namespace the CRI plugin keeps Kubernetes'
// images, containers and tasks in (`ctr -n k8s.io ...`).
const Namespace = "k8s.io"

// MirroredRegistries are the registries whose hosts.toml names the lab
// registry as their mirror: Docker Hub (nginx, podlab/hello) and
// Kubernetes' own (pause), each with its upstream server.
func MirroredRegistries() map[string]string {
	return map[string]string{
		"docker.io":       "https://registry-1.docker.io",
		"registry.k8s.io": "https://registry.k8s.io",
	}
}

// Config is a lab containerd.
type Config struct {
	// Layout is where everything it writes goes (statedir.Containerd).
	Layout statedir.Containerd
	// CertsDir is the registry hosts directory (statedir.Layout.CertsDir).
	CertsDir string
	// Runc is the OCI runtime binary the runc shim runs (podlab's bin/runc).
	Runc string
	// CNIBinDir holds the CNI plugins (/usr/lib/cni on Debian).
	CNIBinDir string
	// SandboxImage is the pause image; empty means SandboxImage.
	SandboxImage string
}

// FromLayout is the lab containerd of the state directory l, running
// runcBin, with the CNI plugins in cniBinDir.
func FromLayout(l statedir.Layout, runcBin, cniBinDir string) Config {
	return Config{Layout: l.Containerd(), CertsDir: l.CertsDir(), Runc: runcBin, CNIBinDir: cniBinDir, SandboxImage: SandboxImage}
}

// Validate says what is wrong with c, in words that say what to do.
func (c Config) Validate() error {
	paths := []struct{ what, p string }{
		{"its directory", c.Layout.Dir},
		{"the registry hosts directory", c.CertsDir},
		{"the runc binary", c.Runc},
		{"the CNI plugin directory", c.CNIBinDir},
	}
	for _, p := range paths {
		if p.p == "" || !filepath.IsAbs(p.p) {
			return fmt.Errorf("%w: %s %q must be an absolute path", ErrBadConfig, p.what, p.p)
		}
		if strings.ContainsAny(p.p, "\"\\\n\r\t") {
			return fmt.Errorf("%w: %s %q has a quote, backslash or control character: choose a plainer path", ErrBadConfig, p.what, p.p)
		}
	}
	// The socket's path must fit in sun_path (108 bytes with its NUL).
	if n := len(c.Layout.Socket() + ".ttrpc"); n > 107 {
		return fmt.Errorf("%w: the socket %s.ttrpc is %d bytes, more than a unix socket's 107: choose a shorter --state-dir", ErrBadConfig, c.Layout.Socket(), n)
	}
	if strings.ContainsAny(c.sandboxImage(), "\"\\\n ") {
		return fmt.Errorf("%w: sandbox image %q is not an image reference", ErrBadConfig, c.sandboxImage())
	}
	return nil
}

func (c Config) sandboxImage() string {
	if c.SandboxImage == "" {
		return SandboxImage
	}
	return c.SandboxImage
}

// The plugins a lab containerd does without: snapshotters this machine
// cannot use (each logs why at every start). The v1 runtime stays, unused:
// 1.6's tasks service, which the CRI plugin needs, refuses to load
// without it.
var disabledPlugins = []string{
	"io.containerd.snapshotter.v1.aufs",
	"io.containerd.snapshotter.v1.btrfs",
	"io.containerd.snapshotter.v1.devmapper",
	"io.containerd.snapshotter.v1.zfs",
}

var configTemplate = template.Must(template.New("config.toml").Parse(`# The lab containerd of podlab's state directory (podlab containerd).
# Rendered by podlab: edits are overwritten at the next start.
version = 2
root = "{{.L.Root}}"
state = "{{.L.State}}"
disabled_plugins = [{{range $i, $p := .Disabled}}{{if $i}}, {{end}}"{{$p}}"{{end}}]

[grpc]
  address = "{{.L.Socket}}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.L.OptDir}}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.SandboxImage}}"
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj is EPERM
  restrict_oom_score_adj = true
  # the pods' network namespaces under state/ (not /var/run/netns)
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{{.Runc}}"
        Root = "{{.L.RuncRoot}}"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.L.CNIConfDir}}"

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{{.CertsDir}}"
`))

// Render is c's config.toml (version 2, as containerd 1.6 reads it).
func Render(c Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err := configTemplate.Execute(&buf, struct {
		L                                       statedir.Containerd
		Disabled                                []string
		SandboxImage, Runc, CNIBinDir, CertsDir string
	}{c.Layout, disabledPlugins, c.sandboxImage(), c.Runc, c.CNIBinDir, c.CertsDir})
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RenderHosts is the hosts.toml of registry host (a key of
// MirroredRegistries) whose mirror is mirror ("http://127.0.0.1:5001"):
// containerd asks the mirror first, with ?ns=<host> on each request, and
// the upstream server after it.
func RenderHosts(host, mirror string) ([]byte, error) {
	server, ok := MirroredRegistries()[host]
	if !ok {
		return nil, fmt.Errorf("%w: no upstream known for registry %q", ErrBadConfig, host)
	}
	u, err := ParseMirror(mirror)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `# %s pulls through the lab registry (podlab registry serve), then upstream.
# Written by podlab (registry serve, init, containerd); containerd and podlab pull read it.
server = "%s"

[host."%s"]
  capabilities = ["pull", "resolve"]
`, host, server, u), nil
}

// ParseMirror checks a mirror URL: http or https, a host, no path.
func ParseMirror(mirror string) (string, error) {
	u, err := url.Parse(mirror)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return "", fmt.Errorf("%w: registry mirror %q: want a URL such as http://127.0.0.1:5001 (the lab registry, podlab registry serve)", ErrBadConfig, mirror)
	}
	if strings.ContainsAny(u.Host, "\"\\") {
		return "", fmt.Errorf("%w: registry mirror %q: a quote or backslash in its host", ErrBadConfig, mirror)
	}
	return u.Scheme + "://" + u.Host, nil
}

// RenderCrictl is a crictl configuration (crictl.yaml) for the socket
// sock: runtime and image endpoint, a timeout that outlasts a first pull,
// and pull-image-on-create as the kubelet pulls before it creates.
func RenderCrictl(sock string) []byte {
	return fmt.Appendf(nil, `# crictl --config this-file, or export CRI_CONFIG_FILE=this-file
runtime-endpoint: %s
image-endpoint: %s
timeout: 30
pull-image-on-create: true
`, Endpoint(sock), Endpoint(sock))
}

// Written is what Write wrote.
type Written struct {
	Crictl   string   // crictl.yaml
	Config   string   // config.toml
	Hosts    []string // each hosts.toml
	ConfList string   // the CNI conflist
}

// Write renders c's config.toml, a crictl.yaml for its socket, one hosts.toml per mirrored registry
// naming mirror (none when mirror is ""), and the CNI conflist of its own
// bridge and pod CIDR (steps/cni), and makes the directories containerd
// writes into.
func Write(c Config, mirror string) (*Written, error) {
	data, err := Render(c)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{c.Layout.Dir, c.Layout.PodLogsDir(), c.Layout.CNIIPAMDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("making containerd's directory: %w", err)
		}
	}
	out := &Written{Config: c.Layout.Config(), Crictl: c.Layout.CrictlConfig()}
	if err := writeFile(out.Config, data); err != nil {
		return nil, err
	}
	if err := writeFile(out.Crictl, RenderCrictl(c.Layout.Socket())); err != nil {
		return nil, err
	}
	if mirror != "" {
		if out.Hosts, err = WriteHosts(c.CertsDir, mirror); err != nil {
			return nil, err
		}
	}
	out.ConfList, _, err = cni.WriteConfList(c.Layout.CNIConfDir(), cni.Template{
		PodCIDR: c.Layout.PodCIDR(),
		Bridge:  c.Layout.BridgeName(),
		DataDir: c.Layout.CNIIPAMDir(),
	})
	if err != nil {
		return nil, fmt.Errorf("writing the lab containerd's CNI configuration: %w", err)
	}
	return out, nil
}

// WriteHosts writes <certsDir>/<host>/hosts.toml for each registry of
// MirroredRegistries, naming mirror ("http://127.0.0.1:5001") as its
// mirror, and returns their paths, sorted. It is the one writer of these
// files: podlab containerd, podlab registry serve and podlab init call it,
// and containerd (config_path) and podlab pull read them.
func WriteHosts(certsDir, mirror string) ([]string, error) {
	var out []string
	for host := range MirroredRegistries() {
		hosts, err := RenderHosts(host, mirror)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(certsDir, host, "hosts.toml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("writing the registry hosts of %s: %w", host, err)
		}
		if err := writeFile(p, hosts); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// writeFile writes data to path atomically (a temporary file renamed).
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
