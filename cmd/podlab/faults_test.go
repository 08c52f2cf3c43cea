package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/store"
)

// adminClientset is client-go with `podlab init`'s admin kubeconfig, not
// rate-limited (client-go's default is 5 requests a second).
func adminClientset(t *testing.T, state string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", statedir.Layout{Dir: state}.Kubeconfig("admin"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func faultPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
}

// checkStoreFile runs bbolt's own consistency check on the store's file.
func checkStoreFile(t *testing.T, state string) {
	t.Helper()
	db, err := bolt.Open(store.Path(state), 0o600, &bolt.Options{Timeout: 5 * time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Errorf("bbolt's check of the store: %v", err)
	}
}

// The API server killed (SIGKILL) in the middle of 8 clients' creates over
// HTTPS loses no acknowledged write: started again on the same store, it
// serves every pod that got a 201, and the file passes bbolt's check.
func TestAPIServer_KilledMidWriteLosesNoAcknowledgedWrite(t *testing.T) {
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, stderr := startAPIServer(t, state, port)
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	cs := adminClientset(t, state)

	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("c%d-%04d", c, i)
				if _, err := cs.CoreV1().Pods("default").Create(ctx, faultPod(name), metav1.CreateOptions{}); err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		}()
	}
	// kill it once the clients are in full swing
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 300 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d creates acknowledged: %s", n, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d creates acknowledged before SIGKILL", len(acked))

	again, stderr2 := startAPIServer(t, state, port)
	pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing after the restart: %v: %s", err, stderr2.String())
	}
	stored := map[string]bool{}
	for _, p := range pods.Items {
		stored[p.Name] = true
	}
	var lost []string
	for _, name := range acked {
		if !stored[name] {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged creates lost: %v", len(lost), len(acked), lost)
	}
	again.Process.Signal(syscall.SIGTERM)
	if err := again.Wait(); err != nil {
		t.Errorf("podlab apiserver after SIGTERM: %v: %s", err, stderr2.String())
	}
	checkStoreFile(t, state)
}

// While `podlab apiserver` serves a state directory, `podlab store`
// reads its store beside it (without holding the server's writes up for
// long), and refuses to write to it, saying why and what to do.
func TestStore_ReadOnlyWhileAPIServerServes(t *testing.T) {
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, stderr := startAPIServer(t, state, port)
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	cs := adminClientset(t, state)

	// creates over HTTPS, timed, while the store is read beside the server
	ctx, cancel := context.WithCancel(context.Background())
	var slowest time.Duration
	var created int
	var createErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			start := time.Now()
			if _, err := cs.CoreV1().Pods("default").Create(context.Background(), faultPod(fmt.Sprintf("p%04d", i)), metav1.CreateOptions{}); err != nil {
				createErr = err
				return
			}
			slowest, created = max(slowest, time.Since(start)), created+1
		}
	}()
	var reads int
	for range 30 {
		out := runPodlab(t, state, "store", "list", "/registry/pods/", "--keys-only")
		if !strings.Contains(out, " under /registry/pods/") {
			t.Fatalf("podlab store list beside the API server:\n%s", out)
		}
		reads++
	}
	out := runPodlab(t, state, "store", "get", "/registry/namespaces/default")
	cancel()
	<-done
	if createErr != nil {
		t.Fatalf("a create while podlab store read: %v: %s", createErr, stderr.String())
	}
	if !strings.Contains(out, "mod_revision") {
		t.Errorf("podlab store get beside the API server:\n%s", out)
	}
	t.Logf("%d creates during %d reads, the slowest %v", created, reads, slowest)
	if created == 0 || slowest > 2*time.Second {
		t.Errorf("%d creates while podlab store read, the slowest took %v: reads held the server up", created, slowest)
	}

	// a write is refused, and changes nothing
	rev := func() string {
		out := runPodlab(t, state, "store", "list", "/registry/namespaces/", "--keys-only")
		return out[strings.Index(out, "revision"):strings.Index(out, "\n")]
	}
	before := rev()
	_, _, err := podlab(t, state, "store", "compact", "2")
	pid := strconv.Itoa(srv.Process.Pid)
	for _, w := range []string{"podlab store compact writes to the store", "another podlab apiserver serves this store", "pid " + pid,
		"writes go through it", "podlab store get, list and watch still read", "stop podlab apiserver"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("podlab store compact while the API server runs: %v\nwant it to say %q", err, w)
		}
	}
	if after := rev(); after != before {
		t.Errorf("the refused compact changed the store: %q, then %q", before, after)
	}

	// nor does a second API server start on it
	_, _, err = podlab(t, state, "apiserver", "--secure-port", strconv.Itoa(freePort(t)))
	for _, w := range []string{"another podlab apiserver serves this store", "pid " + pid, "stop it first, or talk to it with kubectl"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("a second podlab apiserver on the store: %v\nwant it to say %q", err, w)
		}
	}

	// stopped, the store is the administrator's again
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("podlab apiserver after SIGTERM: %v: %s", err, stderr.String())
	}
	if out := runPodlab(t, state, "store", "compact", "2"); !strings.Contains(out, "compacted") && !strings.Contains(out, "removed") {
		t.Errorf("podlab store compact after the API server stopped:\n%s", out)
	}
}
