package cni_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/cni"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name, cidr, route string
	}{
		{"ipv4", "10.244.1.0/24", "0.0.0.0/0"},
		{"ipv6", "fd00:10:244:1::/64", "::/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := cni.Render(cni.Template{PodCIDR: tt.cidr, Bridge: "plb01234567", DataDir: "/s/ipam"})
			if err != nil {
				t.Fatal(err)
			}
			list, err := libcni.ConfListFromBytes(data) // libcni reads it as the runtime will
			if err != nil {
				t.Fatalf("libcni refuses the conflist: %v\n%s", err, data)
			}
			if list.Name != cni.NetworkName || list.CNIVersion != "1.0.0" {
				t.Errorf("name %q version %q, want %s 1.0.0", list.Name, list.CNIVersion, cni.NetworkName)
			}
			var types []string
			for _, p := range list.Plugins {
				types = append(types, p.Network.Type)
			}
			if got := strings.Join(types, ","); got != "bridge,portmap,firewall" {
				t.Errorf("plugins %s, want bridge,portmap,firewall", got)
			}
			for _, want := range []string{`"ipMasq": false`, `"isGateway": true`, `"hairpinMode": true`,
				`"bridge": "plb01234567"`, `"dataDir": "/s/ipam"`, `"subnet": "` + tt.cidr + `"`,
				`"dst": "` + tt.route + `"`, `"portMappings": true`, `"type": "host-local"`} {
				if !strings.Contains(string(data), want) {
					t.Errorf("the conflist lacks %s:\n%s", want, data)
				}
			}
		})
	}
}

func TestRender_BadInput(t *testing.T) {
	good := cni.Template{PodCIDR: "10.244.1.0/24", Bridge: "plb01234567", DataDir: "/s/ipam"}
	tests := []struct {
		name string
		edit func(*cni.Template)
		want error
		says string
	}{
		{"no CIDR", func(t *cni.Template) { t.PodCIDR = "" }, cni.ErrBadPodCIDR, "spec.podCIDR"},
		{"not a CIDR", func(t *cni.Template) { t.PodCIDR = "10.244.1.0" }, cni.ErrBadPodCIDR, "10.244.1.0"},
		{"host bits set", func(t *cni.Template) { t.PodCIDR = "10.244.1.7/24" }, cni.ErrBadPodCIDR, "did you mean 10.244.1.0/24"},
		{"bridge name too long", func(t *cni.Template) { t.Bridge = "a-bridge-name-of-20" }, cni.ErrBadTemplate, "1 to 15 bytes"},
		{"no bridge name", func(t *cni.Template) { t.Bridge = "" }, cni.ErrBadTemplate, "bridge name"},
		{"relative dataDir", func(t *cni.Template) { t.DataDir = "ipam" }, cni.ErrBadTemplate, "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := good
			tt.edit(&tmpl)
			dir := t.TempDir()
			_, _, err := cni.WriteConfList(dir, tmpl)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err = %v, want %v saying %q", err, tt.want, tt.says)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("a refused template left %d files in the conf_dir", len(ents))
			}
		})
	}
}

func TestWriteConfList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	tmpl := cni.Template{PodCIDR: "10.244.1.0/24", Bridge: "plb01234567", DataDir: "/s/ipam"}
	path, changed, err := cni.WriteConfList(dir, tmpl)
	if err != nil || !changed || path != filepath.Join(dir, "10-podlab.conflist") {
		t.Fatalf("first write: %s %v %v", path, changed, err)
	}
	if _, changed, err = cni.WriteConfList(dir, tmpl); err != nil || changed {
		t.Fatalf("the same template again: changed %v, %v; want unchanged", changed, err)
	}
	tmpl.PodCIDR = "10.244.2.0/24"
	if _, changed, err = cni.WriteConfList(dir, tmpl); err != nil || !changed {
		t.Fatalf("a new pod CIDR: changed %v, %v; want changed", changed, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("the conf_dir holds %d files, want the conflist alone", len(ents))
	}
}

// node is a node's network in the test's network namespace.
type node struct {
	net     *cni.Network
	ipam    string // host-local's dataDir
	bridge  string
	dir     string
	binDirs []string
}

func newNode(t *testing.T, cidr string, binDirs ...string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{ipam: filepath.Join(dir, "networks"), bridge: "plbtest0", dir: dir, binDirs: binDirs}
	if _, _, err := cni.WriteConfList(filepath.Join(dir, "net.d"), cni.Template{PodCIDR: cidr, Bridge: n.bridge, DataDir: n.ipam}); err != nil {
		t.Fatal(err)
	}
	var err error
	if n.net, err = cni.New(cni.Config{ConfDir: filepath.Join(dir, "net.d"), CacheDir: filepath.Join(dir, "cache"), BinDirs: binDirs}); err != nil {
		t.Fatal(err)
	}
	return n
}

