package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubectl_AgainstPodlabAPIServer types the chain's commands with a real
// kubectl v1.37 (bin/kubectl, built by make deps) against `podlab
// apiserver`, over HTTPS with the client certificates of `podlab init`'s
// kubeconfigs: step 1 of the chain done by the real client, and every
// answer (tables, errors) as kubectl prints them against a cluster.
func TestKubectl_AgainstPodlabAPIServer(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))

	srv, stderr := startAPIServer(t, state, port)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Process.Kill()
			srv.Wait()
		}
	})

	l := statedir.Layout{Dir: state}
	as := func(identity string, args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", l.Kubeconfig(identity)}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	tests := []struct {
		name     string
		identity string
		args     []string
		want     []string // lines or fragments the output holds, in order
		fails    bool
	}{
		{"kubectl run", "admin", []string{"run", "nginx", "--image=nginx"}, []string{"pod/nginx created"}, false},
		{"kubectl get pods", "admin", []string{"get", "pods"}, []string{"NAME", "READY", "STATUS", "nginx", "0/1", "Pending"}, false},
		{"kubectl get pod -o wide", "admin", []string{"get", "pod", "nginx", "-o", "wide"}, []string{"IP", "NODE", "NOMINATED NODE", "<none>"}, false},
		{"kubectl create deploy", "admin", []string{"create", "deploy", "test", "--image=nginx", "--replicas=2"}, []string{"deployment.apps/test created"}, false},
		{"kubectl get deploy,rs,pods", "admin", []string{"get", "deploy,rs,pods"}, []string{"deployment.apps/test", "0/2", "pod/nginx"}, false},
		{"kubectl get -A has the namespace column", "admin", []string{"get", "pods", "-A"}, []string{"NAMESPACE", "default", "nginx"}, false},
		{"kubectl describe", "admin", []string{"describe", "pod", "nginx"}, []string{"Name:", "nginx", "Status:", "Pending"}, false},
		{"kubectl scale", "admin", []string{"scale", "deployment/test", "--replicas=3"}, []string{"deployment.apps/test scaled"}, false},
		{"kubectl get in chunks of 3: the continue tokens page through", "admin", []string{"get", "clusterroles", "--chunk-size=3", "-o", "name"},
			[]string{"clusterrole.rbac.authorization.k8s.io/admin", "clusterrole.rbac.authorization.k8s.io/edit", "clusterrole.rbac.authorization.k8s.io/view"}, false},
		{"kubectl api-resources", "admin", []string{"api-resources"}, []string{"pods", "po", "Pod", "deployments", "deploy"}, false},
		{"kubectl auth can-i as the viewer", "viewer", []string{"auth", "can-i", "create", "pods"}, []string{"no\n"}, true}, // bare, as kube-apiserver's RBAC gives no reason
		{"the viewer is forbidden to create", "viewer", []string{"run", "x", "--image=nginx"},
			[]string{`Error from server (Forbidden): pods is forbidden: User "viewer" cannot create resource "pods" in API group "" in the namespace "default"`}, true},
		{"a node may not list every pod", "node-1", []string{"get", "pods", "-A"}, []string{"Error from server (Forbidden)", `User "system:node:node-1" cannot list resource "pods"`}, true},
		{"kubectl delete", "admin", []string{"delete", "pod", "nginx", "--wait=false"}, []string{`pod "nginx" deleted`}, false},
		{"a missing pod", "admin", []string{"get", "pod", "nope"}, []string{`Error from server (NotFound): pods "nope" not found`}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := as(tt.identity, tt.args...)
			if tt.fails != (err != nil) {
				t.Fatalf("kubectl %s as %s: error %v (want one: %v)\n%s", strings.Join(tt.args, " "), tt.identity, err, tt.fails, out)
			}
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("kubectl %s as %s: no %q (in order) in\n%s", strings.Join(tt.args, " "), tt.identity, w, out)
				}
				rest = rest[i+len(w):]
			}
		})
	}

	// two API servers cannot serve one store
	if _, _, err := podlab(t, state, "apiserver", "--secure-port", strconv.Itoa(freePort(t))); err == nil || !strings.Contains(err.Error(), "another podlab apiserver serves this store") {
		t.Errorf("a second podlab apiserver on the same store: %v, want refused", err)
	}

	// a certificate from another CA is a 401, not a TLS error
	other := t.TempDir()
	mustPodlab(t, other, "init", "--apiserver-port", strconv.Itoa(port))
	out, err := kubectlWith(kubectl, statedir.Layout{Dir: other}.Kubeconfig("admin"), "--insecure-skip-tls-verify", "--certificate-authority=", "get", "pods")
	if err == nil || !strings.Contains(out, "Unauthorized") {
		t.Errorf("a client certificate of another CA: %v\n%s", err, out)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("podlab apiserver after SIGTERM: %v: %s", err, stderr.String())
	}
	stopped = true
}

