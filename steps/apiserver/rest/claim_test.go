package rest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

func TestServing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcd", "apiserver.lock")
	if _, ok, err := rest.Serving(path); ok || err != nil {
		t.Fatalf("no claim file: serving %v, %v; want false, nil", ok, err)
	}
	release, err := rest.ClaimStore(path)
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := rest.Serving(path)
	if !ok || err != nil || c.PID != os.Getpid() || c.URL != "" {
		t.Fatalf("claimed, not listening yet: %+v %v %v; want this pid, no URL", c, ok, err)
	}
	if err := rest.Advertise(path, "https://127.0.0.1:6443"); err != nil {
		t.Fatal(err)
	}
	c, ok, err = rest.Serving(path)
	if !ok || err != nil || c.PID != os.Getpid() || c.URL != "https://127.0.0.1:6443" {
		t.Fatalf("listening: %+v %v %v; want this pid and its URL", c, ok, err)
	}
	_, err = rest.ClaimStore(path)
	if !errors.Is(err, rest.ErrStoreServed) || !strings.Contains(err.Error(), "https://127.0.0.1:6443") {
		t.Errorf("a second claim: %v, want ErrStoreServed naming the URL served", err)
	}
	release()
	// the file stays, with the last URL in it: the released lock says no
	// one serves it
	if c, ok, err := rest.Serving(path); ok || err != nil {
		t.Fatalf("after release: %+v %v %v; want not serving", c, ok, err)
	}
}

func TestURLFor(t *testing.T) {
	for _, tt := range []struct{ name, addr, want string }{
		{"loopback", "127.0.0.1:6443", "https://127.0.0.1:6443"},
		{"every IPv4 interface", "0.0.0.0:6443", "https://127.0.0.1:6443"},
		{"every IPv6 interface", "[::]:6443", "https://127.0.0.1:6443"},
		{"a node address", "10.0.0.2:443", "https://10.0.0.2:443"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rest.URLFor(tt.addr); got != tt.want {
				t.Errorf("URLFor(%q) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

func TestWaitServing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "etcd", "apiserver.lock")
	if _, ok, err := rest.WaitServing(ctx, path, time.Second); ok || err != nil {
		t.Fatalf("nothing claimed: %v %v, want not serving at once", ok, err)
	}
	release, err := rest.ClaimStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, ok, err := rest.WaitServing(ctx, path, 200*time.Millisecond); !ok || !errors.Is(err, rest.ErrNotServing) {
		t.Fatalf("claimed, never advertised: %v %v, want ErrNotServing", ok, err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		rest.Advertise(path, "https://127.0.0.1:6443")
	}()
	c, ok, err := rest.WaitServing(ctx, path, 5*time.Second)
	if !ok || err != nil || c.URL != "https://127.0.0.1:6443" {
		t.Fatalf("advertised while waiting: %+v %v %v", c, ok, err)
	}
}
