package kubelet

// The kubelet's sysctl admission (pkg/kubelet/sysctl in Kubernetes
// v1.37.2): a pod may set only the sysctls of an allowlist, the safe ones
// (namespaced, and isolated: no effect on other pods of the node) and
// those the node's admin allows with --allowed-unsafe-sysctls, which must
// be namespaced too. A pod that sets any other is rejected before anything
// of it is made: it ends Failed, reason SysctlForbidden, with a Warning
// event saying which sysctl. The allowed ones go to the runtime in the
// sandbox config (LinuxPodSandboxConfig.sysctls), which writes them into
// every container's OCI spec (linux.sysctl): runc sets them in the pod's
// namespaces.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is the reason of a pod rejected for its sysctls
// (the kubelet's sysctl.ForbiddenReason).
const ReasonSysctlForbidden = "SysctlForbidden"

// SafeSysctls are the kubelet v1.37's safe sysctls (safe_sysctls.go): the
// same list as Pod Security's baseline level for v1.37. The kubelet drops
// those a kernel older than their namespacing has (the newest such
// minimum is 4.15); podlab's machines run far newer kernels (idmapped
// mounts need 5.12), so it takes the list whole.
var SafeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
	"net.ipv4.tcp_slow_start_after_idle",
	"net.ipv4.tcp_notsent_lowat",
}

// A sysctl pattern of --allowed-unsafe-sysctls, as Kubernetes' policy
// validation (IsValidSysctlPattern) checks it: a sysctl name whose last
// segment may end in "*". The regexp's text is in the kubelet's error.
const (
	sysctlSegmentFmt             = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
	sysctlPatternSegmentFmt      = "([a-z0-9][-_a-z0-9]*)?[a-z0-9*]"
	sysctlContainSlashPatternFmt = "(" + sysctlSegmentFmt + "[\\./])*" + sysctlPatternSegmentFmt
	sysctlMaxLength              = 253
)

var sysctlPatternRegexp = regexp.MustCompile("^" + sysctlContainSlashPatternFmt + "$")

// SysctlAllowlist is the kubelet's sysctl admission handler
// (patternAllowlist): sysctl names, and prefixes from patterns ending in
// "*", each with the kernel namespace that isolates it.
type SysctlAllowlist struct {
	sysctls  map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctlAllowlist is the allowlist of the safe sysctls and the
// patterns of --allowed-unsafe-sysctls (the kubelet concatenates them). A
// pattern that is not a sysctl pattern, or names sysctls no kernel
// namespace isolates (kernel.sysrq, vm.*), is refused with the kubelet's
// own error, which stops it from starting.
func NewSysctlAllowlist(allowedUnsafe []string) (*SysctlAllowlist, error) {
	w := &SysctlAllowlist{sysctls: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, s := range append(append([]string(nil), SafeSysctls...), allowedUnsafe...) {
		if len(s) > sysctlMaxLength || !sysctlPatternRegexp.MatchString(s) {
			return nil, fmt.Errorf("%w: sysctl %q must have at most %d characters and match regex %s",
				ErrBadSysctlPattern, s, sysctlMaxLength, sysctlContainSlashPatternFmt)
		}
		ns, sysctlOrPrefix, prefixed := utilsysctl.GetNamespace(s)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("%w: the sysctls %q are not known to be namespaced", ErrBadSysctlPattern, sysctlOrPrefix)
		}
		if prefixed {
			w.prefixes[sysctlOrPrefix] = ns
		} else {
			w.sysctls[sysctlOrPrefix] = ns
		}
	}
	return w, nil
}

// validate is the kubelet's validateSysctl: the sysctl is allowlisted,
// and the pod does not share the namespace it lives in with the node.
func (w *SysctlAllowlist) validate(sysctl string, hostNet, hostIPC bool) error {
	sysctl = utilsysctl.NormalizeName(sysctl)
	check := func(ns utilsysctl.Namespace) error {
		if ns == utilsysctl.IPCNamespace && hostIPC || ns == utilsysctl.NetNamespace && hostNet {
			return fmt.Errorf("%q not allowed with host %s enabled", sysctl, ns)
		}
		return nil
	}
	if ns, found := w.sysctls[sysctl]; found {
		return check(ns)
	}
	for p, ns := range w.prefixes {
		if strings.HasPrefix(sysctl, p) {
			return check(ns)
		}
	}
	return fmt.Errorf("%q not allowlisted", sysctl)
}

// Admit is the kubelet's admission of pod's sysctls: "" when it may run,
// else the message of its rejection ("forbidden sysctl: ...", about the
// first sysctl refused), which the kubelet writes in the event.
func (w *SysctlAllowlist) Admit(pod *corev1.Pod) string {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return ""
	}
	for _, s := range sc.Sysctls {
		if err := w.validate(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return fmt.Sprintf("forbidden sysctl: %v", err)
		}
	}
	return ""
}

// reject is the kubelet's rejectPod, for a pod its admission refuses: a
// Warning event with reason and message, and the pod Failed with them
// ("Pod was rejected: " before the message). Nothing of the pod is made.
func (k *Kubelet) reject(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	start := time.Now()
	k.event(ctx, pod, &Recording{}, corev1.EventTypeWarning, reason, message)
	var err error
	for try := 0; try < 5; try++ {
		var cur *corev1.Pod
		if cur, err = k.fresh(ctx, pod); err != nil || cur == nil {
			break
		}
		if cur.Status.Phase == corev1.PodFailed && cur.Status.Reason == reason {
			break // rejected already
		}
		now := metav1.NewTime(k.now())
		cur.Status.Phase, cur.Status.Reason, cur.Status.Message = corev1.PodFailed, reason, "Pod was rejected: "+message
		if cur.Status.StartTime == nil {
			cur.Status.StartTime = &now
		}
		if _, err = k.client.UpdateStatus(ctx, cur); !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		err = fmt.Errorf("rejecting pod %s: %w", podKey(pod), err)
	}
	k.notify(Report{Pod: pod, Stage: Stage{Name: "admit", Why: reason}, Took: time.Since(start),
		Err: errors.Join(fmt.Errorf("%w (%s): %s", ErrSysctlForbidden, reason, message), err)})
	return err
}
