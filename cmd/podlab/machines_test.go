package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/kubelet/criremote"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/statedir"
)

// TestNodeJoin_BadInput: each refused with what to do, and nothing made.
func TestNodeJoin_BadInput(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(freePort(t)))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"upper case", []string{"node", "join", "Node-2"}, "a machine's name is its host name, a DNS label"},
		{"a subdomain, not a label", []string{"node", "join", "node.two"}, "a DNS label"},
		{"no name", []string{"node", "join"}, "needs one name"},
		{"a reserved name", []string{"node", "join", "admin"}, "choose another name"},
		{"before the API server is up", []string{"node", "join", "node-2"}, "no podlab apiserver serves"},
		{"leave of a node that never joined", []string{"node", "leave", "node-3"}, "node-3: the node has not joined"},
		{"leave of a bad name", []string{"node", "leave", "Node_3"}, "a DNS label"},
		{"init with a public lab network", []string{"init", "--lab-cidr", "8.8.8.0/24"}, "not in a private range"},
		{"init with another lab network", []string{"init", "--lab-cidr", "192.168.251.0/24"}, "the state directory has another lab network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := podlab(t, state, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("podlab %s: %v, want an error saying %q\n%s%s", strings.Join(tc.args, " "), err, tc.want, out, errOut)
			}
			if tr := testenv.LabTraces(t, state, "node-2", "node-3"); len(tr) != 0 {
				t.Errorf("left behind: %v", tr)
			}
			if _, err := os.Stat(statedir.Layout{Dir: state}.Node("node-2").MachineDir()); err == nil {
				t.Error("node-2's machine directory is left")
			}
		})
	}
}

// TestNodeJoin_APIServerWithoutTheGateway: an API server that does not
// listen on the lab gateway (started before init chose the lab network)
// fails the join, and the join removes all it made, the bridge too.
func TestNodeJoin_APIServerWithoutTheGateway(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	l := statedir.Layout{Dir: state}
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	rec, err := os.ReadFile(l.LabRecord())
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(l.LabRecord()) // the API server finds no lab network...
	srv, _ := startAPIServer(t, state, port)
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	if err := os.WriteFile(l.LabRecord(), rec, 0o644); err != nil { // ...the join does
		t.Fatal(err)
	}
	_, _, err = podlab(t, state, "node", "join", "node-2")
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "restart podlab apiserver") {
		t.Fatalf("join: %v, want the API server not answering at the gateway, with the fix", err)
	}
	if tr := testenv.LabTraces(t, state, "node-2"); len(tr) != 0 {
		t.Errorf("a failed join left: %v", tr)
	}
	if _, err := os.Stat(l.Node("node-2").MachineDir()); err == nil {
		t.Error("a failed join left node-2's machine directory")
	}
}

