// Package webhook is the client half of admission webhooks: how
// kube-apiserver decides which webhooks a request concerns, and calls each
// over HTTPS with an AdmissionReview.
//
// A MutatingWebhookConfiguration or ValidatingWebhookConfiguration
// (admissionregistration.k8s.io/v1) lists webhooks. For every write, after
// its own mutating admission plugins, the API server calls each mutating
// webhook whose rules match the request (operation, API group, version,
// resource, scope) and whose namespaceSelector and objectSelector match the
// labels of the object's namespace and of the object. It POSTs an
// AdmissionReview (admission.k8s.io/v1) carrying the object, the old object
// on an update, the user and a uid; the webhook answers the same
// AdmissionReview with a response: allowed or not, a Status saying why, and
// for a mutating webhook a JSONPatch (RFC 6902) to apply to the object.
// After validation, the validating webhooks are called the same way and may
// only say yes or no. Warnings in a response reach the client as Warning
// headers (kubectl prints them as "Warning: ...").
//
// A webhook that cannot be called (connection refused, a timeout, a
// certificate its caBundle does not verify, a malformed answer) fails the
// request when its failurePolicy is Fail ("failed calling webhook ...", a
// 500), and is skipped when it is Ignore. A webhook that answers "no"
// fails the request with kube's text: `admission webhook "NAME" denied the
// request: MESSAGE`.
//
// This package knows nothing of the store: the API server gives it the
// configurations it read and the request's attributes, and it gives back a
// patched object, warnings, or an error. podlab supports webhooks reached
// by url (there are no Services in the lab to resolve), AdmissionReview v1,
// and no reinvocation.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Hook is one webhook of a configuration, either kind.
type Hook struct {
	// Configuration names the MutatingWebhookConfiguration or
	// ValidatingWebhookConfiguration the webhook is in.
	Configuration string
	Mutating      bool
	Name          string
	ClientConfig  admissionregistrationv1.WebhookClientConfig
	Rules         []admissionregistrationv1.RuleWithOperations
	// FailurePolicy, Timeout, NamespaceSelector and ObjectSelector are
	// defaulted by the API server when the configuration is stored.
	FailurePolicy     admissionregistrationv1.FailurePolicyType
	Timeout           time.Duration
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
}

// Mutating lists the webhooks of mutating configurations, in the order
// kube-apiserver calls them: configurations by name, webhooks in order.
// (The caller passes the configurations sorted by name, as the store lists
// them.)
func Mutating(cfgs []admissionregistrationv1.MutatingWebhookConfiguration) []Hook {
	var out []Hook
	for _, c := range cfgs {
		for _, w := range c.Webhooks {
			out = append(out, hook(c.Name, true, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector))
		}
	}
	return out
}

// Validating lists the webhooks of validating configurations.
func Validating(cfgs []admissionregistrationv1.ValidatingWebhookConfiguration) []Hook {
	var out []Hook
	for _, c := range cfgs {
		for _, w := range c.Webhooks {
			out = append(out, hook(c.Name, false, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector))
		}
	}
	return out
}

func hook(cfg string, mutating bool, name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, timeout *int32, ns, obj *metav1.LabelSelector) Hook {
	h := Hook{Configuration: cfg, Mutating: mutating, Name: name, ClientConfig: cc, Rules: rules,
		FailurePolicy: admissionregistrationv1.Fail, Timeout: 10 * time.Second, NamespaceSelector: ns, ObjectSelector: obj}
	if fp != nil {
		h.FailurePolicy = *fp
	}
	if timeout != nil {
		h.Timeout = time.Duration(*timeout) * time.Second
	}
	return h
}

// Attributes are what a webhook's rules and selectors are matched against,
// and what its AdmissionReview carries.
type Attributes struct {
	Operation   admissionv1.Operation
	Kind        metav1.GroupVersionKind
	Resource    metav1.GroupVersionResource
	SubResource string
	Namespace   string
	Name        string
	// Namespaced says the resource is namespaced (the rules' scope).
	Namespaced bool
	// NamespaceLabels are the labels of the object's namespace (for a
	// Namespace, its own), for namespaceSelector.
	NamespaceLabels map[string]string
	// Object is the new object (nil on DELETE), OldObject the stored one
	// (on UPDATE and DELETE).
	Object    runtime.Object
	OldObject runtime.Object
	UserInfo  authenticationv1.UserInfo
	DryRun    bool
}

