package admission

import (
	"fmt"
	"github.com/podlab/podlab/internal/qos"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaulting: what kube-apiserver fills in when a client leaves a field
// empty. The real code is the generated SetDefaults_* functions of
// k8s.io/kubernetes/pkg/apis/<group>/v1/defaults.go, run when the request
// body is decoded, plus a few mutating admission plugins for pods. Every
// function here is idempotent: a field that is already set is left alone, so
// running it again on a stored object changes nothing and says nothing.

// Default applies the defaults of obj's kind and returns one note per field
// it set. Kinds without defaults (Event, ResourceQuota, Role, ClusterRole)
// return no notes.
func Default(obj runtime.Object) []string {
	switch o := obj.(type) {
	case *corev1.Pod:
		return DefaultPod(o)
	case *appsv1.Deployment:
		return DefaultDeployment(o)
	case *appsv1.ReplicaSet:
		return DefaultReplicaSet(o)
	case *corev1.Namespace:
		return DefaultNamespace(o)
	case *corev1.Node:
		return DefaultNode(o)
	case *corev1.LimitRange:
		return DefaultLimitRange(o)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return DefaultMutatingWebhookConfiguration(o)
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return DefaultValidatingWebhookConfiguration(o)
	case *rbacv1.RoleBinding:
		return DefaultRoleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		return DefaultClusterRoleBinding(o)
	}
	return nil
}

// defaulter collects the notes of one defaulting pass.
type defaulter struct{ notes []string }

func (d *defaulter) set(path string, value any, why ...string) {
	// Every create runs this a dozen times or more: format the common
	// kinds of values without fmt's reflection.
	var v string
	switch x := value.(type) {
	case string:
		v = x
	case bool:
		v = strconv.FormatBool(x)
	case int:
		v = strconv.Itoa(x)
	case int32:
		v = strconv.FormatInt(int64(x), 10)
	case int64:
		v = strconv.FormatInt(x, 10)
	case corev1.RestartPolicy:
		v = string(x)
	case corev1.DNSPolicy:
		v = string(x)
	case corev1.PullPolicy:
		v = string(x)
	case corev1.TerminationMessagePolicy:
		v = string(x)
	case corev1.PodPhase:
		v = string(x)
	case corev1.PodQOSClass:
		v = string(x)
	case corev1.PreemptionPolicy:
		v = string(x)
	default:
		v = fmt.Sprint(value)
	}
	note := "set " + path + "=" + v
	if len(why) > 0 {
		note += " (" + strings.Join(why, ", ") + ")"
	}
	d.notes = append(d.notes, note)
}

// DefaultPod applies everything kube-apiserver fills in on a new pod:
// SetDefaults_Pod and SetDefaults_PodSpec, the container defaults, the
// ServiceAccount and Priority admission plugins, and the pod strategy's
// status.phase and status.qosClass. The DefaultTolerationSeconds plugin,
// which the API server configures, is DefaultTolerationSeconds.
func DefaultPod(p *corev1.Pod) []string {
	notes := DecodeDefaultsPod(p)
	notes = append(notes, ServiceAccount(p)...)
	notes = append(notes, Priority(p)...)
	return append(notes, PodStatusOnCreate(p)...)
}

// DecodeDefaultsPod is the part of DefaultPod that is defaulting proper:
// SetDefaults_Pod and SetDefaults_PodSpec, which kube-apiserver runs when
// it decodes the request, before any admission plugin.
func DecodeDefaultsPod(p *corev1.Pod) []string {
	d := &defaulter{}
	spec := &p.Spec
	d.podSpec(spec, "spec")

	// SetDefaults_Pod: only pods, not pod templates, get these.
	for i := range spec.Containers {
		d.requestsFromLimits(&spec.Containers[i], fmt.Sprintf("spec.containers[%d]", i))
	}
	for i := range spec.InitContainers {
		d.requestsFromLimits(&spec.InitContainers[i], fmt.Sprintf("spec.initContainers[%d]", i))
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr(corev1.DefaultEnableServiceLinks)
		d.set("spec.enableServiceLinks", true)
	}
	if spec.HostNetwork {
		d.hostNetworkPorts(spec.Containers, "spec.containers")
		d.hostNetworkPorts(spec.InitContainers, "spec.initContainers")
	}

	return d.notes
}

// ServiceAccount is the ServiceAccount admission plugin (mutating): a pod
// naming no service account gets "default".
func ServiceAccount(p *corev1.Pod) []string {
	d := &defaulter{}
	spec := &p.Spec
	// The ServiceAccount admission plugin. The real plugin also checks that
	// the ServiceAccount exists and mounts its token as a projected volume
	// (kube-api-access-xxxxx); podlab has no ServiceAccount objects. It
	// leaves mirror pods alone: a kubelet posts them from a file, may not
	// make them refer to a service account (NodeRestriction), and deletes
	// one whose spec differs from its file.
	if _, mirror := p.Annotations[MirrorPodAnnotation]; spec.ServiceAccountName == "" && !mirror {
		if spec.DeprecatedServiceAccount != "" {
			spec.ServiceAccountName = spec.DeprecatedServiceAccount
		} else {
			spec.ServiceAccountName = "default"
		}
		d.set("spec.serviceAccountName", spec.ServiceAccountName, "ServiceAccount admission")
	}
	if spec.DeprecatedServiceAccount == "" {
		// The v1 conversion keeps the deprecated alias in step.
		spec.DeprecatedServiceAccount = spec.ServiceAccountName
	}

	return d.notes
}

// Priority is the Priority admission plugin (mutating): a pod's priority
// from its priorityClassName.
func Priority(p *corev1.Pod) []string {
	d := &defaulter{}
	spec := &p.Spec
	// The Priority admission plugin, with no PriorityClass objects: a pod
	// without a class gets priority 0, the two built-in system classes their
	// fixed values.
	if spec.Priority == nil {
		switch spec.PriorityClassName {
		case "":
			spec.Priority = ptr(int32(0))
			d.set("spec.priority", 0, "Priority admission, no priorityClassName")
		case "system-cluster-critical":
			spec.Priority = ptr(int32(2000000000))
			d.set("spec.priority", *spec.Priority, "Priority admission, system-cluster-critical")
		case "system-node-critical":
			spec.Priority = ptr(int32(2000001000))
			d.set("spec.priority", *spec.Priority, "Priority admission, system-node-critical")
		}
	}
	if spec.Priority != nil && spec.PreemptionPolicy == nil {
		spec.PreemptionPolicy = ptr(corev1.PreemptLowerPriority)
		d.set("spec.preemptionPolicy", corev1.PreemptLowerPriority, "Priority admission")
	}

	return d.notes
}

// PodStatusOnCreate is the pod strategy's PrepareForCreate (after mutating
// admission in kube-apiserver): a new pod is Pending, and its QoS class is
// computed once, from its resources.
func PodStatusOnCreate(p *corev1.Pod) []string {
	d := &defaulter{}
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.PodPending
		d.set("status.phase", corev1.PodPending)
	}
	if p.Status.QOSClass == "" {
		p.Status.QOSClass = qos.Compute(p)
		d.set("status.qosClass", p.Status.QOSClass)
	}
	return d.notes
}

