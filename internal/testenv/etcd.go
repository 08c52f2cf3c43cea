package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StoreEnv names the environment variable that picks the store backend the
// store and API server suites run on: "etcd" runs them against a real etcd
// (bin/etcd, started by Etcd), anything else on bbolt. `make test` runs
// those packages once with each.
const StoreEnv = "PODLAB_TEST_STORE"

// WantEtcd says whether the suites run on etcd this time.
func WantEtcd() bool { return os.Getenv(StoreEnv) == "etcd" }

// EtcdBin is bin/etcd, or the test skips (fails in CI) when it is missing.
func EtcdBin(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "bin", "etcd")
	if !isExecutable(p) {
		Missing(t, "%s not found (make deps builds it from tools/etcd)", p)
	}
	return p
}

// EtcdProcess is a real etcd a test started.
type EtcdProcess struct {
	Endpoint string // http://127.0.0.1:PORT
	DataDir  string
	bin      string
	peer     string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has exited
	t        testing.TB
}

// Etcd starts bin/etcd for one test: data in t.TempDir(), client and peer
// ports the kernel picked, stopped (SIGKILL) when the test ends.
func Etcd(t testing.TB) *EtcdProcess {
	t.Helper()
	e := &EtcdProcess{bin: EtcdBin(t), DataDir: filepath.Join(t.TempDir(), "etcd"), t: t}
	e.Endpoint = "http://" + freeAddr(t)
	e.peer = "http://" + freeAddr(t)
	e.Start()
	t.Cleanup(e.Kill)
	return e
}

// Start starts (or starts again, after Kill) the etcd on its data and ports,
// and returns once it answers.
func (e *EtcdProcess) Start() {
	e.t.Helper()
	e.cmd = exec.Command(e.bin, "--name", "test", "--data-dir", e.DataDir,
		"--listen-client-urls", e.Endpoint, "--advertise-client-urls", e.Endpoint,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", "test="+e.peer, "--log-level", "error", "--unsafe-no-fsync=false")
	log, err := os.OpenFile(e.DataDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	defer log.Close()
	e.cmd.Stdout, e.cmd.Stderr = log, log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatalf("starting etcd: %v", err)
	}
	exited := make(chan struct{})
	e.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(e.cmd)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if healthy(e.Endpoint) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("etcd at %s did not become healthy in 20s (log: %s)", e.Endpoint, tail(e.DataDir+".log"))
}

// Kill stops etcd with SIGKILL, as a crash would.
func (e *EtcdProcess) Kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-e.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

func healthy(endpoint string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	host := strings.TrimPrefix(endpoint, "http://")
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "GET /health HTTP/1.0\r\nHost: %s\r\n\r\n", host)
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.Contains(line, "200")
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