// Matches says whether h is called for a: one of its rules matches the
// operation, group, version, resource and scope, and its namespaceSelector
// and objectSelector match. It returns an error for a selector that does
// not parse (validation refuses those, so only a stored configuration from
// elsewhere has one).
func (h Hook) Matches(a Attributes) (bool, error) {
	matched := false
	for _, r := range h.Rules {
		if ruleMatches(r, a) {
			matched = true
			break
		}
	}
	if !matched {
		return false, nil
	}
	// namespaceSelector: for namespaced objects, the namespace's labels;
	// for a Namespace, its own; other cluster-scoped objects always match.
	if a.Namespaced || (a.Resource.Group == "" && a.Resource.Resource == "namespaces") {
		ok, err := selects(h.NamespaceSelector, a.NamespaceLabels)
		if err != nil || !ok {
			return false, err
		}
	}
	// objectSelector: the new object's labels, or the old one's
	for _, o := range []runtime.Object{a.Object, a.OldObject} {
		if o == nil {
			continue
		}
		m, ok := o.(metav1.Object)
		if !ok {
			continue
		}
		if ok, err := selects(h.ObjectSelector, m.GetLabels()); err != nil || ok {
			return ok, err
		}
	}
	return a.Object == nil && a.OldObject == nil, nil
}

func selects(sel *metav1.LabelSelector, l map[string]string) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(l)), nil
}

func ruleMatches(r admissionregistrationv1.RuleWithOperations, a Attributes) bool {
	op := false
	for _, o := range r.Operations {
		if o == admissionregistrationv1.OperationAll || string(o) == string(a.Operation) {
			op = true
		}
	}
	if !op || !oneOf(r.APIGroups, a.Resource.Group) || !oneOf(r.APIVersions, a.Resource.Version) {
		return false
	}
	res := false
	for _, name := range r.Resources {
		if resourceMatches(name, a.Resource.Resource, a.SubResource) {
			res = true
		}
	}
	if !res {
		return false
	}
	scope := admissionregistrationv1.AllScopes
	if r.Scope != nil {
		scope = *r.Scope
	}
	switch scope {
	case admissionregistrationv1.ClusterScope:
		return !a.Namespaced
	case admissionregistrationv1.NamespacedScope:
		return a.Namespaced
	}
	return true
}

func oneOf(list []string, v string) bool {
	for _, s := range list {
		if s == "*" || s == v {
			return true
		}
	}
	return false
}

// resourceMatches is kube's: "pods" is the resource alone, "pods/status"
// one subresource, "pods/*" the resource and its subresources, "*/status"
// that subresource of any, "*" every resource without subresources, "*/*"
// everything.
func resourceMatches(rule, resource, sub string) bool {
	want := resource
	if sub != "" {
		want += "/" + sub
	}
	switch {
	case rule == "*/*" || rule == want:
		return true
	case rule == "*":
		return sub == ""
	case rule == resource+"/*":
		return true
	case rule == "*/"+sub && sub != "":
		return true
	}
	return false
}

// Result is what one webhook call gave.
type Result struct {
	// Object is the object after the webhook's patch, in JSON; nil when
	// the webhook sent no patch.
	Object []byte
	// Patch is the JSONPatch the webhook sent, as it sent it.
	Patch []byte
	// Warnings are the response's warnings, each to become a Warning
	// header.
	Warnings []string
}

// CallError is a webhook that could not be called, or whose answer made
// no sense: its failurePolicy decides whether the request fails.
type CallError struct {
	Webhook string
	Reason  error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.Webhook, e.Reason)
}

func (e *CallError) Unwrap() error { return e.Reason }

