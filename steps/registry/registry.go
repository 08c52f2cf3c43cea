// Package registry is the image registry of podlab's lab (step 9: the
// container runtime finds the image registry and downloads the image).
//
// A registry speaks the OCI distribution API over HTTP:
//
//	GET /v2/                                  "I am a registry"
//	GET /v2/<name>/manifests/<tag or digest>  the image's manifest (JSON)
//	GET /v2/<name>/blobs/<digest>             its config and layers, by digest
//
// plus POST/PATCH/PUT under /v2/<name>/blobs/uploads/ and PUT on manifests to
// push. This one is go-containerregistry's pkg/registry, with blobs kept on
// disk (a directory named by algorithm and hex digest) and manifests in
// memory. Memory does not survive a restart, so Run loads every image of an
// OCI layout (the demo images `make images` builds) into the registry each
// time it starts, pushing them to itself; blobs already on disk are not sent
// again.
//
// The package never prints: request lines go to Options.Log.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/podlab/podlab/steps/statedir"
)

// Errors returned while starting a registry or loading images into it.
var (
	// ErrAddrInUse means another process listens on the address already.
	ErrAddrInUse = errors.New("address already in use")
	// ErrNoLayout means the images directory is not an OCI image layout.
	ErrNoLayout = errors.New("no OCI image layout")
	// ErrNoImages means the layout names no image: none of its index.json
	// entries has an org.opencontainers.image.ref.name annotation.
	ErrNoImages = errors.New("no named image in the OCI layout")
)

// BlobDir is where the registry of the state directory stateDir keeps blobs.
func BlobDir(stateDir string) string { return statedir.Layout{Dir: stateDir}.RegistryDir() }

// ImagesDir is the OCI layout of the demo images (`make images` writes it).
func ImagesDir(stateDir string) string { return statedir.Layout{Dir: stateDir}.DemoImagesDir() }

// Options configure a registry server.
type Options struct {
	// BlobDir keeps the blobs, as <BlobDir>/sha256/<hex>. Required.
	BlobDir string
	// Log receives one line per request: time, method, path, status, size.
	// Nil means no log.
	Log io.Writer
	// LogLoads also logs the requests Run makes to load the layout (many
	// HEAD, POST, PATCH and PUT requests); by default they are left out.
	LogLoads bool
}

// Listen opens a TCP listener on addr ("127.0.0.1:5001", or ":0" for any
// free port), with an error that says so when the port is taken.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listening on %s: %w: another registry (or something else) runs there; stop it, or choose another port with --addr 127.0.0.1:PORT", addr, ErrAddrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve runs a registry on ln until ctx is done, then shuts it down and
// returns nil. GET /healthz answers 200 "ok".
func Serve(ctx context.Context, ln net.Listener, opts Options) error {
	ready := &atomic.Bool{}
	ready.Store(true)
	h, err := newHandler(opts, ready, "")
	if err != nil {
		ln.Close()
		return err
	}
	return serve(ctx, ln, h)
}

// Run loads every named image of the OCI layout at layoutDir into a
// registry (see Load), calls ready with what it loaded, and serves it on ln
// until ctx is done.
//
// A registry answers when it is ready: GET /v2/ is the probe clients and
// health checks use, and a client that sees it answer 200 pulls at once.
// So while the images load (Load pushes them over a private loopback
// listener of its own), every request on ln gets 503 Service Unavailable
// with the distribution API's UNAVAILABLE error and a Retry-After header,
// as a registry that is starting up answers; /healthz answers 503 too.
// Once the last image is loaded, ln serves the registry: /v2/ answers 200
// and every tag is there.
func Run(ctx context.Context, ln net.Listener, layoutDir string, opts Options, ready func([]Loaded)) error {
	if err := checkLayout(layoutDir); err != nil {
		ln.Close()
		return err
	}
	isReady := &atomic.Bool{}
	h, err := newHandler(opts, isReady, layoutDir)
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, notReadyGate(h, isReady, layoutDir)) }()

	loaded, err := loadPrivately(ctx, h, layoutDir)
	if err != nil {
		cancel()
		<-served
		return err
	}
	public := loopback(ln.Addr())
	for i := range loaded {
		loaded[i].Reference = public + "/" + loaded[i].Ref
	}
	isReady.Store(true)
	if ready != nil {
		ready(loaded)
	}
	return <-served
}

