package cri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/unpack"
)

// Name and Version are what Version answers (RuntimeName, RuntimeVersion).
const (
	Name       = "podlab"
	Version    = "0.15.0"
	APIVersion = "v1"
)

// Config is a node's runtime.
type Config struct {
	// Node is the node whose runtime this is: its directory holds the
	// socket, the records, the content store, the bundles, the namespaces.
	Node statedir.Node
	// Runtime is the OCI runtime binary (runc); Shim the command line that
	// runs runc.ShimMain (see runc.Runtime).
	Runtime string
	Shim    []string
	// Mirror and Insecure are how PullImage reaches registries (see
	// pull.Options): Mirror, when set, is where docker.io images come
	// from instead of the hosts the registry hosts directory names (the
	// state directory's certs.d, which PullImage reads on every pull).
	Mirror   string
	Insecure bool
	// CNIBinDirs are where the CNI plugins are; default cni.DefaultBinDirs.
	CNIBinDirs []string
	// StreamAddress is where the streaming server (exec, attach,
	// port-forward) listens; default 127.0.0.1:0, as containerd's.
	StreamAddress string
	// Log, when set, receives each CRI call with its request and response
	// (protobuf text, as crictl --debug shows them), and the runtime's notes.
	Log io.Writer
	// OnCommand, when set, receives every runc command line.
	OnCommand func(argv []string)
	// Handlers are the runtime handlers (containerd's runtimes table);
	// default runc.DefaultHandlers(Runtime). One must be runc's.
	Handlers []runc.Handler
	// Snapshotter is how containers' rootfses are made; default overlayfs
	// where the kernel has it (unpack.DefaultSnapshotter), else native.
	Snapshotter unpack.Snapshotter
}

// Server is a node's CRI runtime. New makes it; Serve answers on a
// listener from Listen.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg   Config
	node  statedir.Node
	rec   records
	store *pull.Store
	rt    *runc.Runtime // the default handler's (runc)
	// handlers and runtimes are the handler table: a runtime per handler.
	handlers []runc.Handler
	runtimes map[string]*runc.Runtime
	snap     snapshotter
	network  *cni.Network
	stream   *streamServer

	// mu serializes the calls that make or remove things; reads go
	// unlocked against records written atomically.
	mu    sync.Mutex
	logMu sync.Mutex
	grpc  *grpc.Server
	// imgs is the content store's images, kept while its index.json is
	// the same file.
	imgs   imageCache
	closed chan struct{}
}

// Cleaned is what New removed of creates a killed server left half-made.
type Cleaned struct {
	Kind, ID string // "sandbox" or "container"
	Removed  []string
}

// New opens the node's runtime: its content store, network and runc, and
// cleans what a killed server left half-made (records still "creating").
func New(ctx context.Context, cfg Config) (*Server, []Cleaned, error) {
	n := cfg.Node
	if n.Dir == "" || n.Name == "" {
		return nil, nil, errors.New("cri: no node (statedir.Node with Name and Dir)")
	}
	if cfg.Runtime == "" || len(cfg.Shim) == 0 {
		return nil, nil, errors.New("cri: the OCI runtime binary and the shim command are needed (runc.FindRuntime, and `podlab runc shim`)")
	}
	if err := os.MkdirAll(n.Dir, 0o711); err != nil {
		return nil, nil, fmt.Errorf("making the node directory: %w", err)
	}
	store, err := pull.OpenStore(n.ContentDir())
	if err != nil {
		return nil, nil, err
	}
	network, err := cni.New(cni.Config{ConfDir: n.CNIConfDir(), CacheDir: n.CNICacheDir(), BinDirs: cfg.CNIBinDirs})
	if err != nil {
		return nil, nil, err
	}
	if len(cfg.Handlers) == 0 {
		cfg.Handlers = runc.DefaultHandlers(cfg.Runtime)
	}
	runtimes, err := handlerRuntimes(cfg)
	if err != nil {
		return nil, nil, err
	}
	s := &Server{
		cfg:      cfg,
		node:     n,
		rec:      records{sandboxes: n.CRISandboxesDir(), containers: n.CRIContainersDir()},
		store:    store,
		network:  network,
		rt:       runtimes[runc.DefaultHandler],
		handlers: cfg.Handlers,
		runtimes: runtimes,
		closed:   make(chan struct{}),
	}
	cleaned, err := s.cleanHalfMade(ctx)
	if err != nil {
		return nil, cleaned, err
	}
	return s, cleaned, nil
}

