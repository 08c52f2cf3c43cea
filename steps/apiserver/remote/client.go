package remote

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

// Client is apiserver.Interface over HTTPS: one REST client per group
// version podlab serves, sharing one HTTP client (one connection pool).
type Client struct {
	host    string
	clients map[schema.GroupVersion]*rest.RESTClient

	// reconnect and notice: see WithReconnect.
	reconnect bool
	notice    func(error)
	reach     reachability
	// authz sends access reviews (authorization.k8s.io/v1), which are no
	// stored resource
	authz *rest.RESTClient
}

// coreV1 is the group version of pods, nodes, events...: the client Ping
// uses.
var coreV1 = schema.GroupVersion{Version: "v1"}

var _ apiserver.Interface = (*Client)(nil)

// FromKubeconfig makes a client from a kubeconfig file, as kubectl
// --kubeconfig does: `podlab init` writes one per identity under
// <state-dir>/kubeconfigs/ (admin.kubeconfig, kube-scheduler.kubeconfig,
// node-1.kubeconfig...).
func FromKubeconfig(path string, opts ...Option) (*Client, error) {
	cfg, err := LoadKubeconfig(path)
	if err != nil {
		return nil, err
	}
	c, err := New(cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return c, nil
}

// LoadKubeconfig reads a kubeconfig file into client-go's rest config:
// the server, its CA and the credentials of the current context. Change
// it (Host for another port, Impersonate for kubectl's --as, WrapTransport
// to narrate requests) and pass it to New.
func LoadKubeconfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading kubeconfig %s: %w: `podlab init` writes the lab's kubeconfigs (run it first, or pass the path of one it wrote)", path, ErrNoKubeconfig)
		}
		return nil, fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// New makes a client from a client-go rest config (its host, TLS and
