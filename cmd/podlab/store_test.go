package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/podlab/podlab/internal/testenv"
	"strings"
	"testing"

	"github.com/podlab/podlab/steps/store"
)

func TestStoreCommand(t *testing.T) {
	state := testenv.StateDir(t)
	st, err := store.Open(store.Path(state))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, kv := range []struct{ key, value string }{
		{"/registry/pods/default/web", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web"}}`},
		{"/registry/pods/default/db", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"db"}}`},
		{"/registry/namespaces/default", `not an object`},
	} {
		if _, err := st.Update(ctx, func(tx *store.Tx) error { _, err := tx.Create(kv.key, []byte(kv.value)); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Update(ctx, func(tx *store.Tx) error {
		_, err := tx.Put("/registry/pods/default/web", []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","labels":{"a":"b"}}}`), 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	tests := []struct {
		name string
		args []string
		want []string // substrings of stdout
	}{
		{"get", []string{"store", "get", "/registry/pods/default/web"}, []string{
			store.Path(state), "create_revision  1", "mod_revision     4", "version          2",
			"bytes of JSON (stored by an older podlab)", `"labels":{"a":"b"}`}},
		{"get a value that is no object", []string{"store", "get", "/registry/namespaces/default"}, []string{
			"13 bytes, which podlab cannot decode", "\nnot an object\n"}},
		{"list with values", []string{"store", "list", "/registry/pods/"}, []string{
			"revision 4, compacted up to revision 0", "/registry/pods/default/db  create_revision=2 mod_revision=2 version=1",
			`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"db"}`, "2 keys under /registry/pods/"}},
		{"list keys only, flags after the prefix", []string{"store", "list", "/registry/", "--keys-only"}, []string{
			"KEY", "/registry/namespaces/default", "3 keys under /registry/"}},
		{"list at a revision, before the update", []string{"store", "list", "/registry/pods/", "--rev", "3"}, []string{
			"the keys as they were at revision 3", "/registry/pods/default/web  create_revision=1 mod_revision=1 version=1",
			`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web"},"spec"`, "2 keys under /registry/pods/"}},
		{"compact", []string{"store", "compact", "2"}, []string{"removed 2 events (revisions 1 to 2)", "revisions 3 to 4"}},
		{"compact again", []string{"store", "compact", "1"}, []string{"nothing to compact"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := runPodlab(t, state, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	t.Run("a pod the API server stored, in protobuf", func(t *testing.T) {
		state := testenv.StateDir(t)
		runPodlab(t, state, "init")
		runPodlab(t, state, "run", "web", "--image", "nginx")
		out := runPodlab(t, state, "store", "get", "/registry/pods/default/web")
		for _, w := range []string{
			`bytes of protobuf, as kube-apiserver writes to etcd: "k8s\x00"`,
			"runtime.Unknown naming v1 Pod",
			`k8s\x00\n\t\n\x02v1\x12\x03Pod`,
			"decoded, as JSON:\n" + `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"default"`,
			`"imagePullPolicy":"Always"`, // the defaults admission set are stored
		} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	})

	t.Run("get -o json", func(t *testing.T) {
		out := runPodlab(t, state, "store", "get", "/registry/pods/default/db", "-o", "json")
		var got struct {
			Key         string          `json:"key"`
			ModRevision int64           `json:"mod_revision"`
			Value       []byte          `json:"value"` // base64, as etcdctl -w json
			Encoding    string          `json:"encoding"`
			Object      json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if got.Key != "/registry/pods/default/db" || got.ModRevision != 2 || got.Encoding != "json" ||
			!bytes.Equal(got.Value, []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"db"}}`)) || !bytes.Contains(got.Object, []byte(`"name":"db"`)) {
			t.Errorf("got %+v", got)
		}
	})

	bad := []struct {
		name  string
		state string
		args  []string
		want  string
	}{
		{"no store", t.TempDir(), []string{"store", "list"}, "run `podlab init` first"},
		{"missing key", state, []string{"store", "get", "/registry/pods/default/nope"}, "no key /registry/pods/default/nope"},
		{"key without /", state, []string{"store", "get", "registry"}, `does not start with "/"`},
		{"get without a key", state, []string{"store", "get"}, "needs one key"},
		{"compact a word", state, []string{"store", "compact", "ten"}, "the revision is a number"},
		{"compact the future", state, []string{"store", "compact", "99"}, "the store is at revision 4"},
		{"list a compacted revision", state, []string{"store", "list", "/", "--rev", "1"}, "compacted up to revision 2, and keeps no older state"},
		{"list the future", state, []string{"store", "list", "/", "--rev", "99"}, "the store is at revision 4: list at a revision from 2 to 4"},
		{"watch a compacted revision", state, []string{"store", "watch", "/", "--rev", "1"}, "410 Gone"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(append([]string{"podlab", "--state-dir", tt.state}, tt.args...), strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func runPodlab(t *testing.T, state string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := Run(append([]string{"podlab", "--state-dir", state}, args...), strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("podlab %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