// podSpec is SetDefaults_PodSpec plus the defaults of everything inside a
// pod spec; it applies to pods and to pod templates alike.
func (d *defaulter) podSpec(spec *corev1.PodSpec, path string) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
		d.set(path+".dnsPolicy", spec.DNSPolicy)
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
		d.set(path+".restartPolicy", spec.RestartPolicy)
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
		d.set(path+".securityContext", "{}")
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr(int64(corev1.DefaultTerminationGracePeriodSeconds))
		d.set(path+".terminationGracePeriodSeconds", corev1.DefaultTerminationGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
		d.set(path+".schedulerName", spec.SchedulerName)
	}
	for i := range spec.InitContainers {
		d.container(&spec.InitContainers[i], fmt.Sprintf("%s.initContainers[%d]", path, i))
	}
	for i := range spec.Containers {
		d.container(&spec.Containers[i], fmt.Sprintf("%s.containers[%d]", path, i))
	}
	for i := range spec.Volumes {
		d.volume(&spec.Volumes[i], fmt.Sprintf("%s.volumes[%d]", path, i))
	}
}

// container is SetDefaults_Container and the defaults of its ports, probes
// and environment.
func (d *defaulter) container(c *corev1.Container, path string) {
	if c.ImagePullPolicy == "" {
		tag, digest := imageTagAndDigest(c.Image)
		switch {
		case tag == "latest":
			c.ImagePullPolicy = corev1.PullAlways
			d.set(path+".imagePullPolicy", c.ImagePullPolicy, "image tag :latest")
		case tag == "" && digest == "":
			c.ImagePullPolicy = corev1.PullAlways
			d.set(path+".imagePullPolicy", c.ImagePullPolicy, "no tag means :latest")
		case tag == "":
			c.ImagePullPolicy = corev1.PullIfNotPresent
			d.set(path+".imagePullPolicy", c.ImagePullPolicy, "image pinned by digest")
		default:
			c.ImagePullPolicy = corev1.PullIfNotPresent
			d.set(path+".imagePullPolicy", c.ImagePullPolicy, "image tag :"+tag)
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		d.set(path+".terminationMessagePath", c.TerminationMessagePath)
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		d.set(path+".terminationMessagePolicy", c.TerminationMessagePolicy)
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
			d.set(fmt.Sprintf("%s.ports[%d].protocol", path, i), corev1.ProtocolTCP)
		}
	}
	for i := range c.Env {
		if ref := c.Env[i].ValueFrom; ref != nil && ref.FieldRef != nil && ref.FieldRef.APIVersion == "" {
			ref.FieldRef.APIVersion = "v1"
			d.set(fmt.Sprintf("%s.env[%d].valueFrom.fieldRef.apiVersion", path, i), "v1")
		}
	}
	d.probe(c.LivenessProbe, path+".livenessProbe")
	d.probe(c.ReadinessProbe, path+".readinessProbe")
	d.probe(c.StartupProbe, path+".startupProbe")
}

