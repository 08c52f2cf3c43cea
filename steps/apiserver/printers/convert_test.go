package printers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func objectMeta(namespace, name string, age time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "uid-" + "name", ResourceVersion: "7",
		Labels: map[string]string{"app": name}, CreationTimestamp: metav1.NewTime(now.Add(-age))}
}

func runningPod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: objectMeta(namespace, name, 5*time.Minute),
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.88.0.4"}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

func convertor() TableConvertor { return TableConvertor{Now: func() time.Time { return now }} }

func TestTableConvertor_ConvertToTable(t *testing.T) {
	deploy := &appsv1.Deployment{
		ObjectMeta: objectMeta("default", "web", 2*time.Hour),
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 1, UpdatedReplicas: 2, AvailableReplicas: 1},
	}
	tests := []struct {
		name    string
		obj     runtime.Object
		columns string
		wide    string // the priority-1 columns
		rows    [][]any
	}{
		{
			name: "pod list", obj: &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"},
				Items: []corev1.Pod{*runningPod("default", "a"), *runningPod("dev", "b")}},
			columns: "Name Ready Status Restarts Age IP Node Nominated Node Readiness Gates",
			wide:    "IP Node Nominated Node Readiness Gates",
			rows: [][]any{
				{"a", "1/1", "Running", "0", "5m", "10.88.0.4", "node-1", "<none>", "<none>"},
				{"b", "1/1", "Running", "0", "5m", "10.88.0.4", "node-1", "<none>", "<none>"},
			},
		},
		{
			name: "one deployment", obj: deploy,
			columns: "Name Ready Up-to-date Available Age Containers Images Selector",
			wide:    "Containers Images Selector",
			rows:    [][]any{{"web", "1/2", int64(2), int64(1), "120m", "web", "nginx", "app=web"}},
		},
		{
			name: "empty replica set list", obj: &appsv1.ReplicaSetList{},
			columns: "Name Desired Current Ready Age Containers Images Selector",
			wide:    "Containers Images Selector",
		},
		{
			name: "namespace", obj: &corev1.Namespace{ObjectMeta: objectMeta("", "dev", 3*24*time.Hour), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			columns: "Name Status Age",
			rows:    [][]any{{"dev", "Active", "3d"}},
		},
		{
			name: "node lease", obj: &coordinationv1.Lease{ObjectMeta: objectMeta("kube-node-lease", "node-1", 5*time.Minute), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1")}},
			columns: "Name Holder Age",
			rows:    [][]any{{"node-1", "node-1", "5m"}},
		},
		{
			name: "lease without holder", obj: &coordinationv1.Lease{ObjectMeta: objectMeta("default", "free", 5*time.Minute)},
			columns: "Name Holder Age",
			rows:    [][]any{{"free", "", "5m"}},
		},
		{
			name: "runtime class", obj: &nodev1.RuntimeClass{ObjectMeta: objectMeta("", "gvisor", 2*time.Hour), Handler: "runsc"},
			columns: "Name Handler Age",
			rows:    [][]any{{"gvisor", "runsc", "120m"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, err := convertor().ConvertToTable(context.Background(), tt.obj, "")
			if err != nil {
				t.Fatal(err)
			}
			if table.Kind != "Table" || table.APIVersion != "meta.k8s.io/v1" {
				t.Errorf("kind %s apiVersion %s", table.Kind, table.APIVersion)
			}
			var names, wide []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
				if c.Priority == 1 {
					wide = append(wide, c.Name)
				}
				if c.Description == "" || (c.Type != "string" && c.Type != "integer" && c.Type != "date") {
					t.Errorf("column %s: type %q description %q", c.Name, c.Type, c.Description)
				}
			}
			if got := strings.Join(names, " "); got != tt.columns {
				t.Errorf("columns %q, want %q", got, tt.columns)
			}
			if got := strings.Join(wide, " "); got != tt.wide {
				t.Errorf("priority-1 columns %q, want %q", got, tt.wide)
			}
			if table.ColumnDefinitions[0].Format != "name" && tt.columns[:4] == "Name" {
				t.Errorf("the Name column's format is %q, want name", table.ColumnDefinitions[0].Format)
			}
			if len(table.Rows) != len(tt.rows) {
				t.Fatalf("%d rows, want %d", len(table.Rows), len(tt.rows))
			}
			for i, r := range table.Rows {
				if len(r.Cells) != len(table.ColumnDefinitions) {
					t.Errorf("row %d: %d cells for %d columns", i, len(r.Cells), len(table.ColumnDefinitions))
				}
				for j := range tt.rows[i] {
					if r.Cells[j] != tt.rows[i][j] {
						t.Errorf("row %d cell %s: %#v, want %#v", i, table.ColumnDefinitions[j].Name, r.Cells[j], tt.rows[i][j])
					}
				}
			}
		})
	}
}

