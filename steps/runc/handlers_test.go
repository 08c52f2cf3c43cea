package runc_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

func TestLookupHandler(t *testing.T) {
	hs := runc.DefaultHandlers("/opt/bin/runc")
	tests := []struct {
		name, handler, wantName, wantBinary string
	}{
		{"empty is the default runtime", "", "runc", "/opt/bin/runc"},
		{"runc", "runc", "runc", "/opt/bin/runc"},
		{"gVisor", "runsc", "runsc", "runsc"},
		{"crun", "crun", "crun", "crun"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := runc.LookupHandler(hs, tt.handler)
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != tt.wantName || h.Binary != tt.wantBinary {
				t.Errorf("got %s (%s), want %s (%s)", h.Name, h.Binary, tt.wantName, tt.wantBinary)
			}
		})
	}
	_, err := runc.LookupHandler(hs, "kata")
	if !errors.Is(err, runc.ErrNoHandler) {
		t.Fatalf("unknown handler: %v, want ErrNoHandler", err)
	}
	// containerd's own words, which the kubelet's event carries
	if want := `no runtime for "kata" is configured`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	var nh *runc.NoHandlerError
	if !errors.As(err, &nh) || !strings.Contains(nh.Hint(), "runc, runsc, crun") || !strings.Contains(nh.Hint(), "--runtime-handler kata=PATH") {
		t.Errorf("hint %q", nh.Hint())
	}
}

func TestDefaultHandlers(t *testing.T) {
	hs := runc.DefaultHandlers("/opt/bin/runc")
	byName := map[string]runc.Handler{}
	for _, h := range hs {
		byName[h.Name] = h
	}
	if h := byName["crun"]; h.SpecVersion != "1.0.0" || !h.RefusesHybridCgroups || h.Package != "crun" {
		t.Errorf("crun: %+v: want spec 1.0.0 (what crun 1.8.1 says), the hybrid refusal, package crun", h)
	}
	if h := byName["runsc"]; !slices.Contains(h.Args, "--network=host") || h.ExecFifo != "" {
		t.Errorf("runsc: %+v: want --network=host and no exec fifo", h)
	}
	if h := byName["runc"]; h.SpecVersion != "" || len(h.Args) != 0 {
		t.Errorf("runc: %+v: want podlab's spec version and no flags", h)
	}
}

func TestParseHandler(t *testing.T) {
	defs := runc.DefaultHandlers("/opt/bin/runc")
	tests := []struct {
		name, in, wantName, wantBinary, wantSpec string
		wantArgs                                 []string
	}{
		{"a default elsewhere", "runsc=/opt/gvisor/runsc", "runsc", "/opt/gvisor/runsc", "", []string{"--network=host"}},
		{"crun elsewhere keeps its spec version", "crun=/usr/local/bin/crun", "crun", "/usr/local/bin/crun", "1.0.0", nil},
		{"a new name with a known binary's settings", "gvisor-debug=/opt/runsc", "gvisor-debug", "/opt/runsc", "", []string{"--network=host"}},
		{"a new name, runc's kind", "runc-old=/usr/sbin/runc", "runc-old", "/usr/sbin/runc", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := runc.ParseHandler(tt.in, defs)
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != tt.wantName || h.Binary != tt.wantBinary || h.SpecVersion != tt.wantSpec || !slices.Equal(h.Args, tt.wantArgs) {
				t.Errorf("got %+v", h)
			}
		})
	}
	merged := runc.MergeHandlers(defs, []runc.Handler{{Name: "runsc", Binary: "/x/runsc"}, {Name: "kata", Binary: "/x/kata"}})
	if len(merged) != len(defs)+1 || merged[1].Binary != "/x/runsc" || merged[len(merged)-1].Name != "kata" {
		t.Errorf("merged: %+v", merged)
	}
}

