package rest

// pods/log and pods/exec: the API server authorizes them, finds the pod's
// node and that node's kubelet (its address and port in the Node's
// status), and proxies the request to the kubelet's own API with its own
// client certificate, as kube-apiserver's pod registry does
// (pkg/registry/core/pod/rest/log.go and subresources.go).

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
)

// DefaultKubeletPort is the kubelet API's port when a Node does not
// publish one (kube-apiserver's --kubelet-port default).
const DefaultKubeletPort = 10250

// KubeletPreferredAddressTypes is the order in which a Node's addresses
// are tried to reach its kubelet: kubeadm's --kubelet-preferred-address-types.
var KubeletPreferredAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName}

// WithKubeletTransport is how the API server reaches kubelets: a transport
// with its client certificate (apiserver-kubelet-client) that verifies the
// kubelets' serving certificates against the cluster CA
// (--kubelet-client-certificate, --kubelet-client-key,
// --kubelet-certificate-authority). Without it pods/log and pods/exec are
// 503 ServiceUnavailable.
func WithKubeletTransport(t *http.Transport) Option {
	return func(h *Handler) { h.kubelets = t }
}

// loopback is the API server's own identity for reading what a proxied
// request needs (the pod, its Node), past the gate, as kube-apiserver's
// registry reads its storage.
var loopback = authn.User{Name: "system:apiserver", Groups: []string{authn.GroupMasters}}

// kubeletLocation finds pod's container and the kubelet of its node; path is
// "containerLogs" or "exec". A nil URL means the pod is not scheduled.
func (h *Handler) kubeletLocation(r *http.Request, info requestInfo, container, path string, needHost bool) (*url.URL, error) {
	if h.kubelets == nil {
		return nil, apierrors.NewServiceUnavailable("this API server has no client certificate for kubelets: start it with --kubelet-client-certificate and --kubelet-client-key (podlab init makes pki/apiserver-kubelet-client.crt)")
	}
	ctx := r.Context()
	lc := h.s.ClientFor(loopback, "loopback")
	obj, err := lc.Get(ctx, "pods", info.namespace, info.name)
	if err != nil {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	if container, err = validateContainer(container, pod); err != nil {
		return nil, err
	}
	if pod.Spec.NodeName == "" {
		if needHost {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
		}
		return nil, nil
	}
	obj, err = lc.Get(ctx, "nodes", "", pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	host, port, err := kubeletEndpoint(obj.(*corev1.Node))
	if err != nil {
		return nil, err
	}
	return &url.URL{
		Scheme: "https",
		Host:   net.JoinHostPort(host, strconv.Itoa(port)),
		Path:   fmt.Sprintf("/%s/%s/%s/%s", path, pod.Namespace, pod.Name, container),
	}, nil
}

// kubeletEndpoint is where node's kubelet listens: its first address of
// the preferred types, and the port its status publishes.
func kubeletEndpoint(node *corev1.Node) (string, int, error) {
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = DefaultKubeletPort
	}
	for _, t := range KubeletPreferredAddressTypes {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address, port, nil
			}
		}
	}
	return "", 0, fmt.Errorf("no preferred addresses found; known addresses: %v", node.Status.Addresses)
}

// validateContainer names the container a request is for, as
// kube-apiserver does: the pod's only one when none is named.
func validateContainer(container string, pod *corev1.Pod) (string, error) {
	if container == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			var names []string
			for _, c := range pod.Spec.InitContainers {
				names = append(names, c.Name)
			}
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == container {
				return container, nil
			}
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
}

// authorizeSubresource is the gate's authorization of a proxied
// subresource: get pods/log, create pods/exec.
func authorizeSubresource(r *http.Request, c *apiserver.Client, verb string, info requestInfo) error {
	_, err := c.Authorize(r.Context(), rbac.Attributes{Verb: verb, Resource: "pods", Subresource: info.subresource, Namespace: info.namespace, Name: info.name})
	return err
}

