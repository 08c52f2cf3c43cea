package kubectl

import (
	"fmt"
	"github.com/podlab/podlab/internal/qos"
	"sort"
	"strings"

	"github.com/podlab/podlab/steps/apiserver/printers"
	corev1 "k8s.io/api/core/v1"
)

// pod is kubectl describe pod: where the pod runs, its status, each
// container's image, state and restarts, the pod's conditions, volumes and
// QoS class (the events come after, from Describe).
func (d *describer) pod(pod *corev1.Pod) {
	d.write(0, "Name:\t%s\n", pod.Name)
	d.write(0, "Namespace:\t%s\n", pod.Namespace)
	if pod.Spec.Priority != nil {
		d.write(0, "Priority:\t%d\n", *pod.Spec.Priority)
	}
	if pod.Spec.PriorityClassName != "" {
		d.write(0, "Priority Class Name:\t%s\n", pod.Spec.PriorityClassName)
	}
	if pod.Spec.RuntimeClassName != nil && *pod.Spec.RuntimeClassName != "" {
		d.write(0, "Runtime Class Name:\t%s\n", *pod.Spec.RuntimeClassName)
	}
	if pod.Spec.ServiceAccountName != "" {
		d.write(0, "Service Account:\t%s\n", pod.Spec.ServiceAccountName)
	}
	if pod.Spec.NodeName == "" {
		d.write(0, "Node:\t<none>\n")
	} else {
		d.write(0, "Node:\t%s\n", pod.Spec.NodeName+"/"+pod.Status.HostIP)
	}
	if pod.Status.StartTime != nil {
		d.write(0, "Start Time:\t%s\n", rfc1123(*pod.Status.StartTime))
	}
	d.labels("Labels", pod.Labels)
	d.annotations("Annotations", pod.Annotations)
	if pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
		d.write(0, "Status:\tTerminating (lasts %s)\n", d.age(*pod.DeletionTimestamp))
		if pod.DeletionGracePeriodSeconds != nil {
			d.write(0, "Termination Grace Period:\t%ds\n", *pod.DeletionGracePeriodSeconds)
		}
	} else {
		d.write(0, "Status:\t%s\n", pod.Status.Phase)
	}
	if pod.Status.Reason != "" {
		d.write(0, "Reason:\t%s\n", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		d.write(0, "Message:\t%s\n", pod.Status.Message)
	}
	d.write(0, "IP:\t%s\n", pod.Status.PodIP)
	if len(pod.Status.PodIPs) == 0 {
		d.write(0, "IPs:\t<none>\n")
	} else {
		d.write(0, "IPs:\n")
		for _, ip := range pod.Status.PodIPs {
			d.write(1, "IP:\t%s\n", ip.IP)
		}
	}
	if c := controlledBy(pod); c != "" {
		d.write(0, "Controlled By:\t%s\n", c)
	}
	if pod.Status.NominatedNodeName != "" {
		d.write(0, "NominatedNodeName:\t%s\n", pod.Status.NominatedNodeName)
	}
	if len(pod.Spec.InitContainers) > 0 {
		d.containers("Init Containers", pod.Spec.InitContainers, pod.Status.InitContainerStatuses, pod, "")
	}
	d.containers("Containers", pod.Spec.Containers, pod.Status.ContainerStatuses, pod, "")
	if len(pod.Spec.ReadinessGates) > 0 {
		d.write(0, "Readiness Gates:\n  Type\tStatus\n")
		for _, g := range pod.Spec.ReadinessGates {
			status := "<none>"
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					status = string(c.Status)
					break
				}
			}
			d.write(1, "%v \t%v \n", g.ConditionType, status)
		}
	}
	if len(pod.Status.Conditions) > 0 {
		d.write(0, "Conditions:\n  Type\tStatus\n")
		for _, c := range pod.Status.Conditions {
			d.write(1, "%v \t%v \n", c.Type, c.Status)
		}
	}
	d.volumes(pod.Spec.Volumes, "")
	d.write(0, "QoS Class:\t%s\n", qos.Of(pod))
	d.labels("Node-Selectors", pod.Spec.NodeSelector)
	d.tolerations("Tolerations", pod.Spec.Tolerations)
}

