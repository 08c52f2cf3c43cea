package kubelet

// RuntimeClass: which OCI runtime runs a pod.
//
// The kubelet's runtimeclass manager resolves spec.runtimeClassName to the
// RuntimeClass's handler through the API server (a RuntimeClass that does
// not exist when it looks is a NotFound error, and the sandbox is not made).
// The runtime then receives only the handler's name, as
// RunPodSandboxRequest.runtime_handler: sandboxRuntime is that runtime-side
// half, and knows nothing of the pod. The sandbox records its handler under
// the pod's directory (statedir's SandboxRecord), so that every container of
// the pod, and their kill and removal, use the same runtime, as containerd
// keeps the handler in the sandbox's metadata.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/runc"
)

// lookupRuntimeHandler is the kubelet's runtimeclass manager's
// LookupRuntimeHandler: "" for a pod that names no RuntimeClass (the
// runtime's default), else the RuntimeClass's handler. A RuntimeClass that
// does not exist is a NotFound error, worded as the kubelet's informer
// cache words it (runtimeclass.node.k8s.io "NAME" not found).
func (k *Kubelet) lookupRuntimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	obj, err := k.client.Get(ctx, "runtimeclasses", "", name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// as the kubelet's RuntimeClass lister says it
			return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), name)
		}
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %v", name, err)
	}
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: the API server returned a %T", name, obj)
	}
	return rc.Handler, nil
}

// sandboxRuntime is the runtime's side of RunPodSandbox's runtime_handler:
// the handler's runtime, once the handler is known ("" is the default,
// runc) and can run here (its binary is installed, the host's cgroups suit
// it). Nothing is made before this succeeds.
func (k *Kubelet) sandboxRuntime(handler string) (runc.Handler, *runc.Runtime, error) {
	h, err := runc.LookupHandler(k.cfg.Handlers, handler)
	if err != nil {
		return h, nil, err
	}
	if h.Name != runc.DefaultHandler {
		if err := h.Preflight(runc.CgroupMountRoot); err != nil {
			return h, nil, err
		}
	}
	return h, k.runtimes[h.Name], nil
}

// sandboxRecord is what the sandbox keeps of itself: pods/<uid>/sandbox.json.
type sandboxRecord struct {
	// RuntimeHandler is the handler the sandbox was made with (CRI's
	// PodSandboxStatus.runtime_handler); "runc" for the default.
	RuntimeHandler string `json:"runtimeHandler"`
}

// writeSandboxRecord records the sandbox's handler.
func (l Layout) writeSandboxRecord(uid types.UID, handler string) error {
	p := l.SandboxRecord(uid)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return fmt.Errorf("recording the sandbox's runtime handler: %w", err)
	}
	b, err := json.Marshal(sandboxRecord{RuntimeHandler: handler})
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the sandbox's runtime handler: %w", err)
	}
	return os.Rename(tmp, p)
}

// sandboxHandler reads the handler a pod's sandbox was made with; a pod
// with no record (no sandbox yet, or made before handlers) has the default.
func (l Layout) sandboxHandler(uid types.UID) (string, error) {
	b, err := os.ReadFile(l.SandboxRecord(uid))
	if errors.Is(err, fs.ErrNotExist) {
		return runc.DefaultHandler, nil
	}
	if err != nil {
		return "", err
	}
	var r sandboxRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("reading %s: %w", l.SandboxRecord(uid), err)
	}
	if r.RuntimeHandler == "" {
		return runc.DefaultHandler, nil
	}
	return r.RuntimeHandler, nil
}

// podRuntime is the runtime of the pod's sandbox's handler. A handler the
// node no longer knows (the kubelet restarted with other handlers) is an
// error: its containers cannot be reached with another runtime.
func (k *Kubelet) podRuntime(uid types.UID) (*runc.Runtime, error) {
	name, err := k.layout.sandboxHandler(uid)
	if err != nil {
		return nil, err
	}
	rt, ok := k.runtimes[name]
	if !ok {
		_, err := runc.LookupHandler(k.cfg.Handlers, name)
		return nil, fmt.Errorf("the sandbox of pod %s was made with handler %q: %w", uid, name, err)
	}
	return rt, nil
}

// podHandler is the handler of the pod's sandbox, for what its containers
// need of it (the ociVersion it accepts).
func (k *Kubelet) podHandler(uid types.UID) runc.Handler {
	name, _ := k.layout.sandboxHandler(uid)
	h, _ := runc.LookupHandler(k.cfg.Handlers, name)
	return h
}

// runtimeOrDefault is podRuntime, falling back to the default runtime for
// reading state (a record that cannot be read must not hide the pod).
func (k *Kubelet) runtimeOrDefault(uid types.UID) *runc.Runtime {
	if rt, err := k.podRuntime(uid); err == nil {
		return rt
	}
	return k.rt
}

// sandboxFailure is the message of a FailedCreatePodSandBox event for an
// error of the runtime's RunPodSandbox, as the kubelet prints a gRPC error
// (containerd's errors have code Unknown).
func sandboxFailure(err error) string {
	return "Failed to create pod sandbox: rpc error: code = Unknown desc = " + runtimeMessage(err)
}

// runtimeMessage is the runtime's text of err: containerd's wording for an
// unknown handler.
func runtimeMessage(err error) string {
	var nh *runc.NoHandlerError
	if errors.As(err, &nh) {
		return "failed to get sandbox runtime: " + nh.Error()
	}
	return err.Error()
}