func TestParseHandler_Bad(t *testing.T) {
	for name, in := range map[string]string{
		"no path":          "runsc",
		"empty path":       "runsc=",
		"empty name":       "=/usr/bin/runsc",
		"upper case":       "RunSC=/usr/bin/runsc",
		"underscore":       "my_runtime=/usr/bin/runsc",
		"leading dash":     "-x=/usr/bin/runsc",
		"longer than 63":   strings.Repeat("a", 64) + "=/usr/bin/runsc",
		"a path separator": "a/b=/usr/bin/runsc",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := runc.ParseHandler(in, runc.DefaultHandlers("runc")); !errors.Is(err, runc.ErrInvalidHandler) {
				t.Fatalf("ParseHandler(%q) = %v, want ErrInvalidHandler", in, err)
			}
		})
	}
}

// fakeCgroupRoot mounts, under a temporary directory, what a host's
// /sys/fs/cgroup is: a real tmpfs, and in it a real cgroup2 mount at
// unified/ when hybrid is set.
func fakeCgroupRoot(t *testing.T, hybrid bool) string {
	t.Helper()
	testenv.RequireRoot(t)
	root := filepath.Join(t.TempDir(), "cgroup")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	if err := os.Mkdir(filepath.Join(root, "unified"), 0o755); err != nil {
		t.Fatal(err)
	}
	if hybrid {
		if err := unix.Mount("cgroup2", filepath.Join(root, "unified"), "cgroup2", 0, ""); err != nil {
			t.Fatalf("mounting cgroup2: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(filepath.Join(root, "unified"), unix.MNT_DETACH) })
	}
	return root
}

// TestCgroupModeAt tells the modes apart on real mounts, as crun does.
func TestCgroupModeAt(t *testing.T) {
	testenv.RequireRoot(t)
	// A cgroup2 mount lists the controllers the v2 hierarchy has: on a
	// pure v2 host all of them, on these hybrid machines hugetlb.
	hybridWant := runc.CgroupHybridWithControllers
	unified := filepath.Join(t.TempDir(), "unified")
	if err := os.Mkdir(unified, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("cgroup2", unified, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mounting cgroup2: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(unified, unix.MNT_DETACH) })
	if b, _ := os.ReadFile(filepath.Join(unified, "cgroup.controllers")); strings.TrimSpace(string(b)) == "" {
		hybridWant = runc.CgroupHybridNoControllers
	}
	tests := []struct {
		name string
		root string
		want runc.CgroupMode
	}{
		{"cgroup2 at the root", unified, runc.CgroupModeUnified},
		{"a tmpfs with cgroup2 at unified/", fakeCgroupRoot(t, true), hybridWant},
		{"a tmpfs with a plain unified/ directory", fakeCgroupRoot(t, false), runc.CgroupModeLegacy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runc.CgroupModeAt(tt.root)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("mode %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := runc.CgroupModeAt(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("a missing root: no error")
	}
}

// TestHandler_Preflight: crun is refused, before it runs, on a hybrid host
// whose v2 mount has controllers, in one line saying why; a missing binary
// names its Debian package.
func TestHandler_Preflight(t *testing.T) {
	testenv.RequireRoot(t)
	hs := runc.DefaultHandlers("runc")
	crun, _ := runc.LookupHandler(hs, "crun")
	// Preflight looks at the host and asks crun its version, nothing more
	crun.Binary = filepath.Join(t.TempDir(), "crun")
	if err := os.WriteFile(crun.Binary, []byte("#!/bin/sh\necho 'crun version 1.8.1'\necho 'spec: 1.0.0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	hybrid := fakeCgroupRoot(t, true)
	mode, err := runc.CgroupModeAt(hybrid)
	if err != nil {
		t.Fatal(err)
	}
	err = crun.Preflight(hybrid)
	if mode == runc.CgroupHybridWithControllers {
		if !errors.Is(err, runc.ErrHybridCgroups) {
			t.Fatalf("crun on a hybrid host: %v, want ErrHybridCgroups", err)
		}
		want := "crun 1.8.1 refuses hosts with hybrid cgroups (v1 controllers + a v2 mount with controllers, " + hybrid + "/unified): use runc or a pure cgroup v2 host"
		if err.Error() != want {
			t.Errorf("error %q, want the one line %q", err, want)
		}
	} else if err != nil {
		t.Errorf("crun on a hybrid host without v2 controllers: %v", err)
	}
	if err := crun.Preflight(fakeCgroupRoot(t, false)); err != nil {
		t.Errorf("crun on a v1 host: %v", err)
	}
	runsc, _ := runc.LookupHandler(hs, "runsc")
	runsc.Binary = "/bin/true"
	if err := runsc.Preflight(hybrid); err != nil {
		t.Errorf("runsc on a hybrid host: %v", err)
	}

	crun.Binary = filepath.Join(t.TempDir(), "crun")
	err = crun.Preflight(runc.CgroupMountRoot)
	if !errors.Is(err, runc.ErrRuntimeNotFound) || !strings.Contains(err.Error(), "apt-get install crun") {
		t.Errorf("crun missing: %v, want ErrRuntimeNotFound naming the crun package", err)
	}
}

func TestRuntime_HandlerLayouts(t *testing.T) {
	hs := runc.DefaultHandlers("runc")
	tests := []struct {
		handler, wantState, wantFifo string
	}{
		{"runc", "/root/c1/state.json", "/root/c1/exec.fifo"},
		{"runsc", "/root/c1_sandbox:c1.state", ""},
		{"crun", "/root/c1/status", "/root/c1/exec.fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.handler, func(t *testing.T) {
			h, _ := runc.LookupHandler(hs, tt.handler)
			r := runc.NewRuntime(h, "/root", "/state")
			if got := r.StateFile("c1"); got != tt.wantState {
				t.Errorf("state %s, want %s", got, tt.wantState)
			}
			if got := r.ExecFifo("c1"); got != tt.wantFifo {
				t.Errorf("exec fifo %q, want %q", got, tt.wantFifo)
			}
		})
	}
	// A Runtime made without a handler is runc's, as before.
	r := &runc.Runtime{Root: "/root"}
	if r.StateFile("c1") != "/root/c1/state.json" || r.ExecFifo("c1") != "/root/c1/exec.fifo" {
		t.Errorf("plain runtime: %s %s", r.StateFile("c1"), r.ExecFifo("c1"))
	}
}

// TestRuntime_Runsc_Lifecycle: the same Runtime drives gVisor's runsc:
// create (runsc has no exec fifo: Created tells created from started),
// start, logs, kill, the exit code, delete, with runsc's state under its own
// root.
func TestRuntime_Runsc_Lifecycle(t *testing.T) {
	testenv.RequireRoot(t)
	bin := testenv.LookPath(t, "runsc")
	h, _ := runc.LookupHandler(runc.DefaultHandlers(""), "runsc")
	h.Binary = bin
	base := newRuntime(t)
	r := runc.NewRuntime(h, filepath.Join(base.StateDir, "runtimes", "runsc"), base.StateDir)
	r.Shim, r.OnCommand = base.Shim, base.OnCommand
	id := containerID(t, r)
	ctx := context.Background()

	// gVisor's Sentry and gofer live in the container's cgroup, with the
	// app: the test bundle's pids.max of 32 and half a CPU are the app's
	// budget under runc, not enough for a Go kernel's threads under load
	// (under load it stopped right after start, or exited 2 instead of 7).
	b := bundle(t, id, "sleep")
	setResources(t, b, func(res *specs.LinuxResources) { res.Pids, res.CPU = nil, nil })
	if _, err := r.Create(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	if !r.Created(id) {
		t.Errorf("Created = false after create")
	}
	if _, err := os.Stat(r.StateFile(id)); err != nil {
		t.Errorf("runsc's state: %v", err)
	}
	st, err := r.Start(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "running" || r.Created(id) {
		t.Errorf("after start: status %s, Created %v", st.Status, r.Created(id))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(r.LogPath(id))
		if strings.Contains(string(b), "ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready in the log: %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.Kill(ctx, id, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ex, err := r.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Code != 7 {
		t.Errorf("exit code %d, want 7 (the app's after SIGTERM)", ex.Code)
	}
	if _, err := r.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(r.RootDir()); len(ents) > 0 {
		t.Errorf("left in runsc's root: %v", ents)
	}
}

// setResources edits the linux.resources of the bundle's config.json.
func setResources(t *testing.T, bundle string, edit func(*specs.LinuxResources)) {
	t.Helper()
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	edit(s.Linux.Resources)
	if raw, err = json.Marshal(&s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
