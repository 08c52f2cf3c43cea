package main

import (
	"github.com/podlab/podlab/internal/testenv"
	"strings"
	"testing"
)

// TestCheckCommand walks lesson 02 with the real commands: its checks fail
// before, with what to do, and pass after.
func TestCheckCommand(t *testing.T) {
	state := testenv.StateDir(t)
	out, err := podlabWith(t, checkCommand, state, "check", "2")
	if err == nil || !strings.Contains(err.Error(), "check(s) of lesson 02 failed") {
		t.Fatalf("podlab check 2 before init: error %v\n%s", err, out)
	}
	if !strings.Contains(out, "FAIL the control plane is initialized (token file and store): no API server in "+state) ||
		!strings.Contains(out, "run `podlab init` (lesson 02)") {
		t.Errorf("podlab check 2 before init does not say what to do:\n%s", out)
	}

	mustPodlab(t, state, "init")
	mustPodlab(t, state, "run", "web", "--image", "nginx")
	out, err = podlabWith(t, checkCommand, state, "check", "02")
	if err == nil || !strings.Contains(out, "PASS pod web is stored\n") ||
		!strings.Contains(out, "FAIL namespace locked enforces the restricted Pod Security level: no namespace locked: `podlab create namespace locked") {
		t.Errorf("podlab check 02 without the namespace: error %v\n%s", err, out)
	}

	mustPodlab(t, state, "create", "namespace", "locked", "--labels", "pod-security.kubernetes.io/enforce=restricted")
	out, err = podlabWith(t, checkCommand, state, "check", "2")
	if err != nil {
		t.Fatalf("podlab check 2 after the lesson: %v\n%s", err, out)
	}
	want := `PASS the control plane is initialized (token file and store)
PASS the cluster CA signed the admin's client certificate and kubeconfig
PASS pod web is stored
PASS pod web is Pending with no node
PASS namespace locked enforces the restricted Pod Security level
PASS the refused requests stored nothing
`
	if out != want {
		t.Errorf("podlab check 2 =\n%s\nwant\n%s", out, want)
	}
}

func TestCheckCommand_Bad(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no number", []string{"check"}, "want one lesson number"},
		{"not a number", []string{"check", "two"}, `lesson "two": want a number`},
		{"no such lesson", []string{"check", "42"}, "lesson 42 has no checks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := podlabWith(t, checkCommand, t.TempDir(), tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("podlab %s: error %v, want one containing %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
			}
		})
	}
}
