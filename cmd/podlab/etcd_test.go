package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/vishvananda/netlink"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/statedir"
)

// podlab apiserver --etcd-servers keeps the objects in a real etcd, laid
// out as kube-apiserver lays them out: etcdctl reads the pod at
// /registry/pods/default/NAME, its value in the protobuf envelope, and the
// pod's resourceVersion is the key's mod_revision.
func TestAPIServer_OnEtcd(t *testing.T) {
	e := testenv.Etcd(t)
	etcdctl := strings.TrimSuffix(testenv.EtcdBin(t), "etcd") + "etcdctl"
	state := t.TempDir()
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, _ := startAPIServer(t, state, port, "--etcd-servers", e.Endpoint)
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	cs := adminClientset(t, state)
	pod, err := cs.CoreV1().Pods("default").Create(context.Background(), faultPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(etcdctl, "--endpoints", e.Endpoint, "get", "/registry/pods/default/web", "-w", "fields").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl: %v: %s", err, out)
	}
	for _, want := range []string{`"Key" : "/registry/pods/default/web"`, `"ModRevision" : ` + pod.ResourceVersion + "\n", `"Value" : "k8s\x00`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("etcdctl get shows\n%s\nwithout %q", out, want)
		}
	}
	keys, err := exec.Command(etcdctl, "--endpoints", e.Endpoint, "get", "/registry/", "--prefix", "--keys-only").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/registry/namespaces/kube-system", "/registry/clusterroles/admin", "/registry/clusterrolebindings/cluster-admin"} {
		if !strings.Contains(string(keys), want+"\n") {
			t.Errorf("etcd has no key %s (the bootstrap objects)", want)
		}
	}
}

// Killing etcd (SIGKILL) while clients create through the API server
// loses no acknowledged create; creates wait or fail while it is down,
// and succeed again, and a watch started before goes on, once it is back.
func TestAPIServer_EtcdKilled(t *testing.T) {
	e := testenv.Etcd(t)
	state := t.TempDir()
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, stderr := startAPIServer(t, state, port, "--etcd-servers", e.Endpoint)
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	cs := adminClientset(t, state)
	pods := cs.CoreV1().Pods("default")
	w, err := pods.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var mu sync.Mutex
	var acked []string
	var failed int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("c%d-%d", c, i)
				_, err := pods.Create(context.Background(), faultPod(name), metav1.CreateOptions{})
				mu.Lock()
				if err == nil {
					acked = append(acked, name)
				} else {
					failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	e.Kill()
	mu.Lock()
	atKill := len(acked)
	mu.Unlock()
	time.Sleep(2 * time.Second)
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	// Creates wait (etcd's client retries) or fail while etcd is down: none
	// is acknowledged, but those the kill caught on their way back.
	if before > atKill+4 {
		t.Errorf("%d creates acknowledged while etcd was down: was it killed?", before-atKill)
	}
	e.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= before+20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creates did not resume within 30s of etcd's restart (%d acknowledged before): %s", before, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	list, err := pods.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, p := range list.Items {
		have[p.Name] = true
	}
	for _, name := range acked {
		if !have[name] {
			t.Errorf("pod %s was acknowledged, and is gone after etcd's SIGKILL", name)
		}
	}
	t.Logf("%d creates acknowledged (%d before the kill), %d failed while etcd was down; %d pods listed", len(acked), before, failed, len(list.Items))

	// The watch started before the kill delivers a create made after it.
	if _, err := pods.Create(context.Background(), faultPod("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended when etcd went away (want it to go on)")
			}
			if ev.Type == apiwatch.Added && ev.Object.(metav1.Object).GetName() == "after" {
				return
			}
		case <-timeout:
			t.Fatal("the watch never delivered the create made after etcd came back")
		}
	}
}

// Started before etcd, the API server says it waits for etcd, and serves
// once etcd answers.
func TestAPIServer_WaitsForEtcd(t *testing.T) {
	e := testenv.Etcd(t)
	e.Kill()
	state := t.TempDir()
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	go func() { time.Sleep(7 * time.Second); e.Start() }()
	srv, stderr := startAPIServer(t, state, port, "--etcd-servers", e.Endpoint)
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	if !strings.Contains(stderr.String(), "waiting for etcd: ") || !strings.Contains(stderr.String(), "etcd is not answering") {
		t.Errorf("stderr %q does not say it waited for etcd", stderr.String())
	}
}