// TestNodeJoin_Machines: two nodes joined as machines of their own, their
// kubelets inside their network namespaces, pods Running on both, kubectl
// logs through the lab network, a kubelet killed and started again, then
// leave and reset leave nothing on the host.
func TestNodeJoin_Machines(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.Runc(t)
	kubectl := testenv.Kubectl(t)
	nodes := []string{"node-a", "node-b"}
	state, lab, srvErr, stopAPIServer := labWithAPIServer(t, nodes...)
	l := statedir.Layout{Dir: state}
	for _, n := range nodes {
		out := mustPodlab(t, state, "node", "join", n)
		for _, want := range []string{"network namespace " + l.Node(n).MachineNetns(), "bridge   " + lab.Bridge, "Next, each in a shell of its own:\n  podlab kubelet --node " + n} {
			if !strings.Contains(out, want) {
				t.Errorf("podlab node join %s does not say %q:\n%s", n, want, out)
			}
		}
	}
	if _, _, err := podlab(t, state, "node", "join", "node-a"); err == nil || !strings.Contains(err.Error(), "the node has joined already") {
		t.Errorf("a second join of node-a: %v, want it refused", err)
	}
	ms := map[string]machine.Machine{}
	for _, n := range nodes {
		m, err := machine.Load(l.Node(n))
		if err != nil {
			t.Fatal(err)
		}
		ms[n] = m
	}

	// a registry on the lab network, where the nodes pull from
	ref := pushShell(t, labRegistry(t, lab))

	kubelets := map[string]*exec.Cmd{}
	kout := map[string]*lockedBuffer{}
	startKubelet := func(n string) {
		kubelets[n], kout[n] = startComponent(t, state, "kubelet", "--node", n, "--insecure")
	}
	for _, n := range nodes {
		startKubelet(n)
	}
	admin := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s\nnode-a's kubelet:\n%s\nnode-b's kubelet:\n%s\napiserver:\n%s", strings.Join(args, " "), err, out, kout["node-a"], kout["node-b"], srvErr)
		}
		return out
	}
	inMachine := func(n string) {
		t.Helper()
		same, err := machine.SameNetns("/proc/"+strconv.Itoa(kubelets[n].Process.Pid)+"/ns/net", ms[n].Netns)
		if err != nil || !same {
			t.Errorf("the kubelet of %s (pid %d) is not in its machine's network namespace: %v", n, kubelets[n].Process.Pid, err)
		}
	}
	for _, n := range nodes {
		waitFor(t, 60*time.Second, func() bool {
			out, _ := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "node", n, "-o", "wide", "--no-headers")
			f := strings.Fields(out)
			return len(f) > 5 && f[1] == "Ready" && f[5] == ms[n].IP().String()
		}, n+" Ready with INTERNAL-IP "+ms[n].IP().String()+" in kubectl get nodes -o wide", kout[n])
		inMachine(n)
	}
	for _, n := range nodes {
		admin("run", "web-"+n, "--image="+ref, `--overrides={"spec":{"nodeName":"`+n+`"}}`, "--command", "--",
			"/bin/sh", "-c", "echo hello from "+n+"; sleep 1000")
	}
	for _, n := range nodes {
		admin("wait", "--for=condition=Ready", "pod/web-"+n, "--timeout=120s")
		// the API server reaches the kubelet over the lab network
		if out := admin("logs", "web-"+n); out != "hello from "+n+"\n" {
			t.Errorf("kubectl logs web-%s: %q", n, out)
		}
	}

	// a second join of node-a while its kubelet runs: refused, and the
	// machine, its kubelet and its pod are as they were
	if _, _, err := podlab(t, state, "node", "join", "node-a"); err == nil || !strings.Contains(err.Error(), "the node has joined already") || !strings.Contains(err.Error(), "podlab node leave node-a first") {
		t.Errorf("a second join of node-a while its kubelet runs: %v, want it refused with what to do", err)
	}
	if m, err := machine.Load(l.Node("node-a")); err != nil || m.Address != ms["node-a"].Address || m.HostVeth != ms["node-a"].HostVeth {
		t.Errorf("node-a's machine after the refused join: %+v %v, want %+v", m, err, ms["node-a"])
	}
	if err := kubelets["node-a"].Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("node-a's kubelet after the refused join: %v", err)
	}
	inMachine("node-a")
	if out := admin("logs", "web-node-a"); out != "hello from node-a\n" {
		t.Errorf("kubectl logs web-node-a after the refused join: %q", out)
	}

	// node-a's kubelet killed, started again: it resumes, in its machine
	kubelets["node-a"].Process.Kill()
	kubelets["node-a"].Wait()
	startKubelet("node-a")
	waitFor(t, 60*time.Second, func() bool {
		return strings.Contains(kout["node-a"].String(), "kubelet API: serving https://"+ms["node-a"].IP().String())
	}, "node-a's new kubelet to serve on its lab address", kout["node-a"])
	inMachine("node-a")
	if out := admin("logs", "web-node-a"); out != "hello from node-a\n" {
		t.Errorf("kubectl logs web-node-a after a kubelet restart: %q", out)
	}
	if out := admin("get", "pod", "web-node-a", "-o", "jsonpath={.status.phase} {.status.containerStatuses[0].restartCount}"); out != "Running 0" {
		t.Errorf("web-node-a after its kubelet restarted: %q, want Running 0 (not started again)", out)
	}

	// node-a leaves: drained, deleted, its machine gone; node-b stays
	out := mustPodlab(t, state, "node", "leave", "node-a", "--timeout", "90s")
	for _, want := range []string{"pod/default/web-node-a deleted", "node/node-a drained", "node/node-a deleted", "removed the veth " + ms["node-a"].HostVeth} {
		if !strings.Contains(out, want) {
			t.Errorf("podlab node leave does not say %q:\n%s", want, out)
		}
	}
	kubelets["node-a"].Wait()
	if out := admin("get", "nodes", "-o", "name"); strings.Contains(out, "node-a") {
		t.Errorf("node-a is still a Node:\n%s", out)
	}
	tr := testenv.LabTraces(t, state, nodes...)
	if slices.ContainsFunc(tr, func(s string) bool {
		return strings.Contains(s, ms["node-a"].HostVeth) || strings.Contains(s, "node-a")
	}) {
		t.Errorf("node-a left traces: %v", tr)
	}
	if !slices.Contains(tr, "link "+lab.Bridge) || !slices.Contains(tr, "link "+ms["node-b"].HostVeth) {
		t.Errorf("node-b's machine and the bridge should stay: %v", tr)
	}

	// reset: the API server stopped first, as kubeadm reset wants
	admin("delete", "pod", "web-node-b", "--wait=false")
	stopAPIServer()
	out = mustPodlab(t, state, "reset", "--yes", "--runtime", testenv.Runc(t))
	if !strings.Contains(out, "Removed machines") || !strings.Contains(out, "node-b") {
		t.Errorf("reset does not say it removed node-b's machine:\n%s", out)
	}
	if tr := testenv.LabTraces(t, state, nodes...); len(tr) != 0 {
		t.Errorf("after reset: %v\n%s", tr, out)
	}
	// reset stopped node-b's kubelet, which ran in its machine
	done := make(chan error, 1)
	go func() { done <- kubelets["node-b"].Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		kubelets["node-b"].Process.Kill()
		t.Errorf("node-b's kubelet still runs after reset")
	}
}

