package kubectl

import (
	"os"
	"strings"
	"testing"

	"github.com/podlab/podlab/steps/apiserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
`

// kinds lists "apiVersion/Kind name" of objects, to compare decodes.
func kinds(objs []apiserver.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		out[i] = gvk.GroupVersion().String() + "/" + gvk.Kind + " " + o.GetName()
	}
	return out
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"single YAML document", podYAML, []string{"v1/Pod web"}},
		{"leading separator and trailing separator", "---\n" + podYAML + "---\n", []string{"v1/Pod web"}},
		{
			"several documents, an empty one and a comment-only one skipped",
			podYAML + "---\n---\n# nothing here\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers: [{name: nginx, image: nginx}]\n" +
				"--- # a comment after the separator\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: reader, namespace: dev}\nrules: [{apiGroups: [\"\"], resources: [pods], verbs: [get]}]\n",
			[]string{"v1/Pod web", "apps/v1/Deployment web", "rbac.authorization.k8s.io/v1/Role reader"},
		},
		{"JSON object", `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev"}}`, []string{"v1/Namespace dev"}},
		{
			"JSON objects one after another",
			"{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}\n{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"b\"}}",
			[]string{"v1/Namespace a", "v1/Namespace b"},
		},
		{
			"a List is expanded",
			"apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n- apiVersion: apps/v1\n  kind: ReplicaSet\n  metadata: {name: rs}\n  spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}}}\n",
			[]string{"v1/Namespace a", "apps/v1/ReplicaSet rs"},
		},
		{
			"a typed list's items may leave out their kind",
			"apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n",
			[]string{"v1/Pod a", "v1/Pod b"},
		},
		{"only comments", "# nothing\n", nil},
		{"empty input", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode(strings.NewReader(tt.input), "test.yaml")
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := kinds(objs); strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("Decode = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecode_TypedFields(t *testing.T) {
	f, err := os.Open("testdata/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := Decode(f, "testdata/web.yaml")
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(objs) != 2 {
		t.Fatalf("Decode returned %d objects, want 2 (the empty document skipped): %q", len(objs), kinds(objs))
	}
	d, ok := objs[0].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("object 0 is a %T, want *appsv1.Deployment", objs[0])
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	cpu := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	if cpu.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("cpu request = %s, want 100m", cpu.String())
	}
	if gvk := d.GetObjectKind().GroupVersionKind(); gvk != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
		t.Errorf("GroupVersionKind = %v", gvk)
	}
	p, ok := objs[1].(*corev1.Pod)
	if !ok {
		t.Fatalf("object 1 is a %T, want *corev1.Pod", objs[1])
	}
	if got := p.Spec.Containers[0].Command; strings.Join(got, " ") != "sleep 3600" {
		t.Errorf("command = %q", got)
	}
	if p.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy = %q", p.Spec.Containers[0].ImagePullPolicy)
	}
}

func TestDecode_RoleRules(t *testing.T) {
	objs, err := Decode(strings.NewReader("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: view}\nrules:\n- apiGroups: [\"\", apps]\n  resources: [pods, deployments]\n  verbs: [get, list]\n"), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := objs[0].(*rbacv1.ClusterRole)
	if len(r.Rules) != 1 || strings.Join(r.Rules[0].APIGroups, ",") != ",apps" || strings.Join(r.Rules[0].Verbs, ",") != "get,list" {
		t.Errorf("rules = %+v", r.Rules)
	}
}

func TestDecode_BadInput(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string // substrings of the error
	}{
		{
			"unknown field, named by path and document",
			podYAML + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: nginx\n    image: nginx\n    imagePullPolicyy: Always\n",
			[]string{`web.yaml: document 2 (Pod "web"): unknown field "spec.containers[0].imagePullPolicyy"`},
		},
		{
			"field names are case-sensitive",
			"apiVersion: v1\nkind: Namespace\nMetadata: {name: x}\n",
			[]string{`web.yaml: document 1 (Namespace): unknown field "Metadata"`},
		},
		{
			"several unknown fields are all named",
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: x, nam: y}\nspecc: {}\n",
			[]string{`unknown field "metadata.nam"`, `unknown field "specc"`},
		},
		{
			"unknown kind",
			"apiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
			[]string{`web.yaml: document 1 (Service "web"): no kind "Service" is served by podlab`},
		},
		{
			"wrong apiVersion says which to use",
			"apiVersion: v1\nkind: Deployment\nmetadata: {name: web}\n",
			[]string{`document 1 (Deployment "web")`, `use apiVersion "apps/v1"`},
		},
		{"missing kind", "apiVersion: v1\nmetadata: {name: web}\n", []string{"web.yaml: document 1: kind not set"}},
		{"missing apiVersion and kind", "metadata: {name: web}\n", []string{"apiVersion not set, kind not set"}},
		{"malformed apiVersion", "apiVersion: apps/v1/x\nkind: Deployment\n", []string{"document 1", "apps/v1/x"}},
		{
			"malformed YAML keeps the parser's line, counted in the file",
			podYAML + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   labels: x\n",
			[]string{"web.yaml: document 2", "yaml: line 16:"},
		},
		{
			"a key set twice",
			"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n",
			[]string{"document 1", `line 5: key "name" already set in map`},
		},
		{"a value of the wrong type", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: two}\n", []string{`document 1 (Deployment "web")`, "replicas"}},
		{"a kind that is not a string", "apiVersion: v1\nkind: 5\n", []string{"document 1: reading apiVersion and kind", "kind"}},
		{"metadata that is not a mapping", "apiVersion: v1\nkind: Namespace\nmetadata: x\n", []string{"document 1 (Namespace)", "metadata"}},
		{"a document that is not an object", podYAML + "---\n- a\n- b\n", []string{"document 2: expected a Kubernetes object", "got a list"}},
		{"text after a separator", podYAML + "---foo\n" + podYAML, []string{`web.yaml: line 11: invalid YAML document separator "---foo"`}},
		{"malformed JSON", "{\"apiVersion\": \"v1\",\n \"kind\": }", []string{"web.yaml: document 1: line 2, column"}},
		{
			"an unknown field in a List item",
			"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: b}\n  spec: {finalizerz: []}\n",
			[]string{`web.yaml: document 1 (List), item 1 (Namespace "b"): unknown field "spec.finalizerz"`},
		},
		{"an unknown field in a List", "apiVersion: v1\nkind: List\nitemz: []\n", []string{`document 1 (List)`, `unknown field "itemz"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode(strings.NewReader(tt.input), "web.yaml")
			if err == nil {
				t.Fatalf("Decode succeeded (%q), want an error", kinds(objs))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestDecode_ReadError(t *testing.T) {
	_, err := Decode(failingReader{}, "STDIN")
	if err == nil || !strings.Contains(err.Error(), "reading STDIN") {
		t.Errorf("Decode(failing reader) = %v, want an error about reading STDIN", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, os.ErrClosed }
