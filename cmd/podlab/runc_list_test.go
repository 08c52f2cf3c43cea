package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestRunc_List: podlab runc list prints what the real `runc list` prints
// on the same root, byte for byte, in each of its forms (table, -q, json),
// on an empty root and with a created container; on a fresh state
// directory (no root yet, where runc itself fails) it lists nothing.
func TestRunc_List(t *testing.T) {
	testenv.RequireRoot(t)
	runcBin := testenv.Runc(t)
	t.Setenv("PODLAB_RUNTIME", runcBin)
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1") // the shim runc create starts is this test binary, run as podlab
	t.Setenv("PODLAB_REGISTRY_MIRROR", "")
	hello := demoRegistry(t) + "/podlab/hello:1.0"
	state := testenv.StateDir(t)
	root := statedir.Layout{Dir: state}.Runtime().HandlerRoot("runc")
	header := "ID          PID         STATUS      BUNDLE      CREATED     OWNER\n"
	forms := []struct {
		name   string
		args   []string // after "list"
		noRoot string   // what it prints before anything was created
	}{
		{"table", nil, header},
		{"quiet", []string{"-q"}, ""},
		{"json", []string{"--format", "json"}, "null\n"},
		{"table, named", []string{"--format", "table"}, header},
	}
	compare := func(t *testing.T, wantIn ...string) {
		t.Helper()
		for _, f := range forms {
			got := mustPodlab(t, state, append([]string{"runc", "list"}, f.args...)...)
			out, err := exec.Command(runcBin, append([]string{"--root", root, "list"}, f.args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: runc list: %v\n%s", f.name, err, out)
			}
			if got != string(out) {
				t.Errorf("%s: podlab runc list printed\n%q\nreal runc list printed\n%q", f.name, got, out)
			}
		}
		table := mustPodlab(t, state, "runc", "list")
		if !strings.HasPrefix(table, "ID ") || !strings.Contains(table, "OWNER") {
			t.Errorf("no runc header in %q", table)
		}
		for _, w := range wantIn {
			if !strings.Contains(table, w) {
				t.Errorf("table lacks %q:\n%s", w, table)
			}
		}
	}
	t.Run("no root yet", func(t *testing.T) {
		for _, f := range forms {
			if got := mustPodlab(t, state, append([]string{"runc", "list"}, f.args...)...); got != f.noRoot {
				t.Errorf("%s: podlab runc list printed %q, want %q", f.name, got, f.noRoot)
			}
		}
	})
	if err := os.MkdirAll(root, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Run("empty root", func(t *testing.T) { compare(t) })

	mustPodlab(t, state, "pull", hello)
	mustPodlab(t, state, "unpack")
	mustPodlab(t, state, "spec")
	mustPodlab(t, state, "runc", "create")
	t.Cleanup(func() { podlab(t, state, "runc", "delete", "--force", "hello") })
	t.Run("a created container", func(t *testing.T) {
		compare(t, "hello", "created", state+"/bundles/hello", "root")
	})
}

// TestRunc_List_Bad: a format runc list does not print is refused, saying
// which ones it does.
func TestRunc_List_Bad(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown format", []string{"runc", "list", "--format", "yaml"}, `--format "yaml": runc list prints table or json`},
		{"an unknown handler", []string{"runc", "--runtime", "kata", "list"}, `--runtime kata: no runtime for "kata" is configured`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := podlab(t, t.TempDir(), tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("podlab %s: err = %v, want %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
			}
		})
	}
}
