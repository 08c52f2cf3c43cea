package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/images"
	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

// kubeletApp runs podlab with the kubelet and logs commands in it (whether
// or not app.go lists them yet).
func kubeletApp(t *testing.T, state string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	// podstage stands for the --pod flag of pull, unpack, spec and runc.
	podstage := &cli.Command{
		Name:  "podstage",
		Flags: []cli.Flag{&cli.StringFlag{Name: "pod"}, &cli.StringFlag{Name: "stage"}, &cli.StringFlag{Name: "container", Aliases: []string{"c"}}, namespaceFlag()},
		Action: func(c *cli.Context) error {
			return runPodStage(c, kubelet.StageName(c.String("stage")))
		},
	}
	for _, cmd := range []*cli.Command{kubeletCommand, logsCommand, podstage} {
		if app.Command(cmd.Name) == nil {
			app.Commands = append(app.Commands, cmd)
		}
	}
	err := app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", state}, args...)))
	return out.String() + errOut.String(), err
}

func mustKubeletApp(t *testing.T, state string, args ...string) string {
	t.Helper()
	out, err := kubeletApp(t, state, args...)
	if err != nil {
		t.Fatalf("podlab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestKubeletCommand walks a pod through podlab's kubelet as a learner
// does: --next says what comes next and how, one stage by hand, --once
// does the rest, podlab logs shows hello's greeting, and after podlab
// delete another --once removes everything.
func TestKubeletCommand(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	tmp := t.TempDir()
	// The kubelet's shim is this test binary, run as podlab (see TestMain).
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1")
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))

	helloBin := filepath.Join(tmp, "hello")
	if err := images.BuildHello(ctx, testenv.RepoRoot(), helloBin); err != nil {
		t.Fatalf("building the hello program: %v", err)
	}
	img, err := images.Hello(ctx, images.HelloOptions{Binary: helloBin})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/" + images.HelloRef
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}

	state := filepath.Join(tmp, "state")
	mustPodlab(t, state, "init")
	mustPodlab(t, state, "run", "web", "--image", ref)
	api, err := apiserver.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := api.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}); err != nil {
		t.Fatal(err)
	}
	api.Close()
	t.Cleanup(func() {
		podlab(t, state, "delete", "pod", "web", "--force")
		kubeletApp(t, state, "kubelet", "--once")
	})

	out := mustKubeletApp(t, state, "kubelet", "--next")
	for _, want := range []string{
		"pod default/web (uid ", "phase Pending",
		"next: sandbox (RunPodSandbox): the pod has no sandbox yet",
		"by hand: podlab kubelet --node node-1 --pod web --stage sandbox",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --next does not say %q:\n%s", want, out)
		}
	}
	out = mustKubeletApp(t, state, "kubelet", "--pod", "web", "--stage", "sandbox")
	nodeDir := kubelet.NodeDir(state, "node-1")
	for _, want := range []string{
		"pod default/web: RunPodSandbox: namespaces unshared and pinned, hostname \"web\"",
		filepath.Join(nodeDir, "netns") + "/",
		"next: pull (PullImage) for container web",
		"by hand: podlab pull --pod web",
		"(the same: podlab kubelet --node node-1 --pod web --stage pull)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --stage sandbox does not say %q:\n%s", want, out)
		}
	}

	// What `podlab pull --pod web` will do: the stage, on the pod's node.
	out = mustKubeletApp(t, state, "podstage", "--pod", "web", "--stage", "pull")
	for _, want := range []string{
		"pod default/web, container web: PullImage " + ref + " (imagePullPolicy IfNotPresent): pulled in ",
		"next: unpack (CreateContainer: prepare the rootfs) for container web",
		"by hand: podlab unpack --pod web",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the pull stage by hand does not say %q:\n%s", want, out)
		}
	}

	out = mustKubeletApp(t, state, "kubelet", "--once")
	t.Logf("podlab kubelet --once:\n%s", out)
	for _, want := range []string{
		"node node-1: registered Node (created): cpu ",
		"KubeletReady",
		"rootfs " + filepath.Join(nodeDir, "bundles"),
		"config.json " + filepath.Join(nodeDir, "bundles"),
		"runc create: container k8s_web_web_default_",
		"log       " + filepath.Join(nodeDir, "containers"),
		"StartContainer: container k8s_web_web_default_",
		"event Normal Started: Started container web",
		"status: Running",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --once does not say %q:\n%s", want, out)
		}
	}

	out = mustKubeletApp(t, state, "logs", "web")
	if !strings.Contains(out, "Hello from podlab/hello!") || !strings.Contains(out, "hostname  web") || strings.Contains(out, "stdout F") {
		t.Errorf("podlab logs web:\n%s", out)
	}
	if _, err := kubeletApp(t, state, "logs", "web", "--previous"); err == nil || !strings.Contains(err.Error(), "previous terminated container") {
		t.Errorf("logs --previous of a first run: %v", err)
	}

	out = mustKubeletApp(t, state, "kubelet", "--next")
	if !strings.Contains(out, "next: running for container web") {
		t.Errorf("kubelet --next of a running pod:\n%s", out)
	}

	mustPodlab(t, state, "delete", "pod", "web")
	out = mustKubeletApp(t, state, "kubelet", "--once")
	t.Logf("podlab kubelet --once, after the delete:\n%s", out)
	for _, want := range []string{
		"StopContainer: grace period",
		"web: SIGTERM, exited with code 0",
		"event Normal Killing: Stopping container web",
		"runc delete k8s_web_web_default_",
		"removed " + filepath.Join(nodeDir, "netns"),
		"deleted the pod from the API server (grace period 0)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --once after the delete does not say %q:\n%s", want, out)
		}
	}
	if _, _, err := podlab(t, state, "get", "pod", "web"); err == nil {
		t.Errorf("pod web is still there")
	}
	for _, d := range []string{"bundles", "netns", "ipcns", "utsns", "containers", "runc"} {
		ents, _ := os.ReadDir(filepath.Join(nodeDir, d))
		if len(ents) > 0 {
			t.Errorf("%s/%s is not empty: %v", nodeDir, d, ents)
		}
	}
}

// TestKubeletCommand_BadInputs: each fails with a clear error.
func TestKubeletCommand_BadInputs(t *testing.T) {
	state := t.TempDir()
	mustPodlab(t, state, "init")
	mustPodlab(t, state, "run", "web", "--image", "nginx")
	t.Setenv("PODLAB_RUNTIME", "/bin/true") // never run: every case fails before
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"stage without pod", []string{"kubelet", "--stage", "pull"}, "--pod and --stage go together"},
		{"unknown stage", []string{"kubelet", "--pod", "web", "--stage", "bake"}, `no stage "bake"`},
		{"unscheduled pod", []string{"kubelet", "--pod", "web", "--stage", "pull"}, "pod default/web is not scheduled yet"},
		{"missing pod", []string{"kubelet", "--pod", "nope", "--stage", "pull"}, "not found"},
		{"bad node name", []string{"kubelet", "--node", "../etc", "--once"}, "node name"},
		{"a stage of an unscheduled pod, by --pod", []string{"podstage", "--pod", "web", "--stage", "unpack"}, "pod web is not scheduled yet"},
		{"logs of nothing", []string{"logs"}, "logs needs one pod name"},
		{"logs of an unscheduled pod", []string{"logs", "web"}, "not scheduled to a node yet"},
		{"logs of a missing container", []string{"logs", "web", "-c", "db"}, "not scheduled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kubeletApp(t, state, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("podlab %s: %v, want an error containing %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
			}
		})
	}
}