// probe is SetDefaults_Probe and SetDefaults_HTTPGetAction, in one note.
func (d *defaulter) probe(p *corev1.Probe, path string) {
	if p == nil {
		return
	}
	var set []string
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
		set = append(set, "timeoutSeconds=1")
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
		set = append(set, "periodSeconds=10")
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
		set = append(set, "successThreshold=1")
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
		set = append(set, "failureThreshold=3")
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
			set = append(set, "httpGet.path=/")
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
			set = append(set, "httpGet.scheme=HTTP")
		}
	}
	if len(set) > 0 {
		d.notes = append(d.notes, fmt.Sprintf("set %s %s", path, strings.Join(set, " ")))
	}
}

// volume is SetDefaults_Volume and the defaults of the volume sources: a
// volume with no source is an emptyDir, projected files are mode 0644.
func (d *defaulter) volume(v *corev1.Volume, path string) {
	if v.VolumeSource == (corev1.VolumeSource{}) {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		d.set(path+".emptyDir", "{}", "a volume without a source")
	}
	mode := func(m **int32, field string) {
		if *m == nil {
			*m = ptr(corev1.SecretVolumeSourceDefaultMode)
			d.set(path+"."+field+".defaultMode", "0644")
		}
	}
	switch {
	case v.Secret != nil:
		mode(&v.Secret.DefaultMode, "secret")
	case v.ConfigMap != nil:
		mode(&v.ConfigMap.DefaultMode, "configMap")
	case v.Projected != nil:
		mode(&v.Projected.DefaultMode, "projected")
	case v.DownwardAPI != nil:
		mode(&v.DownwardAPI.DefaultMode, "downwardAPI")
	case v.HostPath != nil && v.HostPath.Type == nil:
		v.HostPath.Type = ptr(corev1.HostPathUnset)
		d.set(path+".hostPath.type", `""`, "no check of what is at the path")
	}
}

// requestsFromLimits: a container that sets a limit but no request for a
// resource requests its limit (SetDefaults_Pod).
func (d *defaulter) requestsFromLimits(c *corev1.Container, path string) {
	if c.Resources.Limits == nil {
		return
	}
	for _, name := range sortedNames(c.Resources.Limits) {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		q := c.Resources.Limits[name]
		c.Resources.Requests[name] = q.DeepCopy()
		d.set(fmt.Sprintf("%s.resources.requests.%s", path, name), q.String(), "from limits")
	}
}

// hostNetworkPorts: with hostNetwork the container port is the host port.
func (d *defaulter) hostNetworkPorts(cs []corev1.Container, path string) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
				d.set(fmt.Sprintf("%s[%d].ports[%d].hostPort", path, i, j), cs[i].Ports[j].HostPort, "hostNetwork")
			}
		}
	}
}

// imageTagAndDigest splits an image reference the way the kubelet's
// ParseImageName does: "nginx" has no tag (the puller will use latest),
// "nginx:1.25" has tag 1.25, "nginx@sha256:..." a digest and no tag, and
// "localhost:5000/nginx" no tag (the colon belongs to the registry host).
func imageTagAndDigest(image string) (tag, digest string) {
	name := image
	if i := strings.Index(image, "@"); i >= 0 {
		name, digest = image[:i], image[i+1:]
	}
	if colon := strings.LastIndex(name, ":"); colon > strings.LastIndex(name, "/") {
		tag = name[colon+1:]
	}
	return tag, digest
}

// DefaultDeployment is SetDefaults_Deployment (apps/v1) and the pod
// template's spec defaults. Pod-only defaults (requests from limits,
// serviceAccountName, tolerations, status) are left for the pods the
// ReplicaSet controller will create from the template.
func DefaultDeployment(dep *appsv1.Deployment) []string {
	d := &defaulter{}
	if dep.Spec.Replicas == nil {
		dep.Spec.Replicas = ptr(int32(1))
		d.set("spec.replicas", 1)
	}
	s := &dep.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
		d.set("spec.strategy.type", s.Type)
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("25%"))
			d.set("spec.strategy.rollingUpdate.maxUnavailable", "25%")
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr(intstr.FromString("25%"))
			d.set("spec.strategy.rollingUpdate.maxSurge", "25%")
		}
	}
	if dep.Spec.RevisionHistoryLimit == nil {
		dep.Spec.RevisionHistoryLimit = ptr(int32(10))
		d.set("spec.revisionHistoryLimit", 10)
	}
	if dep.Spec.ProgressDeadlineSeconds == nil {
		dep.Spec.ProgressDeadlineSeconds = ptr(int32(600))
		d.set("spec.progressDeadlineSeconds", 600)
	}
	d.podSpec(&dep.Spec.Template.Spec, "spec.template.spec")
	return d.notes
}

