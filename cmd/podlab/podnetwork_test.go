package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/up"
)

// podNetworkDeployment is two replicas of hello, each with a hostPort: the
// scheduler spreads them over the two machines.
const podNetworkDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: hello
        image: %s
        ports: [{containerPort: 8080, hostPort: %d}]
`

// httpGet asks addr for / over a connection dial makes, and returns the
// body.
func httpGet(t *testing.T, what string, dial func(context.Context) (net.Conn, error), addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx)
	if err != nil {
		t.Errorf("%s: dialling %s: %v", what, addr, err)
		return ""
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: %s\n%s", what, resp.Status, body)
	}
	return string(body)
}

// TestPodNetwork_AcrossMachines: the whole lab, real processes: the API
// server, the controller-manager with node IPAM, the scheduler, two nodes
// joined as machines with their kubelets inside them and a network agent
// each. A Deployment's two pods land one on each node with an IP from its
// node's podCIDR; each reaches the other by IP over HTTP from inside its
// own network namespace (no NAT: the other sees its pod IP), the hostPort
// of node-2's pod answers at node-2's lab address from node-1's machine,
// and reset leaves nothing of the state directory on the host.
func TestPodNetwork_AcrossMachines(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.Runc(t)
	kubectl := testenv.Kubectl(t)
	nodes := []string{"node-1", "node-2"}
	state, lab, srvErr, stopAPIServer := labWithAPIServer(t, nodes...)
	l := statedir.Layout{Dir: state}

	_, cmlog := startComponent(t, state, "controller-manager", "--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/16")
	startComponent(t, state, "scheduler")
	ms := map[string]machine.Machine{}
	klogs := map[string]*lockedBuffer{}
	alogs := map[string]*lockedBuffer{}
	for _, n := range nodes {
		out := mustPodlab(t, state, "node", "join", n)
		for _, want := range []string{
			"Next, each in a shell of its own:",
			"podlab kubelet --node " + n,
			"podlab network-agent --node " + n,
			"podlab controller-manager --allocate-node-cidrs --cluster-cidr 10.244.0.0/16",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("podlab node join %s does not say %q:\n%s", n, want, out)
			}
		}
		m, err := machine.Load(l.Node(n))
		if err != nil {
			t.Fatal(err)
		}
		ms[n] = m
	}
	// the image, from a registry on the lab network
	ref := pushHello(t, labRegistry(t, lab))

	for _, n := range nodes {
		_, klogs[n] = startComponent(t, state, "kubelet", "--node", n, "--insecure")
		_, alogs[n] = startComponent(t, state, "network-agent", "--node", n)
	}
	admin := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s\nnode-1's kubelet:\n%s\nnode-2's kubelet:\n%s\napiserver:\n%s", strings.Join(args, " "), err, out, klogs["node-1"], klogs["node-2"], srvErr)
		}
		return out
	}
	cidrs := map[string]*net.IPNet{}
	for _, n := range nodes {
		waitFor(t, 60*time.Second, func() bool {
			out, _ := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "node", n, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.spec.podCIDR}")
			f := strings.Fields(out)
			return len(f) == 2 && f[0] == "True"
		}, n+" Ready with a podCIDR", cmlog)
		_, cidr, err := net.ParseCIDR(admin("get", "node", n, "-o", "jsonpath={.spec.podCIDR}"))
		cidrs[n] = cidr
		if err != nil {
			t.Fatal(err)
		}
	}
	// each agent routes the other node's podCIDR via its lab address
	for i, n := range nodes {
		other := nodes[1-i]
		want := fmt.Sprintf("route add %s via %s (node %s)", cidrs[other], ms[other].IP(), other)
		waitFor(t, 30*time.Second, func() bool { return strings.Contains(alogs[n].String(), want) }, n+"'s agent: "+want, alogs[n])
	}

	hostPort := 18080
	f := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(f, []byte(fmt.Sprintf(podNetworkDeployment, ref, hostPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	admin("apply", "-f", f)
	type pod struct{ name, uid, node, ip string }
	pods := map[string]pod{}
	waitFor(t, 120*time.Second, func() bool {
		out, _ := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "pods", "-l", "app=web", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.spec.nodeName} {.status.podIP} {.status.phase}{"\n"}{end}`)
		clear(pods)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[4] == "Running" {
				pods[f[2]] = pod{f[0], f[1], f[2], f[3]}
			}
		}
		return len(pods) == 2
	}, "one Running pod with an IP on each node", klogs["node-2"])
	for _, n := range nodes {
		if ip := net.ParseIP(pods[n].ip); ip == nil || !cidrs[n].Contains(ip) {
			t.Errorf("pod %s on %s has IP %q, want one in its node's podCIDR %s", pods[n].name, n, pods[n].ip, cidrs[n])
		}
	}

	// pod to pod, across the machines, both ways, by IP
	for i, n := range nodes {
		from, to := pods[n], pods[nodes[1-i]]
		addr := net.JoinHostPort(to.ip, "8080")
		body := httpGet(t, fmt.Sprintf("%s (on %s) asking %s (on %s) at %s", from.name, from.node, to.name, to.node, addr),
			func(ctx context.Context) (net.Conn, error) {
				_, netns := sandboxOf(t, l.Node(from.node), from.uid)
				return up.DialInNetns(ctx, netns, "tcp", addr)
			}, addr)
		if !strings.Contains(body, to.name) {
			t.Errorf("%s answered %s:\n%s", to.name, from.name, body)
		}
		// no NAT between pods: the server saw the client's pod IP
		if logs := admin("logs", to.name); !strings.Contains(logs, from.ip+":") {
			t.Errorf("%s's log does not show %s's pod IP %s as the client (NAT?):\n%s", to.name, from.name, from.ip, logs)
		}
	}
	// hostPort: node-2's pod at node-2's lab address, from node-1's machine
	addr := net.JoinHostPort(ms["node-2"].IP().String(), strconv.Itoa(hostPort))
	body := httpGet(t, "node-1's machine asking "+addr, func(ctx context.Context) (net.Conn, error) {
		return machine.Dial(ctx, ms["node-1"].Netns, addr)
	}, addr)
	if !strings.Contains(body, pods["node-2"].name) {
		t.Errorf("hostPort %s answered:\n%s", addr, body)
	}

	// reset, the API server stopped first: what the lab made on the host
	// before (the bridge, the machines' veths, the netns mounts, the
	// cgroups), nothing after
	running := testenv.LabTraces(t, state, nodes...)
	for _, want := range []string{"link " + lab.Bridge, "link " + ms["node-1"].HostVeth, "mount " + ms["node-2"].Netns, "netns " + ms["node-1"].Netns} {
		if !slices.Contains(running, want) {
			t.Errorf("before reset, the host should show %q: %v", want, running)
		}
	}
	if !slices.ContainsFunc(running, func(s string) bool { return strings.HasPrefix(s, "cgroup ") }) {
		t.Errorf("before reset, no cgroup of the state directory: %v", running)
	}
	stopAPIServer()
	out := mustPodlab(t, state, "reset", "--yes", "--runtime", testenv.Runc(t))
	if tr := testenv.LabTraces(t, state, nodes...); len(tr) != 0 {
		t.Errorf("after reset: %v\n%s", tr, out)
	}
}
