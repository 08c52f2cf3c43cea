package up

// kubectl exec, for real: the API server authorizes "create pods/exec",
// then asks the kubelet of the pod's node, which asks its runtime (CRI
// Exec/ExecSync), which runs `runc exec` in the container: a new process
// joins the container's namespaces and cgroup, with its rootfs, user and
// capabilities.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/authn"
	"github.com/podlab/podlab/steps/apiserver/rbac"
	"github.com/podlab/podlab/steps/cri"
	"github.com/podlab/podlab/steps/kubelet"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/statedir"
)

// ExecOptions say what to run where.
type ExecOptions struct {
	// StateDir is podlab's state directory, where the nodes' runtimes are.
	StateDir string
	// Client reads the pod (the user's, as kubectl's). When it can answer
	// access reviews (*apiserver.Client), "create pods/exec" is authorized
	// first, as kube-apiserver does.
	Client apiserver.Interface
	// Namespace and Pod name the pod; Container its container ("": the
	// first).
	Namespace, Pod, Container string
	// Args is the command and its arguments.
	Args []string
	// Runtime is the OCI runtime binary (runc).
	Runtime string
	// IO is the process's stdio; Tty gives it a terminal.
	IO  runc.IO
	Tty bool
	// OnCommand receives the runc command line.
	OnCommand func(argv []string)
}

// ExecTarget is the container an exec ran in.
type ExecTarget struct {
	Node, Container, ContainerID string
	// NodeDir is the node's runtime directory; RuncRoot its runc --root.
	NodeDir, RuncRoot string
	// Defaulted lists the pod's containers when none was named and it has
	// more than one (kubectl says "Defaulted container ... out of: ...").
	Defaulted []string
}

// accessReviewer is the part of *apiserver.Client that answers "may I?".
type accessReviewer interface {
	Access(ctx context.Context, verb, resource, subresource, namespace, name string) (authn.User, rbac.Decision, error)
}

// Exec runs opts.Args in a running container of the pod and returns its
// exit code.
func Exec(ctx context.Context, opts ExecOptions) (*ExecTarget, int, error) {
	if len(opts.Args) == 0 {
		return nil, 0, fmt.Errorf("exec needs a command: podlab exec %s -- CMD [ARG...]", opts.Pod)
	}
	if opts.Namespace == "" {
		opts.Namespace = apiserver.DefaultNamespace
	}
	obj, err := opts.Client.Get(ctx, "pods", opts.Namespace, opts.Pod)
	if err != nil {
		return nil, 0, err
	}
	if a, ok := opts.Client.(accessReviewer); ok {
		u, d, err := a.Access(ctx, "create", "pods", "exec", opts.Namespace, opts.Pod)
		if err != nil {
			return nil, 0, err
		}
		if !d.Allowed {
			return nil, 0, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, opts.Pod,
				fmt.Errorf("user %q cannot create resource \"pods/exec\" in the namespace %q: %s", u.Name, opts.Namespace, d.Reason))
		}
	}
	t, err := TargetOf(opts.StateDir, obj.(*corev1.Pod), opts.Container)
	if err != nil {
		return nil, 0, err
	}
	rt := &runc.Runtime{Binary: opts.Runtime, Root: t.RuncRoot, StateDir: t.NodeDir, OnCommand: opts.OnCommand}
	code, err := rt.Exec(ctx, t.ContainerID, opts.Args, runc.ExecOptions{IO: opts.IO, Tty: opts.Tty})
	return t, code, err
}

// TargetOf finds the running container of pod called container ("": the
// first), from the pod's status and its node's directory.
func TargetOf(stateDir string, pod *corev1.Pod, container string) (*ExecTarget, error) {
	if pod.Spec.NodeName == "" {
		return nil, fmt.Errorf("%w: pod %s is not scheduled to a node yet: no kubelet runs it", ErrNoContainer, pod.Name)
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	t := &ExecTarget{Node: pod.Spec.NodeName, Container: container}
	if container == "" {
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: pod %s has no containers", ErrNoContainer, pod.Name)
		}
		t.Container = names[0]
		if len(names) > 1 {
			t.Defaulted = names
		}
	}
	var cs *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == t.Container {
			cs = &pod.Status.ContainerStatuses[i]
		}
	}
	switch {
	case cs == nil:
		return nil, fmt.Errorf("%w: pod %s has no container %q with a status (it has %s)", ErrNoContainer, pod.Name, t.Container, strings.Join(names, ", "))
	case cs.State.Running == nil:
		return nil, fmt.Errorf("%w: container %s of pod %s is %s: exec needs it running", ErrNoContainer, t.Container, pod.Name, containerState(cs.State))
	}
	id, err := kubelet.ParseContainerID(cs.ContainerID)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: container %s of pod %s: its status's %v", ErrNoContainer, t.Container, pod.Name, err)
	case id.Type != cri.Name:
		return nil, fmt.Errorf("%w: container %s of pod %s runs in the runtime %s (containerID %s), not podlab's (%s://): its runc root is not the node's", ErrNoContainer, t.Container, pod.Name, id.Type, cs.ContainerID, cri.Name)
	}
	t.ContainerID = id.ID
	layout, err := statedir.New(stateDir)
	if err != nil {
		return nil, err
	}
	n := layout.Node(t.Node)
	t.NodeDir, t.RuncRoot = n.Dir, n.RuncRoot()
	return t, nil
}