// DefaultReplicaSet is SetDefaults_ReplicaSet (apps/v1) and the pod
// template's spec defaults.
func DefaultReplicaSet(rs *appsv1.ReplicaSet) []string {
	d := &defaulter{}
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr(int32(1))
		d.set("spec.replicas", 1)
	}
	d.podSpec(&rs.Spec.Template.Spec, "spec.template.spec")
	return d.notes
}

// DefaultNamespace is SetDefaults_Namespace and SetDefaults_NamespaceStatus:
// a namespace is Active until its deletion starts, and carries its own name
// as the label kubernetes.io/metadata.name, so that label selectors (a
// NetworkPolicy's namespaceSelector) can pick namespaces by name.
func DefaultNamespace(ns *corev1.Namespace) []string {
	d := &defaulter{}
	if ns.Name != "" && ns.Labels[corev1.LabelMetadataName] != ns.Name {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
		d.set("metadata.labels["+corev1.LabelMetadataName+"]", ns.Name)
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
		d.set("status.phase", corev1.NamespaceActive)
	}
	return d.notes
}

// DefaultNode is SetDefaults_NodeStatus: a node that reports its capacity
// but not what is allocatable to pods offers all of it.
func DefaultNode(n *corev1.Node) []string {
	d := &defaulter{}
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
		d.set("status.allocatable", "status.capacity")
	}
	return d.notes
}

// DefaultLimitRange is SetDefaults_LimitRangeItem for the Container items: a
// missing default limit is the max, a missing default request is the
// default limit, or else the min. LimitRanger applies the same rules to the
// LimitRanges it is given, so a stored LimitRange without them still works.
func DefaultLimitRange(lr *corev1.LimitRange) []string {
	d := &defaulter{}
	for i := range lr.Spec.Limits {
		d.limitRangeItem(&lr.Spec.Limits[i], fmt.Sprintf("spec.limits[%d]", i))
	}
	return d.notes
}

func (d *defaulter) limitRangeItem(item *corev1.LimitRangeItem, path string) {
	if item.Type != corev1.LimitTypeContainer {
		return
	}
	if item.Default == nil {
		item.Default = corev1.ResourceList{}
	}
	if item.DefaultRequest == nil {
		item.DefaultRequest = corev1.ResourceList{}
	}
	for _, name := range sortedNames(item.Max) {
		if _, ok := item.Default[name]; !ok {
			q := item.Max[name]
			item.Default[name] = q.DeepCopy()
			d.set(fmt.Sprintf("%s.default.%s", path, name), q.String(), "from max")
		}
	}
	for _, name := range sortedNames(item.Default) {
		if _, ok := item.DefaultRequest[name]; !ok {
			q := item.Default[name]
			item.DefaultRequest[name] = q.DeepCopy()
			d.set(fmt.Sprintf("%s.defaultRequest.%s", path, name), q.String(), "from default")
		}
	}
	for _, name := range sortedNames(item.Min) {
		if _, ok := item.DefaultRequest[name]; !ok {
			q := item.Min[name]
			item.DefaultRequest[name] = q.DeepCopy()
			d.set(fmt.Sprintf("%s.defaultRequest.%s", path, name), q.String(), "from min")
		}
	}
}

// DefaultRoleBinding is SetDefaults_RoleBinding and SetDefaults_Subject: the
// roleRef and User and Group subjects are in the rbac.authorization.k8s.io
// group unless they say otherwise.
func DefaultRoleBinding(rb *rbacv1.RoleBinding) []string {
	d := &defaulter{}
	d.rbacBinding(&rb.RoleRef, rb.Subjects)
	return d.notes
}

// DefaultClusterRoleBinding is DefaultRoleBinding for a ClusterRoleBinding.
func DefaultClusterRoleBinding(crb *rbacv1.ClusterRoleBinding) []string {
	d := &defaulter{}
	d.rbacBinding(&crb.RoleRef, crb.Subjects)
	return d.notes
}

func (d *defaulter) rbacBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
		d.set("roleRef.apiGroup", rbacv1.GroupName)
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
			d.set(fmt.Sprintf("subjects[%d].apiGroup", i), rbacv1.GroupName)
		}
	}
}

func ptr[T any](v T) *T { return &v }
