package main

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
)

// helloRegistry builds the hello demo image in-process, serves it from an
// in-process registry for the rest of the test, and returns its reference
// (127.0.0.1:PORT/podlab/hello:1.0): the tests' image, never the network.
func helloRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return pushHello(t, strings.TrimPrefix(srv.URL, "http://"))
}

// pushHello builds the hello demo image in-process and pushes it to the
// registry at host (host:port, plain HTTP); it returns its reference.
func pushHello(t *testing.T, host string) string {
	t.Helper()
	ctx := context.Background()
	helloBin := filepath.Join(t.TempDir(), "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), helloBin); err != nil {
		t.Fatalf("building the hello program: %v", err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: helloBin})
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/" + images.HelloRef
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// markNodeReady sets the node's Ready condition, as its kubelet would report
// it, through the API server of the state directory.
func markNodeReady(t *testing.T, state, node string) {
	t.Helper()
	srv, err := apiserver.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	admin, err := srv.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := admin.Get(context.Background(), "nodes", "", node)
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*corev1.Node)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if _, err := admin.UpdateStatus(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}
