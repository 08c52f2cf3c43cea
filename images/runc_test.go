package images

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/podlab/podlab/internal/testenv"
)

// The tests here run the demo images for real, with runc, to prove that the
// recipes make images that work: nothing in them is checked by reading alone.

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runcBundle unpacks img (whiteouts applied) into a new bundle's rootfs and
// writes its config.json: `runc spec`'s, with edit applied. It returns the
// bundle directory.
func runcBundle(t *testing.T, runc string, img v1.Image, edit func(*specs.Spec)) string {
	t.Helper()
	tarBin := testenv.LookPath(t, "tar")
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	cmd := exec.Command(tarBin, "-x", "-p", "-f", "-", "-C", rootfs)
	cmd.Stdin = rc
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("unpacking: %v\n%s", err, out)
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	var s specs.Spec
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Terminal = false
	s.Linux.CgroupsPath = fmt.Sprintf("/podlab-images-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	edit(&s)
	if b, err = json.MarshalIndent(&s, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// runc delete leaves empty parent cgroups; ours is a direct child of each root.
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", strings.TrimPrefix(s.Linux.CgroupsPath, "/")))
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(s.Linux.CgroupsPath, "/")))
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	return bundle
}

func addCaps(p *specs.Process, caps ...string) {
	c := p.Capabilities
	c.Bounding = append(c.Bounding, caps...)
	c.Effective = append(c.Effective, caps...)
	c.Permitted = append(c.Permitted, caps...)
}

func TestHello_RunsUnderRunc(t *testing.T) {
	testenv.RequireRoot(t)
	runc := testenv.Runc(t)
	img := helloImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bundle := runcBundle(t, runc, img, func(s *specs.Spec) {
		s.Hostname = "podlab-hello"
		s.Process.Args = append(cf.Config.Entrypoint, "--once")
		s.Process.Env = cf.Config.Env
		s.Process.Cwd = cf.Config.WorkingDir
		s.Process.User = specs.User{UID: HelloUID, GID: HelloUID}
		limit, pids := int64(64<<20), int64(32)
		s.Linux.Resources.Memory = &specs.LinuxMemory{Limit: &limit}
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: &pids}
	})
	id := fmt.Sprintf("podlab-hello-test-%d", os.Getpid())
	root := t.TempDir()
	cmd := exec.Command(runc, "--root", root, "run", "--bundle", bundle, id)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	exec.Command(runc, "--root", root, "delete", "-f", id).Run() //nolint:errcheck // already gone when run exited
	if err != nil {
		t.Fatalf("runc run: %v\n%s", err, out.Bytes())
	}
	for _, want := range []string{
		"Hello from podlab/hello!\n",
		"  hostname  podlab-hello\n",
		"  pid       1\n",
		"  user      app (uid 10001), group app (gid 10001)\n",
		"  memory    64.0 MiB",
		"  pids      32 ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestNginx_ServesHTTPUnderRunc(t *testing.T) {
	testenv.RequireRoot(t)
	runc := testenv.Runc(t)
	img := nginxImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bundle := runcBundle(t, runc, img, func(s *specs.Spec) {
		s.Hostname = "podlab-nginx"
		s.Process.Args = append(cf.Config.Entrypoint, cf.Config.Cmd...)
		s.Process.Env = cf.Config.Env
		s.Root.Readonly = false // nginx writes /run/nginx.pid and /var/lib/nginx/body
		// The master chowns /var/lib/nginx/body, then its workers become www-data.
		addCaps(s.Process, "CAP_CHOWN", "CAP_SETUID", "CAP_SETGID")
	})

	id := fmt.Sprintf("podlab-nginx-test-%d", os.Getpid())
	root := t.TempDir()
	logFile := filepath.Join(bundle, "stdout.log")
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	pidFile := filepath.Join(bundle, "pid")
	// Detached, with files for stdio: with pipes, runc run -d would wait for the container.
	cmd := exec.Command(runc, "--root", root, "run", "--detach", "--bundle", bundle, "--pid-file", pidFile, id)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logFile)
		t.Fatalf("runc run: %v\n%s", err, b)
	}
	t.Cleanup(func() {
		exec.Command(runc, "--root", root, "kill", id, "KILL").Run() //nolint:errcheck
		exec.Command(runc, "--root", root, "delete", "-f", id).Run() //nolint:errcheck
	})
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}

	resp, body, err := getInNetns(pid, "127.0.0.1:80")
	if err != nil {
		b, _ := os.ReadFile(logFile)
		t.Fatalf("GET http://127.0.0.1:80/ inside the container: %v\ncontainer output:\n%s", err, b)
	}
	if resp.StatusCode != 200 || !strings.Contains(body, "Welcome to nginx, run by podlab!") {
		t.Errorf("GET / = %s\n%s", resp.Status, body)
	}
	if srv := resp.Header.Get("Server"); !strings.HasPrefix(srv, "nginx/") {
		t.Errorf("Server: %q, want nginx/...", srv)
	}
	// The access log is a link to /dev/stdout: the request shows in the container's output.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if strings.Contains(string(b), `"GET / HTTP/1.0" 200`) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the access log line is not in the container's stdout:\n%s", b)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getInNetns enters the network namespace of pid on a thread of its own,
// brings its loopback up (a new network namespace starts with lo down) and
// sends GET / to addr there, retrying while the server starts. The thread
// stays locked, so it ends with the goroutine and never serves other code.
func getInNetns(pid int, addr string) (*http.Response, string, error) {
	type result struct {
		resp *http.Response
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		r := func() result {
			ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
			if err != nil {
				return result{err: err}
			}
			defer ns.Close()
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				return result{err: fmt.Errorf("setns: %w", err)}
			}
			if err := testenv.LoopbackUp(); err != nil {
				return result{err: fmt.Errorf("bringing lo up: %w", err)}
			}
			var lastErr error
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				// net.Dial makes its socket on this goroutine's thread, in the namespace.
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					lastErr = err
					continue
				}
				conn.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
				fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					conn.Close()
					return result{err: err}
				}
				var body bytes.Buffer
				_, err = body.ReadFrom(resp.Body)
				conn.Close()
				return result{resp: resp, body: body.String(), err: err}
			}
			return result{err: lastErr}
		}()
		done <- r
	}()
	r := <-done
	return r.resp, r.body, r.err
}