// podLog serves GET pods/NAME/log: the kubelet's /containerLogs, streamed
// back (kube-apiserver's LogREST with its LocationStreamer).
func (h *Handler) podLog(w http.ResponseWriter, r *http.Request, c *apiserver.Client, info requestInfo) {
	if r.Method != http.MethodGet {
		writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/log"}, r.Method))
		return
	}
	if err := authorizeSubresource(r, c, "get", info); err != nil {
		writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	params, errs := podLogParams(q)
	if len(errs) > 0 {
		writeError(w, r, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, info.name, errs))
		return
	}
	loc, err := h.kubeletLocation(r, info, q.Get("container"), "containerLogs", false)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if loc == nil {
		w.WriteHeader(http.StatusNoContent) // no node yet: nothing to stream
		return
	}
	loc.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, loc.String(), nil)
	if err != nil {
		writeProxyError(w, err)
		return
	}
	resp, err := (&http.Client{Transport: h.kubelets, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		writeProxyError(w, err)
		return
	}
	defer resp.Body.Close()
	if err := checkKubeletResponse(resp, schema.GroupResource{Resource: "pods/log"}, info.name); err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil && params.Get("follow") != "" {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// podLogParams reads a PodLogOptions from the query, validates it
// (ValidatePodLogOptions) and returns the kubelet's query (LogLocation).
func podLogParams(q url.Values) (url.Values, field.ErrorList) {
	var errs field.ErrorList
	out := url.Values{}
	for _, name := range []string{"follow", "previous", "timestamps"} {
		if v, ok := q[name]; ok {
			var b bool
			_ = runtime.Convert_Slice_string_To_bool(&v, &b, nil)
			if b {
				out.Add(name, "true")
			}
		}
	}
	ints := map[string]*int64{}
	for _, name := range []string{"sinceSeconds", "tailLines", "limitBytes"} {
		v, ok := q[name]
		if !ok || len(v) == 0 || v[0] == "" {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), v[0], "must be an integer"))
			continue
		}
		ints[name] = &n
		out.Add(name, strconv.FormatInt(n, 10))
	}
	if t := q.Get("sinceTime"); t != "" {
		st, err := time.Parse(time.RFC3339, t)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("sinceTime"), t, "must be an RFC 3339 time"))
		} else {
			out.Add("sinceTime", st.Format(time.RFC3339))
		}
	}
	if n := ints["tailLines"]; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *n, "must be greater than or equal to 0"))
	}
	if n := ints["limitBytes"]; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *n, "must be greater than 0"))
	}
	switch n := ints["sinceSeconds"]; {
	case n != nil && out.Has("sinceTime"):
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case n != nil && *n < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *n, "must be greater than 0"))
	}
	return out, errs
}

// checkKubeletResponse turns a kubelet's error answer into the API
// server's (apiserver's GenericHttpResponseChecker): its text becomes the
// message.
func checkKubeletResponse(resp *http.Response, gr schema.GroupResource, name string) error {
	if resp.StatusCode >= http.StatusOK && resp.StatusCode <= http.StatusPartialContent {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	text := string(body)
	switch resp.StatusCode {
	case http.StatusInternalServerError:
		return apierrors.NewInternalError(fmt.Errorf("%s", text))
	case http.StatusBadRequest:
		return apierrors.NewBadRequest(text)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "", gr, name, text, 0, false)
}

// writeProxyError answers an error reaching the kubelet as kube-apiserver
// does: 500, its text as the message, no reason.
func writeProxyError(w http.ResponseWriter, err error) {
	writeStatus(w, http.StatusInternalServerError, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()})
}

// proxyResponder is the upgrade-aware proxy's way to answer an error.
type proxyResponder struct{}

func (proxyResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	writeProxyError(w, err)
}

// podExec serves GET and POST pods/NAME/exec: kube-apiserver's ExecREST.
// The request is an upgrade (SPDY, or a WebSocket); the upgrade-aware
// proxy of apimachinery forwards it to the kubelet's /exec, except a
// WebSocket speaking v5.channel.k8s.io (kubectl 1.30 and later), which
// the API server itself answers and translates to SPDY towards the
// kubelet (apiserver's StreamTranslator), as kube-apiserver does.
func (h *Handler) podExec(w http.ResponseWriter, r *http.Request, c *apiserver.Client, info requestInfo) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/exec"}, r.Method))
		return
	}
	// A WebSocket exec is a GET: kube-apiserver authorizes "create" for
	// it too (AuthorizePodWebsocketUpgradeCreatePermission).
	if err := authorizeSubresource(r, c, "create", info); err != nil {
		writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	loc, err := h.kubeletLocation(r, info, q.Get("container"), "exec", true)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var opts apiproxy.Options
	params := url.Values{}
	for name, p := range map[string]*bool{"stdin": &opts.Stdin, "stdout": &opts.Stdout, "stderr": &opts.Stderr, "tty": &opts.Tty} {
		if v, ok := q[name]; ok {
			_ = runtime.Convert_Slice_string_To_bool(&v, p, nil)
		}
	}
	for name, on := range map[string]bool{corev1.ExecStdinParam: opts.Stdin, corev1.ExecStdoutParam: opts.Stdout, corev1.ExecStderrParam: opts.Stderr, corev1.ExecTTYParam: opts.Tty} {
		if on {
			params.Add(name, "1")
		}
	}
	for _, c := range q[corev1.ExecCommandParam] {
		params.Add(corev1.ExecCommandParam, c)
	}
	loc.RawQuery = params.Encode()
	handler := proxy.NewUpgradeAwareHandler(loc, h.kubelets, false, true, proxyResponder{})
	translator := apiproxy.NewStreamTranslatorHandler(loc, h.kubelets, 0, opts)
	apiproxy.NewTranslatingHandler(handler, translator, wsstream.IsWebSocketRequestWithStreamCloseProtocol).ServeHTTP(w, r)
}