// containers describes containers with their statuses (none for a pod
// template); space indents a template's section.
func (d *describer) containers(label string, containers []corev1.Container, statuses []corev1.ContainerStatus, pod *corev1.Pod, space string) {
	byName := map[string]corev1.ContainerStatus{}
	for _, s := range statuses {
		byName[s.Name] = s
	}
	none := ""
	if len(containers) == 0 {
		none = " <none>"
	}
	d.write(0, "%s%s:%s\n", space, label, none)
	nameIndent := ""
	if space != "" {
		nameIndent = " "
	}
	for _, c := range containers {
		status, ok := byName[c.Name]
		d.write(1, "%s%v:\n", nameIndent, c.Name)
		if ok {
			d.write(2, "Container ID:\t%s\n", status.ContainerID)
		}
		d.write(2, "Image:\t%s\n", c.Image)
		if ok {
			d.write(2, "Image ID:\t%s\n", status.ImageID)
		}
		ports, hostPorts := make([]string, 0, len(c.Ports)), make([]string, 0, len(c.Ports))
		for _, p := range c.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
			hostPorts = append(hostPorts, fmt.Sprintf("%d/%s", p.HostPort, p.Protocol))
		}
		if len(ports) > 1 {
			d.write(2, "Ports:\t%s\n", strings.Join(ports, ", "))
			d.write(2, "Host Ports:\t%s\n", strings.Join(hostPorts, ", "))
		} else {
			d.write(2, "Port:\t%s\n", orNone(strings.Join(ports, "")))
			d.write(2, "Host Port:\t%s\n", orNone(strings.Join(hostPorts, "")))
		}
		if len(c.Command) > 0 {
			d.write(2, "Command:\n")
			for _, s := range c.Command {
				for _, l := range strings.Split(s, "\n") {
					d.write(3, "%s\n", l)
				}
			}
		}
		if len(c.Args) > 0 {
			d.write(2, "Args:\n")
			for _, s := range c.Args {
				for _, l := range strings.Split(s, "\n") {
					d.write(3, "%s\n", l)
				}
			}
		}
		if ok {
			d.containerState("State", status.State)
			if status.LastTerminationState.Terminated != nil {
				d.containerState("Last State", status.LastTerminationState)
			}
			d.write(2, "Ready:\t%s\n", printBool(status.Ready))
			d.write(2, "Restart Count:\t%d\n", status.RestartCount)
		}
		d.resources(c.Resources, 2)
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
		}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
			if p.probe != nil {
				d.write(2, "%s:\t%s\n", p.name, describeProbe(p.probe))
			}
		}
		if len(c.EnvFrom) > 0 {
			d.write(2, "Environment Variables from:\n")
			for _, e := range c.EnvFrom {
				from, name, optional := "", "", false
				switch {
				case e.ConfigMapRef != nil:
					from, name, optional = "ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional != nil && *e.ConfigMapRef.Optional
				case e.SecretRef != nil:
					from, name, optional = "Secret", e.SecretRef.Name, e.SecretRef.Optional != nil && *e.SecretRef.Optional
				}
				if e.Prefix == "" {
					d.write(3, "%s\t%s\tOptional: %t\n", name, from, optional)
				} else {
					d.write(3, "%s\t%s with prefix '%s'\tOptional: %t\n", name, from, e.Prefix, optional)
				}
			}
		}
		d.env(c, pod)
		if len(c.VolumeMounts) == 0 {
			d.write(2, "Mounts:\t<none>\n")
		} else {
			d.write(2, "Mounts:\n")
			mounts := append([]corev1.VolumeMount(nil), c.VolumeMounts...)
			sort.Slice(mounts, func(i, j int) bool { return mounts[i].MountPath < mounts[j].MountPath })
			for _, m := range mounts {
				flags := []string{"rw"}
				if m.ReadOnly {
					flags[0] = "ro"
				}
				if m.SubPath != "" {
					flags = append(flags, fmt.Sprintf("path=%q", m.SubPath))
				}
				d.write(3, "%s from %s (%s)\n", m.MountPath, m.Name, strings.Join(flags, ","))
			}
		}
	}
}

func printBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func (d *describer) containerState(name string, s corev1.ContainerState) {
	switch {
	case s.Running != nil:
		d.write(2, "%s:\tRunning\n", name)
		d.write(3, "Started:\t%v\n", rfc1123(s.Running.StartedAt))
	case s.Waiting != nil:
		d.write(2, "%s:\tWaiting\n", name)
		if s.Waiting.Reason != "" {
			d.write(3, "Reason:\t%s\n", s.Waiting.Reason)
		}
	case s.Terminated != nil:
		d.write(2, "%s:\tTerminated\n", name)
		if s.Terminated.Reason != "" {
			d.write(3, "Reason:\t%s\n", s.Terminated.Reason)
		}
		if s.Terminated.Message != "" {
			d.write(3, "Message:\t%s\n", s.Terminated.Message)
		}
		d.write(3, "Exit Code:\t%d\n", s.Terminated.ExitCode)
		if s.Terminated.Signal > 0 {
			d.write(3, "Signal:\t%d\n", s.Terminated.Signal)
		}
		d.write(3, "Started:\t%s\n", rfc1123(s.Terminated.StartedAt))
		d.write(3, "Finished:\t%s\n", rfc1123(s.Terminated.FinishedAt))
	default:
		d.write(2, "%s:\tWaiting\n", name)
	}
}

func (d *describer) resources(r corev1.ResourceRequirements, level int) {
	for _, section := range []struct {
		title string
		list  corev1.ResourceList
	}{{"Limits", r.Limits}, {"Requests", r.Requests}} {
		if len(section.list) == 0 {
			continue
		}
		d.write(level, "%s:\n", section.title)
		for _, n := range sortedResourceNames(section.list) {
			q := section.list[n]
			d.write(level+1, "%s:\t%s\n", n, q.String())
		}
	}
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// env describes a container's environment; values from the pod's fields
// are resolved as kubectl does (pod is nil in a template).
func (d *describer) env(c corev1.Container, pod *corev1.Pod) {
	if len(c.Env) == 0 {
		d.write(2, "Environment:\t<none>\n")
		return
	}
	d.write(2, "Environment:\n")
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			for i, s := range strings.Split(e.Value, "\n") {
				if i == 0 {
					d.write(3, "%s:\t%s\n", e.Name, s)
				} else {
					d.write(3, "\t%s\n", s)
				}
			}
			continue
		}
		switch f := e.ValueFrom; {
		case f.FieldRef != nil:
			d.write(3, "%s:\t%s (%s:%s)\n", e.Name, podField(pod, f.FieldRef.FieldPath), f.FieldRef.APIVersion, f.FieldRef.FieldPath)
		case f.ResourceFieldRef != nil:
			d.write(3, "%s:\t%s (%s)\n", e.Name, containerResource(c, f.ResourceFieldRef.Resource), f.ResourceFieldRef.Resource)
		case f.SecretKeyRef != nil:
			d.write(3, "%s:\t<set to the key '%s' in secret '%s'>\tOptional: %t\n", e.Name, f.SecretKeyRef.Key, f.SecretKeyRef.Name, f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional)
		case f.ConfigMapKeyRef != nil:
			d.write(3, "%s:\t<set to the key '%s' of config map '%s'>\tOptional: %t\n", e.Name, f.ConfigMapKeyRef.Key, f.ConfigMapKeyRef.Name, f.ConfigMapKeyRef.Optional != nil && *f.ConfigMapKeyRef.Optional)
		}
	}
}

// podField resolves a downward API field path of a pod ("" when unknown).
func podField(pod *corev1.Pod, path string) string {
	if pod == nil {
		return ""
	}
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(k, "']")]
	}
	if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(k, "']")]
	}
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "status.hostIP":
		return pod.Status.HostIP
	case "status.podIP":
		return pod.Status.PodIP
	}
	return ""
}

// containerResource is the value of a resourceFieldRef such as
// "limits.memory"; an unset limit is the node's allocatable.
func containerResource(c corev1.Container, name string) string {
	kind, res, _ := strings.Cut(name, ".")
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	if q, ok := list[corev1.ResourceName(res)]; ok {
		return q.String()
	}
	if kind == "limits" {
		return "node allocatable"
	}
	return "0"
}

