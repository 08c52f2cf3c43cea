package kubectl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
)

func testAPI(t *testing.T) apiserver.Interface {
	t.Helper()
	dir := t.TempDir()
	if _, err := apiserver.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := s.ClientAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func manifest(t *testing.T, doc string) Manifest {
	t.Helper()
	ms, err := DecodeManifests(strings.NewReader(doc), "test.yaml")
	if err != nil || len(ms) != 1 {
		t.Fatalf("decoding: %d manifests, %v", len(ms), err)
	}
	return ms[0]
}

const webYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "nginx:1.25"}]
`

// Two goroutines get, edit and apply with the resourceVersion they read,
// at the same time: each apply lands or is refused with 409, and none that
// landed is lost.
func TestApply_ConcurrentEditsAreNeverLost(t *testing.T) {
	c := testAPI(t)
	ctx := t.Context()
	if _, err := Apply(ctx, c, manifest(t, webYAML), ""); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	landed, refused := map[string]bool{}, 0
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 10 {
				if w == 1 && i == 9 {
					return // 19 updates in all
				}
				key := fmt.Sprintf("example.com/w%d-%d", w, i)
				live, err := c.Get(ctx, "deployments", "default", "web")
				if err != nil {
					t.Error(err)
					return
				}
				live.SetAnnotations(mergeMap(live.GetAnnotations(), key))
				js, _ := json.Marshal(live)
				ms, err := DecodeManifests(bytes.NewReader(js), "STDIN")
				if err != nil {
					t.Error(err)
					return
				}
				_, err = Apply(ctx, c, ms[0], "")
				mu.Lock()
				switch {
				case err == nil:
					landed[key] = true
				case apierrors.IsConflict(err):
					refused++
				default:
					t.Errorf("apply %s: %v", key, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got, err := c.Get(ctx, "deployments", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	for key := range landed {
		if got.GetAnnotations()[key] != "yes" {
			t.Errorf("%s was acknowledged and is lost", key)
		}
	}
	if len(landed)+refused != 19 {
		t.Errorf("%d landed and %d refused, want 19 in all", len(landed), refused)
	}
	t.Logf("%d landed, %d refused with 409", len(landed), refused)
}

func mergeMap(m map[string]string, key string) map[string]string {
	out := map[string]string{key: "yes"}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestModifiedConfiguration_DoesNotNest(t *testing.T) {
	doc := map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "web", "annotations": map[string]any{
		LastAppliedAnnotation: `{"kind":"Pod","metadata":{"annotations":{"` + LastAppliedAnnotation + `":"older"}}}`, "a": "b"}}}
	got, err := ModifiedConfiguration(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"Pod","metadata":{"annotations":{"a":"b","kubectl.kubernetes.io/last-applied-configuration":"{\"kind\":\"Pod\",\"metadata\":{\"annotations\":{\"a\":\"b\"},\"name\":\"web\"}}\n"},"name":"web"}}` + "\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestApply_BadInput(t *testing.T) {
	c := testAPI(t)
	tests := []struct {
		name string
		doc  string
		says string
	}{
		{"no name", "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: busybox}]\n", "metadata.name is required"},
		{"a pod without containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n", "spec.containers: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := DecodeManifests(strings.NewReader(tt.doc), "bad.yaml")
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			_, err = Apply(t.Context(), c, ms[0], "")
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}
