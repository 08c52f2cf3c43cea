package remote_test

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/remote"
)

// TestClient_AccessReview: kubectl auth can-i over the wire decides as the
// gate does in-process, with the reason an access review reports (none for
// RBAC's plain denial, as kube-apiserver gives none).
func TestClient_AccessReview(t *testing.T) {
	l := newLab(t)
	ctx := testCtx(t)
	tests := []struct {
		name, user, verb, resource, sub, ns string
		allowed                             bool
	}{
		{"admin may create pods", "admin", "create", "pods", "", "default", true},
		{"the viewer may not", "viewer", "create", "pods", "", "default", false},
		{"the viewer may list pods", "viewer", "list", "pods", "", "", true},
		{"the scheduler may bind", "system:kube-scheduler", "create", "pods", "binding", "default", true},
		{"the developer may not delete nodes", "developer", "delete", "nodes", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := l.remote(tt.user).AccessReview(ctx, tt.verb, tt.resource, tt.sub, tt.ns, "")
			if err != nil {
				t.Fatal(err)
			}
			_, want, err := l.inProcess(tt.user).(*apiserver.Client).Access(ctx, tt.verb, tt.resource, tt.sub, tt.ns, "")
			if err != nil {
				t.Fatal(err)
			}
			want.Reason = apiserver.ReviewReason(want)
			if d.Allowed != tt.allowed || d != want {
				t.Errorf("over the wire %+v, in-process %+v; want allowed %v, the same decision", d, want, tt.allowed)
			}
		})
	}
	if _, err := l.remote("admin").AccessReview(ctx, "get", "nosuchthings", "", "", ""); err == nil {
		t.Error("a review of a resource podlab does not serve: no error")
	}
}

func TestClient_RulesReview(t *testing.T) {
	l := newLab(t)
	ctx := testCtx(t)
	rules, err := l.remote("viewer").RulesReview(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := l.inProcess("viewer").(*apiserver.Client).Rules(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 || len(rules) != len(want) {
		t.Fatalf("over the wire %d rules, in-process %d: %v", len(rules), len(want), rules)
	}
}

// TestRequestLog: each request is one line, as kubectl -v=6 prints it.
func TestRequestLog(t *testing.T) {
	l := newLab(t)
	ctx := testCtx(t)
	var log bytes.Buffer
	cfg := l.config("admin")
	cfg.WrapTransport = remote.RequestLog(&log)
	c, err := remote.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	must(t, ignore(c.Create(ctx, testPod("web"))))
	if _, err := c.Get(ctx, "pods", "default", "nope"); err == nil {
		t.Fatal("get of a missing pod: no error")
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^POST https://127\.0\.0\.1:\d+/api/v1/namespaces/default/pods 201 Created in \d+ milliseconds$`),
		regexp.MustCompile(`^GET https://127\.0\.0\.1:\d+/api/v1/namespaces/default/pods/nope 404 Not Found in \d+ milliseconds$`),
	}
	lines := bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), log.String())
	}
	for i, re := range want {
		if !re.Match(lines[i]) {
			t.Errorf("line %d: %q, want %s", i, lines[i], re)
		}
	}
}
