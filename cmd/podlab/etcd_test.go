package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/podlab/podlab/internal/testenv"
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