// credentials: a client certificate, a bearer token). The config is
// copied; content type, API paths and serializers are the client's own.
func New(cfg *rest.Config, opts ...Option) (*Client, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, errors.New("making an API client: the config names no server (set its Host, e.g. https://127.0.0.1:6443)")
	}
	base := rest.CopyConfig(cfg)
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("making an API client for %s: %w", cfg.Host, err)
	}
	c := &Client{host: cfg.Host, clients: map[schema.GroupVersion]*rest.RESTClient{}}
	for _, r := range apiserver.Resources() {
		gv := r.GroupVersion()
		if c.clients[gv] != nil {
			continue
		}
		gc := rest.CopyConfig(base)
		gc.GroupVersion = &gv
		gc.APIPath = "/apis"
		if gv.Group == "" {
			gc.APIPath = "/api"
		}
		gc.ContentType = runtime.ContentTypeJSON
		gc.AcceptContentTypes = runtime.ContentTypeJSON
		gc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(gc, hc)
		if err != nil {
			return nil, fmt.Errorf("making an API client for %s (%s): %w", cfg.Host, gv, err)
		}
		c.clients[gv] = rc
	}
	ac := rest.CopyConfig(base)
	ac.GroupVersion = &authorizationv1.SchemeGroupVersion
	ac.APIPath = "/apis"
	ac.ContentType = runtime.ContentTypeJSON
	ac.AcceptContentTypes = runtime.ContentTypeJSON
	ac.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.authz, err = rest.RESTClientForConfigAndClient(ac, hc); err != nil {
		return nil, fmt.Errorf("making an API client for %s (%s): %w", cfg.Host, authorizationv1.SchemeGroupVersion, err)
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Host is the API server the client talks to.
func (c *Client) Host() string { return c.host }

// target resolves a resource and its namespace as the in-process client
// does: for List and Watch (all), "" means every namespace; otherwise it
// means "default".
func (c *Client) target(resource, namespace string, all bool) (apiserver.Resource, *rest.RESTClient, string, error) {
	res, err := apiserver.LookupResource(resource)
	if err != nil {
		return res, nil, "", err
	}
	switch {
	case !res.Namespaced:
		namespace = ""
	case namespace == "" && !all:
		namespace = apiserver.DefaultNamespace
	}
	return res, c.clients[res.GroupVersion()], namespace, nil
}

// wireError keeps the server's status errors as they are (callers test
// them with apierrors) and says where the others happened.
func (c *Client) wireError(doing string, err error) error {
	err = c.wrapWire(doing, err)
	c.observe(err)
	return err
}

func (c *Client) wrapWire(doing string, err error) error {
	if err == nil {
		return nil
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	// A dial or read that timed out matches context.DeadlineExceeded too,
	// but it is the network's answer, not the caller's deadline: the API
	// server is unreachable (and WaitForServer tries again), as a kubelet
	// whose first dial of a joined machine's lab network timed out must.
	var op *net.OpError
	if !errors.As(err, &op) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	return fmt.Errorf("%s at the API server %s: %w: %w (is `podlab apiserver` running there, and is the kubeconfig's server right?)", doing, c.host, ErrUnreachable, err)
}

// typed returns the object of a response with apiVersion and kind set, as
// the in-process client returns it (client-go's decoder clears them).
func typed(o runtime.Object) (apiserver.Object, error) {
	obj, ok := o.(apiserver.Object)
	if !ok {
		return nil, fmt.Errorf("the API server answered a %T, not an object", o)
	}
	if gvks, _, err := scheme.Scheme.ObjectKinds(o); err == nil && len(gvks) > 0 {
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return obj, nil
}

func (c *Client) object(ctx context.Context, doing string, req *rest.Request) (apiserver.Object, error) {
	o, err := req.Do(ctx).Get()
	if err = c.wireError(doing, err); err != nil {
		return nil, err
	}
	return typed(o)
}

// Create implements apiserver.Interface.
func (c *Client) Create(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	res, err := apiserver.ResourceOf(obj)
	if err != nil {
		return nil, err
	}
	_, rc, ns, err := c.target(res.Name, obj.GetNamespace(), false)
	if err != nil {
		return nil, err
	}
	return c.object(ctx, "creating "+res.Singular+" "+obj.GetName(),
		rc.Post().NamespaceIfScoped(ns, res.Namespaced).Resource(res.Name).Body(obj))
}

// Get implements apiserver.Interface.
func (c *Client) Get(ctx context.Context, resource, namespace, name string) (apiserver.Object, error) {
	res, rc, ns, err := c.target(resource, namespace, false)
	if err != nil {
		return nil, err
	}
	return c.object(ctx, "getting "+res.Singular+" "+name,
		rc.Get().NamespaceIfScoped(ns, res.Namespaced).Resource(res.Name).Name(name))
}

// List implements apiserver.Interface.
func (c *Client) List(ctx context.Context, resource, namespace string, opts apiserver.ListOptions) (*apiserver.List, error) {
	res, rc, ns, err := c.target(resource, namespace, true)
	if err != nil {
		return nil, err
	}
	list, err := scheme.Scheme.New(res.GroupVersion().WithKind(res.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", res.Name, err)
	}
	req := rc.Get().NamespaceIfScoped(ns, res.Namespaced && ns != "").Resource(res.Name)
	if opts.LabelSelector != "" {
		req = req.Param("labelSelector", opts.LabelSelector)
	}
	if opts.FieldSelector != "" {
		req = req.Param("fieldSelector", opts.FieldSelector)
	}
	for name, v := range map[string]string{"resourceVersion": opts.ResourceVersion,
		"resourceVersionMatch": opts.ResourceVersionMatch, "continue": opts.Continue} {
		if v != "" {
			req = req.Param(name, v)
		}
	}
	if opts.Limit > 0 {
		req = req.Param("limit", strconv.FormatInt(opts.Limit, 10))
	}
	if err := c.wireError("listing "+res.Name, req.Do(ctx).Into(list)); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", res.Name, err)
	}
	out := &apiserver.List{Items: make([]apiserver.Object, 0, len(items))}
	for _, it := range items {
		obj, err := typed(it)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", res.Name, err)
		}
		out.Items = append(out.Items, obj)
	}
	if lm, err := meta.ListAccessor(list); err == nil {
		out.ResourceVersion = lm.GetResourceVersion()
		out.Continue, out.RemainingItemCount = lm.GetContinue(), lm.GetRemainingItemCount()
	}
	return out, nil
}

// Update implements apiserver.Interface.
func (c *Client) Update(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	return c.put(ctx, obj, "")
}

// UpdateStatus implements apiserver.Interface.
func (c *Client) UpdateStatus(ctx context.Context, obj apiserver.Object) (apiserver.Object, error) {
	return c.put(ctx, obj, "status")
}

func (c *Client) put(ctx context.Context, obj apiserver.Object, sub string) (apiserver.Object, error) {
	res, err := apiserver.ResourceOf(obj)
	if err != nil {
		return nil, err
	}
	_, rc, ns, err := c.target(res.Name, obj.GetNamespace(), false)
	if err != nil {
		return nil, err
	}
	req := rc.Put().NamespaceIfScoped(ns, res.Namespaced).Resource(res.Name).Name(obj.GetName()).Body(obj)
	doing := "updating " + res.Singular + " " + obj.GetName()
	if sub != "" {
		req = req.SubResource(sub)
		doing = "updating the " + sub + " of " + res.Singular + " " + obj.GetName()
	}
	return c.object(ctx, doing, req)
}

// Patch implements apiserver.Interface.
func (c *Client) Patch(ctx context.Context, resource, namespace, name string, pt types.PatchType, data []byte, opts apiserver.PatchOptions) (apiserver.Object, error) {
	res, rc, ns, err := c.target(resource, namespace, false)
	if err != nil {
		return nil, err
	}
	req := rc.Patch(pt).NamespaceIfScoped(ns, res.Namespaced).Resource(res.Name).Name(name).Body(data)
	if opts.Subresource != "" {
		req = req.SubResource(opts.Subresource)
	}
	if opts.FieldManager != "" {
		req = req.Param("fieldManager", opts.FieldManager)
	}
	if opts.Force {
		req = req.Param("force", "true")
	}
	return c.object(ctx, "patching "+res.Singular+" "+name, req)
}

// Bind implements apiserver.Interface.
func (c *Client) Bind(ctx context.Context, b *corev1.Binding) error {
	_, rc, ns, err := c.target("pods", b.Namespace, false)
	if err != nil {
		return err
	}
	err = rc.Post().Namespace(ns).Resource("pods").Name(b.Name).SubResource("binding").Body(b).Do(ctx).Error()
	return c.wireError("binding pod "+b.Name+" to node "+b.Target.Name, err)
}

// Delete implements apiserver.Interface. Force is sent as a zero grace
// period, as kubectl delete --force --grace-period=0 sends it.
func (c *Client) Delete(ctx context.Context, resource, namespace, name string, opts apiserver.DeleteOptions) (apiserver.Object, error) {
	res, rc, ns, err := c.target(resource, namespace, false)
	if err != nil {
		return nil, err
	}
	var do metav1.DeleteOptions
	do.GracePeriodSeconds = opts.GracePeriodSeconds
	if opts.Force {
		zero := int64(0)
		do.GracePeriodSeconds = &zero
	}
	o, err := rc.Delete().NamespaceIfScoped(ns, res.Namespaced).Resource(res.Name).Name(name).Body(&do).Do(ctx).Get()
	if err = c.wireError("deleting "+res.Singular+" "+name, err); err != nil {
		return nil, err
	}
	if _, gone := o.(*metav1.Status); gone {
		return nil, nil // a Success Status: the object is gone
	}
	return typed(o)
}
