package printers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/apiserver/discovery"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// tableServer serves discovery and answers the pod lists kubectl get asks
// for with a Table from TableConvertor, as the REST handlers will; it
// records each request's Accept and includeObject.
func tableServer(t *testing.T, pods []corev1.Pod, seen *[]string) *httptest.Server {
	t.Helper()
	disc, err := discovery.Handler(discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conv := TableConvertor{Now: func() time.Time { return now }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var list *corev1.PodList
		switch r.URL.Path {
		case "/api/v1/pods":
			list = &corev1.PodList{Items: pods}
		case "/api/v1/namespaces/default/pods":
			list = &corev1.PodList{}
			for _, p := range pods {
				if p.Namespace == "default" {
					list.Items = append(list.Items, p)
				}
			}
		default:
			disc.ServeHTTP(w, r)
			return
		}
		*seen = append(*seen, r.Header.Get("Accept")+" includeObject="+r.URL.Query().Get("includeObject"))
		list.ResourceVersion = "42"
		var obj runtime.Object = list
		if strings.Contains(r.Header.Get("Accept"), "as=Table") {
			table, err := conv.ConvertToTable(r.Context(), list, r.URL.Query().Get("includeObject"))
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			obj = table
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(obj)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestKubectl_GetTable: the lab's real kubectl prints the Table the
// convertor makes exactly as it prints kube-apiserver's: the columns, -o
// wide's priority-1 columns, and -A's NAMESPACE from each row's metadata.
func TestKubectl_GetTable(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	var seen []string
	srv := tableServer(t, []corev1.Pod{*runningPod("default", "web"), *runningPod("dev", "api")}, &seen)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "pods"}, "" +
			"NAME   READY   STATUS    RESTARTS   AGE\n" +
			"web    1/1     Running   0          5m\n"},
		{[]string{"get", "po", "-o", "wide"}, "" +
			"NAME   READY   STATUS    RESTARTS   AGE   IP          NODE     NOMINATED NODE   READINESS GATES\n" +
			"web    1/1     Running   0          5m    10.88.0.4   node-1   <none>           <none>\n"},
		{[]string{"get", "pods", "-A", "--show-labels"}, "" +
			"NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE   LABELS\n" +
			"default     web    1/1     Running   0          5m    app=web\n" +
			"dev         api    1/1     Running   0          5m    app=api\n"},
	}
	for _, tt := range tests {
		seen = nil
		cmd := exec.CommandContext(context.Background(), kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, tt.args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "KUBERC=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			continue
		}
		if string(out) != tt.want {
			t.Errorf("kubectl %s printed\n%s\nwant\n%s", strings.Join(tt.args, " "), out, tt.want)
		}
		t.Logf("kubectl %s asked %q", strings.Join(tt.args, " "), seen)
		if len(seen) != 1 || !strings.HasPrefix(seen[0], "application/json;as=Table;v=v1;g=meta.k8s.io,") {
			t.Errorf("kubectl %s asked %q, want one request for a Table", strings.Join(tt.args, " "), seen)
		}
	}
}
