package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubectl_LogsAndExecThroughTheKubelet is kubectl logs and kubectl
// exec as on a cluster: real kubectl asks `podlab apiserver` for pods/log
// and pods/exec; the API server authorizes them, finds node-1's kubelet
// from its Node's status and proxies to the kubelet's own HTTPS API with
// its client certificate; the kubelet checks that certificate, asks the
// API server (a SubjectAccessReview, with its own kubeconfig) whether
// kube-apiserver-kubelet-client may use nodes/proxy, then reads the CRI
// log or runs runc exec in the container.
func TestKubectl_LogsAndExecThroughTheKubelet(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.Runc(t) // startComponent gives it to the kubelet
	kubectl := testenv.Kubectl(t)
	ref := shellRegistry(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	kport := freePort(t)
	_, kout := startComponent(t, state, "kubelet", "--node", "node-1", "--port", strconv.Itoa(kport))
	l := statedir.Layout{Dir: state}
	as := func(identity string, args ...string) (string, error) {
		return kubectlWith(kubectl, l.Kubeconfig(identity), args...)
	}
	// before the kubelet stops (cleanups run last first): its containers go
	t.Cleanup(func() {
		if out, err := as("admin", "delete", "pods", "--all", "--grace-period=1", "--timeout=60s"); err != nil {
			t.Errorf("deleting the pods: %v\n%s", err, out)
		}
	})
	admin := func(args ...string) string {
		t.Helper()
		out, err := as("admin", args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s\nkubelet:\n%s", strings.Join(args, " "), err, out, kout.String())
		}
		return out
	}

	// the kubelet publishes where its API listens
	waitFor(t, 30*time.Second, func() bool {
		out, _ := as("admin", "get", "node", "node-1", "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port} {.status.addresses[0].address}")
		return out == strconv.Itoa(kport)+" 127.0.0.1"
	}, "node-1 to publish its kubelet endpoint 127.0.0.1:"+strconv.Itoa(kport), kout)

	admin("run", "web", "--image="+ref, `--overrides={"spec":{"nodeName":"node-1"}}`, "--command", "--",
		"/bin/sh", "-c", "echo one; echo two; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo three; sleep 1000")
	admin("wait", "--for=condition=Ready", "pod/web", "--timeout=90s")

	tests := []struct {
		name     string
		identity string
		args     []string
		stdin    string
		want     string // the whole output, or with fails a fragment
		fails    bool
	}{
		{"logs", "admin", []string{"logs", "web"}, "", "one\ntwo\n", false},
		{"logs --tail=1", "admin", []string{"logs", "web", "--tail=1"}, "", "two\n", false},
		{"logs --limit-bytes", "admin", []string{"logs", "web", "--limit-bytes=5"}, "", "one\nt", false},
		{"the viewer may read logs (view has pods/log)", "viewer", []string{"logs", "web", "-c", "web"}, "", "one\ntwo\n", false},
		{"exec, no tty", "admin", []string{"exec", "web", "--", "cat", "/etc/hostname"}, "", "web\n", false},
		{"exec -i with stdin", "admin", []string{"exec", "-i", "web", "--", "cat"}, "hello through the kubelet\n", "hello through the kubelet\n", false},
		{"exec's exit code", "admin", []string{"exec", "web", "--", "/bin/sh", "-c", "exit 3"}, "", "command terminated with exit code 3", true},
		{"exec as the viewer", "viewer", []string{"exec", "web", "--", "cat", "/etc/hostname"}, "",
			// kubectl's words for an upgrade refused (WebSocket, then SPDY)
			`error: unable to upgrade connection: pods "web" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"`, true},
		// the scheduler may get pods, not their logs
		{"logs without pods/log", "kube-scheduler", []string{"logs", "web"}, "",
			`Error from server (Forbidden): pods "web" is forbidden: User "system:kube-scheduler" cannot get resource "pods/log" in API group "" in the namespace "default"`, true},
		// kubectl checks the container itself (it reads the pod first)
		{"logs of an unknown container", "admin", []string{"logs", "web", "-c", "nope"}, "",
			`error: container nope is not valid for pod web out of: web`, true},
		{"exec in an unknown container", "admin", []string{"exec", "web", "-c", "nope", "--", "cat", "/etc/hostname"}, "",
			`container nope is not valid for pod web`, true},
		{"logs of a missing pod", "admin", []string{"logs", "nope"}, "", `pods "nope" not found`, true},
		{"negative --tail is all", "admin", []string{"logs", "web", "--tail=-1"}, "", "one\ntwo\n", false},
		{"bad --since", "admin", []string{"logs", "web", "--since=-5s"}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(kubectl, append([]string{"--kubeconfig", l.Kubeconfig(tt.identity)}, tt.args...)...)
			cmd.Stdin = strings.NewReader(tt.stdin)
			b, err := cmd.CombinedOutput()
			out := string(b)
			if tt.fails != (err != nil) {
				t.Fatalf("kubectl %s as %s: error %v (want one: %v)\n%s\nkubelet:\n%s", strings.Join(tt.args, " "), tt.identity, err, tt.fails, out, kout.String())
			}
			if tt.fails && !strings.Contains(out, tt.want) || !tt.fails && out != tt.want {
				t.Errorf("kubectl %s as %s:\n%q\nwant %q", strings.Join(tt.args, " "), tt.identity, out, tt.want)
			}
		})
	}

	// podlab logs --timestamps prints what kubectl logs --timestamps does:
	// TIME TEXT, without the CRI log's stream and tag
	t.Run("podlab logs --timestamps as kubectl's", func(t *testing.T) {
		want := admin("logs", "web", "--timestamps")
		got := mustPodlab(t, state, "logs", "web", "--timestamps")
		if got != want {
			t.Errorf("podlab logs --timestamps:\n%s\nkubectl logs --timestamps:\n%s", got, want)
		}
		if strings.Contains(got, " stdout F ") {
			t.Errorf("podlab logs --timestamps prints the CRI stream and tag:\n%s", got)
		}
	})

	t.Run("logs -f follows a line written later", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", l.Kubeconfig("admin"), "logs", "-f", "web")
		pr, pw := io.Pipe()
		cmd.Stdout = pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		lines := make(chan string, 10)
		go func() {
			buf := make([]byte, 4096)
			var acc string
			for {
				n, err := pr.Read(buf)
				acc += string(buf[:n])
				for {
					i := strings.IndexByte(acc, '\n')
					if i < 0 {
						break
					}
					lines <- acc[:i]
					acc = acc[i+1:]
				}
				if err != nil {
					close(lines)
					return
				}
			}
		}()
		for _, want := range []string{"one", "two"} {
			if got := <-lines; got != want {
				t.Fatalf("logs -f: %q, want %q", got, want)
			}
		}
		admin("exec", "web", "--", "/bin/sh", "-c", ": > /tmp/go")
		select {
		case got := <-lines:
			if got != "three" {
				t.Errorf("logs -f, the line written later: %q, want three", got)
			}
		case <-ctx.Done():
			t.Fatal("logs -f did not show the line written later")
		}
	})

	t.Run("exec -it through a terminal", func(t *testing.T) {
		// script gives kubectl a pseudo-terminal, as a learner's shell is
		cmd := exec.Command("script", "-qec", kubectl+" --kubeconfig "+l.Kubeconfig("admin")+` exec -it web -- /bin/sh -c "test -t 0 && test -t 1 && echo on-a-tty"`, "/dev/null")
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "on-a-tty") {
			t.Errorf("kubectl exec -it: %v\n%q", err, out)
		}
	})

	t.Run("exec -it gets the terminal's size", func(t *testing.T) {
		// kubectl sends its terminal's size; the kubelet sizes the
		// pseudo-terminal it holds before runc starts on it
		cmd := exec.Command("script", "-qec", "stty rows 40 cols 100; "+kubectl+" --kubeconfig "+l.Kubeconfig("admin")+" exec -it web -- stty size", "/dev/null")
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "40 100") {
			t.Errorf("kubectl exec -it web -- stty size: %v\n%q, want 40 100", err, out)
		}
	})

	// The kubelet's own port: a caller without a certificate is 401; one
	// with the developer's certificate is authenticated, then refused by
	// the API server's answer to the kubelet's SubjectAccessReview (403).
	t.Run("the kubelet API refuses", func(t *testing.T) {
		ca, err := os.ReadFile(l.CACert())
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		dev, err := tls.LoadX509KeyPair(l.PKICert("developer"), l.PKIKey("developer"))
		if err != nil {
			t.Fatal(err)
		}
		url := "https://127.0.0.1:" + strconv.Itoa(kport) + "/containerLogs/default/web/web"
		for _, tc := range []struct {
			name  string
			certs []tls.Certificate
			code  int
			body  string
		}{
			{"no certificate", nil, http.StatusUnauthorized, "Unauthorized"},
			{"the developer", []tls.Certificate{dev}, http.StatusForbidden, "Forbidden (user=developer, verb=get, resource=nodes, subresource(s)=[proxy])\n"},
		} {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: tc.certs}}}
			resp, err := c.Get(url)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || string(body) != tc.body {
				t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.code, tc.body)
			}
		}
	})

	// a pod without a node: kube-apiserver's 400
	admin("run", "pending", "--image="+ref)
	if out, err := as("admin", "exec", "pending", "--", "cat", "/etc/hostname"); err == nil || !strings.Contains(out, "pod pending does not have a host assigned") {
		t.Errorf("exec in an unscheduled pod: %v\n%s", err, out)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool, what string, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s\n%s", d, what, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// shellRegistry is helloRegistry's image with this machine's /bin/sh
// (dash) and /bin/cat and the C library they need: an image to exec a
// shell in, built in-process, served by an in-process registry.
func shellRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return pushShell(t, strings.TrimPrefix(srv.URL, "http://"))
}

// pushShell pushes the shell image to the registry at host (host:port)
// as podlab/shell:1.0, and returns its reference.
func pushShell(t *testing.T, host string) string {
	t.Helper()
	img := shellImage(t)
	ref := host + "/podlab/shell:1.0"
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// shellImage is the hello image with a shell, cat, sleep and stty.
func shellImage(t *testing.T) v1.Image {

	t.Helper()
	ctx := context.Background()
	helloBin := filepath.Join(t.TempDir(), "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), helloBin); err != nil {
		t.Fatalf("building the hello program: %v", err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: helloBin})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin", "lib", "lib/x86_64-linux-gnu", "lib64", "tmp"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode}); err != nil {
			t.Fatal(err)
		}
	}
	for to, from := range map[string]string{
		"bin/sh": "/bin/dash", "bin/cat": "/bin/cat", "bin/sleep": "/bin/sleep", "bin/stty": "/bin/stty",
		"lib/x86_64-linux-gnu/libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
		"lib64/ld-linux-x86-64.so.2":     "/lib64/ld-linux-x86-64.so.2",
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			testenv.Missing(t, "%s for the test's shell image: %v", from, err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: to, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		t.Fatal(err)
	}
	return img
}
