package remote

import (
	"context"
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Which errors of the wire say the API server is unreachable (so that
// WaitForServer and a watch's resume try again) and which are the caller's
// own or the server's answer.
func TestWrapWire(t *testing.T) {
	get := func(err error) error { return &url.Error{Op: "Get", URL: "https://172.22.0.1:6443/version", Err: err} }
	for _, tc := range []struct {
		name        string
		err         error
		unreachable bool
	}{
		{"a dial that timed out (it matches context.DeadlineExceeded)", get(&net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}), true},
		{"a refused connection", get(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"the caller's context cancelled", get(context.Canceled), false},
		{"the caller's deadline", get(context.DeadlineExceeded), false},
		{"the server's answer", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Client{host: "172.22.0.1:6443"}).wrapWire("asking for /version", tc.err)
			if errors.Is(got, ErrUnreachable) != tc.unreachable {
				t.Errorf("wrapWire(%v) = %v; unreachable %v, want %v", tc.err, got, errors.Is(got, ErrUnreachable), tc.unreachable)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("wrapWire(%v) = %v: the cause is lost", tc.err, got)
			}
		})
	}
}
