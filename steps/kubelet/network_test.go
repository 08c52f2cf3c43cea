package kubelet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/up"
)

// givePodCIDR sets node-1's spec.podCIDR, as the controller-manager's node
// IPAM does, once the kubelet registered it.
func (c *cluster) givePodCIDR(t *testing.T, cidr string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.kubelet.Register(ctx); err != nil {
		t.Fatal(err)
	}
	obj, err := c.admin.Get(ctx, "nodes", "", apiserver.HostNode)
	if err != nil {
		t.Fatal(err)
	}
	node := obj.(*corev1.Node)
	node.Spec.PodCIDR, node.Spec.PodCIDRs = cidr, []string{cidr}
	if _, err := c.admin.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// leases are the addresses host-local holds for the node.
func leases(t *testing.T, k *kubelet.Kubelet) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(k.Layout().CNIIPAMDir(), cni.NetworkName))
	if os.IsNotExist(err) {
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

// httpGet sends GET / to addr from inside the network namespace netns
// ("" for the test's own, the node's), trying while nothing listens yet.
func httpGet(t *testing.T, netns, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	for {
		if netns == "" {
			conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		} else {
			conn, err = up.DialInNetns(ctx, netns, "tcp", addr)
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("connecting to %s from %q: %v", addr, netns, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET http://%s/ from %q: %v", addr, netns, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET http://%s/ from %q: %s", addr, netns, resp.Status)
	}
	return string(body)
}

func TestPodNetwork(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	ctx := context.Background()
	c := newCluster(t)
	c.givePodCIDR(t, "10.244.3.0/24")
	_, cidr, _ := net.ParseCIDR("10.244.3.0/24")
	res, err := c.kubelet.Heartbeat(ctx)
	if err != nil || res.RuntimeConfigErr != nil || !res.RuntimeConfig.Changed {
		t.Fatalf("the heartbeat did not hand the pod CIDR to the runtime: %+v %v", res, err)
	}
	// The runtime rendered its network configuration from it.
	confs, _ := filepath.Glob(filepath.Join(c.kubelet.Layout().CNIConfDir(), "*.conflist"))
	if len(confs) != 1 {
		t.Fatalf("the runtime's network configurations: %v, want one", confs)
	}
	if conf, err := os.ReadFile(confs[0]); err != nil || !strings.Contains(string(conf), `"subnet": "10.244.3.0/24"`) {
		t.Fatalf("%s: %v\n%s", confs[0], err, conf)
	}
	if res, err := c.kubelet.Heartbeat(ctx); err != nil || res.RuntimeConfig.Changed {
		t.Errorf("a second heartbeat handed the same pod CIDR again: %+v, %v", res.RuntimeConfig, err)
	}

	a := helloPod(t, "web-a")
	a.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 18080}}
	c.create(t, a)
	c.create(t, helloPod(t, "web-b"))
	pa := c.syncUntil(t, "web-a", 20*time.Second, "running", running)
	pb := c.syncUntil(t, "web-b", 20*time.Second, "running", running)

	// Two IPs from the node's pod CIDR, in the status.
	for _, p := range []*corev1.Pod{pa, pb} {
		ip := net.ParseIP(p.Status.PodIP)
		if ip == nil || !cidr.Contains(ip) || len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != p.Status.PodIP {
			t.Fatalf("pod %s: podIP %q podIPs %v, want one address in %s", p.Name, p.Status.PodIP, p.Status.PodIPs, cidr)
		}
		if sb := c.sandboxOf(t, p.UID); sb.Status.GetNetwork().GetIp() != p.Status.PodIP {
			t.Errorf("pod %s: podIP %s, the runtime's PodSandboxStatus says %s", p.Name, p.Status.PodIP, sb.Status.GetNetwork().GetIp())
		}
	}
	if pa.Status.PodIP == pb.Status.PodIP {
		t.Fatalf("two pods got the address %s", pa.Status.PodIP)
	}

	// Pod to pod, by IP, over the node's bridge.
	netnsA := c.sandboxOf(t, pa.UID).Info.Namespaces["net"]
	if body := httpGet(t, netnsA, net.JoinHostPort(pb.Status.PodIP, "8080")); !strings.Contains(body, "web-b") {
		t.Errorf("web-a asked web-b's IP and got:\n%s", body)
	}
	// hostPort: the node's address (the bridge's, 10.244.3.1) :18080 is web-a's :8080.
	if body := httpGet(t, "", "10.244.3.1:18080"); !strings.Contains(body, "web-a") {
		t.Errorf("the node's hostPort 18080 answered:\n%s", body)
	}

	// Deleting web-a gives its address back.
	if _, err := c.admin.Delete(ctx, "pods", "default", "web-a", apiserver.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		obj, err := c.admin.Get(ctx, "pods", "default", "web-a")
		if apierrors.IsNotFound(err) {
			break
		}
		if err == nil {
			_ = c.kubelet.SyncPod(ctx, obj.(*corev1.Pod))
		}
		if time.Now().After(deadline) {
			t.Fatal("web-a was not removed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := leases(t, c.kubelet); len(got) != 1 || got[0] != pb.Status.PodIP {
		t.Errorf("host-local holds %v after web-a went, want only web-b's %s", got, pb.Status.PodIP)
	}
	if sbs := c.sandboxesOf(t, pa.UID); len(sbs) != 0 {
		t.Errorf("web-a's sandbox outlived it: %v", sbs)
	}
}

func TestPodNetwork_SandboxFails(t *testing.T) {
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
		c := newClusterWithRuntime(t, func(rc *cri.Config) { rc.CNIBinDirs = []string{bin} })
		c.givePodCIDR(t, "10.244.4.0/24")
		p := c.create(t, helloPod(t, "nobridge"))
		if _, err := c.kubelet.SandboxStage(ctx, p); err == nil {
			t.Fatal("the sandbox was made without the bridge plugin")
		}
		want := `plugin type="bridge" failed (add): failed to find plugin "bridge"`
		if ev := c.events(t, p); !hasEvent(ev, "Warning FailedCreatePodSandBox: Failed to create pod sandbox: rpc error: ") || !strings.Contains(strings.Join(ev, "\n"), want) {
			t.Errorf("events %q, want FailedCreatePodSandBox with the runtime's %s", ev, want)
		}
		if sbs := c.sandboxesOf(t, p.UID); len(sbs) != 0 {
			t.Errorf("the runtime kept the failed sandbox: %v", sbs)
		}
		if ents, _ := os.ReadDir(c.kubelet.Layout().NamespaceDir("net")); len(ents) != 0 {
			t.Errorf("the failed sandbox's netns is left: %v", ents)
		}
		if got := leases(t, c.kubelet); len(got) != 0 {
			t.Errorf("host-local holds %v after a failed sandbox", got)
		}
		if p = c.get(t, "nobridge"); p.Status.PodIP != "" {
			t.Errorf("podIP %q for a pod with no network", p.Status.PodIP)
		}
	})

	t.Run("pod CIDR exhausted", func(t *testing.T) {
		c := newCluster(t)
		c.givePodCIDR(t, "10.244.5.0/30") // the gateway's address and one pod's
		first := c.create(t, helloPod(t, "first"))
		if _, err := c.kubelet.SandboxStage(ctx, first); err != nil {
			t.Fatal(err)
		}
		second := c.create(t, helloPod(t, "second"))
		if _, err := c.kubelet.SandboxStage(ctx, second); err == nil {
			t.Fatal("a second sandbox in a /30")
		}
		want := `plugin type="bridge" failed (add): failed to allocate for range 0: no IP addresses available in range set: 10.244.5.1-10.244.5.2`
		if ev := c.events(t, second); !hasEvent(ev, "Warning FailedCreatePodSandBox: Failed to create pod sandbox: rpc error: ") || !strings.Contains(strings.Join(ev, "\n"), want) {
			t.Errorf("events %q, want FailedCreatePodSandBox with the runtime's %s", ev, want)
		}
		if got := leases(t, c.kubelet); len(got) != 1 {
			t.Errorf("host-local holds %v, want the first pod's address alone", got)
		}
	})

	t.Run("no pod CIDR", func(t *testing.T) {
		c := newCluster(t)
		var notes []string
		for _, name := range []string{"lo-only-1", "lo-only-2"} {
			res, err := c.kubelet.SandboxStage(ctx, c.create(t, helloPod(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			notes = append(notes, res.NetworkNote)
			if len(res.Sandbox.IPs) != 0 || !res.Sandbox.Ready {
				t.Errorf("%s: IPs %v, ready %v; want lo only, ready", name, res.Sandbox.IPs, res.Sandbox.Ready)
			}
		}
		if !strings.Contains(notes[0], "--allocate-node-cidrs") || notes[1] != "" {
			t.Errorf("notes %q: want the controller-manager's flag named once", notes)
		}
	})
}
