package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// DefaultPort is the kubelet API's port (the kubelet's --port).
const DefaultPort = 10250

// Serve serves h over TLS on ln until ctx ends, then stops, cancelling
// the requests still open (a follow, an exec) and waiting for them at
// most 5 s.
func Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config, h http.Handler) error {
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the kubelet API on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	cancel()
	sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stopping the kubelet API: %w", err)
	}
	return nil
}

// SubjectAccessReviews is the kubelet's webhook authorizer: it asks the
// API server, with a SubjectAccessReview sent through client (the
// kubelet's own credentials: its kubeconfig), whether the user may do
// what the request asks. It caches nothing (the real one caches allowed
// answers for 5 minutes and denied ones for 30 s).
func SubjectAccessReviews(client authorizationclient.SubjectAccessReviewInterface) Authorizer {
	return sarAuthorizer{client}
}

type sarAuthorizer struct {
	client authorizationclient.SubjectAccessReviewInterface
}

func (s sarAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(),
	}}
	if a.IsResourceRequest() {
		sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
			Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName(),
		}
	} else {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	out, err := s.client.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("asking the API server (SubjectAccessReview): %w", err)
	}
	switch {
	case out.Status.Allowed:
		return authorizer.DecisionAllow, out.Status.Reason, nil
	case out.Status.Denied:
		return authorizer.DecisionDeny, out.Status.Reason, nil
	}
	return authorizer.DecisionNoOpinion, out.Status.Reason, nil
}
