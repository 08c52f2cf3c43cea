package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
)

// TestEndToEnd walks the runtime half of the chain with the real podlab
// binary, as a learner does: pull podlab/hello from an in-process registry,
// unpack it, write its spec with limits, and run it with runc.
func TestEndToEnd(t *testing.T) {
	testenv.RequireRoot(t)
	runc := testenv.Runc(t)
	ctx := context.Background()
	tmp := t.TempDir()

	podlab := filepath.Join(tmp, "podlab")
	build := exec.Command("go", "build", "-o", podlab, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building podlab: %v\n%s", err, out)
	}
	helloBin := filepath.Join(tmp, "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), helloBin); err != nil {
		t.Fatalf("building the hello program: %v", err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: helloBin})
	if err != nil {
		t.Fatalf("building the hello image: %v", err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/" + images.HelloRef
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("pushing hello: %v", err)
	}

	state := testenv.StateDir(t)
	bundle := filepath.Join(state, "bundles", "hello")
	id := fmt.Sprintf("e2e-%d", os.Getpid())
	env := append(os.Environ(), "PODLAB_STATE_DIR="+state, "PODLAB_RUNTIME="+runc)
	podlabRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(podlab, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("podlab %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	t.Cleanup(func() {
		c := exec.Command(podlab, "runc", "delete", "--force", id)
		c.Env = env
		c.Run()
	})

	// Step 9: pull.
	out := podlabRun("pull", ref)
	if !strings.Contains(out, "sha256:") {
		t.Errorf("pull printed no digests:\n%s", out)
	}
	// Step 10: unpack; the last layer's whiteouts removed what earlier layers wrote.
	podlabRun("unpack", ref, "--bundle", bundle)
	rootfs := filepath.Join(bundle, "rootfs")
	for _, gone := range []string{"etc/motd", "srv/www/old.html"} {
		if _, err := os.Lstat(filepath.Join(rootfs, gone)); !os.IsNotExist(err) {
			t.Errorf("%s should have been removed by a whiteout, Lstat: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(rootfs, "srv/www/index.html")); err != nil {
		t.Errorf("the opaque directory's new index.html is missing: %v", err)
	}
	if fi, err := os.Stat(bundle); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("bundle mode: %v, %v; want 0700", fi.Mode().Perm(), err)
	}

	// Step 11: the spec, with Kubernetes-style args and limits.
	podlabRun("spec", "--bundle", bundle, "--image", ref, "--id", id, "--hostname", "e2e-host",
		"--memory", "48Mi", "--pids", "24", "--args", "--once")
	if _, err := os.Stat(filepath.Join(bundle, "config.json")); err != nil {
		t.Fatalf("no config.json: %v", err)
	}

	// Steps 12-13: runc runs it in the foreground; the app sees what the spec said.
	out = podlabRun("runc", "run", id, "--bundle", bundle)
	for _, want := range []string{
		"Hello from podlab/hello!",
		"hostname  e2e-host",
		"pid       1",
		"uid " + strconv.Itoa(images.HelloUID),
		"48.0 MiB",
		"pids      24",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the container's output lacks %q:\n%s", want, out)
		}
	}

	// runc run removed the container when it ended, as runc does: the same
	// ID runs again, and its log stays readable.
	out = podlabRun("runc", "run", id, "--bundle", bundle)
	if !strings.Contains(out, "Hello from podlab/hello!") {
		t.Errorf("a second run of %s did not run:\n%s", id, out)
	}
	if out = podlabRun("runc", "logs", id); !strings.Contains(out, "Hello from podlab/hello!") {
		t.Errorf("podlab runc logs after a foreground run:\n%s", out)
	}

	// Detached, serving: the limits are in the container's cgroup files.
	// A container that ran keeps its exit.json until deleted, as a pod keeps
	// its terminated container's status: the detached one gets its own id.
	detached := id + "-d"
	t.Cleanup(func() {
		c := exec.Command(podlab, "runc", "delete", "--force", detached)
		c.Env = env
		c.Run()
	})
	podlabRun("spec", "--bundle", bundle, "--image", ref, "--id", detached, "--memory", "48Mi", "--pids", "24")
	podlabRun("runc", "run", "--detach", detached, "--bundle", bundle)
	pid := waitPid(t, filepath.Join(state, "runc", detached, "state.json"))
	memory, pids := cgroupLimits(t, pid)
	if memory != strconv.Itoa(48<<20) {
		t.Errorf("memory limit in the container's cgroup file = %q, want %d", memory, 48<<20)
	}
	if pids != "24" {
		t.Errorf("pids limit in the container's cgroup file = %q, want 24", pids)
	}
	out = podlabRun("runc", "state", detached)
	if !strings.Contains(out, "running") {
		t.Errorf("runc state does not say running:\n%s", out)
	}
	for _, c := range []string{id, detached} {
		podlabRun("runc", "delete", "--force", c)
		for _, left := range []string{filepath.Join(state, "runc", c), filepath.Join(state, "containers", c)} {
			if _, err := os.Stat(left); !os.IsNotExist(err) {
				t.Errorf("%s left behind after delete: %v", left, err)
			}
		}
	}
}

// waitPid reads the container's init pid from runc's state.json.
func waitPid(t *testing.T, stateFile string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(stateFile)
		if err == nil {
			// "init_process_pid":1234,
			if _, after, ok := bytes.Cut(data, []byte(`"init_process_pid":`)); ok {
				end := bytes.IndexAny(after, ",}")
				if pid, err := strconv.Atoi(string(after[:end])); err == nil && pid > 0 {
					return pid
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", stateFile)
	return 0
}

// cgroupLimits reads the memory and pids limits straight from the cgroup
// files of a process, on cgroup v1, v2 or hybrid.
func cgroupLimits(t *testing.T, pid int) (memory, pids string) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(data))
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case ctrls == "": // cgroup v2: the unified hierarchy
			for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				if v := read(filepath.Join(root, path, "memory.max")); v != "" && memory == "" {
					memory = v
				}
				if v := read(filepath.Join(root, path, "pids.max")); v != "" && pids == "" {
					pids = v
				}
			}
		case strings.Contains(ctrls, "memory"):
			if v := read(filepath.Join("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes")); v != "" {
				memory = v
			}
		case strings.Contains(ctrls, "pids"):
			if v := read(filepath.Join("/sys/fs/cgroup/pids", path, "pids.max")); v != "" {
				pids = v
			}
		}
	}
	return memory, pids
}
