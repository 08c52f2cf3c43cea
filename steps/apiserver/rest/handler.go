package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
)

// Authenticator proves who made an HTTP request: from its client
// certificate, its bearer token... It returns ok false with a nil error
// when the request carries no credentials of its kind (the next
// authenticator is asked), and an error when it carries some that prove
// nothing (401 Unauthorized).
type Authenticator interface {
	AuthenticateRequest(*http.Request) (authn.User, bool, error)
}

// TableConvertor prints objects as kubectl's columns (server-side
// printing): obj is one object or a typed list (*corev1.PodList...);
// includeObject is "None", "Metadata" or "Object", the includeObject
// parameter of the Accept header's Table.
type TableConvertor interface {
	ConvertToTable(ctx context.Context, obj runtime.Object, includeObject string) (*metav1.Table, error)
}

// MaxBodyBytes is the largest request body kube-apiserver reads: 3 MiB.
// A larger one is 413 Request Entity Too Large.
const MaxBodyBytes = 3 << 20

// Option configures a Handler.
type Option func(*Handler)

// WithAuthenticator adds an authenticator, tried after those added before;
// name says which one proved a user in the gate's narration ("x509",
// "token file").
func WithAuthenticator(name string, a Authenticator) Option {
	return func(h *Handler) { h.authns = append(h.authns, namedAuthenticator{name, a}) }
}

// WithTableConvertor serves Accept: application/json;as=Table with tc.
func WithTableConvertor(tc TableConvertor) Option {
	return func(h *Handler) { h.tables = tc }
}

// WithFallback serves every path that names no resource (/api, /apis,
// /version, /healthz, /openapi/...) with fb, once the user is authorized
// for it.
func WithFallback(fb http.Handler) Option {
	return func(h *Handler) { h.fallback = fb }
}

// WithPhases calls fn with every phase of the gate for every request,
// with the request it belongs to: "POST /api/v1/namespaces/default/pods
// (admin)". fn is called from many goroutines at once.
func WithPhases(fn func(request string, p apiserver.Phase)) Option {
	return func(h *Handler) { h.phases = fn }
}

// LogPhases writes each phase as one line to w: what `podlab apiserver -v`
// prints.
func LogPhases(w io.Writer) Option {
	var mu sync.Mutex
	return WithPhases(func(request string, p apiserver.Phase) {
		mu.Lock()
		defer mu.Unlock()
		plugin := ""
		if p.Plugin != "" {
			plugin = " [" + p.Plugin + "]"
		}
		fmt.Fprintf(w, "%s %s: %s%s: %s\n", time.Now().Format("15:04:05.000"), request, p.Name, plugin, p.Summary)
	})
}

// WithBookmarkInterval sets how often a watch that allows bookmarks gets
// one (kube-apiserver: about every minute).
func WithBookmarkInterval(d time.Duration) Option {
	return func(h *Handler) { h.bookmarkEvery = d }
}

type namedAuthenticator struct {
	name string
	a    Authenticator
}

// Handler serves the Kubernetes REST API over the gate s.
type Handler struct {
	s             *apiserver.Server
	authns        []namedAuthenticator
	tables        TableConvertor
	fallback      http.Handler
	phases        func(string, apiserver.Phase)
	bookmarkEvery time.Duration
	kubelets      *http.Transport
}

// New returns the REST API of s.
func New(s *apiserver.Server, opts ...Option) *Handler {
	h := &Handler{s: s, bookmarkEvery: time.Minute}
	for _, o := range opts {
		o(h)
	}
	return h
}

