package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"web","image":"nginx"}]}}`

// Every error is a metav1.Status with kube-apiserver's code, reason and
// message, and the request changes nothing.
func TestErrors_Status(t *testing.T) {
	l := newLab(t, nil)
	if code, body, _ := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(podJSON)); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	big := append([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","annotations":{"a":"`), bytes.Repeat([]byte("x"), 4<<20)...)
	big = append(big, `"}}}`...)
	tests := []struct {
		name        string
		user        string
		method      string
		path        string
		contentType string
		body        string
		header      []string
		code        int32
		reason      metav1.StatusReason
		message     string
	}{
		{"a token that proves nothing", "", "GET", "/api/v1/namespaces/default/pods", "", "", []string{"Authorization", "Bearer nope"},
			401, metav1.StatusReasonUnauthorized, "Unauthorized"},
		{"no credentials: system:anonymous, whom RBAC allows nothing", "", "GET", "/api/v1/namespaces/default/pods", "", "", nil,
			403, metav1.StatusReasonForbidden, `pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"`},
		{"anonymous on a non-resource path", "", "GET", "/api", "", "", nil,
			403, metav1.StatusReasonForbidden, `forbidden: User "system:anonymous" cannot get path "/api"`},
		// (kube-apiserver names no object on a create: "pods is forbidden"; the gate names it)
		{"a viewer may not create", "viewer", "POST", "/api/v1/namespaces/default/pods", "application/json", podJSON, nil,
			403, metav1.StatusReasonForbidden, `pods is forbidden: User "viewer" cannot create resource "pods" in API group "" in the namespace "default"`},
		{"a missing object", "admin", "GET", "/api/v1/namespaces/default/pods/nope", "", "", nil,
			404, metav1.StatusReasonNotFound, `pods "nope" not found`},
		{"a missing deployment", "admin", "GET", "/apis/apps/v1/namespaces/default/deployments/nope", "", "", nil,
			404, metav1.StatusReasonNotFound, `deployments.apps "nope" not found`},
		{"an unknown resource: podlab says what it serves", "admin", "GET", "/api/v1/namespaces/default/widgets", "", "", nil,
			404, metav1.StatusReasonNotFound, `no resource "widgets" is served by podlab (it serves: pods, nodes, namespaces, `},
		{"a resource in the wrong group", "admin", "GET", "/apis/apps/v1/namespaces/default/pods", "", "", nil,
			404, metav1.StatusReasonNotFound, `no resource "pods.apps" is served by podlab (it serves: pods, `},
		{"a subresource pods do not have", "admin", "GET", "/api/v1/namespaces/default/pods/web/scale", "", "", nil,
			404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
		{"an existing name", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", podJSON, nil,
			409, metav1.StatusReasonAlreadyExists, `pods "web" already exists`},
		{"a stale resourceVersion", "admin", "PUT", "/api/v1/namespaces/default/pods/web", "application/json",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","resourceVersion":"1"},"spec":{"containers":[{"name":"web","image":"nginx"}]}}`, nil,
			409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on pods "web": the object has been modified; please apply your changes to the latest version and try again`},
		{"an invalid pod", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty"},"spec":{}}`, nil,
			422, metav1.StatusReasonInvalid, `Pod "empty" is invalid: spec.containers: Required value`},
		{"a body that is not JSON", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1",`, nil,
			400, metav1.StatusReasonBadRequest, `the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1",)`},
		{"another kind", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`, nil,
			400, metav1.StatusReasonBadRequest, `Deployment in version "v1" cannot be handled as a Pod`},
		{"a version the URL's group does not have", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v2","kind":"Pod","metadata":{"name":"x"}}`, nil,
			400, metav1.StatusReasonBadRequest, `Pod in version "v2" cannot be handled as a Pod: no kind "Pod" is registered for version "v2" in scheme`},
		{"a kind of another group", "admin", "POST", "/apis/apps/v1/namespaces/default/deployments", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`, nil,
			400, metav1.StatusReasonBadRequest, `Pod in version "v1" cannot be handled as a Deployment`},
		{"a body that is not an object", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", `[]`, nil,
			400, metav1.StatusReasonBadRequest, `the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type v1.TypeMeta (5b5d)`},
		{"an empty body", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", ``, nil,
			400, metav1.StatusReasonBadRequest, `the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)`},
		{"a value of the wrong type", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":7}}`, nil,
			400, metav1.StatusReasonBadRequest, `Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field`},
		{"an unknown field, fieldValidation=Strict", "admin", "POST", "/api/v1/namespaces/default/pods?fieldValidation=Strict", "application/json",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containerz":[]}}`, nil,
			400, metav1.StatusReasonBadRequest, `Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containerz"`},
		{"another namespace in the body", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"kube-system"},"spec":{"containers":[{"name":"web","image":"nginx"}]}}`, nil,
			400, metav1.StatusReasonBadRequest, "the namespace of the provided object does not match the namespace sent on the request"},
		{"another name in the body", "admin", "PUT", "/api/v1/namespaces/default/pods/web", "application/json", strings.Replace(podJSON, `"web"}`, `"other"}`, 1), nil,
			400, metav1.StatusReasonBadRequest, "the name of the object (other) does not match the name on the URL (web)"},
		{"a body over 3 MiB", "admin", "POST", "/api/v1/namespaces/default/pods", "application/json", string(big), nil,
			413, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728"},
		{"a body in a format podlab does not read", "admin", "POST", "/api/v1/namespaces/default/pods", "application/cbor", podJSON, nil,
			415, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{"a patch type podlab does not apply", "admin", "PATCH", "/api/v1/namespaces/default/pods/web", "application/apply-patch+cbor", `{}`, nil,
			415, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"},
		{"a response format podlab does not write", "admin", "GET", "/api/v1/namespaces/default/pods/web", "", "", []string{"Accept", "application/cbor"},
			406, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf"},
		{"PUT on a collection", "admin", "PUT", "/api/v1/namespaces/default/pods", "application/json", podJSON, nil,
			405, metav1.StatusReasonMethodNotAllowed, `put is not supported on resources of kind "pods"`},
		{"pods/attach, not served yet", "admin", "GET", "/api/v1/namespaces/default/pods/web/attach", "", "", nil,
			501, "", "pods/attach is not served by podlab's API server yet"},
		{"a bad label selector", "admin", "GET", "/api/v1/namespaces/default/pods?labelSelector=a%3D%3D%3Db", "", "", nil,
			400, metav1.StatusReasonBadRequest, `unable to parse the label selector "a===b"`},
		{"a bad continue token", "admin", "GET", "/api/v1/namespaces/default/pods?limit=1&continue=garbage", "", "", nil,
			400, metav1.StatusReasonBadRequest, "continue key is not valid"},
		{"a bad limit", "admin", "GET", "/api/v1/namespaces/default/pods?limit=many", "", "", nil,
			400, metav1.StatusReasonBadRequest, `limit "many" is not a number of items`},
		{"a bad timeoutSeconds", "admin", "GET", "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=soon", "", "", nil,
			400, metav1.StatusReasonBadRequest, `timeoutSeconds "soon" is not a number of seconds`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hdr := l.do(tt.user, tt.method, tt.path, tt.contentType, []byte(tt.body), tt.header...)
			st := status(t, body)
			if code != int(tt.code) || st.Code != tt.code || st.Reason != tt.reason || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure {
				t.Errorf("HTTP %d, Status %+v; want %d %q", code, st, tt.code, tt.reason)
			}
			if !strings.Contains(st.Message, tt.message) {
				t.Errorf("message %q, want %q", st.Message, tt.message)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	// nothing those requests sent was stored
	code, body, _ := l.do("admin", "GET", "/api/v1/namespaces/default/pods", "", nil)
	if code != 200 || strings.Count(string(body), `"name":"web","namespace"`) != 1 || strings.Contains(string(body), `"big"`) || strings.Contains(string(body), `"empty"`) {
		t.Errorf("after the bad requests: %d %s", code, body)
	}
}

// An unknown field with no fieldValidation (kube's default, Warn) is
// dropped and reported in a Warning header.
func TestErrors_UnknownFieldWarns(t *testing.T) {
	l := newLab(t, nil)
	code, body, hdr := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containerz":[],"containers":[{"name":"web","image":"nginx"}]}}`))
	if code != 201 || hdr.Get("Warning") != `299 - "unknown field \"spec.containerz\""` {
		t.Errorf("%d, Warning %q: %s", code, hdr.Get("Warning"), body)
	}
}

