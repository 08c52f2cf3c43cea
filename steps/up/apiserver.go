package up

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/remote"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// APIServer is the kube-apiserver Up drives the chain through, over
// HTTPS: its own, in-process (the handler `podlab apiserver` serves, on
// 127.0.0.1 and a port the kernel picks, for as long as Up runs), or the
// podlab apiserver already serving the state directory.
type APIServer struct {
	// URL is where it serves; PID the process that serves it.
	URL string
	PID int
	// InProcess is true when Up ran it; false when it reused a running
	// podlab apiserver (whose log, with -v, holds the gate's phases).
	InProcess bool

	rec  *requestRecorder
	stop func()
}

// Requests are the requests the in-process API server answered, in the
// order it answered them (nil for a reused one).
func (a *APIServer) Requests() []Request {
	if a == nil || a.rec == nil {
		return nil
	}
	return a.rec.all()
}

// Request is one request the in-process API server answered.
type Request struct {
	Method, Path string
	// User is the common name of the client certificate that came with it
	// (the identity the x509 authenticator proved), "" without one.
	User string
	// Code is the HTTP status of the answer.
	Code int
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s (%s) %d %s", r.Method, r.Path, r.User, r.Code, http.StatusText(r.Code))
}

// requestRecorder records each request's status as it is written.
type requestRecorder struct {
	h    http.Handler
	mu   sync.Mutex
	reqs []Request
}

func (rr *requestRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.Path}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		req.User = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	sw := &statusWriter{ResponseWriter: w, done: func(code int) {
		req.Code = code
		rr.mu.Lock()
		rr.reqs = append(rr.reqs, req)
		rr.mu.Unlock()
	}}
	rr.h.ServeHTTP(sw, r)
	sw.WriteHeader(http.StatusOK) // recorded once: a no-op if written
}

func (rr *requestRecorder) all() []Request {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]Request(nil), rr.reqs...)
}

// statusWriter calls done with the status code, once.
type statusWriter struct {
	http.ResponseWriter
	done  func(int)
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.done(code)
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush lets a watch's events through as they come.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ensurePKI completes the lab's PKI (podlab init's second half): the CA,
// the serving and client certificates, and a kubeconfig per identity,
// including each node of the token file. It keeps what exists.
func ensurePKI(stateDir string) (*pki.Result, error) {
	tokens, err := authn.Load(authn.Path(stateDir))
	if err != nil {
		return nil, err
	}
	var nodes []pki.Node
	for _, e := range tokens.Entries() {
		if name, ok := strings.CutPrefix(e.User.Name, pki.NodeUserPrefix); ok {
			nodes = append(nodes, pki.Node{Name: name, Hosts: pki.MachineHosts()})
		}
	}
	res, err := pki.Ensure(pki.Options{Layout: statedir.Layout{Dir: stateDir}, APIServerHosts: pki.MachineHosts(), Nodes: nodes})
	if err != nil {
		return nil, fmt.Errorf("making the lab's PKI (podlab init): %w", err)
	}
	return res, nil
}

// startAPIServer reuses the podlab apiserver that serves the state
// directory, or serves its store itself: it claims the store as `podlab
// apiserver` does (so podlab's commands, run meanwhile, find it), opens
// it, and serves rest.NewKubeAPIServer over HTTPS on 127.0.0.1 and a
// free port, with the state directory's PKI. onPhase receives every phase
// of the gate of every request, with the request ("POST /api/v1/...
// (admin)").
func startAPIServer(ctx context.Context, stateDir string, onPhase func(request string, p apiserver.Phase)) (*APIServer, error) {
	l := statedir.Layout{Dir: stateDir}
	if a, ok, err := runningAPIServer(ctx, l); ok || err != nil {
		return a, err
	}
	release, err := rest.ClaimStore(l.APIServerLock())
	if errors.Is(err, rest.ErrStoreServed) { // one started meanwhile
		if a, ok, err := runningAPIServer(ctx, l); ok || err != nil {
			return a, err
		}
	}
	if err != nil {
		return nil, err
	}
	cfg := rest.ServerConfig{BindAddress: "127.0.0.1", SecurePort: 0,
		TLSCertFile: l.PKICert("apiserver"), TLSPrivateKeyFile: l.PKIKey("apiserver"), ClientCAFile: l.CACert()}
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		release()
		return nil, err
	}
	s, err := apiserver.Open(stateDir)
	if err != nil {
		release()
		return nil, err
	}
	h, err := rest.NewKubeAPIServer(s, tlsConfig.ClientCAs, rest.WithPhases(onPhase))
	if err != nil {
		s.Close()
		release()
		return nil, err
	}
	a := &APIServer{PID: os.Getpid(), InProcess: true, rec: &requestRecorder{h: h}}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- rest.ListenAndServe(sctx, cfg, a.rec, func(addr string) { ready <- addr })
	}()
	a.stop = func() {
		cancel()
		<-done
		s.Close()
		release()
	}
	select {
	case addr := <-ready:
		a.URL = rest.URLFor(addr)
	case err := <-done:
		cancel()
		s.Close()
		release()
		return nil, fmt.Errorf("serving the Kubernetes API in-process: %w", err)
	}
	if err := rest.Advertise(l.APIServerLock(), a.URL); err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}

// runningAPIServer is the podlab apiserver serving the state directory,
// if one does (waiting, 10 s at most, for one that is starting).
func runningAPIServer(ctx context.Context, l statedir.Layout) (*APIServer, bool, error) {
	claim, serving, err := rest.WaitServing(ctx, l.APIServerLock(), 10*time.Second)
	if err != nil || !serving {
		return nil, false, err
	}
	return &APIServer{URL: claim.URL, PID: claim.PID, stop: func() {}}, true, nil
}

// clientAs is a client of a over HTTPS with the kubeconfig of identity
// (admin, kube-scheduler, kube-controller-manager, node-1...): the client
// certificate in it says who it is.
func (a *APIServer) clientAs(stateDir, identity string) (*remote.Client, error) {
	cfg, err := remote.LoadKubeconfig(statedir.Layout{Dir: stateDir}.Kubeconfig(identity))
	if err != nil {
		return nil, err
	}
	cfg.Host = a.URL           // its port, whatever the kubeconfig names
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the components of one lab
	return remote.New(cfg)
}
