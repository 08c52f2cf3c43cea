package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RuntimeClasses stored and validated, and the RuntimeClass admission
// plugin on pod creates.

func gvisorClass() *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor"},
		Handler:    "runsc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"sandbox": "gvisor"},
			Tolerations:  []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpEqual, Value: "gvisor", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

func TestServer_RuntimeClass_StoredUnderKubesKey(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	if _, err := admin.Create(ctx(t), gvisorClass()); err != nil {
		t.Fatalf("create RuntimeClass: %v", err)
	}
	got, err := admin.Get(ctx(t), "runtimeclasses", "", "gvisor")
	if err != nil {
		t.Fatalf("get RuntimeClass: %v", err)
	}
	if h := got.(*nodev1.RuntimeClass).Handler; h != "runsc" {
		t.Errorf("handler %q, want runsc", h)
	}
	if key := mustResource("runtimeclasses").Key("", "gvisor"); key != "/registry/runtimeclasses/gvisor" {
		t.Errorf("store key %q, want kube's /registry/runtimeclasses/gvisor", key)
	}
}

func TestServer_RuntimeClass_Admission(t *testing.T) {
	s, _ := testServer(t)
	var phases []Phase
	admin := as(t, s, "admin", WithPhases(func(p Phase) { phases = append(phases, p) }))
	if _, err := admin.Create(ctx(t), gvisorClass()); err != nil {
		t.Fatalf("create RuntimeClass: %v", err)
	}

	missing := testPod("missing")
	missing.Spec.RuntimeClassName = new("kata")
	_, err := admin.Create(ctx(t), missing)
	if want := `pods "missing" is forbidden: pod rejected: RuntimeClass "kata" not found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("pod naming a missing RuntimeClass: %v, want Forbidden %q", err, want)
	}
	if _, err := admin.Get(ctx(t), "pods", "default", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("the refused pod was stored: %v", err)
	}

	phases = nil
	p := testPod("sandboxed")
	p.Spec.RuntimeClassName = new("gvisor")
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	created, err := admin.Create(ctx(t), p)
	if err != nil {
		t.Fatalf("pod with RuntimeClass gvisor: %v", err)
	}
	got := created.(*corev1.Pod)
	if cpu, mem := got.Spec.Overhead[corev1.ResourceCPU], got.Spec.Overhead[corev1.ResourceMemory]; cpu.String() != "250m" || mem.String() != "64Mi" {
		t.Errorf("spec.overhead = %v, want the class's cpu=250m memory=64Mi", got.Spec.Overhead)
	}
	if got.Spec.NodeSelector["sandbox"] != "gvisor" || got.Spec.NodeSelector["disk"] != "ssd" {
		t.Errorf("nodeSelector = %v, want the pod's and the class's merged", got.Spec.NodeSelector)
	}
	found := false
	for _, tol := range got.Spec.Tolerations {
		found = found || (tol.Key == "sandbox" && tol.Value == "gvisor" && tol.Effect == corev1.TaintEffectNoSchedule)
	}
	if !found {
		t.Errorf("tolerations = %v, want the class's sandbox=gvisor:NoSchedule", got.Spec.Tolerations)
	}
	var narrated []string
	for _, ph := range phases {
		if ph.Plugin == "RuntimeClass" {
			narrated = append(narrated, ph.Name+": "+ph.Summary)
		}
	}
	if len(narrated) != 2 || !strings.Contains(narrated[0], `RuntimeClass "gvisor": handler "runsc"`) || !strings.Contains(narrated[1], `spec.overhead matches RuntimeClass "gvisor"`) {
		t.Errorf("-v narration of RuntimeClass: %q, want its mutating and validating phases", narrated)
	}

	conflict := testPod("conflict")
	conflict.Spec.RuntimeClassName = new("gvisor")
	conflict.Spec.NodeSelector = map[string]string{"sandbox": "none"}
	_, err = admin.Create(ctx(t), conflict)
	if want := `pods "conflict" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = none`; err == nil || err.Error() != want {
		t.Errorf("conflicting nodeSelector: %v, want %q", err, want)
	}

	own := testPod("own-overhead")
	own.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	_, err = admin.Create(ctx(t), own)
	if want := `pods "own-overhead" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`; err == nil || err.Error() != want {
		t.Errorf("pod setting its own overhead: %v, want %q", err, want)
	}
}

func TestServer_RuntimeClass_BadInput(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	if _, err := admin.Create(ctx(t), gvisorClass()); err != nil {
		t.Fatal(err)
	}
	changed, err := admin.Get(ctx(t), "runtimeclasses", "", "gvisor")
	if err != nil {
		t.Fatal(err)
	}
	changed.(*nodev1.RuntimeClass).Handler = "runc"
	tests := []struct {
		name  string
		write func() error
		want  string
	}{
		{"no handler", func() error {
			_, err := admin.Create(ctx(t), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "empty"}})
			return err
		}, `RuntimeClass.node.k8s.io "empty" is invalid: handler: Invalid value: "": a lowercase RFC 1123 label must consist of`},
		{"handler not a DNS label", func() error {
			_, err := admin.Create(ctx(t), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Handler: "Run_SC"})
			return err
		}, `RuntimeClass.node.k8s.io "bad" is invalid: handler: Invalid value: "Run_SC": a lowercase RFC 1123 label`},
		{"negative overhead", func() error {
			rc := gvisorClass()
			rc.Name = "negative"
			rc.Overhead.PodFixed[corev1.ResourceCPU] = resource.MustParse("-1")
			_, err := admin.Create(ctx(t), rc)
			return err
		}, `RuntimeClass.node.k8s.io "negative" is invalid: overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0`},
		{"bad nodeSelector", func() error {
			rc := gvisorClass()
			rc.Name = "badsel"
			rc.Scheduling.NodeSelector = map[string]string{"bad key!": "x"}
			_, err := admin.Create(ctx(t), rc)
			return err
		}, `RuntimeClass.node.k8s.io "badsel" is invalid: scheduling.nodeSelector: Invalid value: "bad key!"`},
		{"bad toleration", func() error {
			rc := gvisorClass()
			rc.Name = "badtol"
			rc.Scheduling.Tolerations = []corev1.Toleration{{Key: "", Operator: corev1.TolerationOpEqual, Value: "x"}}
			_, err := admin.Create(ctx(t), rc)
			return err
		}, `RuntimeClass.node.k8s.io "badtol" is invalid: scheduling.tolerations[0].operator`},
		{"handler changed", func() error {
			_, err := admin.Update(ctx(t), changed)
			return err
		}, `RuntimeClass.node.k8s.io "gvisor" is invalid: handler: Invalid value: "runc": field is immutable`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.write()
			if !apierrors.IsInvalid(err) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want Invalid starting %q", err, tt.want)
			}
		})
	}
	got, err := admin.Get(ctx(t), "runtimeclasses", "", "gvisor")
	if err != nil || got.(*nodev1.RuntimeClass).Handler != "runsc" {
		t.Errorf("after the refused update: %v, %v; want handler runsc kept", got, err)
	}
}
