package rest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/podlab/podlab/steps/apiserver/rest"
)

func TestClaimStore_OneAPIServerPerStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcd", "apiserver.lock")
	release, err := rest.ClaimStore(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the lock file holds %q, want this pid", b)
	}
	_, err = rest.ClaimStore(path)
	if !errors.Is(err, rest.ErrStoreServed) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second claim: %v, want ErrStoreServed naming the pid that holds it", err)
	}
	release()
	again, err := rest.ClaimStore(path)
	if err != nil {
		t.Fatalf("a claim after release: %v", err)
	}
	again()
}
