package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// built builds podlab-runc and steps/runc's test app once, into one
// directory: dir/podlab-runc, dir/app.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "podlab-runc-test-")
		if buildErr != nil {
			return
		}
		root := testenv.RepoRoot()
		for _, b := range [][2]string{{"podlab-runc", "./cmd/podlab-runc"}, {"app", "./steps/runc/testdata/app"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b[0]), b[1])
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = errors.New("building " + b[1] + ": " + err.Error() + "\n" + string(out))
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// bundle is a bundle whose rootfs holds only /app, run as `app ARGS...`,
// in a cgroup under the state directory's cgroup root.
func bundle(t *testing.T, state, id string, args ...string) string {
	t.Helper()
	l, err := statedir.New(state)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.AppBundle(t, filepath.Join(built(t), "app"), id, func(s *specs.Spec) {
		s.Linux.CgroupsPath = l.CgroupRoot() + "/" + id
	}, args...)
}

// podlabRunc runs podlab-runc in this process and returns stdout, stderr
// and the error.
func podlabRunc(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(append([]string{"podlab-runc"}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func exitCodeOf(err error) int {
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return -1
}

// TestRun_ExitCodeLogAndRunAgain: a foreground run passes the app's output
// and exit code on, keeps them where podlab runc logs and state read them,
// and frees the ID for the next run.
func TestRun_ExitCodeLogAndRunAgain(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.StateDir(t)
	b := bundle(t, state, "small", "exit", "3")
	for round := 1; round <= 2; round++ {
		out, errOut, err := podlabRunc(t, "--state-dir", state, "--runtime", testenv.Runc(t), "run", "small", "--bundle", b)
		if code := exitCodeOf(err); code != 3 {
			t.Fatalf("round %d: exit code %d (err %v), want 3\nstderr:\n%s", round, code, err, errOut)
		}
		if !strings.Contains(out, "hello from pid 1 on small") {
			t.Errorf("round %d: stdout %q, want the app's greeting", round, out)
		}
		if !strings.Contains(errOut, "Container small exited with code 3; runc removed it") {
			t.Errorf("round %d: stderr %q, want the ending", round, errOut)
		}
		r := runc.NewRuntime(runc.DefaultHandlers(testenv.Runc(t))[0], "", state)
		var ex runc.Exit
		raw, err := os.ReadFile(r.ExitPath("small"))
		if err != nil {
			t.Fatalf("round %d: the exit record: %v", round, err)
		}
		if err := json.Unmarshal(raw, &ex); err != nil || ex.Code != 3 {
			t.Errorf("round %d: exit.json %s, want code 3", round, raw)
		}
		if log, err := os.ReadFile(r.LogPath("small")); err != nil || !strings.Contains(string(log), " stdout F hello from pid 1") {
			t.Errorf("round %d: container.log %q (%v), want the greeting in the CRI format", round, log, err)
		}
	}
}

// TestShim_FromTheSmallBinary: a Runtime whose shim is podlab-runc's (as
// runc.ShimCommand picks it beside podlab) creates and starts a container,
// and the shim collects its log and exit code.
func TestShim_FromTheSmallBinary(t *testing.T) {
	testenv.RequireRoot(t)
	dir := built(t)
	exe := filepath.Join(t.TempDir(), "podlab")
	if err := os.WriteFile(exe, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "podlab-runc"), filepath.Join(filepath.Dir(exe), runc.SmallBinary)); err != nil {
		t.Fatal(err)
	}
	shim := runc.ShimCommand(exe)
	if len(shim) != 2 || filepath.Base(shim[0]) != runc.SmallBinary || shim[1] != "shim" {
		t.Fatalf("ShimCommand = %q, want podlab-runc shim", shim)
	}
	state := testenv.StateDir(t)
	l, _ := statedir.New(state)
	rl := l.Runtime()
	r := runc.NewRuntime(runc.DefaultHandlers(testenv.Runc(t))[0], rl.HandlerRoot(runc.DefaultHandler), rl.Dir)
	r.CgroupParent = rl.CgroupParent
	r.Shim = shim
	ctx := t.Context()
	if _, err := r.Create(ctx, "shimmed", bundle(t, state, "shimmed", "exit", "5")); err != nil {
		t.Fatalf("create with podlab-runc's shim: %v", err)
	}
	t.Cleanup(func() { _, _ = r.Delete(ctx, "shimmed", true) })
	if _, err := r.Start(ctx, "shimmed"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := r.State(ctx, "shimmed")
		if err != nil {
			t.Fatal(err)
		}
		if st.Exit != nil {
			if st.Exit.Code != 5 {
				t.Errorf("exit code %d, want 5", st.Exit.Code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shim wrote no exit code in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if log, err := os.ReadFile(r.LogPath("shimmed")); err != nil || !strings.Contains(string(log), " stdout F hello from pid 1 on shimmed") {
		t.Errorf("container.log %q (%v), want the greeting the shim copied", log, err)
	}
}

// TestBadInput: each mistake gets an error that says what to do.
func TestBadInput(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no ID", []string{"--state-dir", state, "run", "--bundle", state}, nil, "no container ID: podlab-runc run ID --bundle DIR"},
		{"no bundle", []string{"--state-dir", state, "--runtime", "/bin/true", "run", "x", "--bundle", filepath.Join(state, "missing")}, nil, "missing"},
		{"unknown runtime", []string{"--state-dir", state, "--runtime", "nosuch", "run", "x", "--bundle", state}, nil, "nosuch"},
		{"shim by hand", []string{"shim"}, map[string]string{runc.ShimConfigEnv: ""}, "run podlab runc create ID --bundle DIR instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, err := podlabRunc(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}
