package server

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/podlab/podlab/steps/kubelet"
)

// Host is the kubelet the API serves: *kubelet.Kubelet.
type Host interface {
	// Pod reads a pod bound to the node.
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Logs writes a container's log to w.
	Logs(ctx context.Context, pod *corev1.Pod, w io.Writer, opts kubelet.LogsOptions) (*kubelet.LogsSource, error)
	// Exec runs cmd in a running container and returns its exit code.
	Exec(ctx context.Context, pod *corev1.Pod, container string, cmd []string, opts kubelet.ExecOptions) (int, error)
}

// Authorizer decides whether a user may make a request of the kubelet:
// the real kubelet's webhook authorizer asks the API server with a
// SubjectAccessReview (SubjectAccessReviews). It is the Authorize method
// of k8s.io/apiserver's authorizer.Authorizer.
type Authorizer interface {
	Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)
}

// Config is what the server needs.
type Config struct {
	// Node is the node's name: the name of the Node the requests are
	// authorized against (nodes/proxy of NODE).
	Node string
	// Host is the kubelet; Authorizer the API server's judgement.
	Host       Host
	Authorizer Authorizer
	// ClientCAs verify client certificates (the cluster CA): the kubelet's
	// --client-ca-file.
	ClientCAs *x509.CertPool
	// OnRequest, when set, is told of each request and its outcome, for
	// the command to print.
	OnRequest func(Request)
}

// Request is one request the server answered.
type Request struct {
	Method, Path string
	// User is who the client certificate says made it ("" when none).
	User string
	// Code is the HTTP status (101 for an exec that was upgraded).
	Code int
	// Reason is why the request was refused, if it was.
	Reason string
}

// Server is the kubelet's API as an http.Handler.
type Server struct {
	cfg  Config
	auth *x509request.Authenticator
	mux  *http.ServeMux
}

// New returns the kubelet API of cfg.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Host == nil:
		return nil, errors.New("kubelet server: no Host")
	case cfg.Authorizer == nil:
		return nil, errors.New("kubelet server: no Authorizer: the kubelet authorizes every request with the API server (webhook mode)")
	case cfg.ClientCAs == nil:
		return nil, errors.New("kubelet server: no client CA: run `podlab init` to make <state-dir>/pki/ca.crt")
	}
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = cfg.ClientCAs
	s := &Server{cfg: cfg, auth: x509request.New(opts, x509request.CommonNameUserConversion), mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	s.mux.HandleFunc("GET /exec/{namespace}/{pod}/{container}", s.exec)
	s.mux.HandleFunc("POST /exec/{namespace}/{pod}/{container}", s.exec)
	return s, nil
}

// statusRecorder keeps the status a handler wrote, for OnRequest.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Hijack hands the connection to an exec's SPDY streams.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	r.code = http.StatusSwitchingProtocols
	return h.Hijack()
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and the streaming code reach the
// connection (an exec hijacks it).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ServeHTTP authenticates and authorizes the request as the kubelet's
// filter does, then serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	sr := &statusRecorder{ResponseWriter: w}
	if s.cfg.OnRequest != nil {
		defer func() {
			rec.Code = sr.code
			if rec.Code == 0 {
				rec.Code = http.StatusSwitchingProtocols // hijacked
			}
			s.cfg.OnRequest(rec)
		}()
	}
	resp, ok, err := s.auth.AuthenticateRequest(r)
	if err != nil || !ok {
		rec.Reason = "no client certificate"
		if err != nil {
			rec.Reason = err.Error()
		}
		writeErrorString(sr, http.StatusUnauthorized, "Unauthorized")
		return
	}
	u := resp.User
	rec.User = u.GetName()
	attrs := s.attributes(u, r)
	decision, reason, err := s.cfg.Authorizer.Authorize(r.Context(), attrs)
	if err != nil {
		rec.Reason = err.Error()
		writeErrorString(sr, http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
			u.GetName(), attrs.Verb, attrs.Resource, attrs.Subresource))
		return
	}
	if decision != authorizer.DecisionAllow {
		rec.Reason = reason
		writeErrorString(sr, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)\n",
			u.GetName(), attrs.Verb, attrs.Resource, []string{attrs.Subresource}))
		return
	}
	s.mux.ServeHTTP(sr, r)
}

