package nodeauthorizer

import corev1 "k8s.io/api/core/v1"

// path is how an object is related to a node: the edges of
// kube-apiserver's node authorizer graph, which all go through a pod bound
// to the node.
type path int

const (
	noPath              path = iota // nothing podlab stores leads to it
	podOnNode                       // node <- pod
	secretOfPod                     // node <- pod <- secret
	configMapOfPod                  // node <- pod <- configmap
	claimOfPod                      // node <- pod <- pvc
	serviceAccountOfPod             // node <- pod <- serviceaccount
)

// leadsTo reports whether pod uses the object called name of p's kind.
func (p path) leadsTo(pod *corev1.Pod, name string) bool {
	switch p {
	case podOnNode:
		return pod.Name == name
	case secretOfPod:
		return visitSecrets(pod, func(n string) bool { return n == name })
	case configMapOfPod:
		return visitConfigMaps(pod, func(n string) bool { return n == name })
	case claimOfPod:
		for _, v := range pod.Spec.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name:
				return true
			case v.Ephemeral != nil && pod.Name+"-"+v.Name == name:
				// an ephemeral volume's claim is named <pod>-<volume>
				return true
			}
		}
	case serviceAccountOfPod:
		return pod.Spec.ServiceAccountName == name
	}
	return false
}

// eachContainer calls fn for every container of pod, init and ephemeral
// containers included, until fn returns true.
func eachContainer(pod *corev1.Pod, fn func(envFrom []corev1.EnvFromSource, env []corev1.EnvVar) bool) bool {
	for _, c := range pod.Spec.InitContainers {
		if fn(c.EnvFrom, c.Env) {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if fn(c.EnvFrom, c.Env) {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if fn(c.EnvFrom, c.Env) {
			return true
		}
	}
	return false
}

// visitSecrets calls fn with the name of every secret pod uses (image pull
// secrets, volumes, environment), as Kubernetes' VisitPodSecretNames, until
// fn returns true.
func visitSecrets(pod *corev1.Pod, fn func(name string) bool) bool {
	for _, s := range pod.Spec.ImagePullSecrets {
		if fn(s.Name) {
			return true
		}
	}
	if eachContainer(pod, func(envFrom []corev1.EnvFromSource, env []corev1.EnvVar) bool {
		for _, e := range envFrom {
			if e.SecretRef != nil && fn(e.SecretRef.Name) {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && fn(e.ValueFrom.SecretKeyRef.Name) {
				return true
			}
		}
		return false
	}) {
		return true
	}
	ref := func(r *corev1.LocalObjectReference) bool { return r != nil && fn(r.Name) }
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.Secret != nil && fn(s.Secret.SecretName),
			s.AzureFile != nil && fn(s.AzureFile.SecretName),
			s.CephFS != nil && ref(s.CephFS.SecretRef),
			s.Cinder != nil && ref(s.Cinder.SecretRef),
			s.FlexVolume != nil && ref(s.FlexVolume.SecretRef),
			s.ISCSI != nil && ref(s.ISCSI.SecretRef),
			s.RBD != nil && ref(s.RBD.SecretRef),
			s.ScaleIO != nil && ref(s.ScaleIO.SecretRef),
			s.StorageOS != nil && ref(s.StorageOS.SecretRef),
			s.CSI != nil && ref(s.CSI.NodePublishSecretRef):
			return true
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.Secret != nil && fn(src.Secret.Name) {
					return true
				}
			}
		}
	}
	return false
}

// visitConfigMaps calls fn with the name of every config map pod uses
// (volumes, environment), as Kubernetes' VisitPodConfigmapNames, until fn
// returns true.
func visitConfigMaps(pod *corev1.Pod, fn func(name string) bool) bool {
	if eachContainer(pod, func(envFrom []corev1.EnvFromSource, env []corev1.EnvVar) bool {
		for _, e := range envFrom {
			if e.ConfigMapRef != nil && fn(e.ConfigMapRef.Name) {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && fn(e.ValueFrom.ConfigMapKeyRef.Name) {
				return true
			}
		}
		return false
	}) {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil && fn(v.ConfigMap.Name):
			return true
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil && fn(src.ConfigMap.Name) {
					return true
				}
			}
		}
	}
	return false
}
