package remote

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// RequestLog returns a wrapper for client-go's transport
// (rest.Config.WrapTransport) that writes one line per request to w once
// its answer's status line arrives, as kubectl -v=6 narrates them:
//
//	POST https://127.0.0.1:6443/api/v1/namespaces/default/pods 201 Created in 4 milliseconds
//
// A request that got no answer ends with the error instead of a status.
// Lines from concurrent requests never interleave.
func RequestLog(w io.Writer) func(http.RoundTripper) http.RoundTripper {
	var mu sync.Mutex
	return func(rt http.RoundTripper) http.RoundTripper {
		return &requestLogger{rt: rt, w: w, mu: &mu}
	}
}

type requestLogger struct {
	rt http.RoundTripper
	w  io.Writer
	mu *sync.Mutex
}

func (l *requestLogger) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := l.rt.RoundTrip(r)
	ms := time.Since(start).Milliseconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		fmt.Fprintf(l.w, "%s %s in %d milliseconds: %v\n", r.Method, r.URL, ms, err)
		return resp, err
	}
	fmt.Fprintf(l.w, "%s %s %s in %d milliseconds\n", r.Method, r.URL, resp.Status, ms)
	return resp, nil
}