// TestNodeJoin_WhileItsHostKubeletRuns: a node whose kubelet runs now, on
// the host, is not joined (its kubeconfig and certificates would change
// under it, and a second kubelet of the node would start in the machine):
// refused with what to do, nothing made, its kubeconfig as it was. Once the
// kubelet is stopped, the same join works.
func TestNodeJoin_WhileItsHostKubeletRuns(t *testing.T) {
	testenv.RequireRoot(t)
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	l := statedir.Layout{Dir: state}
	serveAPI(t, state)
	lab, err := machine.LoadLab(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		machine.Leave(context.Background(), l, "node-2", time.Second)
		machine.Down(context.Background(), lab)
	})
	kubelet, out := startComponent(t, state, "kubelet", "--node", "node-2", "--port", "0")
	var port string
	waitFor(t, 30*time.Second, func() bool {
		p, err := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "node", "node-2", "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}")
		if n, cerr := strconv.Atoi(p); err != nil || cerr != nil || n <= 0 {
			return false
		}
		port = p
		return true
	}, "node-2 registered with its kubelet's API port", out)
	before, err := os.ReadFile(l.Kubeconfig("node-2"))
	if err != nil {
		t.Fatal(err)
	}

	_, _, err = podlab(t, state, "node", "join", "node-2")
	want := "joining node node-2: its kubelet runs now, outside a machine (its API answers at 127.0.0.1:" + port + ", as Node node-2 publishes): stop it (Ctrl-C), join, then start it again"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("join while node-2's host kubelet runs: %v, want %q", err, want)
	}
	if tr := testenv.LabTraces(t, state, "node-2"); slices.ContainsFunc(tr, func(s string) bool { return !strings.HasPrefix(s, "cgroup ") }) {
		t.Errorf("the refused join left: %v", tr)
	}
	if _, err := os.Stat(l.Node("node-2").MachineDir()); err == nil {
		t.Error("the refused join left node-2's machine directory")
	}
	if after, err := os.ReadFile(l.Kubeconfig("node-2")); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the refused join changed node-2's kubeconfig (%v)", err)
	}
	if err := kubelet.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("node-2's kubelet after the refused join: %v", err)
	}

	// the kubelet stopped: its API no longer answers, and the join works
	kubelet.Process.Signal(syscall.SIGINT)
	waitFor(t, 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, "node-2's kubelet to stop serving", out)
	mustPodlab(t, state, "node", "join", "node-2")
}