// Listen makes the unix socket at path. A path that exists and is not a
// socket is refused (ErrNotSocket), and nothing is removed; a socket
// another runtime answers on is refused (ErrInUse), naming it; a stale
// socket nobody answers on is removed, and stale says so.
func Listen(ctx context.Context, path string) (ln net.Listener, stale bool, err error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, false, err
	case fi.Mode()&fs.ModeSocket == 0:
		return nil, false, fmt.Errorf("%w: %s is %s; move it away or choose another node", ErrNotSocket, path, describeMode(fi))
	default:
		who, answered := whoServes(ctx, path)
		if answered {
			return nil, false, fmt.Errorf("%w %s: %s answers on it; stop it first (one runtime per node)", ErrInUse, path, who)
		}
		if err := os.Remove(path); err != nil {
			return nil, false, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
		stale = true
	}
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, false, fmt.Errorf("the socket path %s is %d bytes; a unix socket's path must be under %d: use a shorter --state-dir", path, len(path), len(unix.RawSockaddrUnix{}.Path))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return nil, stale, err
	}
	ln, err = net.Listen("unix", path)
	if err != nil {
		return nil, stale, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, stale, err
	}
	return ln, stale, nil
}

func describeMode(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return fmt.Sprintf("a regular file of %d bytes", fi.Size())
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	default:
		return "not a socket (" + m.String() + ")"
	}
}

// whoServes connects to the socket at path: when something answers, it
// names it by the peer's process (SO_PEERCRED) and its CRI Version.
func whoServes(ctx context.Context, path string) (string, bool) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", false
	}
	defer c.Close()
	who := "a process"
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cred.Pid))
					who = fmt.Sprintf("pid %d (%s)", cred.Pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
				}
			})
		}
	}
	cc, err := grpc.NewClient("unix://"+path, grpcInsecure())
	if err == nil {
		defer cc.Close()
		vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if v, err := runtimeapi.NewRuntimeServiceClient(cc).Version(vctx, &runtimeapi.VersionRequest{}); err == nil {
			who = fmt.Sprintf("%s %s, %s", v.RuntimeName, v.RuntimeVersion, who)
		}
	}
	return who, true
}

// Serve answers CRI calls on ln, and starts the streaming server, until
// ctx ends or Stop; then it stops both and removes the socket.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	st, err := newStreamServer(s, s.cfg.StreamAddress)
	if err != nil {
		return err
	}
	s.stream = st
	go st.serve()
	defer st.close()
	s.grpc = grpc.NewServer(grpc.UnaryInterceptor(s.logCall))
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, s)
	runtimeapi.RegisterImageServiceServer(s.grpc, s)
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closed:
		}
		s.grpc.GracefulStop()
	}()
	err = s.grpc.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// StreamURL is the streaming server's base URL, once Serve started it.
func (s *Server) StreamURL() string {
	if s.stream == nil {
		return ""
	}
	return s.stream.base
}

// Stop ends Serve.
func (s *Server) Stop() {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

// logCall is the -v narration: each call, its request and its response or
// error, in protobuf text.
func (s *Server) logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if s.cfg.Log == nil {
		return resp, err
	}
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s request: {%s}\n", time.Now().Format("15:04:05.000"), method, text(req))
	if err != nil {
		fmt.Fprintf(&b, "%s %s error (%s): %v\n", time.Now().Format("15:04:05.000"), method, status.Code(err), status.Convert(err).Message())
	} else {
		fmt.Fprintf(&b, "%s %s response (%s): {%s}\n", time.Now().Format("15:04:05.000"), method, time.Since(start).Round(time.Microsecond), text(resp))
	}
	s.logMu.Lock()
	io.WriteString(s.cfg.Log, b.String())
	s.logMu.Unlock()
	return resp, err
}

// note writes one of the runtime's own lines to the log.
func (s *Server) note(format string, a ...any) {
	if s.cfg.Log == nil {
		return
	}
	s.logMu.Lock()
	fmt.Fprintf(s.cfg.Log, "%s note: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	s.logMu.Unlock()
}

func text(v any) string {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(prototext.MarshalOptions{}.Format(m))
}

// newID is a random 64-hex id, as containerd's.
func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// resolve finds the one id of all that id names, whole or by a unique
// prefix (crictl prints 13 characters), as containerd's truncindex.
func resolve(kind, id string, all []string) (string, error) {
	if id == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s ID is empty", kind)
	}
	var found []string
	for _, a := range all {
		if a == id {
			return a, nil
		}
		if strings.HasPrefix(a, id) {
			found = append(found, a)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
	default:
		return "", status.Errorf(codes.InvalidArgument, "%s ID %q is ambiguous: it begins %d IDs; give more of it", kind, id, len(found))
	}
}

func (s *Server) findSandbox(id string) (*sandboxRecord, error) {
	all, err := s.rec.sandboxIDs()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing sandboxes: %v", err)
	}
	full, err := resolve("sandbox", id, all)
	if err != nil {
		return nil, err
	}
	sb, err := s.rec.sandbox(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: not found", id)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return sb, nil
}

func (s *Server) findContainer(id string) (*containerRecord, error) {
	all, err := s.rec.containerIDs()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing containers: %v", err)
	}
	full, err := resolve("container", id, all)
	if err != nil {
		return nil, err
	}
	c, err := s.rec.container(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", id)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return c, nil
}

func grpcInsecure() grpc.DialOption {
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}
