package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// KubeAPIServerBin is bin/kube-apiserver, the real kube-apiserver of the
// lab's release (`make kube-apiserver` builds it from tools/kube-apiserver),
// or the test skips (fails in CI) when it is missing.
func KubeAPIServerBin(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "bin", "kube-apiserver")
	if !isExecutable(p) {
		Missing(t, "%s not found (make kube-apiserver builds it from tools/kube-apiserver, about 7 minutes)", p)
	}
	return p
}

// KubeAPIServerConfig is what a test gives the real kube-apiserver: the
// etcd it stores in, the port it serves on, and the lab's PKI files (the
// serving certificate and key, the CA its clients' certificates are signed
// by, as `podlab init` makes them).
type KubeAPIServerConfig struct {
	EtcdEndpoint string
	Port         int
	CertFile     string
	KeyFile      string
	ClientCAFile string
}

// KubeAPIServer starts bin/kube-apiserver for one test, on loopback, and
// returns once its /readyz answers ok; it is stopped (SIGKILL) when the
// test ends. It runs as kubeadm configures it where that matters (RBAC,
// x509 clients), with what a lone process on loopback needs:
// --endpoint-reconciler-type=none (there is no routable address to
// advertise), a service-account key pair made here, and the admission
// plugin ServiceAccount disabled (no controller-manager creates the
// ServiceAccount "default" that it would require of every pod).
func KubeAPIServer(t testing.TB, cfg KubeAPIServerConfig) {
	t.Helper()
	bin := KubeAPIServerBin(t)
	dir := t.TempDir()
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	writeServiceAccountKeys(t, saKey, saPub)
	cmd := exec.Command(bin,
		"--etcd-servers="+cfg.EtcdEndpoint,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cfg.Port),
		"--tls-cert-file="+cfg.CertFile,
		"--tls-private-key-file="+cfg.KeyFile,
		"--client-ca-file="+cfg.ClientCAFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/12",
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--cert-dir="+filepath.Join(dir, "certs"))
	logPath := filepath.Join(dir, "kube-apiserver.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	})
	ca, err := os.ReadFile(cfg.ClientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", cfg.Port)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("kube-apiserver exited at start (log: %s)", tail(logPath))
		default:
		}
		if ready(c, url) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver on port %d was not ready in 60s (log: %s)", cfg.Port, tail(logPath))
}

// ready asks /readyz, which kube-apiserver serves to anonymous clients.
func ready(c *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// writeServiceAccountKeys writes a new ECDSA P-256 key pair (ES256
// tokens), as kubeadm's sa.key and sa.pub: the private key in PEM (EC
// PRIVATE KEY), the public key in PEM (PUBLIC KEY, PKIX).
func writeServiceAccountKeys(t testing.TB, keyPath, pubPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		t.Fatal(err)
	}
}
