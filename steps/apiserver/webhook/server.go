package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Policy is what the lab's webhook server does: the server side of an
// admission webhook, small enough to read whole.
type Policy struct {
	// AddLabels are added to every object sent to /mutate, by a JSONPatch
	// (a mutating webhook).
	AddLabels map[string]string
	// DenyLabel refuses, at /validate, every object that carries this
	// label: "KEY" (any value) or "KEY=VALUE" (a validating webhook).
	DenyLabel string
}

// Handler serves p: POST /mutate and POST /validate take an AdmissionReview
// and answer it. log, if not nil, gets one line per review.
func Handler(p Policy, log func(string)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mutate", func(w http.ResponseWriter, r *http.Request) {
		serveReview(w, r, log, p.mutate)
	})
	mux.HandleFunc("POST /validate", func(w http.ResponseWriter, r *http.Request) {
		serveReview(w, r, log, p.validate)
	})
	return mux
}

// serveReview decodes an AdmissionReview, lets decide answer it, and sends
// the review back with the response and the request's uid.
func serveReview(w http.ResponseWriter, r *http.Request, log func(string), decide func(*admissionv1.AdmissionRequest, *metav1.PartialObjectMetadata) (*admissionv1.AdmissionResponse, string)) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err != nil {
		http.Error(w, "reading the AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "the body is not an AdmissionReview with a request", http.StatusBadRequest)
		return
	}
	var meta metav1.PartialObjectMetadata
	if len(review.Request.Object.Raw) > 0 {
		if err := json.Unmarshal(review.Request.Object.Raw, &meta); err != nil {
			http.Error(w, "the request's object has no metadata: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	resp, what := decide(review.Request, &meta)
	resp.UID = review.Request.UID
	if log != nil {
		log(fmt.Sprintf("%s %s %s %s/%s by %s: %s", r.URL.Path, review.Request.Operation, review.Request.Kind.Kind, review.Request.Namespace, review.Request.Name, review.Request.UserInfo.Username, what))
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (p Policy) mutate(_ *admissionv1.AdmissionRequest, meta *metav1.PartialObjectMetadata) (*admissionv1.AdmissionResponse, string) {
	var ops []map[string]any
	if meta.Labels == nil && len(p.AddLabels) > 0 {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{}})
	}
	keys := make([]string, 0, len(p.AddLabels))
	for k := range p.AddLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var added []string
	for _, k := range keys {
		if v, ok := meta.Labels[k]; ok && v == p.AddLabels[k] {
			continue
		}
		// RFC 6901: "~" is "~0" and "/" is "~1" in a JSON pointer
		key := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + key, "value": p.AddLabels[k]})
		added = append(added, k+"="+p.AddLabels[k])
	}
	if len(ops) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}, "allowed, nothing to add"
	}
	patch, _ := json.Marshal(ops) // maps of strings always marshal
	pt := admissionv1.PatchTypeJSONPatch
	what := "added label " + strings.Join(added, ",")
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt,
		Warnings: []string{"podlab's mutating webhook " + what}}, "allowed, " + what
}

func (p Policy) validate(_ *admissionv1.AdmissionRequest, meta *metav1.PartialObjectMetadata) (*admissionv1.AdmissionResponse, string) {
	if p.DenyLabel == "" {
		return &admissionv1.AdmissionResponse{Allowed: true}, "allowed"
	}
	key, value, withValue := strings.Cut(p.DenyLabel, "=")
	v, has := meta.Labels[key]
	if !has || (withValue && v != value) {
		return &admissionv1.AdmissionResponse{Allowed: true}, "allowed, no label " + p.DenyLabel
	}
	msg := fmt.Sprintf("objects labelled %s=%s are not allowed here (podlab webhook serve --deny-label %s)", key, v, p.DenyLabel)
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: msg, Code: http.StatusForbidden}}, "denied: " + msg
}

// Serve serves p over HTTPS on ln, with cert as the serving certificate,
// until ctx ends. The API server verifies cert against the caBundle of the
// webhook configuration.
func Serve(ctx context.Context, ln net.Listener, cert tls.Certificate, p Policy, log func(string)) error {
	srv := &http.Server{
		Handler:           Handler(p, log),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the admission webhooks on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