// leases are the addresses host-local holds in the node's dataDir.
func (n *node) leases(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(n.ipam, cni.NetworkName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// pinNetns makes a network namespace and pins it at a file, as the
// kubelet's sandbox does.
func pinNetns(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(p, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in the pod's namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), p, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatalf("pinning a network namespace: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
	return p
}

func attachment(t *testing.T, id string) cni.Attachment {
	return cni.Attachment{ID: id, NetNS: pinNetns(t), PodNamespace: "default", PodName: "pod-" + id, PodUID: "uid-" + id}
}

// links lists the network interfaces of a type (veth, bridge) in the
// test's network namespace. (/sys/class/net is the host's: sysfs shows the
// namespace that mounted it.)
func links(t *testing.T, typ string) []string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show", "type", typ).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show type %s: %v: %s", typ, err, out)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	return names
}

func vethCount(t *testing.T) int { return len(links(t, "veth")) }

func TestNetwork_SetupTeardown(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()
	n := newNode(t, "10.244.7.0/24")
	_, cidr, _ := net.ParseCIDR("10.244.7.0/24")
	a, b := attachment(t, "sandbox-a"), attachment(t, "sandbox-b")
	ra, err := n.net.Setup(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := n.net.Setup(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*cni.Result{ra, rb} {
		if len(r.IPs) != 1 || !cidr.Contains(r.IPs[0]) {
			t.Fatalf("IPs %v, want one in %s", r.IPs, cidr)
		}
		if data, err := os.ReadFile(r.ResultPath); err != nil || !strings.Contains(string(data), r.IPs[0].String()) {
			t.Errorf("the result JSON %s: %v, want it to hold %s", r.ResultPath, err, r.IPs[0])
		}
		if len(r.Gateways) != 1 || r.Gateways[0].String() != "10.244.7.1" {
			t.Errorf("gateways %v, want the bridge's 10.244.7.1", r.Gateways)
		}
	}
	if ra.IPs[0].Equal(rb.IPs[0]) {
		t.Fatalf("two sandboxes got one address, %s", ra.IPs[0])
	}
	if got := n.leases(t); len(got) != 2 {
		t.Errorf("host-local holds %v, want 2 addresses", got)
	}
	if got := links(t, "bridge"); len(got) != 1 || got[0] != n.bridge {
		t.Errorf("bridges %v, want %s", got, n.bridge)
	}
	if got := vethCount(t); got != 2 {
		t.Errorf("%d veths, want 2", got)
	}
	if st, ok, err := n.net.Status("sandbox-a"); err != nil || !ok || !st.IPs[0].Equal(ra.IPs[0]) {
		t.Errorf("Status(sandbox-a) = %+v, %v, %v; want %s", st, ok, err, ra.IPs[0])
	}
	if ids, err := n.net.Sandboxes(); err != nil || strings.Join(ids, ",") != "sandbox-a,sandbox-b" {
		t.Errorf("Sandboxes() = %v, %v", ids, err)
	}

	// DEL: the address goes back, the veth and the cache file go.
	del, err := n.net.Teardown(ctx, "sandbox-a")
	if err != nil || len(del) != 1 || !del[0].IPs[0].Equal(ra.IPs[0]) {
		t.Fatalf("Teardown(sandbox-a) = %+v, %v", del, err)
	}
	if got := vethCount(t); got != 1 {
		t.Errorf("%d veths after DEL, want 1", got)
	}
	if got := n.leases(t); len(got) != 1 || got[0] != rb.IPs[0].String() {
		t.Errorf("after DEL host-local holds %v, want only %s", got, rb.IPs[0])
	}
	if _, err := os.Stat(ra.ResultPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the result JSON outlived DEL: %v", err)
	}
	if _, ok, _ := n.net.Status("sandbox-a"); ok {
		t.Error("Status says sandbox-a is attached after DEL")
	}
	if del, err := n.net.Teardown(ctx, "sandbox-a"); err != nil || len(del) != 0 {
		t.Errorf("a second DEL = %v, %v; want nothing done", del, err)
	}

	// DEL after the network namespace is gone: the address is released.
	if err := unix.Unmount(b.NetNS, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if _, err := n.net.Teardown(ctx, "sandbox-b"); err != nil {
		t.Fatalf("DEL of a sandbox whose netns is gone: %v", err)
	}
	if got := n.leases(t); len(got) != 0 {
		t.Errorf("after DEL host-local holds %v, want none", got)
	}
}

func TestNetwork_SetupFaults(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()

	t.Run("missing plugin", func(t *testing.T) {
		bin := t.TempDir()
		for _, p := range []string{"host-local", "portmap", "firewall"} { // no bridge
			if err := os.Symlink(filepath.Join("/usr/lib/cni", p), filepath.Join(bin, p)); err != nil {
				t.Fatal(err)
			}
		}
		n := newNode(t, "10.244.8.0/24", bin)
		_, err := n.net.Setup(ctx, attachment(t, "sandbox-m"))
		want := `failed to setup network for sandbox "sandbox-m": plugin type="bridge" failed (add): failed to find plugin "bridge"`
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "containernetworking-plugins") {
			t.Fatalf("err = %v, want %s ... and the package to install", err, want)
		}
		if strings.Contains(err.Error(), "undoing") {
			t.Errorf("the DEL after a failed ADD failed: %v", err)
		}
		if got := n.leases(t); len(got) != 0 {
			t.Errorf("host-local holds %v after a failed ADD", got)
		}
	})

	t.Run("pod CIDR exhausted", func(t *testing.T) {
		// A /30 has two addresses for hosts: the gateway's and one pod's.
		n := newNode(t, "10.244.9.0/30")
		before := vethCount(t)
		first, err := n.net.Setup(ctx, attachment(t, "sandbox-1"))
		if err != nil {
			t.Fatal(err)
		}
		second := attachment(t, "sandbox-2")
		_, err = n.net.Setup(ctx, second)
		want := `failed to setup network for sandbox "sandbox-2": plugin type="bridge" failed (add): failed to allocate for range 0: no IP addresses available in range set`
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--node-cidr-mask-size") {
			t.Fatalf("err = %v, want %s ... and a hint", err, want)
		}
		if got := n.leases(t); len(got) != 1 || got[0] != first.IPs[0].String() {
			t.Errorf("host-local holds %v, want only the first pod's %s", got, first.IPs[0])
		}
		if got := vethCount(t) - before; got != 1 {
			t.Errorf("%d veths on the bridge, want the first pod's alone", got)
		}
		if _, ok, _ := n.net.Status("sandbox-2"); ok {
			t.Error("the failed sandbox is cached as attached")
		}
		if _, err := n.net.Teardown(ctx, "sandbox-1"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNetwork_BadInput(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	good := func(t *testing.T) cni.Attachment { return attachment(t, "sandbox-x") }
	tests := []struct {
		name   string
		edit   func(*cni.Attachment)
		noConf bool
		want   error
		says   string
	}{
		{"no sandbox id", func(a *cni.Attachment) { a.ID = "" }, false, cni.ErrBadAttachment, "sandbox id"},
		{"netns not a namespace", func(a *cni.Attachment) { a.NetNS = "/etc/hostname" }, false, cni.ErrBadAttachment, "not a network namespace"},
		{"netns missing", func(a *cni.Attachment) { a.NetNS = "/nonexistent/netns" }, false, cni.ErrBadAttachment, "not a network namespace"},
		{"bad protocol", func(a *cni.Attachment) {
			a.PortMappings = []cni.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"}}
		}, false, cni.ErrBadAttachment, `protocol "TCP"`},
		{"port 0", func(a *cni.Attachment) {
			a.PortMappings = []cni.PortMapping{{HostPort: 0, ContainerPort: 80, Protocol: "tcp"}}
		}, false, cni.ErrBadAttachment, "1 to 65535"},
		{"no configuration", func(*cni.Attachment) {}, true, cni.ErrNoNetwork, "no pod CIDR yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if !tt.noConf {
				if _, _, err := cni.WriteConfList(filepath.Join(dir, "net.d"), cni.Template{PodCIDR: "10.244.1.0/24", Bridge: "plbbad0", DataDir: filepath.Join(dir, "ipam")}); err != nil {
					t.Fatal(err)
				}
			}
			n, err := cni.New(cni.Config{ConfDir: filepath.Join(dir, "net.d"), CacheDir: filepath.Join(dir, "cache")})
			if err != nil {
				t.Fatal(err)
			}
			a := good(t)
			tt.edit(&a)
			if _, err := n.Setup(ctx, a); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err = %v, want %v saying %q", err, tt.want, tt.says)
			}
			if _, err := os.Stat(filepath.Join(dir, "ipam")); !errors.Is(err, os.ErrNotExist) {
				t.Error("refused input reached host-local")
			}
		})
	}
	if _, err := cni.New(cni.Config{ConfDir: "net.d", CacheDir: "/c"}); !errors.Is(err, cni.ErrBadTemplate) {
		t.Errorf("New with a relative conf_dir: %v", err)
	}
}
