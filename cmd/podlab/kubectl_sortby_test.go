package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestKubectl_SortByAndIncludeObject: kubectl asks for a Table with
// includeObject=Object when it sorts (--sort-by: it sorts the rows by each
// row's object, with a JSONPath), and the server must answer with whole
// objects, as kube-apiserver reads TableOptions from the query. Then the
// three includeObject values by a raw request, and a bad one: kube's 400.
func TestKubectl_SortByAndIncludeObject(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	serveAPI(t, state)
	kubeconfig := statedir.Layout{Dir: state}.Kubeconfig("admin")
	run := func(args ...string) string {
		t.Helper()
		out, err := kubectlWith(kubectl, kubeconfig, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	// three pods whose names and nodes sort in opposite orders
	var manifest strings.Builder
	for _, p := range []struct{ name, node string }{{"a", "node-c"}, {"b", "node-b"}, {"c", "node-a"}} {
		manifest.WriteString("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " + p.name + "\n  labels:\n    app: sorted\nspec:\n  nodeName: " + p.node +
			"\n  containers:\n  - name: web\n    image: nginx\n")
	}
	file := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(file, []byte(manifest.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run("create", "-f", file)
	run("run", "other", "--image=nginx") // no label app=sorted, no node

	tests := []struct {
		name string
		args []string
		want []string // the pods' names, in this order
	}{
		{"by name", []string{"get", "pods", "--sort-by=.metadata.name"}, []string{"a", "b", "c", "other"}},
		{"by node (the unscheduled pod first)", []string{"get", "pods", "--sort-by=.spec.nodeName"}, []string{"other", "c", "b", "a"}},
		{"by node, with a field selector", []string{"get", "pods", "--sort-by=.spec.nodeName", "--field-selector=spec.nodeName!=node-b"}, []string{"other", "c", "a"}},
		{"by node, with a label selector", []string{"get", "pods", "-l", "app=sorted", "--sort-by=.spec.nodeName"}, []string{"c", "b", "a"}},
		{"by node, -o wide", []string{"get", "pods", "-o", "wide", "--sort-by=.spec.nodeName"}, []string{"other", "c", "b", "a"}},
		{"by node, one pod left out by name", []string{"get", "pods", "--field-selector=metadata.name!=other", "--sort-by=.spec.nodeName"}, []string{"c", "b", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(tt.args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) == 0 || !strings.HasPrefix(lines[0], "NAME ") {
				t.Fatalf("kubectl %s: no table:\n%s", strings.Join(tt.args, " "), out)
			}
			var got []string
			for _, l := range lines[1:] {
				got = append(got, strings.Fields(l)[0])
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("kubectl %s: rows %v, want %v:\n%s", strings.Join(tt.args, " "), got, tt.want, out)
			}
			if slices.Contains(tt.args, "wide") && !regexp.MustCompile(`(?m)^c\s.*\snode-a\s`).MatchString(out) {
				t.Errorf("kubectl %s: no NODE column with node-a for c:\n%s", strings.Join(tt.args, " "), out)
			}
		})
	}

	// a raw request for each includeObject value, as curl would send it
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(query string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", cfg.Host+"/api/v1/namespaces/default/pods"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	raw := []struct {
		name, query string
		kind        string // of each row's object; "" for none
		spec        bool   // the object has its spec
	}{
		{"the default: metadata", "", "PartialObjectMetadata", false},
		{"Metadata", "?includeObject=Metadata", "PartialObjectMetadata", false},
		{"Object", "?includeObject=Object", "Pod", true},
		{"None", "?includeObject=None", "", false},
		{"Object, with a field selector", "?includeObject=Object&fieldSelector=spec.nodeName%3Dnode-a", "Pod", true},
	}
	for _, tt := range raw {
		t.Run("raw "+tt.name, func(t *testing.T) {
			code, body := get(tt.query)
			var table struct {
				Kind string `json:"kind"`
				Rows []struct {
					Object *struct {
						Kind     string `json:"kind"`
						Metadata struct{ Name string }
						Spec     json.RawMessage `json:"spec"`
					} `json:"object"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(body, &table); err != nil || code != http.StatusOK || table.Kind != "Table" || len(table.Rows) == 0 {
				t.Fatalf("GET pods%s: %d %v %.400s", tt.query, code, err, body)
			}
			for _, row := range table.Rows {
				switch {
				case tt.kind == "" && row.Object != nil:
					t.Errorf("includeObject=None: a row has an object: %.400s", body)
				case tt.kind != "" && (row.Object == nil || row.Object.Kind != tt.kind || row.Object.Metadata.Name == ""):
					t.Errorf("row object %+v, want a %s with its name: %.400s", row.Object, tt.kind, body)
				case tt.kind != "" && tt.spec != (len(row.Object.Spec) > 0):
					t.Errorf("row object has spec: %v, want %v: %.400s", len(row.Object.Spec) > 0, tt.spec, body)
				}
			}
		})
	}

	t.Run("raw bad includeObject", func(t *testing.T) {
		code, body := get("?includeObject=Everything")
		var st struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
			Code    int    `json:"code"`
		}
		json.Unmarshal(body, &st)
		want := `Unable to convert to Table as requested: includeObject: Invalid value: "Everything": must be 'Metadata', 'Object', 'None', or empty`
		if code != http.StatusBadRequest || st.Reason != "BadRequest" || st.Message != want {
			t.Errorf("includeObject=Everything: %d %s %q, want 400 BadRequest %q", code, st.Reason, st.Message, want)
		}
		out, err := kubectlWith(kubectl, kubeconfig, "get", "--raw", "/api/v1/namespaces/default/pods?includeObject=x")
		if err != nil {
			t.Errorf("JSON, not a Table, ignores includeObject as kube-apiserver does: %v\n%s", err, out)
		}
	})
}
