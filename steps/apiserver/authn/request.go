package authn

import (
	"errors"
	"net/http"
	"strings"
)

// Authenticator answers "who sent this request?", as kube-apiserver's
// authenticator.Request: ok is false when the request carries no
// credential this authenticator knows (the next one is asked), and err is
// not nil when it carries one that proves nothing (a 401, whatever the
// others say, unless one of them authenticates the request).
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (User, bool, error)
}

// Errors of authenticating a request. The server answers each with 401
// Unauthorized and logs the reason.
var (
	// ErrInvalidToken is a bearer token in no line of the token file.
	ErrInvalidToken = errors.New("invalid bearer token")
	// ErrInvalidCertificate is a client certificate that does not verify:
	// another CA's, expired, or not made for client authentication.
	ErrInvalidCertificate = errors.New("invalid client certificate")
)

// AuthenticateRequest authenticates the bearer token of the request's
// Authorization header, as kube-apiserver's bearer token authenticator in
// front of its token file: no header, or not "Bearer <token>", is not this
// authenticator's business (false, nil); a token the file does not hold
// is ErrInvalidToken.
func (t *Tokens) AuthenticateRequest(r *http.Request) (User, bool, error) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return User{}, false, nil
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return User{}, false, nil
	}
	u, ok := t.Authenticate(token)
	if !ok {
		return User{}, false, ErrInvalidToken
	}
	return u, true, nil
}

// Union asks each authenticator in turn and returns the first user one of
// them authenticates, as kube-apiserver's union authenticator (x509 client
// certificates, then bearer tokens). If none does, the errors of those that
// refused a credential are returned together; no credential at all is
// (User{}, false, nil), an anonymous request.
func Union(authenticators ...Authenticator) Authenticator {
	return union(authenticators)
}

type union []Authenticator

func (u union) AuthenticateRequest(r *http.Request) (User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.AuthenticateRequest(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return user, true, nil
		}
	}
	return User{}, false, errors.Join(errs...)
}
