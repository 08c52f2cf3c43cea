package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/podlab/podlab/internal/testenv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
)

// podlabIn runs one command with stdin.
func podlabIn(t *testing.T, state, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(append([]string{"podlab", "--state-dir", state}, args...), strings.NewReader(stdin), &out, &errOut)
	return out.String() + errOut.String(), err
}

// webManifest is a Deployment manifest as a learner writes one: no
// replicas, labels given, one container per name in images.
func webManifest(labels string, images ...string) string {
	var containers strings.Builder
	for _, img := range images {
		name, ref, _ := strings.Cut(img, "=")
		fmt.Fprintf(&containers, "      - name: %s\n        image: %s\n", name, ref)
	}
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {` + labels + `}
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
` + containers.String()
}

func applyManifest(t *testing.T, state, manifest string) string {
	t.Helper()
	out, err := podlabIn(t, state, manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	return out
}

func getDeployment(t *testing.T, state string) (*appsv1.Deployment, string) {
	t.Helper()
	out := mustPodlab(t, state, "get", "deployment", "web", "-o", "json")
	d := &appsv1.Deployment{}
	if err := json.Unmarshal([]byte(out), d); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, out)
	}
	return d, out
}

// adminClient is the API server of state, for what another tool would do.
func adminClient(t *testing.T, state string) apiserver.Interface {
	t.Helper()
	srv, err := apiserver.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := srv.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Eleven rounds of `get -o json | apply`: the last-applied annotation is
// the manifest without itself, so it never nests and never grows.
func TestApply_RoundTripKeepsTheAnnotationSmall(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	if out := applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25")); !strings.Contains(out, "deployment.apps/web created") {
		t.Errorf("first apply says\n%s", out)
	}
	var first int
	for round := 1; round <= 11; round++ {
		_, live := getDeployment(t, state)
		applyManifest(t, state, live)
		d, _ := getDeployment(t, state)
		ann := d.Annotations[corev1.LastAppliedConfigAnnotation]
		if strings.Contains(ann, "last-applied-configuration") {
			t.Fatalf("round %d: the annotation holds itself:\n%s", round, ann)
		}
		if round == 1 {
			first = len(ann)
		} else if len(ann) > first+16 {
			t.Fatalf("round %d: the annotation grew from %d to %d bytes", round, first, len(ann))
		}
	}
	if out := applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25")); !strings.Contains(out, "deployment.apps/web configured") {
		t.Errorf("applying the manifest again says\n%s", out)
	}
	if out := applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25")); !strings.Contains(out, "deployment.apps/web unchanged") {
		t.Errorf("applying the same manifest twice says\n%s", out)
	}
}

// kubectl scale, then a new manifest without replicas: the count stays, as
// no manifest ever set it.
func TestApply_KeepsTheScaledReplicas(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25"))
	if out := mustPodlab(t, state, "scale", "deployment/web", "--replicas", "3"); !strings.Contains(out, "deployment.apps/web scaled") {
		t.Errorf("scale says\n%s", out)
	}
	out := applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.27"))
	if !strings.Contains(out, "deployment.apps/web configured") || !strings.Contains(out, `"image":"nginx:1.27"`) {
		t.Errorf("apply says\n%s", out)
	}
	d, _ := getDeployment(t, state)
	if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("replicas %d image %s, want 3 and nginx:1.27", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
}

// Three versions: what the last manifest set and this one drops goes;
// what another tool added stays; containers merge by name.
func TestApply_ThreeWayMerge(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	applyManifest(t, state, webManifest("app: web, tier: frontend", "nginx=nginx:1.25"))
	// another tool adds a label and a sidecar container
	patch := `{"metadata":{"labels":{"owner":"ops"}},"spec":{"template":{"spec":{"containers":[{"name":"log","image":"busybox:1.36"}]}}}}`
	if _, err := adminClient(t, state).Patch(t.Context(), "deployments", "default", "web", types.StrategicMergePatchType, []byte(patch), apiserver.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.27"))
	d, _ := getDeployment(t, state)
	if _, ok := d.Labels["tier"]; ok || d.Labels["owner"] != "ops" || d.Labels["app"] != "web" {
		t.Errorf("labels %v, want app=web and owner=ops, tier removed", d.Labels)
	}
	images := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		images[c.Name] = c.Image
	}
	if len(images) != 2 || images["nginx"] != "nginx:1.27" || images["log"] != "busybox:1.36" {
		t.Errorf("containers %v, want nginx at 1.27 and the log sidecar kept", images)
	}
}

// Two learners each get -o json, edit, apply: 19 updates, of which each
// either lands or is refused with 409; none is silently lost.
func TestApply_ResourceVersionIsAPrecondition(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25"))
	edit := func(live string, k int) string {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(live), &m); err != nil {
			t.Fatal(err)
		}
		meta := m["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		ann[fmt.Sprintf("example.com/update-%d", k)] = "yes"
		b, _ := json.Marshal(m)
		return string(b)
	}
	var landed, refused []int
	for k := 0; k < 19; k += 2 {
		_, a := getDeployment(t, state) // both read the same version
		_, b := getDeployment(t, state)
		for i, live := range []string{a, b} {
			if k+i == 19 {
				break
			}
			out, err := podlabIn(t, state, edit(live, k+i), "apply", "-f", "-")
			switch {
			case err == nil:
				landed = append(landed, k+i)
			case strings.Contains(err.Error(), `Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply your changes to the latest version and try again`):
				refused = append(refused, k+i)
			default:
				t.Fatalf("update %d: %v\n%s", k+i, err, out)
			}
		}
	}
	d, _ := getDeployment(t, state)
	for _, k := range landed {
		if d.Annotations[fmt.Sprintf("example.com/update-%d", k)] != "yes" {
			t.Errorf("update %d was acknowledged and is lost", k)
		}
	}
	for _, k := range refused {
		if _, ok := d.Annotations[fmt.Sprintf("example.com/update-%d", k)]; ok {
			t.Errorf("update %d was refused and is there", k)
		}
	}
	if len(landed) != 10 || len(refused) != 9 {
		t.Errorf("%d landed and %d refused, want 10 and 9 (the second of each pair read a stale version)", len(landed), len(refused))
	}
}

func TestScale_Preconditions(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25"))
	d, _ := getDeployment(t, state)
	tests := []struct {
		name string
		args []string
		says string // "" for success
	}{
		{"current replicas differ", []string{"--current-replicas", "3"}, "Expected replicas to be 3, was 1"},
		{"resource version differs", []string{"--resource-version", "1"}, "Expected resource version to be 1, was " + d.ResourceVersion},
		{"both hold", []string{"--current-replicas", "1", "--resource-version", d.ResourceVersion}, ""},
		{"negative replicas", []string{"--replicas", "-2"}, "--replicas N, with N at least 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"scale", "deployment/web", "--replicas", "2"}, tt.args...)
			out, err := podlabIn(t, state, "", args...)
			if tt.says == "" {
				if err != nil || !strings.Contains(out, "deployment.apps/web scaled (replicas 2") {
					t.Errorf("scale: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}

func TestApply_BadInput(t *testing.T) {
	state := testenv.StateDir(t)
	mustPodlab(t, state, "init")
	applyManifest(t, state, webManifest("app: web", "nginx=nginx:1.25"))
	dir := t.TempDir()
	tests := []struct {
		name     string
		manifest string
		says     string
	}{
		{"an unknown kind", "apiVersion: v1\nkind: Frobnicator\nmetadata:\n  name: x\n", `no kind "Frobnicator" is served by podlab`},
		{"no name", "apiVersion: v1\nkind: ConfigMap\n", `kind "ConfigMap"`},
		{"a typo", strings.Replace(webManifest("app: web", "nginx=nginx:1.25"), "image:", "imagee:", 1), `unknown field "spec.template.spec.containers[0].imagee"`},
		{"an invalid change", strings.Replace(webManifest("app: web", "nginx=nginx:1.25"), "spec:\n", "spec:\n  replicas: -1\n", 1), "spec.replicas: Invalid value: -1: must be greater than or equal to 0"},
	}
	before, _ := getDeployment(t, state)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(tt.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := podlabIn(t, state, "", "apply", "-f", file)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want an error saying %q\n%s", err, tt.says, out)
			}
			after, _ := getDeployment(t, state)
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the deployment changed: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}
