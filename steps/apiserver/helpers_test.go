package apiserver

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/store"
)

// testServer initializes a state dir in t.TempDir() and opens its API
// server.
func testServer(t testing.TB) (*Server, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := Init(context.Background(), dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	s, err := openTestServer(t, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// openTestServer opens dir's API server over its bbolt store, or, when
// PODLAB_TEST_STORE=etcd, over a real etcd started for the test.
func openTestServer(t testing.TB, dir string, opts ...Option) (*Server, error) {
	if !testenv.WantEtcd() {
		return Open(dir, opts...)
	}
	e := testenv.Etcd(t)
	return OpenEtcd(context.Background(), dir, store.EtcdConfig{Endpoints: []string{e.Endpoint}}, nil, opts...)
}

// reopen opens a second API server on s's store: the same file, or the
// same etcd.
func reopen(t testing.TB, s *Server, dir string) (*Server, error) {
	if eps := s.store.EtcdEndpoints(); eps != nil {
		return OpenEtcd(context.Background(), dir, store.EtcdConfig{Endpoints: eps}, nil)
	}
	return Open(dir)
}

// skipOnEtcd skips a test of something only the bbolt file has.
func skipOnEtcd(t testing.TB, why string) {
	t.Helper()
	if testenv.WantEtcd() {
		t.Skipf("PODLAB_TEST_STORE=etcd: %s", why)
	}
}

// as returns a client for one of the lab's users.
func as(t testing.TB, s *Server, user string, opts ...ClientOption) *Client {
	t.Helper()
	c, err := s.ClientAs(user, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
	}
}

// revision is the store's current revision.
func revision(t testing.TB, s *Server) int64 {
	t.Helper()
	var rev int64
	if err := s.store.View(context.Background(), func(tx *store.Tx) error {
		rev = tx.Revision()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rev
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
