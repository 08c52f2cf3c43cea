package cri

// Runtime handlers: the OCI runtimes this runtime runs containers with.
//
// As containerd's CRI plugin keeps a table of runtimes (one per
// [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.NAME]), the
// server keeps one runc.Runtime per handler of Config.Handlers (default
// runc.DefaultHandlers: runc, runsc, crun), each with its own --root. A
// sandbox is made with the handler RunPodSandboxRequest.runtime_handler
// names ("" is runc); its record keeps the name, and every container of
// the sandbox copies it into its own record, so that start, stop, exec,
// logs and delete reach the container with the runtime that made it.

import (
	"errors"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podlab/podlab/steps/runc"
)

// handlerRuntimes makes the runtime of each handler, runc's as the
// default: its binary and flags, its --root under the node's runtime
// directory (statedir's HandlerRoot) and the shim. Its CgroupParent is
// empty: deleting a container removes the container's own cgroup and
// nothing above it, as containerd does: the pod's cgroup and the QoS
// tiers above it are the kubelet's (it removes a pod's when the pod goes,
// and keeps the tiers with their settings).
func handlerRuntimes(cfg Config) (map[string]*runc.Runtime, error) {
	r := cfg.Node.Runtime()
	out := map[string]*runc.Runtime{}
	for _, h := range cfg.Handlers {
		rt := runc.NewRuntime(h, r.HandlerRoot(h.Name), r.Dir)
		rt.Shim, rt.OnCommand = cfg.Shim, cfg.OnCommand
		out[h.Name] = rt
	}
	if out[runc.DefaultHandler] == nil {
		return nil, errors.New("cri: the handlers must include the default runtime, " + runc.DefaultHandler)
	}
	return out, nil
}

// handlerName is the handler a sandbox's runtime_handler names: "" is the
// default, runc.
func handlerName(h string) string {
	if h == "" {
		return runc.DefaultHandler
	}
	return h
}

// sandboxRuntime is RunPodSandbox's lookup of runtime_handler: the
// handler's runtime, once the handler is in the table and can run on this
// host (its binary is installed, the host's cgroups suit it). Nothing is
// made before this succeeds. An unknown handler gets containerd's text.
func (s *Server) sandboxRuntime(handler string) (runc.Handler, *runc.Runtime, error) {
	name := handlerName(handler)
	h, err := runc.LookupHandler(s.handlers, name)
	if err != nil {
		return h, nil, status.Errorf(codes.Unknown, "failed to get sandbox runtime: %v", err)
	}
	if h.Name != runc.DefaultHandler {
		if err := h.Preflight(runc.CgroupMountRoot); err != nil {
			return h, nil, status.Error(codes.Unknown, err.Error())
		}
	}
	return h, s.runtimes[h.Name], nil
}

// handler is the handler called name ("" is runc's); the zero Handler
// when this server has none of that name.
func (s *Server) handler(name string) runc.Handler {
	h, _ := runc.LookupHandler(s.handlers, handlerName(name))
	return h
}

// rtOf is the runtime of a container's handler; a handler this server no
// longer has (restarted with other handlers) falls back to runc's, which
// then reports the container unknown rather than hiding it.
func (s *Server) rtOf(c *containerRecord) *runc.Runtime {
	if rt := s.runtimes[handlerName(c.RuntimeHandler)]; rt != nil {
		return rt
	}
	return s.rt
}

// rtByID is rtOf of the container with this id (the streaming server knows
// only ids).
func (s *Server) rtByID(id string) *runc.Runtime {
	if c, err := s.rec.container(id); err == nil {
		return s.rtOf(c)
	}
	return s.rt
}

// gVisor: the handler's runtime is runsc, which makes a container with
// io.kubernetes.cri.container-type "container" inside its pod's sandbox.
func gVisor(h runc.Handler) bool { return filepath.Base(h.Binary) == "runsc" }
