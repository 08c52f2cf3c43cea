package runc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

// TestMain turns the test binary into podlab's shim when the runtime starts
// it as one (Runtime.Shim is this binary).
func TestMain(m *testing.M) {
	if os.Getenv(runc.ShimConfigEnv) != "" {
		os.Exit(runc.ShimMain())
	}
	code := m.Run()
	if appPath != "" {
		os.RemoveAll(filepath.Dir(appPath))
	}
	os.Exit(code)
}

const (
	memoryLimit = 64 << 20
	pidsLimit   = 32
	cpuQuota    = 50000
	cpuPeriod   = 100000
)

var (
	appOnce sync.Once
	appPath string
	appErr  error
)

// app builds testdata/app, a static program, once per test run.
func app(t testing.TB) string {
	t.Helper()
	appOnce.Do(func() {
		dir, err := os.MkdirTemp("", "podlab-runc-app-")
		if err != nil {
			appErr = err
			return
		}
		appPath = filepath.Join(dir, "app") // TestMain removes dir
		cmd := exec.Command("go", "build", "-o", appPath, "./testdata/app")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			appErr = fmt.Errorf("building testdata/app: %v\n%s", err, out)
		}
	})
	if appErr != nil {
		t.Fatal(appErr)
	}
	return appPath
}

// bundle makes a bundle whose rootfs holds only /app, with a config.json
// based on `runc spec`: the namespaces of a Pod's container, cgroupsPath
// /podlab/<id>, memory, pids and cpu limits, no terminal, no ambient caps.
func bundle(t testing.TB, id string, args ...string) string {
	t.Helper()
	return testenv.AppBundle(t, app(t), id, func(s *specs.Spec) {
		s.Linux.CgroupsPath = "/podlab/" + id
		s.Linux.Namespaces = []specs.LinuxNamespace{
			{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
			{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.CgroupNamespace},
		}
		mem, pids, quota, period := int64(memoryLimit), int64(pidsLimit), int64(cpuQuota), uint64(cpuPeriod)
		s.Linux.Resources.Memory = &specs.LinuxMemory{Limit: &mem}
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: &pids}
		s.Linux.Resources.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}, args...)
}

// newRuntime is a Runtime with its own state directory, logging each runc
// command line, whose shim is this test binary.
func newRuntime(t *testing.T) *runc.Runtime {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &runc.Runtime{
		Binary:    testenv.Runc(t),
		StateDir:  testenv.StateDir(t),
		Shim:      []string{exe},
		OnCommand: func(argv []string) { t.Logf("+ %s", strings.Join(argv, " ")) },
	}
}

// containerID is unique per test and run, so that tests never share
// cgroups; the container is force-deleted and its cgroups removed at the end.
func containerID(t *testing.T, r *runc.Runtime) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-", ",", "").Replace(strings.ToLower(t.Name()))
	name = strings.TrimPrefix(name, "testruntime_")
	if len(name) > 32 {
		name = name[:32]
	}
	// short enough to be the hostname too (at most 64 bytes)
	id := fmt.Sprintf("podlab-test-%s-%d", name, time.Now().UnixNano()%1e6)
	t.Cleanup(func() {
		_ = exec.Command(r.Binary, "--root", r.RootDir(), "delete", "--force", id).Run()
		if ms, err := runc.HostCgroupMounts(); err == nil {
			_, _ = runc.RemoveCgroupDirs(ms, "/podlab/"+id)
		}
	})
	return id
}

