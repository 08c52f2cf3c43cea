package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver/authn"
)

// TestCommands_ClientsOfTheAPIServerWhenItRuns: podlab's kubectl-style
// commands open the store in-process while no podlab apiserver serves the
// state directory, and are its clients over HTTPS while one does: -v says
// which, narrates each request as kubectl -v=6, --as is impersonation and
// --token a bearer token, and errors read the same either way.
func TestCommands_ClientsOfTheAPIServerWhenItRuns(t *testing.T) {
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	tokens, err := authn.Load(authn.Path(state))
	if err != nil {
		t.Fatal(err)
	}
	viewerToken, err := tokens.TokenFor("viewer")
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)

	tests := []struct {
		name string
		args []string
		// fails is the error's text, "" when none
		fails string
		// inProcess and network are what the output (stdout, then
		// stderr) holds, in order, without and with a server
		inProcess, network []string
		// notNetwork is what the output must not hold with a server
		notNetwork []string
	}{
		{
			name:      "a write",
			args:      []string{"-v", "run", "web", "--image", "nginx"},
			inProcess: []string{`authentication        token file: bearer token -> user "admin"`, "pod/web created", "no podlab apiserver serves " + state + ": opening its store in-process"},
			network: []string{"ran in podlab apiserver (pid ", url + "): its phases are in its log (podlab apiserver -v)", "pod/web2 created",
				"podlab apiserver (pid ", "serves " + state + ": a client of it at " + url + " over HTTPS, as admin",
				`regexp:POST https://127\.0\.0\.1:\d+/api/v1/namespaces/default/pods 201 Created in \d+ milliseconds`},
			notNetwork: []string{"authentication        token file", "opening its store in-process"},
		},
		{
			name:      "a read",
			args:      []string{"get", "pods"},
			inProcess: []string{"NAME", "web", "Pending"},
			network:   []string{"NAME", "web", "Pending"},
		},
		{
			name:      "--as developer, forbidden",
			args:      []string{"-v", "--as", "developer", "run", "x", "--image", "nginx", "-n", "kube-system"},
			fails:     `pods is forbidden: User "developer" cannot create resource "pods" in API group "" in the namespace "kube-system"`,
			inProcess: []string{`authorization         RBAC: 403 Forbidden: User "developer"`},
			network: []string{"as admin impersonating developer (Impersonate-User: developer",
				`regexp:POST https://127\.0\.0\.1:\d+/api/v1/namespaces/kube-system/pods 403 Forbidden in \d+ milliseconds`},
		},
		{
			name:      "--token of the viewer, forbidden",
			args:      []string{"-v", "--token", viewerToken, "run", "x", "--image", "nginx"},
			fails:     `pods is forbidden: User "viewer" cannot create resource "pods" in API group "" in the namespace "default"`,
			inProcess: []string{`authentication        token file: bearer token -> user "viewer"`},
			network:   []string{`with the bearer token of --token (viewer)`, "403 Forbidden"},
		},
		{
			name:      "auth can-i, a SelfSubjectAccessReview over the network",
			args:      []string{"--as", "viewer", "auth", "can-i", "create", "pods"},
			fails:     "exit status 1",
			inProcess: []string{"no", "(viewer: no RBAC policy matched"},
			network:   []string{"no", "(viewer: no RBAC rule allows it (the API server's -v log says which bindings RBAC looked at))"},
		},
		{
			name:      "auth can-i --list, a SelfSubjectRulesReview",
			args:      []string{"--as", "developer", "auth", "can-i", "--list"},
			inProcess: []string{`What developer may do in namespace "default":`, "selfsubjectaccessreviews.authorization.k8s.io"},
			network:   []string{`What developer may do in namespace "default":`, "selfsubjectaccessreviews.authorization.k8s.io"},
		},
	}
	// bad input reads the same either way, and loses nothing
	bad := []struct{ flag, want string }{
		{"--as nosuchuser", `--as nosuchuser: no such user in the token file: "nosuchuser"`},
		{"--token nope", "Unauthorized: the bearer token is not in the token file " + authn.Path(state) + "; act as a user with --as NAME, or pass one of its tokens"},
	}
	run := func(t *testing.T, args []string, fails string, want, not []string, network bool) {
		t.Helper()
		if network && args[0] == "-v" && args[1] == "run" {
			args = []string{"-v", "run", "web2", "--image", "nginx"}
		}
		out, errOut, err := podlab(t, state, args...)
		switch {
		case fails == "" && err != nil:
			t.Fatalf("podlab %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		case fails != "" && (err == nil || !strings.Contains(exitText(err), fails)):
			t.Fatalf("podlab %s: error %v, want %q\n%s%s", strings.Join(args, " "), err, fails, out, errOut)
		}
		holdsInOrder(t, out+errOut, want)
		for _, n := range not {
			if strings.Contains(out+errOut, n) {
				t.Errorf("podlab %s: the output holds %q:\n%s%s", strings.Join(args, " "), n, out, errOut)
			}
		}
	}
	for _, tt := range tests {
		t.Run("in-process/"+tt.name, func(t *testing.T) { run(t, tt.args, tt.fails, tt.inProcess, nil, false) })
	}
	for _, b := range bad {
		t.Run("in-process/bad/"+b.flag, func(t *testing.T) { run(t, append(strings.Fields(b.flag), "get", "pods"), b.want, nil, nil, false) })
	}

	srv, stderr := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	for _, tt := range tests {
		t.Run("network/"+tt.name, func(t *testing.T) { run(t, tt.args, tt.fails, tt.network, tt.notNetwork, true) })
	}
	for _, b := range bad {
		t.Run("network/bad/"+b.flag, func(t *testing.T) { run(t, append(strings.Fields(b.flag), "get", "pods"), b.want, nil, nil, true) })
	}

	// once the server stops, the commands open the store again
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("podlab apiserver after SIGTERM: %v: %s", err, stderr.String())
	}
	_, errOut, err := podlab(t, state, "-v", "get", "pods")
	if err != nil || !strings.Contains(errOut, "no podlab apiserver serves") {
		t.Errorf("after the server stopped: %v, %q; want the in-process way", err, errOut)
	}
}

// exitText is an error's text, or its exit status for cli.Exit("", 1).
func exitText(err error) string {
	if s := err.Error(); s != "" {
		return s
	}
	return "exit status " + strconv.Itoa(exitCode(err))
}

// holdsInOrder checks that out holds each of want in order; one starting
// "regexp:" is a regular expression.
func holdsInOrder(t *testing.T, out string, want []string) {
	t.Helper()
	rest := out
	for _, w := range want {
		var i, n int
		if re, ok := strings.CutPrefix(w, "regexp:"); ok {
			loc := regexp.MustCompile(re).FindStringIndex(rest)
			if loc == nil {
				t.Fatalf("no %s (in order) in\n%s", re, out)
			}
			i, n = loc[0], loc[1]-loc[0]
		} else if i, n = strings.Index(rest, w), len(w); i < 0 {
			t.Fatalf("no %q (in order) in\n%s", w, out)
		}
		rest = rest[i+n:]
	}
}
