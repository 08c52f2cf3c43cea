package admission

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func limitRange(name string, items ...corev1.LimitRangeItem) corev1.LimitRange {
	return corev1.LimitRange{ObjectMeta: meta(name), Spec: corev1.LimitRangeSpec{Limits: items}}
}

func containerItem(item corev1.LimitRangeItem) corev1.LimitRangeItem {
	item.Type = corev1.LimitTypeContainer
	return item
}

func podItem(item corev1.LimitRangeItem) corev1.LimitRangeItem {
	item.Type = corev1.LimitTypePod
	return item
}

func TestLimitRanger_Pass(t *testing.T) {
	defaults := limitRange("limits", containerItem(corev1.LimitRangeItem{
		Default: rl("cpu=500m", "memory=256Mi"), DefaultRequest: rl("cpu=100m", "memory=128Mi")}))

	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		ranges       []corev1.LimitRange
		wantRequests corev1.ResourceList
		wantLimits   corev1.ResourceList
		wantNotes    []string // each must be among the notes
		wantQOS      corev1.PodQOSClass
	}{
		{
			name:         "defaults fill an empty container",
			pod:          defaultedPod("web", ctr("web", "nginx")),
			ranges:       []corev1.LimitRange{defaults},
			wantRequests: rl("cpu=100m", "memory=128Mi"),
			wantLimits:   rl("cpu=500m", "memory=256Mi"),
			wantNotes: []string{
				`LimitRange "limits": set container "web" requests.cpu=100m (defaultRequest)`,
				`LimitRange "limits": set container "web" limits.memory=256Mi (default)`,
				"set annotation kubernetes.io/limit-ranger",
				"set status.qosClass=Burstable (resources changed)",
				`LimitRange "limits": pod is within its bounds (it sets none)`,
			},
			wantQOS: corev1.PodQOSBurstable,
		},
		{
			name:         "what the container sets is kept",
			pod:          defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=200m"), rl("cpu=1"))),
			ranges:       []corev1.LimitRange{defaults},
			wantRequests: rl("cpu=200m", "memory=128Mi"),
			wantLimits:   rl("cpu=1", "memory=256Mi"),
			wantQOS:      corev1.PodQOSBurstable,
		},
		{
			name: "max alone becomes the default limit and request",
			pod:  defaultedPod("web", ctr("web", "nginx")),
			ranges: []corev1.LimitRange{limitRange("max", containerItem(corev1.LimitRangeItem{
				Max: rl("cpu=1", "memory=1Gi")}))},
			wantRequests: rl("cpu=1", "memory=1Gi"),
			wantLimits:   rl("cpu=1", "memory=1Gi"),
			wantNotes:    []string{`LimitRange "max": pod is within Container max cpu=1, Container max memory=1Gi`},
			wantQOS:      corev1.PodQOSGuaranteed,
		},
		{
			name: "within min, max and ratio",
			pod:  defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=250m"), rl("cpu=500m"))),
			ranges: []corev1.LimitRange{limitRange("bounds", containerItem(corev1.LimitRangeItem{
				Min: rl("cpu=100m"), Max: rl("cpu=1"), MaxLimitRequestRatio: rl("cpu=2")}))},
			wantRequests: rl("cpu=250m"),
			wantLimits:   rl("cpu=500m"),
			wantQOS:      corev1.PodQOSBurstable,
		},
		{
			name: "pod total within a Pod item",
			pod: defaultedPod("web",
				withResources(ctr("web", "nginx"), nil, rl("memory=512Mi")),
				withResources(ctr("log", "busybox"), nil, rl("memory=256Mi"))),
			ranges:       []corev1.LimitRange{limitRange("pod", podItem(corev1.LimitRangeItem{Max: rl("memory=1Gi")}))},
			wantRequests: rl("memory=512Mi"),
			wantLimits:   rl("memory=512Mi"),
			wantQOS:      corev1.PodQOSBurstable,
		},
		{
			name: "the first LimitRange's default wins",
			pod:  defaultedPod("web", ctr("web", "nginx")),
			ranges: []corev1.LimitRange{
				limitRange("a", containerItem(corev1.LimitRangeItem{Default: rl("cpu=300m")})),
				limitRange("b", containerItem(corev1.LimitRangeItem{Default: rl("cpu=900m")})),
			},
			wantRequests: rl("cpu=300m"),
			wantLimits:   rl("cpu=300m"),
			wantQOS:      corev1.PodQOSBurstable,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := LimitRanger(tc.pod, tc.ranges)
			if err != nil {
				t.Fatalf("LimitRanger: %v", err)
			}
			r := tc.pod.Spec.Containers[0].Resources
			if !apiequality.Semantic.DeepEqual(r.Requests, tc.wantRequests) || !apiequality.Semantic.DeepEqual(r.Limits, tc.wantLimits) {
				t.Errorf("resources = requests %v limits %v, want requests %v limits %v", r.Requests, r.Limits, tc.wantRequests, tc.wantLimits)
			}
			for _, want := range tc.wantNotes {
				if !slices.Contains(notes, want) {
					t.Errorf("notes %q\nlack %q", notes, want)
				}
			}
			if tc.pod.Status.QOSClass != tc.wantQOS {
				t.Errorf("status.qosClass = %s, want %s", tc.pod.Status.QOSClass, tc.wantQOS)
			}
		})
	}
}

