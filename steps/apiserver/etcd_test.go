package apiserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Creates that commit at once get the resourceVersion of their own commit,
// which with etcd is known only once etcd has committed (another create may
// commit between a transaction's snapshot and its own commit): the object
// returned must carry the revision a read of it shows.
func TestCreate_ConcurrentResourceVersions(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	const n = 16
	got := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj, err := admin.Create(ctx(t), testPod(fmt.Sprintf("p%d", i)))
			if err != nil {
				errs <- err
				return
			}
			got[i] = obj.GetResourceVersion()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		obj, err := admin.Get(context.Background(), "pods", "default", fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetResourceVersion() != got[i] {
			t.Errorf("p%d: create returned resourceVersion %s, the store has %s", i, got[i], obj.GetResourceVersion())
		}
	}
}