// cgroupDirs lists the directories of /podlab/<id> that exist in any hierarchy.
func cgroupDirs(t *testing.T, id string) []string {
	t.Helper()
	ms, err := runc.HostCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range ms {
		d := filepath.Join(m.Mountpoint, "podlab", id)
		if _, err := os.Stat(d); err == nil {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func checkLimits(t *testing.T, cg *runc.Cgroup) {
	t.Helper()
	if cg == nil {
		t.Fatal("no cgroup read back")
	}
	for _, c := range []struct {
		name string
		got  runc.Limit
		want int64
	}{{"memory", cg.Memory, memoryLimit}, {"pids", cg.Pids, pidsLimit}, {"cpu quota", cg.CPUQuota, cpuQuota}, {"cpu period", cg.CPUPeriod, cpuPeriod}} {
		if !c.got.Known || c.got.Unlimited || c.got.Value != c.want {
			t.Errorf("%s limit = %s (from %s), want %d", c.name, c.got, c.got.File, c.want)
		}
	}
	if len(cg.Dirs) == 0 {
		t.Errorf("no cgroup directories")
	}
}

func TestRuntime_Run_Foreground(t *testing.T) {
	testenv.RequireRoot(t)
	r := newRuntime(t)
	id := containerID(t, r)
	var stdout, stderr bytes.Buffer
	ex, err := r.Run(context.Background(), id, bundle(t, id, "exit", "3"), runc.IO{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Code != 3 {
		t.Errorf("exit code %d, want 3", ex.Code)
	}
	// pid 1 of its own pid namespace, on its own hostname (uts namespace)
	if want := "hello from pid 1 on " + id + "\n"; stdout.String() != want {
		t.Errorf("stdout = %q, want %q", stdout.String(), want)
	}
	if stderr.String() != "a line on stderr\n" {
		t.Errorf("stderr = %q", stderr.String())
	}
	st, err := r.State(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "stopped" || st.Exit == nil || st.Exit.Code != 3 || st.StateFile != "" {
		t.Errorf("state = %+v (exit %+v), want stopped with exit code 3 and no runc state", st, st.Exit)
	}
	if st.LogPath != r.LogPath(id) {
		t.Errorf("a foreground container's log path is %q, want %s", st.LogPath, r.LogPath(id))
	}
	if st.Cgroup != nil {
		t.Errorf("cgroup %+v reported for a container whose cgroups runc removed", st.Cgroup)
	}
	var logs bytes.Buffer
	if err := r.Logs(context.Background(), id, &logs, runc.LogsOptions{}); err != nil {
		t.Errorf("Logs of a foreground container: %v", err)
	}
	// stdout and stderr are two pipes: their lines may interleave either way
	got := strings.SplitAfter(logs.String(), "\n")
	slices.Sort(got)
	if want := []string{"", "a line on stderr\n", "hello from pid 1 on " + id + "\n"}; !slices.Equal(got, want) {
		t.Errorf("Logs of a foreground container = %q, want the lines %q", logs.String(), want[1:])
	}
	d, err := r.Delete(context.Background(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after delete", d.Dir)
	}
	if dirs := cgroupDirs(t, id); len(dirs) != 0 {
		t.Errorf("cgroups left after delete: %q", dirs)
	}
}

// A foreground run removes the container when it ends, as runc run does:
// the same ID runs again at once, and the log and exit code of the last run
// stay readable. With Keep, as runc run --keep, the stopped container stays
// and its ID is taken until Delete.
func TestRuntime_Run_RemovesWhenDone(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		keep   bool
		parent string // the runtime's CgroupParent
	}{
		{"removed", false, ""},
		{"kept", true, ""},
		// the bundle's cgroup (/podlab/ID) is not under the runtime's
		// parent: its empty parents are left alone, and the run succeeds
		{"removed, cgroup outside the runtime's parent", false, "/podlab-elsewhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRuntime(t)
			r.CgroupParent = tt.parent
			id := containerID(t, r)
			b := bundle(t, id, "exit", "7")
			run := func() (*runc.Exit, error) {
				return r.RunWithOptions(ctx, id, b, runc.IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}, runc.RunOptions{Keep: tt.keep})
			}
			if ex, err := run(); err != nil || ex.Code != 7 {
				t.Fatalf("first run: %+v, %v; want exit code 7", ex, err)
			}
			_, stateErr := os.Stat(r.StateFile(id))
			if tt.keep != (stateErr == nil) {
				t.Errorf("runc state file after a run with keep=%v: %v", tt.keep, stateErr)
			}
			if dirs := cgroupDirs(t, id); tt.keep != (len(dirs) > 0) {
				t.Errorf("cgroups after a run with keep=%v: %q", tt.keep, dirs)
			}
			var logs bytes.Buffer
			if err := r.Logs(ctx, id, &logs, runc.LogsOptions{}); err != nil || !strings.Contains(logs.String(), "hello from pid 1") {
				t.Errorf("Logs after the run: %q, %v", logs.String(), err)
			}
			st, err := r.State(ctx, id)
			if err != nil || st.Exit == nil || st.Exit.Code != 7 {
				t.Errorf("State after the run: %+v, %v; want exit code 7", st, err)
			}

			_, err = run()
			if tt.keep {
				if !errors.Is(err, runc.ErrContainerExists) {
					t.Fatalf("second run of a kept container: %v, want ErrContainerExists", err)
				}
				if _, err := r.Delete(ctx, id, false); err != nil {
					t.Fatal(err)
				}
				if _, err = run(); err != nil {
					t.Fatalf("run after delete: %v", err)
				}
				if _, err := r.Delete(ctx, id, false); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("second run of the same ID: %v", err)
			}
			logs.Reset()
			if err := r.Logs(ctx, id, &logs, runc.LogsOptions{}); err != nil || strings.Count(logs.String(), "hello from pid 1") != 1 {
				t.Errorf("Logs after the second run = %q, %v; want the second run's lines only", logs.String(), err)
			}
			if _, err := r.Delete(ctx, id, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRuntime_CreateStart_Logs(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	r := newRuntime(t)
	tests := []struct {
		name     string
		args     []string
		code     int
		messages string
		streams  []string // the stream of each CRI line
		tags     []string
	}{
		{"exit 0", []string{"exit", "0"}, 0, "hello from pid 1 on ID\na line on stderr\n", []string{"stdout", "stderr"}, []string{"F", "F"}},
		{"exit 42", []string{"exit", "42"}, 42, "hello from pid 1 on ID\na line on stderr\n", []string{"stdout", "stderr"}, []string{"F", "F"}},
		{"partial lines", []string{"partial"}, 0, strings.Repeat("x", 20000) + "\nno newline at the end", []string{"stdout", "stdout", "stdout"}, []string{"P", "F", "P"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := containerID(t, r)
			c, err := r.Create(ctx, id, bundle(t, id, tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.State(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != "created" || st.Pid != c.Pid || st.ExecFifo == "" {
				t.Errorf("after create: status %s pid %d fifo %q, want created, pid %d, a fifo", st.Status, st.Pid, st.ExecFifo, c.Pid)
			}
			if _, err := os.Stat(c.ExecFifo); err != nil {
				t.Errorf("exec fifo: %v", err)
			}
			checkLimits(t, c.Cgroup)
			if _, err := r.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			ex, err := r.Wait(wctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ex.Code != tt.code || ex.Pid != c.Pid {
				t.Errorf("exit = %+v, want code %d pid %d", ex, tt.code, c.Pid)
			}
			raw, err := os.ReadFile(c.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			if len(lines) != len(tt.streams) {
				t.Fatalf("log has %d lines, want %d:\n%.300s", len(lines), len(tt.streams), raw)
			}
			// stdout and stderr are two pipes: the order within a stream is
			// kept, the order between them is whatever the shim read first.
			got := map[string][]string{}
			for _, l := range lines {
				ll, err := runc.ParseLogLine(l)
				if err != nil {
					t.Fatal(err)
				}
				if time.Since(ll.Time) > time.Minute {
					t.Errorf("line %.80q: time is not recent", l)
				}
				got[ll.Stream] = append(got[ll.Stream], map[bool]string{true: "P", false: "F"}[ll.Partial])
			}
			want := map[string][]string{}
			for i, s := range tt.streams {
				want[s] = append(want[s], tt.tags[i])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("tags per stream = %v, want %v\n%.300s", got, want, raw)
			}
			var out bytes.Buffer
			if err := r.Logs(ctx, id, &out, runc.LogsOptions{}); err != nil {
				t.Fatal(err)
			}
			wantMsgs := strings.ReplaceAll(tt.messages, "ID", id)
			if len(want) > 1 { // compare the lines in any order
				a, b := strings.Split(out.String(), "\n"), strings.Split(wantMsgs, "\n")
				slices.Sort(a)
				slices.Sort(b)
				if !slices.Equal(a, b) {
					t.Errorf("logs = %q, want the lines of %q", out.String(), wantMsgs)
				}
			} else if out.String() != wantMsgs {
				t.Errorf("logs = %.100q, want %.100q", out.String(), wantMsgs)
			}
			st, err = r.State(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != "stopped" || st.Exit == nil || st.Exit.Code != tt.code {
				t.Errorf("state after exit: %s, exit %+v; want stopped, code %d", st.Status, st.Exit, tt.code)
			}
			if _, err := r.Delete(ctx, id, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRuntime_Lifecycle(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	r := newRuntime(t)
	id := containerID(t, r)
	c, err := r.Create(ctx, id, bundle(t, id, "sleep"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}

	// logs -f follows until the container exits
	followed := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		err := r.Logs(ctx, id, &out, runc.LogsOptions{Follow: true})
		if err != nil {
			out.WriteString("ERROR: " + err.Error())
		}
		followed <- out.String()
	}()

	st, err := r.State(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "running" || st.Pid != c.Pid || st.Exit != nil {
		t.Errorf("state = %s pid %d exit %+v; want running pid %d", st.Status, st.Pid, st.Exit, c.Pid)
	}
	checkLimits(t, st.Cgroup)
	if st.Cgroup != nil && st.Cgroup.Path != "/podlab/"+id {
		t.Errorf("cgroup path %q, want /podlab/%s", st.Cgroup.Path, id)
	}

	var out bytes.Buffer
	code, err := r.Exec(ctx, id, []string{"/app", "exit", "5"}, runc.ExecOptions{IO: runc.IO{Stdout: &out, Stderr: &out}})
	if err != nil {
		t.Fatal(err)
	}
	if code != 5 || !strings.Contains(out.String(), "on "+id) {
		t.Errorf("exec: code %d, output %q; want 5 and the container's hostname", code, out.String())
	}

	procs, err := r.Ps(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].Pid != c.Pid || procs[0].Command != "/app sleep" {
		t.Errorf("ps = %+v, want one process, pid %d, /app sleep", procs, c.Pid)
	}

	if _, err := r.Delete(ctx, id, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("deleting a running container without force: %v, want an error hinting --force", err)
	}

	if err := r.Kill(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex, err := r.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Code != 7 {
		t.Errorf("exit code after SIGTERM = %d, want 7 (the app's own)", ex.Code)
	}
	select {
	case got := <-followed:
		if got != "ready\nterminating\n" {
			t.Errorf("logs -f = %q, want %q", got, "ready\nterminating\n")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("logs -f did not stop after the container exited")
	}

	if len(cgroupDirs(t, id)) == 0 {
		t.Fatalf("no cgroup directories before delete")
	}
	d, err := r.Delete(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{r.StateFile(id), filepath.Dir(r.StateFile(id)), r.ContainerDir(id)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there after delete", p)
		}
	}
	if dirs := cgroupDirs(t, id); len(dirs) != 0 {
		t.Errorf("cgroups left after delete: %q (removed %q, %v)", dirs, d.Cgroups, d.CgroupErr)
	}
	if _, err := r.State(ctx, id); !errors.Is(err, runc.ErrContainerNotFound) {
		t.Errorf("state after delete: %v, want ErrContainerNotFound", err)
	}
}

func TestRuntime_Delete_Force(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	r := newRuntime(t)
	id := containerID(t, r)
	if _, err := r.Create(ctx, id, bundle(t, id, "sleep")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	shimPid := 0
	if st, err := r.State(ctx, id); err == nil {
		shimPid = st.ShimPid
	}
	if shimPid == 0 {
		t.Errorf("no shim pid")
	}
	if _, err := r.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.ContainerDir(id)); !os.IsNotExist(err) {
		t.Errorf("%s still there", r.ContainerDir(id))
	}
	if dirs := cgroupDirs(t, id); len(dirs) != 0 {
		t.Errorf("cgroups left after delete --force: %q", dirs)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", shimPid)); err == nil && shimPid > 0 && bytes.Contains(b, []byte("runc.test")) {
		t.Errorf("shim %d still running after delete", shimPid)
	}
}

func TestRuntime_BadInputs(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t)
	empty := t.TempDir()
	missingRuntime := *r
	missingRuntime.Binary = "/nonexistent/bin/runc"
	tests := []struct {
		name string
		root bool // needs root to set up
		do   func(t *testing.T) error
		want error
		text []string // in the message
	}{
		{"state of unknown id", false, func(*testing.T) error { _, err := r.State(ctx, "no-such-container"); return err },
			runc.ErrContainerNotFound, []string{"no-such-container", "podlab runc create"}},
		{"kill unknown id", false, func(*testing.T) error { return r.Kill(ctx, "no-such-container", "") }, runc.ErrContainerNotFound, nil},
		{"delete unknown id", false, func(*testing.T) error { _, err := r.Delete(ctx, "no-such-container", true); return err }, runc.ErrContainerNotFound, nil},
		{"logs of unknown id", false, func(*testing.T) error {
			return r.Logs(ctx, "no-such-container", &bytes.Buffer{}, runc.LogsOptions{})
		}, runc.ErrContainerNotFound, nil},
		{"exec in unknown id", false, func(*testing.T) error {
			_, err := r.Exec(ctx, "no-such-container", []string{"/app"}, runc.ExecOptions{})
			return err
		}, runc.ErrContainerNotFound, nil},
		{"invalid id", false, func(*testing.T) error { _, err := r.Create(ctx, "../escape", empty); return err }, runc.ErrInvalidID, []string{"../escape"}},
		{"missing bundle", false, func(*testing.T) error { _, err := r.Create(ctx, "x1", filepath.Join(empty, "nope")); return err },
			runc.ErrNoBundle, []string{"nope", "podlab unpack"}},
		{"no bundle given", false, func(*testing.T) error { _, err := r.Run(ctx, "x1", "", runc.IO{}); return err }, runc.ErrNoBundle, []string{"--bundle"}},
		{"bundle without config.json", false, func(*testing.T) error { _, err := r.Create(ctx, "x1", empty); return err },
			runc.ErrNoConfig, []string{"config.json", "podlab spec"}},
		{"runtime binary missing", false, func(*testing.T) error { _, err := missingRuntime.Create(ctx, "x1", empty); return err },
			runc.ErrRuntimeNotFound, []string{"/nonexistent/bin/runc", "make deps", "--runtime"}},
		{"runtime binary missing, foreground", false, func(*testing.T) error { _, err := missingRuntime.Run(ctx, "x1", empty, runc.IO{}); return err },
			runc.ErrRuntimeNotFound, []string{"/nonexistent/bin/runc"}},
		{"duplicate id", true, func(t *testing.T) error {
			id := containerID(t, r)
			b := bundle(t, id, "sleep")
			if _, err := r.Create(ctx, id, b); err != nil {
				t.Fatal(err)
			}
			_, err := r.Create(ctx, id, b)
			if _, err := r.Delete(ctx, id, true); err != nil {
				t.Error(err)
			}
			return err
		}, runc.ErrContainerExists, []string{"podlab runc delete"}},
		{"config runc refuses", true, func(t *testing.T) error {
			id := containerID(t, r)
			b := bundle(t, id, "exit", "0")
			if err := os.Remove(filepath.Join(b, "rootfs", "app")); err != nil {
				t.Fatal(err)
			}
			_, err := r.Create(ctx, id, b)
			if _, serr := os.Stat(r.ContainerDir(id)); !os.IsNotExist(serr) {
				t.Errorf("a failed create left %s", r.ContainerDir(id))
			}
			return err
		}, nil, []string{"/app"}},
		{"config runc refuses, foreground", true, func(t *testing.T) error {
			id := containerID(t, r)
			b := bundle(t, id, "exit", "0")
			if err := os.Remove(filepath.Join(b, "rootfs", "app")); err != nil {
				t.Fatal(err)
			}
			_, err := r.Run(ctx, id, b, runc.IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
			if _, serr := os.Stat(r.ContainerDir(id)); !os.IsNotExist(serr) {
				t.Errorf("a failed run left %s", r.ContainerDir(id))
			}
			return err
		}, nil, []string{"running container", "/app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				testenv.RequireRoot(t)
			}
			err := tt.do(t)
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %q is not %q", err, tt.want)
			}
			for _, s := range tt.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			t.Logf("error: %v", err)
		})
	}
}

func TestFindRuntime(t *testing.T) {
	if got, err := runc.FindRuntime("/opt/crun"); err != nil || got != "/opt/crun" {
		t.Errorf("FindRuntime(explicit) = %q, %v; want /opt/crun", got, err)
	}
	t.Setenv("PODLAB_RUNTIME", "/from/env/runc")
	if got, err := runc.FindRuntime(""); err != nil || got != "/from/env/runc" {
		t.Errorf("FindRuntime with $PODLAB_RUNTIME = %q, %v; want /from/env/runc", got, err)
	}
	t.Setenv("PODLAB_RUNTIME", "")
	t.Setenv("PATH", t.TempDir())
	// The test binary has no runc beside it and PATH has none.
	if got, err := runc.FindRuntime(""); !errors.Is(err, runc.ErrRuntimeNotFound) || !strings.Contains(err.Error(), "make deps") {
		t.Errorf("FindRuntime with no runc anywhere = %q, %v; want ErrRuntimeNotFound hinting make deps", got, err)
	}
}

// BenchmarkRuntime_Run runs a trivial container in the foreground through
// Runtime.Run; compare with BenchmarkRuncRun, bare `runc run` (target: at
// most 1.3x).
func BenchmarkRuntime_Run(b *testing.B) {
	testenv.RequireRoot(b)
	r := &runc.Runtime{Binary: testenv.Runc(b), StateDir: b.TempDir()}
	dir := bundle(b, "bench", "exit", "0")
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("podlab-bench-%d-%d", os.Getpid(), i)
		ex, err := r.Run(ctx, id, dir, runc.IO{Stdout: io.Discard, Stderr: io.Discard})
		if err != nil || ex.Code != 0 {
			b.Fatalf("run: %v, %+v", err, ex)
		}
		b.StopTimer()
		if _, err := r.Delete(ctx, id, true); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRuncRun is bare `runc run` of the same container.
func BenchmarkRuncRun(b *testing.B) {
	testenv.RequireRoot(b)
	bin, root := testenv.Runc(b), b.TempDir()
	dir := bundle(b, "bench", "exit", "0")
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("podlab-bench-bare-%d-%d", os.Getpid(), i)
		if out, err := exec.Command(bin, "--root", root, "run", "--bundle", dir, id).CombinedOutput(); err != nil {
			b.Fatalf("runc run: %v\n%s", err, out)
		}
	}
	b.Cleanup(func() {
		if ms, err := runc.HostCgroupMounts(); err == nil {
			_, _ = runc.RemoveCgroupDirs(ms, "/podlab/bench")
		}
	})
}

// TestRuntime_ExecConsoleSize: `kubectl exec -it` brings the client's
// terminal size. Given as the process's consoleSize, runc's init sizes the
// container's console before the command runs; without it, nothing sizes
// the console and the command sees 0 0 (a resize arriving later, as
// SIGWINCH, raced a quick `stty size` on a loaded machine).
func TestRuntime_ExecConsoleSize(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	r := newRuntime(t)
	id := containerID(t, r)
	if _, err := r.Create(ctx, id, bundle(t, id, "sleep")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size *specs.Box
		want string
	}{
		{"no size given", nil, "0 0"},
		{"consoleSize 40x100", &specs.Box{Height: 40, Width: 100}, "40 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, follower := openPty(t)
			read := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(leader) // EIO once no process holds the follower
				read <- string(b)
			}()
			code, err := r.Exec(ctx, id, []string{"/app", "size"}, runc.ExecOptions{Tty: true, Console: follower, ConsoleSize: tc.size})
			follower.Close()
			if err != nil || code != 0 {
				t.Fatalf("exec: code %d, %v", code, err)
			}
			select {
			case got := <-read:
				if strings.TrimSpace(got) != tc.want {
					t.Errorf("the command saw a terminal of %q, want %q", got, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the terminal's output did not end")
			}
			if left, _ := filepath.Glob(filepath.Join(r.ContainerDir(id), "exec-*.json")); len(left) != 0 {
				t.Errorf("process files left: %q", left)
			}
		})
	}
	if err := r.Kill(ctx, id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
}

// openPty opens a pseudo-terminal: the leader end the test reads, the
// follower end runc runs on.
func openPty(t *testing.T) (leader, follower *os.File) {
	t.Helper()
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leader.Close() })
	if err := unix.IoctlSetPointerInt(int(leader.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(leader.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	follower, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { follower.Close() })
	return leader, follower
}
