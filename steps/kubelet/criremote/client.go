package criremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultTextLimit is how much of a request or response Options.Log shows
// (an image list or a verbose status can be tens of kilobytes).
const DefaultTextLimit = 2000

// maxMsgSize is the kubelet's own limit on a CRI message (16 MiB).
const maxMsgSize = 16 * 1024 * 1024

// Endpoint returns the unix socket path of a CRI endpoint, which must be
// unix:///ABSOLUTE/PATH (the kubelet's --container-runtime-endpoint form).
func Endpoint(endpoint string) (string, error) {
	if endpoint == "" {
		return "", fmt.Errorf("%w: empty; give unix:///PATH/TO/SOCKET (podlab's runtime: unix://<state>/nodes/NAME/cri.sock)", ErrEndpoint)
	}
	scheme, path, ok := strings.Cut(endpoint, "://")
	if !ok {
		return "", fmt.Errorf("%w %q: no scheme; give unix://%s", ErrEndpoint, endpoint, endpoint)
	}
	if scheme != "unix" {
		return "", fmt.Errorf("%w %q: scheme %q is not supported; a runtime on Linux answers on a unix socket: unix:///PATH", ErrEndpoint, endpoint, scheme)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w %q: the socket path must be absolute (unix:///PATH: three slashes)", ErrEndpoint, endpoint)
	}
	return filepath.Clean(path), nil
}

// Options are a client's narration.
type Options struct {
	// Log, when set, receives each CRI call with its request and its
	// response or error, in protobuf text.
	Log io.Writer
	// TextLimit trims each request and response shown (default
	// DefaultTextLimit).
	TextLimit int
}

// Client is a kubelet's connection to its runtime.
type Client struct {
	Runtime runtimeapi.RuntimeServiceClient
	Image   runtimeapi.ImageServiceClient
	// RuntimeEndpoint and ImageEndpoint are what Dial was given.
	RuntimeEndpoint, ImageEndpoint string

	conns []*grpc.ClientConn
}

// Dial makes the runtime and image clients; an empty imageEndpoint is the
// runtime's. It does not call the runtime (gRPC connects on the first
// call): Probe, or the first call, tells whether one answers.
func Dial(runtimeEndpoint, imageEndpoint string, opts Options) (*Client, error) {
	if imageEndpoint == "" {
		imageEndpoint = runtimeEndpoint
	}
	c := &Client{RuntimeEndpoint: runtimeEndpoint, ImageEndpoint: imageEndpoint}
	n := &narrator{w: opts.Log, limit: opts.TextLimit}
	if n.limit <= 0 {
		n.limit = DefaultTextLimit
	}
	rconn, err := dial(runtimeEndpoint, n)
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, rconn)
	iconn := rconn
	if imageEndpoint != runtimeEndpoint {
		if iconn, err = dial(imageEndpoint, n); err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, iconn)
	}
	c.Runtime = runtimeapi.NewRuntimeServiceClient(rconn)
	c.Image = runtimeapi.NewImageServiceClient(iconn)
	return c, nil
}

func dial(endpoint string, n *narrator) (*grpc.ClientConn, error) {
	path, err := Endpoint(endpoint)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}
	if n.w != nil {
		opts = append(opts, grpc.WithUnaryInterceptor(n.intercept))
	}
	conn, err := grpc.NewClient("unix://"+path, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the container runtime at %s: %w", endpoint, err)
	}
	return conn, nil
}

// Close closes the connections.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// Probe asks the runtime at endpoint its Version, within timeout: the
// kubelet's first call. Nothing answering is ErrUnreachable.
func Probe(ctx context.Context, endpoint string, timeout time.Duration) (*runtimeapi.VersionResponse, error) {
	path, err := Endpoint(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the container runtime at %s: %w", endpoint, err)
	}
	defer conn.Close()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(pctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w on %s: %s", ErrUnreachable, endpoint, status.Convert(err).Message())
	}
	return v, nil
}

// narrator writes each call as crictl --debug does.
type narrator struct {
	mu    sync.Mutex
	w     io.Writer
	limit int
}

func (n *narrator) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	name := method[strings.LastIndex(method, "/")+1:]
	var b strings.Builder
	fmt.Fprintf(&b, "CRI %s request: {%s}\n", name, n.text(req))
	if err != nil {
		fmt.Fprintf(&b, "CRI %s error (%s): %s\n", name, status.Code(err), status.Convert(err).Message())
	} else {
		fmt.Fprintf(&b, "CRI %s response (%s): {%s}\n", name, time.Since(start).Round(time.Microsecond), n.text(reply))
	}
	n.mu.Lock()
	io.WriteString(n.w, b.String())
	n.mu.Unlock()
	return err
}

// text is a message in one line of protobuf text, trimmed to the limit.
func (n *narrator) text(v any) string {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(prototext.MarshalOptions{}.Format(m))
	if len(s) > n.limit {
		s = fmt.Sprintf("%s ... (%d more bytes)", s[:n.limit], len(s)-n.limit)
	}
	return s
}