// labWithAPIServer is a state directory with its PKI, a running podlab
// apiserver (stopAPIServer stops it; so does the test's end) and its lab
// network chosen; whatever the test does, its nodes leave and the lab goes
// at the end, so nothing of it stays on the host. The host has no trace of
// it yet (LabTraces), or the test fails at once.
func labWithAPIServer(t *testing.T, nodes ...string) (state string, lab machine.Lab, srvErr *bytes.Buffer, stopAPIServer func()) {
	t.Helper()
	state = testenv.StateDir(t)
	l := statedir.Layout{Dir: state}
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, srvErr := startAPIServer(t, state, port)
	stopAPIServer = func() {
		if srv.ProcessState == nil {
			srv.Process.Signal(syscall.SIGTERM)
			srv.Wait()
		}
	}
	t.Cleanup(stopAPIServer)
	t.Cleanup(func() {
		for _, n := range nodes {
			machine.Leave(context.Background(), l, n, time.Second)
		}
	})
	if tr := testenv.LabTraces(t, state, nodes...); len(tr) != 0 {
		t.Fatalf("before: %v", tr)
	}
	lab, err := machine.LoadLab(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Down(context.Background(), lab) })
	return state, lab, srvErr, stopAPIServer
}

// labRegistry serves an in-process registry on the lab network's gateway,
// where joined nodes pull from (the first join made the bridge that holds
// the gateway's address), until the test ends; it returns host:port.
func labRegistry(t *testing.T, lab machine.Lab) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(lab.Gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	reg := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go reg.Serve(ln)
	t.Cleanup(func() { reg.Close() })
	return ln.Addr().String()
}

// TestNodeJoin_PullsThroughTheLabMirror: the README's `kubectl run nginx
// --image=nginx` on a lab of one joined machine, with `podlab registry
// serve` on the lab's gateway. The registry names itself there in
// certs.d/docker.io/hosts.toml, and the node's runtime, inside the
// machine, pulls as that file says, as podlab pull and containerd do: the
// pod is Running with docker.io/library/nginx from the mirror. Then again
// with PODLAB_REGISTRY_MIRROR on the host's loopback, as lesson 01 leaves
// it: the machine's kubelet does not hand that to its runtime, which
// pulls through the gateway again (a plain name has imagePullPolicy
// Always).
func TestNodeJoin_PullsThroughTheLabMirror(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.Runc(t)
	kubectl := testenv.Kubectl(t)
	t.Setenv(pull.MirrorEnv, "")
	state, lab, srvErr, stopAPIServer := labWithAPIServer(t, "node-m")
	l := statedir.Layout{Dir: state}
	t.Cleanup(func() { // after the kubelet and the registry stopped
		stopAPIServer()
		if out, errOut, err := podlab(t, state, "reset", "--yes", "--runtime", testenv.Runc(t)); err != nil {
			t.Errorf("reset: %v\n%s%s", err, out, errOut)
		}
		if tr := testenv.LabTraces(t, state, "node-m"); len(tr) != 0 {
			t.Errorf("after reset: %v", tr)
		}
	})
	mustPodlab(t, state, "node", "join", "node-m")

	layoutDir := filepath.Join(t.TempDir(), "images")
	if err := images.WriteLayout(context.Background(), layoutDir, []images.Named{{Ref: "library/nginx:latest", Image: shellImage(t)}}); err != nil {
		t.Fatal(err)
	}
	_, regOut := startComponent(t, state, "registry", "serve", "--addr", net.JoinHostPort(lab.Gateway.String(), "0"), "--images", layoutDir)
	hosts := pull.HostsFile(l.CertsDir(), "docker.io")
	waitFor(t, 60*time.Second, func() bool {
		b, _ := os.ReadFile(hosts)
		return strings.Contains(string(b), `[host."http://`+lab.Gateway.String()+":")
	}, "podlab registry serve to name itself on the gateway in "+hosts, regOut)

	admin := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s\napiserver:\n%s", strings.Join(args, " "), err, out, srvErr)
		}
		return out
	}
	runNginx := func(pod string, kout *lockedBuffer) {
		t.Helper()
		admin("run", pod, "--image=nginx")
		if out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=90s"); err != nil {
			events, _ := kubectlWith(kubectl, l.Kubeconfig("admin"), "get", "events", "--field-selector", "involvedObject.name="+pod)
			runtimeLog, _ := os.ReadFile(l.Node("node-m").RuntimeLog())
			t.Fatalf("pod %s (image nginx) not Ready: %v\n%s\nevents:\n%s\nkubelet:\n%s\nruntime:\n%s\nregistry:\n%s", pod, err, out, events, kout, runtimeLog, regOut)
		}
		if id := admin("get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0].imageID}"); !strings.HasPrefix(id, "docker.io/library/nginx@sha256:") {
			t.Errorf("pod %s's imageID %q, want docker.io/library/nginx@sha256:...", pod, id)
		}
	}

	startComponent(t, state, "scheduler")
	kubelet, kout := startComponent(t, state, "kubelet", "--node", "node-m")
	runNginx("nginx", kout)
	if !strings.Contains(regOut.String(), "/v2/library/nginx/manifests/latest") {
		t.Errorf("the registry on the gateway was not asked for library/nginx:\n%s", regOut)
	}

	// the host's loopback mirror in the environment, as lesson 01 sets it,
	// and a kubelet that starts the node's runtime anew
	kubelet.Process.Signal(syscall.SIGINT)
	kubelet.Wait()
	if _, err := criremote.Stop(context.Background(), l.Node("node-m").RuntimePidFile(), 10*time.Second); err != nil {
		t.Fatalf("stopping node-m's runtime: %v", err)
	}
	t.Setenv(pull.MirrorEnv, "http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	_, kout = startComponent(t, state, "kubelet", "--node", "node-m")
	runNginx("nginx-2", kout)
	if want := "is not passed on: node node-m is a machine of its own"; !strings.Contains(kout.String(), want) {
		t.Errorf("the kubelet does not say %q:\n%s", want, kout)
	}
	admin("delete", "pod", "nginx", "nginx-2", "--wait=false")
}