// ServeHTTP authenticates the request, applies impersonation, then serves
// it through the gate.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	u, via, err := h.authenticate(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	who := u.Name
	var opts []apiserver.ClientOption
	label := func(who string) string { return r.Method + " " + r.URL.RequestURI() + " (" + who + ")" }
	if h.phases != nil {
		opts = append(opts, apiserver.WithPhases(func(p apiserver.Phase) { h.phases(label(who), p) }))
	}
	opts = append(opts, apiserver.WithFieldManager(managerOrUserAgent(r.URL.Query().Get("fieldManager"), r.UserAgent())))
	c := h.s.ClientFor(u, via, opts...)
	target, ok, err := impersonation(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if ok {
		who = u.Name + " as " + target.Name
		if c, err = c.Impersonate(r.Context(), target, opts...); err != nil {
			writeError(w, r, err)
			return
		}
	}
	info, ok := parsePath(r.URL.Path)
	if !ok {
		h.serveNonResource(w, r, c)
		return
	}
	h.serveResource(w, r, c, info)
}

// authenticate asks each authenticator in turn; a request none of them
// recognizes is system:anonymous.
func (h *Handler) authenticate(r *http.Request) (authn.User, string, error) {
	for _, na := range h.authns {
		u, ok, err := na.a.AuthenticateRequest(r)
		if err != nil {
			return authn.User{}, "", errUnauthorized
		}
		if ok {
			return u, na.name, nil
		}
	}
	return authn.Anonymous(), "anonymous", nil
}

// impersonation reads the Impersonate-* headers. As kube-apiserver's
// impersonation filter, a request that names groups, a uid or extra
// fields without Impersonate-User is 400 Bad Request, listing what it
// asked for in kube's words ("requested [{Group  system:masters    }]
// without impersonating a user"); nothing is ignored.
func impersonation(r *http.Request) (authn.User, bool, error) {
	name := r.Header.Get(authenticationv1.ImpersonateUserHeader)
	groups := r.Header.Values(authenticationv1.ImpersonateGroupHeader)
	uid := r.Header.Get(authenticationv1.ImpersonateUIDHeader)
	if name == "" {
		// kube's buildImpersonationRequests: each group, each extra value,
		// then the uid, as object references
		var asked []corev1.ObjectReference
		for _, g := range groups {
			asked = append(asked, corev1.ObjectReference{Kind: "Group", Name: g})
		}
		for header, values := range r.Header {
			key, ok := strings.CutPrefix(header, authenticationv1.ImpersonateUserExtraHeaderPrefix)
			if !ok {
				continue
			}
			if k, err := url.PathUnescape(strings.ToLower(key)); err == nil {
				key = k
			} else {
				key = strings.ToLower(key)
			}
			for _, v := range values {
				asked = append(asked, corev1.ObjectReference{Kind: "UserExtra", APIVersion: authenticationv1.SchemeGroupVersion.String(), Name: v, FieldPath: key})
			}
		}
		if uid != "" {
			asked = append(asked, corev1.ObjectReference{Kind: "UID", Name: uid, APIVersion: authenticationv1.SchemeGroupVersion.String()})
		}
		if len(asked) > 0 {
			return authn.User{}, false, apierrors.NewBadRequest(fmt.Sprintf("requested %v without impersonating a user", asked))
		}
		return authn.User{}, false, nil
	}
	return authn.User{Name: name, Groups: groups, UID: uid}, true, nil
}

// serveNonResource authorizes a path that names no resource and hands it
// to the fallback.
func (h *Handler) serveNonResource(w http.ResponseWriter, r *http.Request, c *apiserver.Client) {
	verb := strings.ToLower(r.Method)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		verb = "get"
	}
	if _, err := c.AccessPath(r.Context(), verb, r.URL.Path); err != nil {
		writeError(w, r, err)
		return
	}
	if h.fallback == nil {
		writeError(w, r, errNotFound)
		return
	}
	h.fallback.ServeHTTP(w, r)
}

// managerOrUserAgent is the field manager a write is recorded under, as
// kube-apiserver names it: ?fieldManager=, else the User-Agent up to its
// first "/" ("kubectl-client-side-apply/v1.37.2 (linux/amd64) ..." is
// kubectl-client-side-apply), printable characters only, at most 128
// bytes.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	var b strings.Builder
	for _, r := range strings.Split(userAgent, "/")[0] {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