func TestLimitRanger_Annotation(t *testing.T) {
	p := defaultedPod("web", ctr("web", "nginx"))
	LimitRangerMutate(p, []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{
		Default: rl("cpu=500m", "memory=256Mi"), DefaultRequest: rl("cpu=100m", "memory=128Mi")}))})
	want := "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
	if got := p.Annotations["kubernetes.io/limit-ranger"]; got != want {
		t.Errorf("annotation = %q, want %q", got, want)
	}
}

func TestLimitRanger_Fail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		ranges []corev1.LimitRange
		want   string
	}{
		{
			name:   "container limit above max",
			pod:    defaultedPod("web", withResources(ctr("web", "nginx"), rl("memory=512Mi"), rl("memory=2Gi"))),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{Max: rl("memory=1Gi")}))},
			want:   `pods "web" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi`,
		},
		{
			name:   "container request above max",
			pod:    defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=2"), nil)),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{Max: rl("cpu=1")}))},
			// the default limit (max, 1) is below the request: max checks the limit first
			want: `pods "web" is forbidden: maximum cpu usage per Container is 1, but request is 2`,
		},
		{
			name:   "container request below min",
			pod:    defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=50m"), nil)),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{Min: rl("cpu=100m")}))},
			want:   `pods "web" is forbidden: minimum cpu usage per Container is 100m, but request is 50m`,
		},
		{
			name:   "limit/request ratio",
			pod:    defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=100m"), rl("cpu=500m"))),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{MaxLimitRequestRatio: rl("cpu=2")}))},
			want:   `pods "web" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000`,
		},
		{
			name:   "ratio without a limit",
			pod:    defaultedPod("web", withResources(ctr("web", "nginx"), rl("cpu=100m"), nil)),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{MaxLimitRequestRatio: rl("cpu=2")}))},
			want:   `pods "web" is forbidden: cpu max limit to request ratio per Container is 2, but no limit is specified or limit is 0`,
		},
		{
			name: "pod total above a Pod max",
			pod: defaultedPod("web",
				withResources(ctr("web", "nginx"), nil, rl("memory=512Mi")),
				withResources(ctr("log", "busybox"), nil, rl("memory=768Mi"))),
			ranges: []corev1.LimitRange{limitRange("pod", podItem(corev1.LimitRangeItem{Max: rl("memory=1Gi")}))},
			want:   `pods "web" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 1280Mi`,
		},
		{
			name:   "Pod max without limits",
			pod:    defaultedPod("web", ctr("web", "nginx")),
			ranges: []corev1.LimitRange{limitRange("pod", podItem(corev1.LimitRangeItem{Max: rl("cpu=2")}))},
			want:   `pods "web" is forbidden: maximum cpu usage per Pod is 2.  No limit is specified`,
		},
		{
			name:   "every violation at once",
			pod:    defaultedPod("web", withResources(ctr("web", "nginx"), nil, rl("cpu=2", "memory=2Gi"))),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{Max: rl("cpu=1", "memory=1Gi")}))},
			want:   `pods "web" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, maximum memory usage per Container is 1Gi, but limit is 2Gi]`,
		},
		{
			name: "the second LimitRange rejects",
			pod:  defaultedPod("web", withResources(ctr("web", "nginx"), nil, rl("cpu=2"))),
			ranges: []corev1.LimitRange{
				limitRange("loose", containerItem(corev1.LimitRangeItem{Max: rl("cpu=4")})),
				limitRange("tight", containerItem(corev1.LimitRangeItem{Max: rl("cpu=1")})),
			},
			want: `pods "web" is forbidden: maximum cpu usage per Container is 1, but limit is 2`,
		},
		{
			name: "init containers are checked too",
			pod: func() *corev1.Pod {
				p := defaultedPod("web", withResources(ctr("web", "nginx"), nil, rl("cpu=500m")))
				p.Spec.InitContainers = []corev1.Container{withResources(ctr("init", "busybox"), rl("cpu=3"), rl("cpu=3"))}
				return p
			}(),
			ranges: []corev1.LimitRange{limitRange("limits", containerItem(corev1.LimitRangeItem{Max: rl("cpu=1")}))},
			want:   `pods "web" is forbidden: maximum cpu usage per Container is 1, but limit is 3`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LimitRanger(tc.pod, tc.ranges)
			if !apierrors.IsForbidden(err) {
				t.Fatalf("LimitRanger = %v, want a 403 Forbidden", err)
			}
			wantErrText(t, err, tc.want)
		})
	}
}