// TestMachineMirror: the registry mirror a kubelet hands its node's
// runtime. A joined node's runtime runs inside its machine, so a mirror on
// the host's loopback is not passed on (saying so); any other mirror is,
// and so is every mirror of a node that did not join.
func TestMachineMirror(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	l := statedir.Layout{Dir: testenv.StateDir(t)}
	lab, _, err := machine.EnsureLab(l, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Down(ctx, lab) })
	if _, err := machine.Join(ctx, l, lab, "node-j"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Leave(ctx, l, "node-j", time.Second) })
	gateway := "http://" + net.JoinHostPort(lab.Gateway.String(), "5001")
	for _, tc := range []struct {
		name, node, mirror, want string
	}{
		{"joined, 127.0.0.1", "node-j", "http://127.0.0.1:5001", ""},
		{"joined, another loopback address", "node-j", "http://127.0.0.2:5001", ""},
		{"joined, localhost", "node-j", "http://localhost:5001", ""},
		{"joined, ::1", "node-j", "http://[::1]:5001", ""},
		{"joined, the gateway", "node-j", gateway, gateway},
		{"joined, none", "node-j", "", ""},
		{"not joined, 127.0.0.1", "node-1", "http://127.0.0.1:5001", "http://127.0.0.1:5001"},
		{"not joined, the gateway", "node-1", gateway, gateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got := machineMirror(&out, l, tc.node, tc.mirror)
			if got != tc.want {
				t.Errorf("machineMirror(%s, %q) = %q, want %q", tc.node, tc.mirror, got, tc.want)
			}
			said := strings.Contains(out.String(), tc.mirror+" is not passed on: node "+tc.node+" is a machine of its own")
			if dropped := tc.mirror != "" && got == ""; said != dropped {
				t.Errorf("machineMirror(%s, %q) said %q: want a note exactly when it drops the mirror", tc.node, tc.mirror, out.String())
			}
		})
	}
}