// Bad input to podlab etcd and to the API server's etcd flags: a clear
// error that says what to do, before anything starts.
func TestEtcd_BadInput(t *testing.T) {
	state := t.TempDir()
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(freePort(t)))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"etcd-servers without a scheme", []string{"apiserver", "--secure-port", "0", "--etcd-servers", "127.0.0.1:2379"}, "write it as http://HOST:PORT"},
		{"etcd-prefix without a slash", []string{"apiserver", "--secure-port", "0", "--etcd-servers", "http://127.0.0.1:1", "--etcd-prefix", "registry"}, "must start with /"},
		{"etcd on port 0", []string{"etcd", "--port", "0"}, "not in 1-65534"},
		{"etcd on the last port", []string{"etcd", "--port", "65535"}, "the peer port is the next one"},
		{"etcd with no listen address", []string{"etcd", "--listen-address", ""}, "an address to listen on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := podlab(t, state, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("podlab %s: %v (%s%s), want an error containing %q", strings.Join(tt.args, " "), err, out, errOut, tt.want)
			}
		})
	}
}

// podlab etcd runs bin/etcd in the foreground with its data under the
// state directory, says where clients reach it, serves etcdctl, and stops
// cleanly on Ctrl-C (SIGINT).
func TestEtcd_Command(t *testing.T) {
	bin := testenv.EtcdBin(t)
	etcdctl := strings.TrimSuffix(bin, "etcd") + "etcdctl"
	state := t.TempDir()
	port := freePort(t)
	cmd, out, done := startPodlabEtcd(t, state, bin, port)
	defer cmd.Process.Kill()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := exec.Command(etcdctl, "--endpoints", url, "put", "/registry/hello", "world").Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdctl never reached podlab etcd at %s:\n%s", url, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"clients on " + url, "podlab apiserver --etcd-servers " + url, filepath.Join(state, "etcd", "member-data")} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("podlab etcd printed\n%s\nwithout %q", out.String(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "etcd", "member-data", "member")); err != nil {
		t.Errorf("no etcd data under the state directory: %v", err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "stopped") {
			t.Errorf("after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("podlab etcd did not stop on SIGINT:\n%s", out.String())
	}
}

// podlab etcd of a state directory with a lab network also listens on the
// lab's gateway, making the bridge if no node has made it, and says both
// URLs; podlab reset removes the bridge again. In a network namespace of
// its own: the bridge and its iptables rules stay there.
func TestEtcd_OnTheLabNetwork(t *testing.T) {
	if !testenv.InNewNetns(t) {
		return
	}
	bin := testenv.EtcdBin(t)
	etcdctl := strings.TrimSuffix(bin, "etcd") + "etcdctl"
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t)) // for podlab reset
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(freePort(t)))
	lab, err := machine.LoadLab(statedir.Layout{Dir: state})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(lab.Bridge); err == nil {
		t.Fatalf("the bridge %s is there before podlab etcd", lab.Bridge)
	}
	port := freePort(t)
	cmd, out, done := startPodlabEtcd(t, state, bin, port)
	defer cmd.Process.Kill()
	loopback := "http://127.0.0.1:" + strconv.Itoa(port)
	gateway := "http://" + lab.Gateway.String() + ":" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := exec.Command(etcdctl, "--endpoints", gateway, "put", "/registry/hello", "lab").Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdctl never reached podlab etcd at %s:\n%s", gateway, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, err := exec.Command(etcdctl, "--endpoints", loopback, "get", "/registry/hello", "--print-value-only").Output(); err != nil || strings.TrimSpace(string(got)) != "lab" {
		t.Errorf("etcdctl on loopback: %q %v, want the value put through the gateway", got, err)
	}
	for _, want := range []string{"made the lab bridge " + lab.Bridge, "clients on " + loopback, "and on " + gateway + ", the lab network's gateway (bridge " + lab.Bridge + ")"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("podlab etcd printed\n%s\nwithout %q", out.String(), want)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("podlab etcd did not stop on SIGINT:\n%s", out.String())
	}
	reset := mustPodlab(t, state, "reset", "--yes")
	if _, err := netlink.LinkByName(lab.Bridge); err == nil {
		t.Errorf("the lab bridge %s is still there after podlab reset:\n%s", lab.Bridge, reset)
	}
}

// startPodlabEtcd starts podlab etcd (bin/etcd found on PATH) in the
// foreground of a child process; done receives its end.
func startPodlabEtcd(t *testing.T, state, bin string, port int) (*exec.Cmd, *lockedBuffer, <-chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "--state-dir", state, "etcd", "--port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "PODLAB_TEST_RUN_MAIN=1", "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, out, done
}
