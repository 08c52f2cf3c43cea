package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/up"
)

// TestPodNetwork_OverCNI: every part real, in a network namespace the test
// owns: the controller-manager's node IPAM gives node-1 a pod CIDR, the
// kubelet hands it to the runtime, which writes its conflist and attaches
// each sandbox through the CNI plugins; kubectl get pods -o wide shows two
// IPs from the CIDR, one pod reaches the other by IP, and reset deletes
// the bridge.
func TestPodNetwork_OverCNI(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	kubectl := testenv.Kubectl(t)
	ref := helloRegistry(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	l := statedir.Layout{Dir: state}
	admin := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	_, cmlog := startComponent(t, state, "controller-manager", "--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/16")
	_, klog := startComponent(t, state, "kubelet", "--port", "0")
	waitFor(t, 30*time.Second, func() bool {
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "node", "node-1", "-o", "jsonpath={.spec.podCIDR}")
		_, _, perr := net.ParseCIDR(strings.TrimSpace(out))
		return err == nil && perr == nil // not kubectl's NotFound before the kubelet registers
	}, "node-1's pod CIDR", cmlog)
	startComponent(t, state, "scheduler")
	mustPodlab(t, state, "run", "web-a", "--image", ref)
	mustPodlab(t, state, "run", "web-b", "--image", ref)
	waitRunning(t, state, 60*time.Second, "web-a", "web-b")

	cidr := admin("get", "node", "node-1", "-o", "jsonpath={.spec.podCIDR}")
	_, podNet, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatalf("node-1's podCIDR %q: %v", cidr, err)
	}
	wide := admin("get", "pods", "-o", "wide")
	ips := map[string]string{}
	for _, line := range strings.Split(wide, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 5 {
			ips[f[0]] = f[5]
		}
	}
	for _, name := range []string{"web-a", "web-b"} {
		if ip := net.ParseIP(ips[name]); ip == nil || !podNet.Contains(ip) {
			t.Fatalf("kubectl get pods -o wide: %s has IP %q, want one in %s\n%s", name, ips[name], cidr, wide)
		}
	}
	if ips["web-a"] == ips["web-b"] {
		t.Fatalf("two pods share %s:\n%s", ips["web-a"], wide)
	}
	node := l.Node("node-1")
	for _, want := range []string{
		fmt.Sprintf("node node-1: podCIDR %s handed to the runtime (UpdateRuntimeConfig)", cidr),
		"network: the runtime attached it (CNI ADD): IP " + ips["web-a"],
	} {
		if !strings.Contains(klog.String(), want) {
			t.Errorf("the kubelet does not say %q:\n%s", want, klog.String())
		}
	}

	// web-a asks web-b over HTTP, by IP, from inside its network namespace.
	uid := admin("get", "pod", "web-a", "-o", "jsonpath={.metadata.uid}")
	sandbox, netns := sandboxOf(t, node, uid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := up.DialInNetns(ctx, netns, "tcp", net.JoinHostPort(ips["web-b"], "8080"))
	if err != nil {
		t.Fatalf("web-a dialling web-b at %s: %v", ips["web-b"], err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", ips["web-b"])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "web-b") {
		t.Errorf("web-b answered web-a %s:\n%s", resp.Status, body)
	}
	if _, err := os.Stat(node.CNICacheDir() + "/results/podlab-" + sandbox + "-eth0"); err != nil {
		t.Errorf("web-a's CNI result JSON: %v", err)
	}
	if !regexp.MustCompile(`"bridge": "plb[0-9a-f]{8}"`).MatchString(readFile(t, node.CNIConfDir()+"/10-podlab.conflist")) {
		t.Errorf("the conflist names no plb<hash> bridge")
	}

	// Deleting the pods gives their addresses back (CNI DEL).
	admin("delete", "pods", "web-a", "web-b")
	waitFor(t, 30*time.Second, func() bool { return strings.TrimSpace(admin("get", "pods", "-o", "name")) == "" }, "the pods gone", klog)
	leases, _ := os.ReadDir(node.CNIIPAMDir() + "/podlab")
	for _, e := range leases {
		if net.ParseIP(e.Name()) != nil {
			t.Errorf("host-local still holds %s after its pod went", e.Name())
		}
	}
	if !strings.Contains(klog.String(), "RemovePodSandbox "+sandbox[:13]) {
		t.Errorf("the kubelet does not say it removed web-a's sandbox %s (the runtime's CNI DEL):\n%s", sandbox, klog.String())
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sandboxOf asks node's runtime over CRI (as crictl pods --label and
// inspectp would) for the sandbox the kubelet made for the pod with uid:
// its id and its pinned network namespace.
func sandboxOf(t *testing.T, node statedir.Node, uid string) (id, netns string) {
	t.Helper()
	ctx := context.Background()
	c, err := criremote.Dial(kubelet.DefaultRuntimeEndpoint(node), "", criremote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{kubelet.LabelPodUID: uid}}})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("the sandboxes of pod %s on %s: %v, %v", uid, node.Name, l.GetItems(), err)
	}
	st, err := c.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: l.Items[0].Id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Namespaces map[string]string `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Namespaces["net"] == "" {
		t.Fatalf("sandbox %s: no network namespace in its verbose status %q: %v", l.Items[0].Id, st.Info["info"], err)
	}
	return l.Items[0].Id, info.Namespaces["net"]
}
