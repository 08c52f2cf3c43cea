package admission

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func runtimeClass(overhead corev1.ResourceList, selector map[string]string, tolerations ...corev1.Toleration) *nodev1.RuntimeClass {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}
	if overhead != nil {
		rc.Overhead = &nodev1.Overhead{PodFixed: overhead}
	}
	if selector != nil || tolerations != nil {
		rc.Scheduling = &nodev1.Scheduling{NodeSelector: selector, Tolerations: tolerations}
	}
	return rc
}

func TestRuntimeClassAdmit(t *testing.T) {
	sandbox := corev1.Toleration{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name         string
		class        string // spec.runtimeClassName, "" for none
		rc           *nodev1.RuntimeClass
		selector     map[string]string
		tolerations  []corev1.Toleration
		wantOverhead corev1.ResourceList
		wantSelector map[string]string
		wantTols     []corev1.Toleration
	}{
		{name: "no RuntimeClass named"},
		{name: "class without overhead or scheduling", class: "gvisor", rc: runtimeClass(nil, nil)},
		{name: "overhead copied", class: "gvisor", rc: runtimeClass(rl("cpu=250m"), nil), wantOverhead: rl("cpu=250m")},
		{name: "nodeSelector into an empty one", class: "gvisor", rc: runtimeClass(nil, map[string]string{"sandbox": "gvisor"}),
			wantSelector: map[string]string{"sandbox": "gvisor"}},
		{name: "nodeSelector merged, same value kept", class: "gvisor", rc: runtimeClass(nil, map[string]string{"sandbox": "gvisor", "zone": "a"}),
			selector: map[string]string{"sandbox": "gvisor", "disk": "ssd"}, wantSelector: map[string]string{"sandbox": "gvisor", "zone": "a", "disk": "ssd"}},
		{name: "toleration appended once", class: "gvisor", rc: runtimeClass(nil, nil, sandbox),
			tolerations: []corev1.Toleration{sandbox}, wantTols: []corev1.Toleration{sandbox}},
		{name: "toleration appended", class: "gvisor", rc: runtimeClass(nil, nil, sandbox), wantTols: []corev1.Toleration{sandbox}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("web", ctr("web", "nginx"))
			if tt.class != "" {
				p.Spec.RuntimeClassName = &tt.class
			}
			p.Spec.NodeSelector, p.Spec.Tolerations = tt.selector, tt.tolerations
			notes, err := RuntimeClassAdmit(p, tt.rc)
			if err != nil {
				t.Fatalf("RuntimeClassAdmit: %v", err)
			}
			if (len(notes) == 0) != (tt.rc == nil) {
				t.Errorf("notes %q: want some exactly when the pod names a RuntimeClass", notes)
			}
			if !reflect.DeepEqual(p.Spec.Overhead, tt.wantOverhead) || !reflect.DeepEqual(p.Spec.NodeSelector, tt.wantSelector) || !reflect.DeepEqual(p.Spec.Tolerations, tt.wantTols) {
				t.Errorf("overhead %v selector %v tolerations %v; want %v %v %v", p.Spec.Overhead, p.Spec.NodeSelector, p.Spec.Tolerations, tt.wantOverhead, tt.wantSelector, tt.wantTols)
			}
			if _, err := RuntimeClassValidate(p, tt.rc); err != nil {
				t.Errorf("RuntimeClassValidate after Admit: %v", err)
			}
		})
	}
}

func TestRuntimeClassAdmit_Refused(t *testing.T) {
	tests := []struct {
		name     string
		class    string
		rc       *nodev1.RuntimeClass
		overhead corev1.ResourceList
		selector map[string]string
		want     string
	}{
		{"missing class", "kata", nil, nil, nil, `pods "web" is forbidden: pod rejected: RuntimeClass "kata" not found`},
		{"different overhead", "gvisor", runtimeClass(rl("cpu=250m"), nil), rl("cpu=1m"), nil,
			`pods "web" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
		{"nodeSelector conflict", "gvisor", runtimeClass(nil, map[string]string{"sandbox": "gvisor"}), nil, map[string]string{"sandbox": "no"},
			`pods "web" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = no`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("web", ctr("web", "nginx"))
			p.Spec.RuntimeClassName = &tt.class
			p.Spec.Overhead, p.Spec.NodeSelector = tt.overhead, tt.selector
			_, err := RuntimeClassAdmit(p, tt.rc)
			if !apierrors.IsForbidden(err) || err.Error() != tt.want {
				t.Errorf("error %v, want Forbidden %q", err, tt.want)
			}
		})
	}
}

func TestRuntimeClassValidate_Refused(t *testing.T) {
	tests := []struct {
		name     string
		class    bool
		rc       *nodev1.RuntimeClass
		overhead corev1.ResourceList
		want     string
	}{
		{"overhead without a class", false, nil, rl("cpu=1"), `pods "web" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
		{"overhead the class does not define", true, runtimeClass(nil, nil), rl("cpu=1"), `pods "web" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
		{"overhead changed after Admit", true, runtimeClass(rl("cpu=250m"), nil), rl("cpu=1"), `pods "web" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("web", ctr("web", "nginx"))
			if tt.class {
				p.Spec.RuntimeClassName = new("gvisor")
			}
			p.Spec.Overhead = tt.overhead
			_, err := RuntimeClassValidate(p, tt.rc)
			if !apierrors.IsForbidden(err) || err.Error() != tt.want {
				t.Errorf("error %v, want Forbidden %q", err, tt.want)
			}
		})
	}
}
