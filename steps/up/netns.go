package up

// An HTTP request from inside a pod, without a curl in its image: podlab
// enters the pod's network namespace itself. A network namespace belongs to
// a thread, not a process, so a goroutine locks itself to its OS thread and
// setns(2)s that thread into the namespace the kubelet pinned at
// <node>/netns/<pod-uid>. A socket belongs to the namespace it was created
// in, whatever thread uses it later: the connection dialled there reaches
// the pod's 127.0.0.1, the same loopback the pod's containers share. The
// thread is never unlocked, so Go ends it with the goroutine rather than
// hand it, still in the pod's namespace, to other goroutines.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// HTTPAnswer is what an HTTP GET made inside a pod's network namespace got.
type HTTPAnswer struct {
	// URL is what was asked, as the pod sees it: http://127.0.0.1:PORT/.
	URL string
	// Netns is the network namespace the request was made in.
	Netns string
	// StatusLine is "HTTP/1.1 200 OK"; Header the response's headers.
	StatusLine string
	StatusCode int
	Header     http.Header
	// Body is the start of the page (at most MaxBody bytes).
	Body []byte
	// Tries is how many connections were tried: the app may not listen
	// yet right after it started.
	Tries int
	Took  time.Duration
}

// MaxBody is how much of a page GetInPod keeps.
const MaxBody = 4096

// GetInPod sends GET path to 127.0.0.1:port inside the network namespace
// pinned at netns, trying again while nothing listens there yet (for up to
// wait), as curl run in the pod would.
func GetInPod(ctx context.Context, netns string, port int, path string, wait time.Duration) (*HTTPAnswer, error) {
	if path == "" {
		path = "/"
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ans := &HTTPAnswer{URL: "http://" + addr + path, Netns: netns}
	start := time.Now()
	deadline := start.Add(wait)
	var conn net.Conn
	for {
		ans.Tries++
		c, err := DialInNetns(ctx, netns, "tcp", addr)
		if err == nil {
			conn = c
			break
		}
		if !errors.Is(err, unix.ECONNREFUSED) || time.Now().After(deadline) {
			return ans, fmt.Errorf("connecting to %s in the network namespace %s: %w", addr, netns, err)
		}
		select {
		case <-ctx.Done():
			return ans, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	} else {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ans.URL, nil)
	if err != nil {
		return ans, err
	}
	req.Header.Set("User-Agent", "podlab-up")
	req.Close = true
	if err := req.Write(conn); err != nil {
		return ans, fmt.Errorf("sending GET %s: %w", ans.URL, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return ans, fmt.Errorf("reading the answer to GET %s: %w", ans.URL, err)
	}
	defer resp.Body.Close()
	ans.StatusLine = resp.Proto + " " + resp.Status
	ans.StatusCode = resp.StatusCode
	ans.Header = resp.Header
	var body bytes.Buffer
	if _, err := io.Copy(&body, io.LimitReader(resp.Body, MaxBody)); err != nil {
		return ans, fmt.Errorf("reading the page of %s: %w", ans.URL, err)
	}
	ans.Body = body.Bytes()
	ans.Took = time.Since(start)
	return ans, nil
}

// DialInNetns dials addr from inside the network namespace pinned at
// netns (a bind mount of /proc/<pid>/ns/net, or the file itself).
func DialInNetns(ctx context.Context, netns, network, addr string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		// The thread goes back to its own network namespace before it is
		// unlocked; if it cannot, it stays locked and ends with this
		// goroutine, serving no other. (Locked alone is not enough: on the
		// main thread, which Go keeps, /proc/<pid>/ns/net would then name
		// the pod's namespace.)
		runtime.LockOSThread()
		switched := false
		c, err := func() (net.Conn, error) {
			orig, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				return nil, fmt.Errorf("opening the thread's network namespace: %w", err)
			}
			defer orig.Close()
			f, err := os.Open(netns)
			if err != nil {
				return nil, fmt.Errorf("opening the network namespace: %w", err)
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				return nil, fmt.Errorf("setns(%s, CLONE_NEWNET): %w", netns, err)
			}
			switched = true
			defer func() {
				if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
					switched = false
				}
			}()
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}()
		if !switched {
			runtime.UnlockOSThread()
		}
		done <- dialed{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		go func() { // the dial still ends; close what it made
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