// attributes are what the kubelet asks the API server about a request (the
// kubelet's GetRequestAttributes): the verb from the HTTP method, on the
// node's Node, subresource "proxy" for every path but /stats, /metrics,
// /logs (the node's own logs) and a few others, which podlab does not
// serve. /containerLogs and /exec are both "proxy".
func (s *Server) attributes(u user.Info, r *http.Request) authorizer.AttributesRecord {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	sub := "proxy"
	switch {
	case isSubpath(r.URL.Path, "/stats/"):
		sub = "stats"
	case isSubpath(r.URL.Path, "/metrics"):
		sub = "metrics"
	case isSubpath(r.URL.Path, "/logs/"):
		sub = "log"
	}
	return authorizer.AttributesRecord{
		User: u, Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: sub,
		Name: s.cfg.Node, ResourceRequest: true, Path: r.URL.Path,
	}
}

func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && subpath[len(path)] == '/')
}

// writeErrorString answers as go-restful's WriteErrorString does: the text,
// as text/plain.
func writeErrorString(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}

// pod reads the pod a path names; ok false has answered 404 as the kubelet
// does.
func (s *Server) pod(w http.ResponseWriter, r *http.Request, msg string) (*corev1.Pod, bool) {
	pod, err := s.cfg.Host.Pod(r.Context(), r.PathValue("namespace"), r.PathValue("pod"))
	switch {
	case err == nil && pod.Spec.NodeName == s.cfg.Node:
		return pod, true
	case err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		// The Node authorizer lets a kubelet read only its own pods: the
		// others do not exist for it.
		writeErrorString(w, http.StatusNotFound, msg)
	default:
		writeErrorString(w, http.StatusInternalServerError, fmt.Sprintf("reading pod %q: %v", r.PathValue("pod"), err))
	}
	return nil, false
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// containerLogs serves /containerLogs/NS/POD/CONTAINER (the kubelet's
// getContainerLogs).
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// backwards compatibility for the "tail" query parameter
	if t := q.Get("tail"); t != "" {
		q["tailLines"] = []string{t}
		if t == "all" {
			delete(q, "tailLines")
		}
	}
	opts, err := logOptions(q)
	if err != nil {
		writeErrorString(w, http.StatusBadRequest, `{"message": "Unable to decode query."}`)
		return
	}
	if !validLogOptions(opts) {
		writeErrorString(w, http.StatusUnprocessableEntity, `{"message": "Invalid request."}`)
		return
	}
	podName, container := r.PathValue("pod"), r.PathValue("container")
	pod, ok := s.pod(w, r, fmt.Sprintf("pod %q does not exist", podName))
	if !ok {
		return
	}
	if !hasContainer(pod, container) {
		writeErrorString(w, http.StatusNotFound, fmt.Sprintf("container %q not found in pod %q", container, podName))
		return
	}
	lo := kubelet.LogsOptions{
		Container: container, Previous: opts.Previous, Follow: opts.Follow,
		TimestampPrefix: opts.Timestamps, TailLines: opts.TailLines, LimitBytes: opts.LimitBytes,
	}
	switch {
	case opts.SinceTime != nil:
		t := opts.SinceTime.Time
		lo.SinceTime = &t
	case opts.SinceSeconds != nil:
		t := time.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
		lo.SinceTime = &t
	}
	// Nothing is written before the first line: an error before it is
	// still a 400 with its text, as the kubelet answers it.
	fw := &flushWriter{w: w}
	if _, err := s.cfg.Host.Logs(r.Context(), pod, fw, lo); err != nil {
		if !fw.wrote {
			writeErrorString(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	if !fw.wrote {
		w.WriteHeader(http.StatusOK)
	}
}

// flushWriter flushes every write, so `kubectl logs -f` sees each line
// as it comes (the kubelet's flushwriter).
type flushWriter struct {
	w     http.ResponseWriter
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.wrote {
		f.w.Header().Set("Content-Type", "text/plain")
		f.wrote = true
	}
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

// logOptions reads the query as the kubelet decodes it into a
// v1.PodLogOptions (a bool parameter is true unless "false", "f" or "0";
// numbers are base 10).
func logOptions(q map[string][]string) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{}
	bools := map[string]*bool{"follow": &o.Follow, "previous": &o.Previous, "timestamps": &o.Timestamps,
		"insecureSkipTLSVerifyBackend": &o.InsecureSkipTLSVerifyBackend}
	for name, p := range bools {
		if v, ok := q[name]; ok {
			if err := runtime.Convert_Slice_string_To_bool(&v, p, nil); err != nil {
				return nil, err
			}
		}
	}
	ints := map[string]**int64{"tailLines": &o.TailLines, "sinceSeconds": &o.SinceSeconds, "limitBytes": &o.LimitBytes}
	for name, p := range ints {
		if v, ok := q[name]; ok {
			if err := runtime.Convert_Slice_string_To_Pointer_int64(&v, p, nil); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := q["sinceTime"]; ok && len(v) > 0 && v[0] != "" {
		t, err := time.Parse(time.RFC3339, v[0])
		if err != nil {
			return nil, err
		}
		o.SinceTime = &metav1.Time{Time: t}
	}
	return o, nil
}

// validLogOptions is kube's ValidatePodLogOptions.
func validLogOptions(o *corev1.PodLogOptions) bool {
	switch {
	case o.TailLines != nil && *o.TailLines < 0,
		o.LimitBytes != nil && *o.LimitBytes < 1,
		o.SinceSeconds != nil && o.SinceTime != nil,
		o.SinceSeconds != nil && *o.SinceSeconds < 1:
		return false
	}
	return true
}

// exec serves /exec/NS/POD/CONTAINER (the kubelet's getExec): the remote
// command protocol of k8s.io/cri-streaming over WebSocket or SPDY, with
// the command run by the kubelet's runtime.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		writeErrorString(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, ok := s.pod(w, r, "pod does not exist")
	if !ok {
		return
	}
	container := r.PathValue("container")
	if !hasContainer(pod, container) {
		writeErrorString(w, http.StatusNotFound, fmt.Sprintf("container not found (%q)", container))
		return
	}
	cmd := r.URL.Query()[corev1.ExecCommandParam]
	remotecommand.ServeExec(w, r, executor{host: s.cfg.Host, pod: pod}, pod.Name, string(pod.UID), container, cmd, opts,
		4*time.Hour, remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// executor runs the command through the Host, as the CRI runtime's Exec.
type executor struct {
	host Host
	pod  *corev1.Pod
}

func (e executor) ExecInContainer(ctx context.Context, _, _ string, container string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	opts := kubelet.ExecOptions{Tty: tty}
	if resize != nil {
		sizes := make(chan kubelet.TerminalSize)
		go func() {
			defer close(sizes)
			for sz := range resize {
				select {
				case sizes <- kubelet.TerminalSize{Width: sz.Width, Height: sz.Height}:
				case <-ctx.Done():
					return
				}
			}
		}()
		opts.Resize = sizes
	}
	if out != nil {
		opts.Stdout = out
	}
	if errw != nil {
		opts.Stderr = errw
	}
	if in != nil {
		// runc gets a pipe (an *os.File), so that the command's end does
		// not wait for the client to close its stdin.
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		defer pr.Close()
		go func() {
			_, _ = io.Copy(pw, in)
			pw.Close()
		}()
		defer pw.Close()
		opts.Stdin = pr
	}
	code, err := e.host.Exec(ctx, e.pod, container, cmd, opts)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}