// Call sends a's AdmissionReview to h and returns its answer. A webhook
// that denies returns kube's StatusError ("admission webhook ... denied
// the request"); one that cannot be called a *CallError.
func Call(ctx context.Context, h Hook, a Attributes) (Result, error) {
	if h.ClientConfig.URL == nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: errors.New("the webhook has no url (podlab has no Services to reach a webhook by service)")}
	}
	review, uid, obj, err := newReview(a)
	if err != nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("could not create admission objects: %w", err)}
	}
	client, err := httpClient(h.ClientConfig.CABundle)
	if err != nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("could not get REST client: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	u := *h.ClientConfig.URL + "?timeout=" + fmt.Sprintf("%ds", int(h.Timeout.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(review))
	if err != nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("failed to call webhook: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("failed to call webhook: %w", err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 3<<20))
	if err != nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("failed to call webhook: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("failed to call webhook: the server responded with the status code %d but did not return more information", resp.StatusCode)}
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("failed to call webhook: %w", err)}
	}
	r := out.Response
	switch {
	case r == nil:
		return Result{}, &CallError{Webhook: h.Name, Reason: errors.New("received invalid webhook response: webhook response was absent")}
	case out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview":
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", out.APIVersion, out.Kind)}
	case r.UID != uid:
		return Result{}, &CallError{Webhook: h.Name, Reason: fmt.Errorf("received invalid webhook response: expected response.uid=%q, got %q", uid, r.UID)}
	case len(r.Patch) > 0 && !h.Mutating:
		return Result{}, &CallError{Webhook: h.Name, Reason: errors.New("received invalid webhook response: validating webhooks may not return patches")}
	case len(r.Patch) > 0 && (r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch):
		return Result{}, &CallError{Webhook: h.Name, Reason: errors.New(`received invalid webhook response: webhook returned response.patch but not response.patchType; must be "JSONPatch"`)}
	}
	res := Result{Warnings: r.Warnings}
	if !r.Allowed {
		return res, Denied(h.Name, r.Result)
	}
	if len(r.Patch) == 0 {
		return res, nil
	}
	patch, err := jsonpatch.DecodePatch(r.Patch)
	if err != nil {
		return res, &CallError{Webhook: h.Name, Reason: fmt.Errorf("received undecodable patch in webhook response: %w", err)}
	}
	if obj == nil {
		return res, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.Name))
	}
	patched, err := patch.Apply(obj)
	if err != nil {
		return res, apierrors.NewInternalError(err)
	}
	res.Object, res.Patch = patched, r.Patch
	return res, nil
}

// Denied is kube's error for a webhook that says no (webhookerrors.ToStatusErr).
func Denied(name string, result *metav1.Status) *apierrors.StatusError {
	deniedBy := fmt.Sprintf("admission webhook %q denied the request", name)
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	switch {
	case st.Message != "":
		st.Message = deniedBy + ": " + st.Message
	case st.Reason != "":
		st.Message = deniedBy + ": " + string(st.Reason)
	default:
		st.Message = deniedBy + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// newReview is the AdmissionReview request for a, with a new uid, and the
// object's JSON (nil on DELETE), which a patch applies to.
func newReview(a Attributes) ([]byte, types.UID, []byte, error) {
	uid := uuid.NewUUID()
	req := &admissionv1.AdmissionRequest{
		UID:             uid,
		Kind:            a.Kind,
		Resource:        a.Resource,
		SubResource:     a.SubResource,
		RequestKind:     &a.Kind,
		RequestResource: &a.Resource,
		Name:            a.Name,
		Namespace:       a.Namespace,
		Operation:       a.Operation,
		UserInfo:        a.UserInfo,
		DryRun:          &a.DryRun,
	}
	if a.SubResource != "" {
		req.RequestSubResource = a.SubResource
	}
	var obj []byte
	if a.Object != nil {
		b, err := json.Marshal(a.Object)
		if err != nil {
			return nil, "", nil, err
		}
		obj = b
		req.Object = runtime.RawExtension{Raw: b}
	}
	if a.OldObject != nil {
		b, err := json.Marshal(a.OldObject)
		if err != nil {
			return nil, "", nil, err
		}
		req.OldObject = runtime.RawExtension{Raw: b}
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	}
	b, err := json.Marshal(review)
	return b, uid, obj, err
}

// httpClient trusts caBundle (PEM), or the system's roots when it is
// empty, as kube-apiserver's webhook client does.
func httpClient(caBundle []byte) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("unable to load root certificates: unable to parse bytes as PEM block")
		}
		cfg.RootCAs = pool
	}
	// one connection per call: nothing is left open between requests
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Proxy: nil, DisableKeepAlives: true}}, nil
}