// A request the stopping server cancelled (Serve cancels every request
// before it shuts down) is answered as kube-apiserver's retry-after filter
// answers during shutdown: 429 with Retry-After, which client-go waits out
// and retries, not a 500 "context canceled" that ends a watcher's resume.
// Other errors keep their own status.
func TestWriteError_ServerStopping(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cancelled  bool
		err        error
		code       int
		retryAfter string
		message    string
	}{
		{"cancelled by the stopping server", true, fmt.Errorf("listing pods: %w", context.Canceled), 429, "1", "The apiserver is shutting down, please try again later."},
		{"context canceled, the request alive", false, context.Canceled, 500, "", "Internal error occurred: context canceled"},
		{"another error of a cancelled request", true, errors.New("disk full"), 500, "", "Internal error occurred: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancelled {
				cancel()
			} else {
				defer cancel()
			}
			r := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/pods", nil)
			w := httptest.NewRecorder()
			writeError(w, r, tc.err)
			var st metav1.Status
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
				t.Fatalf("the body is not a Status: %v\n%s", err, w.Body.String())
			}
			if w.Code != tc.code || int(st.Code) != tc.code || st.Message != tc.message || w.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("writeError: %d, Retry-After %q, Status %d %q; want %d, %q, %q", w.Code, w.Header().Get("Retry-After"), st.Code, st.Message, tc.code, tc.retryAfter, tc.message)
			}
		})
	}
}
