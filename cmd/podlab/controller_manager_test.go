package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/internal/testenv"

	"github.com/podlab/podlab/internal/cliargs"
)

// controllerManagerApp runs podlab with the controller-manager command in
// it (whether or not app.go lists it yet).
func controllerManagerApp(t *testing.T, state string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &errOut)
	if app.Command("controller-manager") == nil {
		app.Commands = append(app.Commands, controllerManagerCommand)
	}
	err := app.Run(cliargs.FlagsFirst(app, append([]string{"podlab", "--state-dir", state}, args...)))
	return out.String() + errOut.String(), err
}

func TestControllerManagerOnce(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "create", "deployment", "web", "--image", "nginx:1.25", "--replicas", "2")

	out, err := controllerManagerApp(t, state, "controller-manager", "--once")
	if err != nil {
		t.Fatalf("controller-manager --once: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^I\d{4} \d\d:\d\d:\d\d\.\d{6} [ \d]{7} deployment_controller\.go:203\] "Adding deployment" logger="deployment-controller" deployment="default/web"$`),
		regexp.MustCompile(`deployment_util\.go:262\] "Updating replica set revision" logger="deployment-controller" replicaSet="default/web-[4-9bcdf]+" newRevision="1"`),
		regexp.MustCompile(`replica_set\.go:668\] "Too few replicas" logger="replicaset-controller" replicaSet="default/web-[4-9bcdf]+" need=2 creating=2`),
		regexp.MustCompile(`controller-manager --once: \d+ passes, \d+ writes through the API server, settled`),
		regexp.MustCompile(`ScalingReplicaSet +Scaled up replica set web-[4-9bcdf]+ from 0 to 2`),
		regexp.MustCompile(`pods created +default/web-[4-9bcdf]+-\w{5}, default/web-[4-9bcdf]+-\w{5}`),
	} {
		if !want.MatchString(out) {
			t.Errorf("controller-manager --once does not match %s:\n%s", want, out)
		}
	}

	// At --verbosity 2 only the actions are logged.
	mustPodlab(t, state, "scale", "deployment/web", "--replicas", "1")
	out, err = controllerManagerApp(t, state, "controller-manager", "--once", "--verbosity", "2")
	if err != nil {
		t.Fatalf("controller-manager --once --verbosity 2: %v\n%s", err, out)
	}
	if strings.Contains(out, "Started syncing deployment") || !strings.Contains(out, `"Too many replicas"`) {
		t.Errorf("--verbosity 2 printed the wrong lines:\n%s", out)
	}
}

func TestControllerManagerFailsAsViewer(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "create", "deployment", "web", "--image", "nginx:1.25")
	out, err := controllerManagerApp(t, state, "controller-manager", "--once", "--as", "viewer")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("as viewer: err %v, want forbidden\n%s", err, out)
	}
}

func TestControllerManagerAllocatesNodeCIDRs(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "node", "add", "node-1")
	mustPodlab(t, state, "node", "add", "node-2")

	out, err := controllerManagerApp(t, state, "controller-manager", "--once", "--allocate-node-cidrs")
	if err != nil {
		t.Fatalf("controller-manager --once --allocate-node-cidrs: %v\n%s", err, out)
	}
	for _, want := range []string{
		`range_allocator.go:433] "Set node PodCIDR" logger="node-ipam-controller" node="node-1" podCIDRs=["10.244.0.0/24"]`,
		`node CIDRs           node-1 10.244.0.0/24, node-2 10.244.1.0/24`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestControllerManagerBadIPAMFlags(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"not a CIDR", []string{"--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0"}, `--cluster-cidr "10.244.0.0": want one CIDR, such as 10.244.0.0/16`},
		{"node mask too short", []string{"--allocate-node-cidrs", "--node-cidr-mask-size", "8"}, "mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size"},
		{"without --allocate-node-cidrs", []string{"--cluster-cidr", "10.0.0.0/8"}, "add --allocate-node-cidrs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := controllerManagerApp(t, state, append([]string{"controller-manager", "--once"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err %v, want %q\n%s", err, tt.says, out)
			}
		})
	}
}

// `podlab node add` labels a declared node as its kubelet would, and keeps
// the labels asked for (a zone, for the scheduler's default spreading).
func TestNodeAddLabelsAsKubelet(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	serveAPI(t, state)
	mustPodlab(t, state, "node", "add", "node-1", "--labels", "topology.kubernetes.io/zone=z1")
	var n corev1.Node
	if err := json.Unmarshal([]byte(mustPodlab(t, state, "get", "node", "node-1", "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH, "topology.kubernetes.io/zone": "z1",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, n.Labels[k], v, n.Labels)
		}
	}
}