// describeProbe is kubectl's one-line probe: "http-get http://:80/ delay=0s
// timeout=1s period=10s #success=1 #failure=3".
func describeProbe(p *corev1.Probe) string {
	attrs := fmt.Sprintf("delay=%ds timeout=%ds period=%ds #success=%d #failure=%d", p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
	switch {
	case p.Exec != nil:
		return fmt.Sprintf("exec %v %s", p.Exec.Command, attrs)
	case p.HTTPGet != nil:
		host := p.HTTPGet.Host
		if port := p.HTTPGet.Port.String(); port != "" {
			host += ":" + port
		}
		return fmt.Sprintf("http-get %s://%s%s %s", strings.ToLower(string(p.HTTPGet.Scheme)), host, p.HTTPGet.Path, attrs)
	case p.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s:%s %s", p.TCPSocket.Host, p.TCPSocket.Port.String(), attrs)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return fmt.Sprintf("grpc <pod>:%d %s %s", p.GRPC.Port, service, attrs)
	}
	return "unknown " + attrs
}

func (d *describer) volumes(volumes []corev1.Volume, space string) {
	if len(volumes) == 0 {
		d.write(0, "%sVolumes:\t<none>\n", space)
		return
	}
	d.write(0, "%sVolumes:\n", space)
	nameIndent := ""
	if space != "" {
		nameIndent = " "
	}
	for _, v := range volumes {
		d.write(1, "%s%v:\n", nameIndent, v.Name)
		switch s := v.VolumeSource; {
		case s.HostPath != nil:
			t := "<none>"
			if s.HostPath.Type != nil {
				t = string(*s.HostPath.Type)
			}
			d.write(2, "Type:\tHostPath (bare host directory volume)\n    Path:\t%v\n    HostPathType:\t%v\n", s.HostPath.Path, t)
		case s.EmptyDir != nil:
			limit := "<unset>"
			if s.EmptyDir.SizeLimit != nil && s.EmptyDir.SizeLimit.Sign() > 0 {
				limit = s.EmptyDir.SizeLimit.String()
			}
			d.write(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n    Medium:\t%v\n    SizeLimit:\t%v\n", s.EmptyDir.Medium, limit)
		case s.Secret != nil:
			d.write(2, "Type:\tSecret (a volume populated by a Secret)\n    SecretName:\t%v\n    Optional:\t%v\n", s.Secret.SecretName, s.Secret.Optional != nil && *s.Secret.Optional)
		case s.ConfigMap != nil:
			d.write(2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n    Name:\t%v\n    Optional:\t%v\n", s.ConfigMap.Name, s.ConfigMap.Optional != nil && *s.ConfigMap.Optional)
		case s.PersistentVolumeClaim != nil:
			d.write(2, "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)\n    ClaimName:\t%v\n    ReadOnly:\t%v\n", s.PersistentVolumeClaim.ClaimName, s.PersistentVolumeClaim.ReadOnly)
		case s.DownwardAPI != nil:
			d.write(2, "Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n")
			for _, item := range s.DownwardAPI.Items {
				if item.FieldRef != nil {
					d.write(3, "%v -> %v\n", item.FieldRef.FieldPath, item.Path)
				}
				if item.ResourceFieldRef != nil {
					d.write(3, "%v -> %v\n", item.ResourceFieldRef.Resource, item.Path)
				}
			}
		case s.Projected != nil:
			d.write(2, "Type:\tProjected (a volume that contains injected data from multiple sources)\n")
			for _, src := range s.Projected.Sources {
				switch {
				case src.Secret != nil:
					d.write(2, "SecretName:\t%v\n    Optional:\t%v\n", src.Secret.Name, src.Secret.Optional != nil && *src.Secret.Optional)
				case src.DownwardAPI != nil:
					d.write(2, "DownwardAPI:\ttrue\n")
				case src.ConfigMap != nil:
					d.write(2, "ConfigMapName:\t%v\n    Optional:\t%v\n", src.ConfigMap.Name, src.ConfigMap.Optional != nil && *src.ConfigMap.Optional)
				case src.ServiceAccountToken != nil && src.ServiceAccountToken.ExpirationSeconds != nil:
					d.write(2, "TokenExpirationSeconds:\t%d\n", *src.ServiceAccountToken.ExpirationSeconds)
				}
			}
		default:
			d.write(2, "<unknown>\n")
		}
	}
}

func (d *describer) tolerations(title string, tolerations []corev1.Toleration) {
	d.write(0, "%s:\t", title)
	if len(tolerations) == 0 {
		d.write(0, "<none>\n")
		return
	}
	sorted := append([]corev1.Toleration(nil), tolerations...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	for i, t := range sorted {
		if i > 0 {
			d.write(0, "\t")
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value == "" {
			if t.Key != "" || t.Effect != "" {
				s += " op=Exists"
			} else {
				s += "op=Exists"
			}
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		d.write(0, "%s\n", s)
	}
}

// node is kubectl describe node, without the lease and the pods running
// there (podlab serves no leases, and Describe is given no pods for a node).
func (d *describer) node(node *corev1.Node) {
	d.write(0, "Name:\t%s\n", node.Name)
	d.write(0, "Roles:\t%s\n", orNone(strings.Join(printers.NodeRoles(node), ",")))
	d.labels("Labels", node.Labels)
	d.annotations("Annotations", node.Annotations)
	d.write(0, "CreationTimestamp:\t%s\n", rfc1123(node.CreationTimestamp))
	d.write(0, "Taints:\t")
	if len(node.Spec.Taints) == 0 {
		d.write(0, "<none>\n")
	}
	taints := append([]corev1.Taint(nil), node.Spec.Taints...)
	sort.Slice(taints, func(i, j int) bool {
		return string(taints[i].Effect)+","+taints[i].Key < string(taints[j].Effect)+","+taints[j].Key
	})
	for i, t := range taints {
		if i > 0 {
			d.write(0, "\t")
		}
		d.write(0, "%s\n", t.ToString())
	}
	d.write(0, "Unschedulable:\t%v\n", node.Spec.Unschedulable)
	if len(node.Status.Conditions) > 0 {
		d.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
		d.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
		for _, c := range node.Status.Conditions {
			d.write(1, "%v \t%v \t%s \t%s \t%v \t%v\n", c.Type, c.Status, rfc1123(c.LastHeartbeatTime), rfc1123(c.LastTransitionTime), c.Reason, c.Message)
		}
	}
	d.write(0, "Addresses:\n")
	for _, a := range node.Status.Addresses {
		d.write(1, "%s:\t%s\n", a.Type, a.Address)
	}
	for _, section := range []struct {
		title string
		list  corev1.ResourceList
	}{{"Capacity", node.Status.Capacity}, {"Allocatable", node.Status.Allocatable}} {
		if len(section.list) == 0 {
			continue
		}
		d.write(0, "%s:\n", section.title)
		for _, n := range sortedResourceNames(section.list) {
			q := section.list[n]
			d.write(0, "  %s:\t%s\n", n, q.String())
		}
	}
	info := node.Status.NodeInfo
	d.write(0, "System Info:\n")
	d.write(0, "  Machine ID:\t%s\n", info.MachineID)
	d.write(0, "  System UUID:\t%s\n", info.SystemUUID)
	d.write(0, "  Boot ID:\t%s\n", info.BootID)
	d.write(0, "  Kernel Version:\t%s\n", info.KernelVersion)
	d.write(0, "  OS Image:\t%s\n", info.OSImage)
	d.write(0, "  Operating System:\t%s\n", info.OperatingSystem)
	d.write(0, "  Architecture:\t%s\n", info.Architecture)
	d.write(0, "  Container Runtime Version:\t%s\n", info.ContainerRuntimeVersion)
	d.write(0, "  Kubelet Version:\t%s\n", info.KubeletVersion)
	if node.Spec.PodCIDR != "" {
		d.write(0, "PodCIDR:\t%s\n", node.Spec.PodCIDR)
	}
	if len(node.Spec.PodCIDRs) > 0 {
		d.write(0, "PodCIDRs:\t%s\n", strings.Join(node.Spec.PodCIDRs, ","))
	}
	if node.Spec.ProviderID != "" {
		d.write(0, "ProviderID:\t%s\n", node.Spec.ProviderID)
	}
}
