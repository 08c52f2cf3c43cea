package rest

import (
	"crypto/x509"
	"fmt"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/discovery"
	"github.com/podlab/podlab/steps/apiserver/printers"
)

// NewKubeAPIServer is the handler `podlab apiserver` serves, and `podlab
// up` in-process: the REST API of s behind kube-apiserver's union
// authenticator (a client certificate clientCAs signed, the flag
// --client-ca-file; then the static token file, --token-auth-file; the
// first that knows the request decides), with discovery, OpenAPI, health
// and /version for every path that names no resource, and server-side
// tables. opts come after, to add narration (WithPhases, LogPhases).
func NewKubeAPIServer(s *apiserver.Server, clientCAs *x509.CertPool, opts ...Option) (*Handler, error) {
	nonResource, err := discovery.Handler(discovery.Options{})
	if err != nil {
		return nil, fmt.Errorf("serving discovery: %w", err)
	}
	all := []Option{
		WithAuthenticator("x509", authn.NewX509(clientCAs)),
		WithAuthenticator("token file", s.Tokens()),
		WithFallback(nonResource),
		WithTableConvertor(printers.TableConvertor{}),
	}
	return New(s, append(all, opts...)...), nil
}
