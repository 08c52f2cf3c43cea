package main

import (
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

// TestRunc_RuntimeFlag: --runtime takes a handler's name or a path; an
// unknown name and a runtime that refuses this host say so before anything
// runs, and each handler reads its own --root.
func TestRunc_RuntimeFlag(t *testing.T) {
	state := testenv.StateDir(t)
	tests := []struct {
		name    string
		runtime string
		want    string // in the output or the error
	}{
		{"an unknown handler", "kata", `--runtime kata: no runtime for "kata" is configured: give a path, or one of runc, runsc, crun`},
		{"runsc's own root", "runsc", "container not found: \"web\" (no " + state + "/runtimes/runsc/web_sandbox:web.state)"},
		{"runc's root, as before", "runc", "container not found: \"web\" (no " + state + "/runc/web/state.json)"},
		{"a missing binary", "/nonexistent/runc", "OCI runtime binary not found: /nonexistent/runc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.runtime == "runsc" {
				testenv.LookPath(t, "runsc")
			}
			args := []string{"runc", "--runtime", tt.runtime, "state", "web"}
			if strings.HasPrefix(tt.runtime, "/") {
				args = []string{"runc", "--runtime", tt.runtime, "run", "web"} // the binary is checked before the bundle
			}
			out, err := podlabIn(t, state, "", args...)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			if got := out + err.Error(); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRunc_RuntimeCrun: on a host whose cgroups crun refuses, --runtime
// crun says why in one line before running crun; elsewhere it reaches crun.
func TestRunc_RuntimeCrun(t *testing.T) {
	testenv.LookPath(t, "crun")
	state := testenv.StateDir(t)
	out, err := podlabIn(t, state, "", "runc", "--runtime", "crun", "state", "web")
	if err == nil {
		t.Fatalf("no error; output:\n%s", out)
	}
	mode, merr := runc.CgroupModeAt(runc.CgroupMountRoot)
	if merr != nil {
		t.Fatal(merr)
	}
	want := "container not found: \"web\" (no " + state + "/runtimes/crun/web/status)"
	if mode == runc.CgroupHybridWithControllers {
		want = "refuses hosts with hybrid cgroups (v1 controllers + a v2 mount with controllers, /sys/fs/cgroup/unified): use runc or a pure cgroup v2 host"
	}
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q, want one line with %q", err, want)
	}
}
