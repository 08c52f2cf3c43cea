package up

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/statedir"
)

// TestStartAPIServer: up serves the state directory's store itself, over
// HTTPS, claiming it as podlab apiserver does, so its clients' requests
// (and the gate's phases) are seen; a second up reuses that server; once
// stopped, the store is free again.
func TestStartAPIServer(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := apiserver.Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ensurePKI(dir); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var phases []string
	api, err := startAPIServer(ctx, dir, func(request string, p apiserver.Phase) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(request, "(admin)") {
			phases = append(phases, p.Name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			api.stop()
		}
	}()
	if !api.InProcess || api.PID != os.Getpid() || !strings.HasPrefix(api.URL, "https://127.0.0.1:") {
		t.Fatalf("in-process API server: %+v", api)
	}
	lock := statedir.Layout{Dir: dir}.APIServerLock()
	if c, ok, err := rest.Serving(lock); !ok || err != nil || c.URL != api.URL {
		t.Errorf("the claim says %+v %v %v, want it served at %s", c, ok, err, api.URL)
	}

	admin, err := api.clientAs(dir, "admin")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
	if _, err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	node, err := api.clientAs(dir, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.List(ctx, "pods", "", apiserver.ListOptions{}); err == nil {
		t.Error("node-1 listed every pod: the Node authorizer should refuse it")
	}
	want := []Request{
		{"POST", "/api/v1/namespaces/default/pods", "admin", 201},
		{"GET", "/api/v1/pods", "system:node:node-1", 403},
	}
	if got := api.Requests(); !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(phases, apiserver.PhaseAuthentication) || !slices.Contains(phases, apiserver.PhaseStorage) {
		t.Errorf("the gate's phases of admin's create: %v", phases)
	}

	again, err := startAPIServer(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.InProcess || again.URL != api.URL || again.PID != os.Getpid() {
		t.Errorf("a second up: %+v, want it to reuse %s", again, api.URL)
	}
	again.stop()

	api.stop()
	stopped = true
	if _, ok, err := rest.Serving(lock); ok || err != nil {
		t.Errorf("after stop: serving %v %v", ok, err)
	}
	st, err := apiserver.Open(dir)
	if err != nil {
		t.Fatalf("the store after stop: %v", err)
	}
	st.Close()
}
