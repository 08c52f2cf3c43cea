package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ServerConfig is how `podlab apiserver` serves, named after
// kube-apiserver's flags.
type ServerConfig struct {
	BindAddress string // --bind-address: 127.0.0.1
	SecurePort  int    // --secure-port: 6443; 0 lets the kernel choose
	// The serving certificate and its key (--tls-cert-file,
	// --tls-private-key-file), and the CA that signs client certificates
	// (--client-ca-file).
	TLSCertFile, TLSPrivateKeyFile, ClientCAFile string
	// AlsoOn are more addresses to serve on, at the same port: the lab
	// network's gateway, where joined nodes reach the API server. Each is
	// bound with IP_FREEBIND, so the address need not exist yet (the lab
	// bridge gets it when the first node joins). Ignored when BindAddress
	// is unspecified (0.0.0.0 covers them).
	AlsoOn []string
}

// ErrNoServingCertificate: the certificate files are missing.
var ErrNoServingCertificate = errors.New("no serving certificate: run `podlab init` first")

// TLSConfig loads the serving certificate and the client CA. It asks
// clients for a certificate without requiring one or verifying it in the
// handshake (tls.RequestClientCert), as kube-apiserver does: the x509
// authenticator verifies it, so a certificate from another CA is a 401
// with a Status body, not a TLS error, and a request without one may
// still bring a bearer token.
func (cfg ServerConfig) TLSConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSPrivateKeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%v)", ErrNoServingCertificate, err)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate %s: %w", cfg.TLSCertFile, err)
	}
	ca, err := os.ReadFile(cfg.ClientCAFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (no client CA: %v)", ErrNoServingCertificate, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the client CA %s holds no PEM certificate", cfg.ClientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
		ClientCAs:    pool, // named to clients, so they pick a certificate it signed
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ListenAndServe serves h over HTTPS until ctx is done, then stops: it
// stops accepting, cancels every request still open (watches end, as a
// stopping kube-apiserver ends them and clients watch again) and waits
// for them, at most 10 s. ready is called with the address once the
// port is open.
func ListenAndServe(ctx context.Context, cfg ServerConfig, h http.Handler, ready func(addr string)) error {
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.SecurePort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (is another podlab apiserver running? choose another --secure-port)", addr, err)
	}
	lns := []net.Listener{ln}
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	if bind := net.ParseIP(cfg.BindAddress); bind == nil || !bind.IsUnspecified() {
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		for _, a := range cfg.AlsoOn {
			l, err := listenFreebind(ctx, net.JoinHostPort(a, port))
			if err != nil {
				return err
			}
			lns = append(lns, l)
		}
	}
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	done := make(chan error, len(lns))
	for _, l := range lns {
		go func() { done <- srv.ServeTLS(l, "", "") }()
	}
	select {
	case err := <-done:
		return fmt.Errorf("serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	cancelRequests()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the server: %w", err)
	}
	return nil
}

// listenFreebind listens on addr with IP_FREEBIND: the address may be
// one the host does not have yet.
func listenFreebind(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (the lab network's gateway): %w (is another podlab apiserver of this state directory running?)", addr, err)
	}
	return ln, nil
}

// ErrNoKubeletClientCertificate: the API server's client certificate for
// kubelets is missing.
var ErrNoKubeletClientCertificate = errors.New("no client certificate for kubelets: run `podlab init` to make pki/apiserver-kubelet-client.crt")

// KubeletTransport is how the API server calls kubelets (WithKubeletTransport):
// with its client certificate (--kubelet-client-certificate and
// --kubelet-client-key: CN kube-apiserver-kubelet-client), verifying each
// kubelet's serving certificate against caFile
// (--kubelet-certificate-authority).
func KubeletTransport(certFile, keyFile, caFile string) (*http.Transport, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%v)", ErrNoKubeletClientCertificate, err)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubelet client certificate %s: %w", certFile, err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the kubelets' certificate authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the kubelets' certificate authority %s holds no PEM certificate", caFile)
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}, nil
}