// TestTableConvertor_IncludeObject: each row carries nothing, the object's
// metadata (the default: kubectl -A takes NAMESPACE from it), or the object.
func TestTableConvertor_IncludeObject(t *testing.T) {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Pod{*runningPod("dev", "a")}}
	for _, include := range []string{"", "Metadata", "Object", "None"} {
		table, err := convertor().ConvertToTable(context.Background(), list, include)
		if err != nil {
			t.Fatalf("includeObject %q: %v", include, err)
		}
		if table.ResourceVersion != "42" {
			t.Errorf("includeObject %q: resourceVersion %q, want the list's 42", include, table.ResourceVersion)
		}
		obj := table.Rows[0].Object.Object
		switch include {
		case "", "Metadata":
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("includeObject %q: row object %T, want PartialObjectMetadata", include, obj)
			}
			if m.Kind != "PartialObjectMetadata" || m.APIVersion != "meta.k8s.io/v1" || m.Namespace != "dev" || m.Name != "a" || m.Labels["app"] != "a" {
				t.Errorf("includeObject %q: %+v", include, m)
			}
		case "Object":
			if p, ok := obj.(*corev1.Pod); !ok || p.Spec.NodeName != "node-1" {
				t.Errorf("includeObject Object: row object %#v", obj)
			}
		case "None":
			if obj != nil {
				t.Errorf("includeObject None: row object %T", obj)
			}
		}
	}
}

func TestTableConvertor_BadInput(t *testing.T) {
	tests := []struct {
		name    string
		obj     runtime.Object
		include string
		want    string
	}{
		{"no object", nil, "", "no object"},
		{"unknown includeObject", runningPod("dev", "a"), "Everything", `includeObject "Everything" is not one of None, Metadata, Object`},
		{"kind podlab does not serve", &corev1.ConfigMap{}, "", "not a kind podlab serves"},
		{"list of a kind podlab does not serve", &corev1.ConfigMapList{Items: []corev1.ConfigMap{{}}}, "", "not a kind podlab serves"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := convertor().ConvertToTable(context.Background(), tt.obj, tt.include)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := convertor().ConvertToTable(ctx, &corev1.PodList{Items: []corev1.Pod{*runningPod("dev", "a")}}, ""); err == nil {
		t.Error("a cancelled context converted")
	}
}

// TestColumns_EveryResource: every kind podlab serves has kube's columns
// and one cell per column, so no `kubectl get` of a podlab resource meets a
// server that cannot print it.
func TestColumns_EveryResource(t *testing.T) {
	for _, r := range apiserver.Resources() {
		cols, err := Columns(r.Kind)
		if err != nil {
			t.Errorf("%s: %v", r.Name, err)
			continue
		}
		cells, err := Cells(r.New(), now)
		if err != nil {
			t.Errorf("%s: %v", r.Name, err)
			continue
		}
		if len(cells) != len(cols) {
			t.Errorf("%s: %d cells for %d columns", r.Name, len(cells), len(cols))
		}
	}
	cols, _ := Columns("RoleBinding")
	if d := cols[1].Description; strings.Contains(d, "immutable") || !strings.HasPrefix(d, "roleRef can reference a Role") {
		t.Errorf("RoleBinding's ROLE column describes %q, want kube's (v1beta1's) text", d)
	}
}
