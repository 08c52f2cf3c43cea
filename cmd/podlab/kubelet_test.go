package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/internal/cliargs"
	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/statedir"
)

// kubeletApp runs podlab with the kubelet and logs commands in it (whether
// or not app.go lists them yet).
func kubeletApp(t *testing.T, state string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	for _, cmd := range []*cli.Command{kubeletCommand, logsCommand} {
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
	// The kubelet's shim is this test binary, run as podlab (see TestMain).
	t.Setenv("PODLAB_TEST_RUN_MAIN", "1")
	t.Setenv("PODLAB_RUNTIME", testenv.Runc(t))

	ref := helloRegistry(t)

	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	// web is walked by hand, auto is left to the kubelet: they must end
	// the same. Both have a container called app.
	for _, name := range []string{"web", "auto"} {
		createBoundPod(t, state, name, "node-1", ref)
	}
	t.Cleanup(func() {
		podlab(t, state, "delete", "pod", "web", "--force")
		podlab(t, state, "delete", "pod", "auto", "--force")
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
	nodeDir := statedir.Layout{Dir: state}.Node("node-1").Dir
	for _, want := range []string{
		"pod default/web: RunPodSandbox: sandbox ",
		`hostname "web"`,
		"    net  " + filepath.Join(nodeDir, "netns") + "/",
		"the runtime's record " + filepath.Join(nodeDir, "cri") + "/",
		"next: pull (PullImage) for container app",
		"by hand: podlab pull --pod web",
		"(the same: podlab kubelet --node node-1 --pod web --stage pull)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --stage sandbox does not say %q:\n%s", want, out)
		}
	}

	// unpack and spec are no kubelet stages: the runtime does them inside
	// CreateContainer, and --pod says so.
	for _, cmd := range []string{"unpack", "spec"} {
		_, err := kubeletApp(t, state, cmd, "--pod", "web")
		if err == nil || !strings.Contains(err.Error(), "CreateContainer") || !strings.Contains(err.Error(), "--stage create") {
			t.Errorf("podlab %s --pod web: %v, want an error saying the runtime does it inside CreateContainer (--stage create)", cmd, err)
		}
	}

	// The rest by hand, each with the command --next names.
	for _, step := range []struct {
		args []string
		says string
		next string
		also []string
	}{
		// The kubelet's Pull stage asks the node's runtime: -v shows the
		// CRI calls, each with its request and response.
		{[]string{"-v", "pull", "--pod", "web"}, "pod default/web, container app: PullImage " + ref + " (imagePullPolicy IfNotPresent): pulled in ", "by hand: podlab runc create --pod web",
			[]string{"kubelet of node-1: asks its runtime on unix://" + statedir.Layout{Dir: state}.Node("node-1").CRISocket() + " over CRI: ImageStatus, then PullImage",
				`CRI ImageStatus request: {image: {image: "` + ref + `"}}`, "CRI ImageStatus response (",
				`CRI PullImage request: {image: {image: "` + ref + `"}`, `CRI PullImage response (`, `image_ref: "sha256:`}},
		// The runtime unpacks and writes the spec inside CreateContainer.
		{[]string{"runc", "create", "--pod", "web"}, "pod default/web, container app: CreateContainer: container ", "by hand: podlab runc start --pod web",
			[]string{"bundle    " + filepath.Join(nodeDir, "bundles") + "/", "config    " + filepath.Join(nodeDir, "bundles") + "/",
				"/hello --listen :8080 in cgroup ", "log       " + filepath.Join(nodeDir, "logs", "pods", "default_web_")}},
		{[]string{"runc", "start", "--pod", "web"}, "pod default/web, container app: StartContainer: container ", "next: running for container app", nil},
	} {
		out := mustPodlab(t, state, step.args...)
		for _, want := range step.also {
			// protobuf text spaces vary from build to build: compare without.
			if nospace := func(s string) string { return strings.ReplaceAll(s, " ", "") }; !strings.Contains(nospace(out), nospace(want)) {
				t.Errorf("podlab %s does not say %q:\n%s", strings.Join(step.args, " "), want, out)
			}
		}
		for _, want := range []string{step.says, step.next} {
			if !strings.Contains(out, want) {
				t.Errorf("podlab %s does not say %q:\n%s", strings.Join(step.args, " "), want, out)
			}
		}
	}

	out = mustKubeletApp(t, state, "kubelet", "--once")
	t.Logf("podlab kubelet --once:\n%s", out)
	for _, want := range []string{
		"node node-1: registered Node (created): cpu ",
		"KubeletReady",
		"pod default/auto, container app: CreateContainer: container ",
		"bundle    " + filepath.Join(nodeDir, "bundles") + "/",
		"log       " + filepath.Join(nodeDir, "logs", "pods", "default_auto_"),
		"pod default/auto, container app: StartContainer: container ",
		"event Normal Started: Started container app",
		"status: Running",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --once does not say %q:\n%s", want, out)
		}
	}

	sameStatus(t, state, "web", "auto")

	out = mustKubeletApp(t, state, "logs", "web")
	if !strings.Contains(out, "Hello from podlab/hello!") || !strings.Contains(out, "hostname  web") || strings.Contains(out, "stdout F") {
		t.Errorf("podlab logs web:\n%s", out)
	}
	if _, err := kubeletApp(t, state, "logs", "web", "--previous"); err == nil || !strings.Contains(err.Error(), "previous terminated container") {
		t.Errorf("logs --previous of a first run: %v", err)
	}

	out = mustKubeletApp(t, state, "kubelet", "--next")
	if !strings.Contains(out, "next: running for container app") {
		t.Errorf("kubelet --next of a running pod:\n%s", out)
	}

	mustPodlab(t, state, "delete", "pod", "web")
	mustPodlab(t, state, "delete", "pod", "auto")
	out = mustKubeletApp(t, state, "kubelet", "--once")
	t.Logf("podlab kubelet --once, after the delete:\n%s", out)
	for _, want := range []string{
		"StopContainer: grace period",
		"app: StopContainer (timeout 30s), exited with code 0",
		"StopPodSandbox ",
		"event Normal Killing: Stopping container app",
		"RemoveContainer ",
		"RemovePodSandbox ",
		"removed " + filepath.Join(nodeDir, "logs", "pods", "default_web_"),
		"deleted the pod from the API server (grace period 0)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet --once after the delete does not say %q:\n%s", want, out)
		}
	}
	for _, p := range []string{"web", "auto"} {
		if _, _, err := podlab(t, state, "get", "pod", p); err == nil {
			t.Errorf("pod %s is still there", p)
		}
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
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "run", "web", "--image", "nginx")
	t.Setenv("PODLAB_RUNTIME", "/bin/true") // never run: every case fails before
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"stage without pod", []string{"kubelet", "--stage", "pull"}, "--pod and --stage go together"},
		{"unknown stage", []string{"kubelet", "--pod", "web", "--stage", "bake"}, `no stage "bake"`},
		// node-1's kubelet may not read a pod that is not bound to it: the
		// Node authorizer answers 403, for a missing pod too
		{"unscheduled pod", []string{"kubelet", "--pod", "web", "--stage", "pull"}, "no relationship found between node 'node-1' and this object\n(the kubelet of node node-1 may read only the pods bound to it: is pod web there and scheduled to node-1? podlab get pod web -o wide)"},
		{"missing pod", []string{"kubelet", "--pod", "nope", "--stage", "pull"}, "no relationship found between node 'node-1' and this object"},
		{"another node's identity", []string{"kubelet", "--node", "node-2", "--as", "system:node:node-1", "--once"}, `registering node node-2: nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"bad node name", []string{"kubelet", "--node", "../etc", "--once"}, "node name"},
		// the kubelet is a CRI client: an endpoint nothing answers on is
		// named, with how to start a runtime there, and none is started
		{"a runtime endpoint nothing answers on", []string{"kubelet", "--container-runtime-endpoint", "unix:///nonexistent/cri.sock", "--once"},
			"no container runtime answers on the kubelet's endpoint (--container-runtime-endpoint unix:///nonexistent/cri.sock)"},
		{"an image endpoint nothing answers on", []string{"kubelet", "--image-service-endpoint", "unix:///nonexistent/image.sock", "--once"},
			"(--image-service-endpoint unix:///nonexistent/image.sock)"},
		{"a tcp runtime endpoint", []string{"kubelet", "--container-runtime-endpoint", "tcp://127.0.0.1:1", "--once"}, `scheme "tcp" is not supported`},
		{"a stage of an unscheduled pod, by --pod", []string{"pull", "--pod", "web"}, "pod web is not scheduled yet"},
		{"unpack is the runtime's, by --pod", []string{"unpack", "--pod", "web"}, `no stage "unpack": the container runtime unpacks the image and writes the OCI spec inside CRI CreateContainer`},
		{"spec is the runtime's, by --pod", []string{"spec", "--pod", "web"}, `no stage "spec"`},
		{"runc start of an unscheduled pod", []string{"runc", "start", "--pod", "web"}, "pod web is not scheduled yet"},
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

// sameStatus checks that two pods, one walked by hand and one run by the
// kubelet, ended in the same state: phase, conditions, container state,
// and the same events.
func sameStatus(t *testing.T, state, byHand, auto string) {
	t.Helper()
	api, err := apiserver.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	admin, err := api.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	summary := func(name string) string {
		obj, err := admin.Get(context.Background(), "pods", "default", name)
		if err != nil {
			t.Fatal(err)
		}
		p := obj.(*corev1.Pod)
		var b strings.Builder
		fmt.Fprintf(&b, "phase=%s hostIP=%s qos=%s started=%v\n", p.Status.Phase, p.Status.HostIP, p.Status.QOSClass, p.Status.StartTime != nil)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "condition %s=%s\n", c.Type, c.Status)
		}
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "container %s ready=%v started=%v restarts=%d running=%v image=%s imageID=%s\n",
				c.Name, c.Ready, c.Started != nil && *c.Started, c.RestartCount, c.State.Running != nil, c.Image, c.ImageID)
		}
		events, err := admin.List(context.Background(), "events", "default", apiserver.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, o := range events.Items {
			// Pulling only when the image was missing: the hand walk pulled
			// it, so the kubelet found it present (event Pulled, "already
			// present on machine"), as a real kubelet would.
			if ev := o.(*corev1.Event); ev.InvolvedObject.Name == name && ev.Source.Component == "kubelet" && ev.Reason != "Pulling" {
				reasons = append(reasons, ev.Reason)
			}
		}
		sort.Strings(reasons)
		fmt.Fprintf(&b, "kubelet events %v\n", reasons)
		return b.String()
	}
	if h, a := summary(byHand), summary(auto); h != a {
		t.Errorf("walked by hand and run by the kubelet differ:\nby hand (%s):\n%s\nkubelet (%s):\n%s", byHand, h, auto, a)
	}
}