// loadPrivately serves h on a loopback port of its own while Load pushes
// the layout's images to it, then closes that port.
func loadPrivately(ctx context.Context, h http.Handler, layoutDir string) ([]Loaded, error) {
	private, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loading %s: listening on a private loopback port: %w", layoutDir, err)
	}
	lctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(lctx, private, h) }()
	loaded, err := Load(ctx, private.Addr().String(), layoutDir)
	stop()
	if serr := <-served; err == nil && serr != nil {
		err = serr
	}
	return loaded, err
}

// notReadyGate answers every request with 503 until ready is set, in the
// distribution API's error format, then hands them to h.
func notReadyGate(h http.Handler, ready *atomic.Bool, layoutDir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ready.Load() {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"errors":[{"code":"UNAVAILABLE","message":"the registry is loading its images from %s; try again in a moment"}]}`+"\n", layoutDir)
	})
}

// loopback is the address to reach a listener from this machine: its port on
// 127.0.0.1 when it listens on every address.
func loopback(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
}

func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown) //nolint:errcheck // Serve returns ErrServerClosed
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the registry on %s: %w", ln.Addr(), err)
	}
	return nil
}

// loadUserAgent marks the requests Load makes, so that the log can leave them out.
const loadUserAgent = "podlab-registry-load"

// newHandler is the registry's HTTP handler. Blobs of the OCI layout at
// layoutDir (if any) are served from the layout when BlobDir has lost
// them: podlab reset removes BlobDir, the registry serving on.
func newHandler(opts Options, ready *atomic.Bool, layoutDir string) (http.Handler, error) {
	if opts.BlobDir == "" {
		return nil, errors.New("starting the registry: no blob directory given")
	}
	if err := os.MkdirAll(opts.BlobDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the registry's blob directory: %w", err)
	}
	var blobs ggcrregistry.BlobHandler = ggcrregistry.NewDiskBlobHandler(opts.BlobDir)
	if layoutDir != "" {
		blobs = &layoutFallback{disk: blobs, dir: opts.BlobDir, layout: layoutDir}
	}
	reg := ggcrregistry.New(
		ggcrregistry.WithBlobHandler(blobs),
		ggcrregistry.Logger(log.New(io.Discard, "", 0)), // requests are logged below, one line each
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "loading images", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/", reg)
	if opts.Log == nil {
		return mux, nil
	}
	var mu sync.Mutex // one line at a time
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(rec, r)
		if !opts.LogLoads && strings.Contains(r.UserAgent(), loadUserAgent) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(opts.Log, "%s %-4s %s %d %s\n", time.Now().Format("15:04:05"), r.Method, r.URL.RequestURI(), rec.status, size(rec.bytes))
	}), nil
}

type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// diskBlobs is what ggcr's disk blob handler does.
type diskBlobs interface {
	ggcrregistry.BlobHandler
	ggcrregistry.BlobStatHandler
	ggcrregistry.BlobPutHandler
	ggcrregistry.BlobDeleteHandler
}

// layoutFallback serves blobs from disk, and a blob the disk has lost
// (podlab reset removed the registry's directory while it served) from
// the OCI layout the registry loaded its images from, read-only. Without
// it every pull after a reset gets its manifests (kept in memory) and
// then 404 for each blob.
type layoutFallback struct {
	disk   ggcrregistry.BlobHandler
	dir    string // the disk's directory
	layout string
}

func (f *layoutFallback) inLayout(h v1.Hash) string {
	return filepath.Join(f.layout, "blobs", h.Algorithm, h.Hex)
}

func (f *layoutFallback) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	n, err := f.disk.(diskBlobs).Stat(ctx, repo, h)
	if !errors.Is(err, ggcrregistry.ErrNotFound) {
		return n, err
	}
	fi, lerr := os.Stat(f.inLayout(h))
	if lerr != nil {
		return n, err
	}
	return fi.Size(), nil
}

func (f *layoutFallback) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	rc, err := f.disk.Get(ctx, repo, h)
	if !errors.Is(err, os.ErrNotExist) {
		return rc, err
	}
	if lrc, lerr := os.Open(f.inLayout(h)); lerr == nil {
		return lrc, nil
	}
	return nil, ggcrregistry.ErrNotFound
}

// Put makes the blob directory again if it was removed, then writes to it.
func (f *layoutFallback) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("making the registry's blob directory again: %w", err)
	}
	return f.disk.(diskBlobs).Put(ctx, repo, h, rc)
}

func (f *layoutFallback) Delete(ctx context.Context, repo string, h v1.Hash) error {
	return f.disk.(diskBlobs).Delete(ctx, repo, h)
}