// startAPIServer runs `podlab apiserver` on port for state, as its own
// process (this test binary, run as podlab), and waits until it serves.
func startAPIServer(t *testing.T, state string, port int, extra ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	srv := exec.Command(os.Args[0], append([]string{"--state-dir", state, "apiserver", "--secure-port", strconv.Itoa(port)}, extra...)...)
	srv.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	srv.Stderr = stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "serving the Kubernetes API on") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case l, ok := <-ready:
		if !ok {
			t.Fatalf("podlab apiserver ended before serving: %s", stderr.String())
		}
		t.Log(l)
	case <-time.After(20 * time.Second):
		srv.Process.Kill()
		t.Fatalf("podlab apiserver did not serve within 20s: %s", stderr.String())
	}
	return srv, stderr
}

// TestComponents_OverTheNetwork: the controller-manager and the scheduler
// as clients of `podlab apiserver`, each with its own kubeconfig, after
// real kubectl created a Deployment: the chain for a Deployment over
// HTTPS, ReplicaSet NAME-<pod-template-hash>, pods, then binds.
func TestComponents_OverTheNetwork(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	mustPodlab(t, state, "node", "add", "node-2", "--cpu", "4", "--memory", "8Gi")
	srv, _ := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	l := statedir.Layout{Dir: state}
	admin := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, l.Kubeconfig("admin"), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// node-2's kubelet is not running: say it is Ready, as its heartbeat would
	admin("patch", "node", "node-2", "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"`+time.Now().UTC().Format(time.RFC3339)+`"}]}}`)
	admin("create", "deploy", "test", "--image=nginx", "--replicas=2")

	out := mustPodlab(t, state, "controller-manager", "--once", "--verbosity", "2", "--kubeconfig", l.Kubeconfig("kube-controller-manager"))
	if !strings.Contains(out, "Scaled up replica set test-") {
		t.Errorf("controller-manager --once over the network:\n%s", out)
	}
	rs := admin("get", "rs", "-o", "name")
	if !strings.HasPrefix(strings.TrimSpace(rs), "replicaset.apps/test-") {
		t.Fatalf("no ReplicaSet test-<hash>: %q", rs)
	}
	// the API server names a write's field manager after the client's
	// User-Agent, as kube-controller-manager's ReplicaSets say
	// "manager: kube-controller-manager"
	if m := admin("get", "rs", "-o", "jsonpath={.items[0].metadata.managedFields[0].manager}", "--show-managed-fields"); m != "kube-controller-manager" {
		t.Errorf("the ReplicaSet's field manager: %q, want kube-controller-manager", m)
	}
	out = mustPodlab(t, state, "scheduler", "--once", "--kubeconfig", l.Kubeconfig("kube-scheduler"))
	if !strings.Contains(out, "2 bound") {
		t.Errorf("scheduler --once over the network:\n%s", out)
	}
	if nodes := admin("get", "pods", "-o", "jsonpath={.items[*].spec.nodeName}"); nodes != "node-2 node-2" {
		t.Errorf("the pods' nodes: %q, want both on node-2", nodes)
	}
	// the scheduler's identity is its certificate's: it may not create pods
	if out, err := kubectlWith(kubectl, l.Kubeconfig("kube-scheduler"), "run", "x", "--image=nginx"); err == nil || !strings.Contains(out, `User "system:kube-scheduler" cannot create resource "pods"`) {
		t.Errorf("kube-scheduler creating a pod: %v\n%s", err, out)
	}
}

// kubectlWith runs kubectl with the kubeconfig given.
func kubectlWith(kubectl, kubeconfig string, args ...string) (string, error) {
	out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// freePort is a TCP port on 127.0.0.1 nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serveAPI makes state's kubeconfigs name a free port (podlab init run
// again) and serves state's store there with `podlab apiserver` until the
// test ends: what the components, clients of the API server only, need.
// It returns the port.
func serveAPI(t *testing.T, state string) int {
	t.Helper()
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, _ := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	})
	return port
}
