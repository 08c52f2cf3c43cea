package runc

// Runtime handlers: the OCI runtimes a node's container runtime knows.
//
// containerd's CRI plugin has a table of runtimes, one per handler name:
//
//	[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
//	  runtime_type = "io.containerd.runc.v2"
//	  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
//	    BinaryName = "/usr/bin/runsc"
//
// A RuntimeClass names a handler (its .handler field); the kubelet passes
// that name, and nothing else of the pod, to the runtime in
// RunPodSandboxRequest.runtime_handler, and the runtime looks it up. A name
// missing from the table fails RunPodSandbox with "no runtime for NAME is
// configured". The empty name is the default runtime, runc.
//
// Every handler here speaks runc's command line (create, start, state, kill,
// delete, exec), as containerd's runc shim assumes of its BinaryName; they
// differ in where they keep their state, the ociVersion they accept in
// config.json, the global flags they need, and what hosts they run on.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultHandler is the handler of a pod that names no RuntimeClass (the
// empty runtime_handler): containerd's default_runtime_name.
const DefaultHandler = "runc"

// Handler is one OCI runtime a node can run containers with.
type Handler struct {
	// Name is the handler name a RuntimeClass's .handler gives.
	Name string
	// Binary is the OCI runtime binary: a path, or a name looked up on PATH
	// (containerd's BinaryName).
	Binary string
	// Args are global flags put before every command (runsc's --network).
	Args []string
	// SpecVersion is the ociVersion the runtime accepts in config.json;
	// empty: any, podlab writes its own (the runtime-spec it is built with).
	SpecVersion string
	// State and ExecFifo are where, under the runtime's --root, it keeps a
	// container's state and the fifo a created container waits on; "<id>"
	// stands for the container ID, and an empty ExecFifo means the runtime
	// has none (runsc's sandbox waits on its own).
	State, ExecFifo string
	// Package is the Debian package that installs Binary, named when it
	// is missing.
	Package string
	// RefusesHybridCgroups: the runtime will not run any container on a
	// host whose cgroup v2 mount has controllers next to v1 hierarchies.
	RefusesHybridCgroups bool
}

// runcState and runcFifo are runc's (and crun's fifo) layout under --root.
const (
	runcStateFile = "<id>/state.json"
	runcFifoFile  = "<id>/exec.fifo"
)

// DefaultHandlers are the handlers a node knows unless told otherwise:
//
//   - runc, the default: runcBinary (bin/runc, runc 1.5.3);
//   - runsc, gVisor: a user-space kernel between the app and the host's.
//     Debian's runsc (2022-12) decides that a network namespace is the
//     host's when /proc/sys/net/core/rmem_default exists in it, which on
//     kernels since 6.x is true of every network namespace: with its own
//     network stack (--network=sandbox) it refuses every pod. With
//     --network=host it joins the pod's network namespace (config.json's
//     path) and passes socket calls through to it: the pod keeps its IP.
//   - crun, the C runtime: it accepts config.json up to spec 1.1 (crun
//     1.8.1 says "spec: 1.0.0" and refuses 1.2.0 and 1.3.0 with "unknown
//     version specified"), and refuses hosts with hybrid cgroups.
func DefaultHandlers(runcBinary string) []Handler {
	return []Handler{
		{Name: "runc", Binary: runcBinary, State: runcStateFile, ExecFifo: runcFifoFile, Package: "runc"},
		{Name: "runsc", Binary: "runsc", Args: []string{"--network=host"}, State: "<id>_sandbox:<id>.state", Package: "runsc"},
		{Name: "crun", Binary: "crun", SpecVersion: "1.0.0", State: "<id>/status", ExecFifo: runcFifoFile, Package: "crun", RefusesHybridCgroups: true},
	}
}

// ParseHandler reads a handler given as NAME=PATH (the kubelet's
// --runtime-handler): a default handler's settings with another binary, or
// a handler of runc's kind under a new name.
func ParseHandler(s string, defaults []Handler) (Handler, error) {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return Handler{}, fmt.Errorf("%w %q: want NAME=PATH, e.g. runsc=/usr/bin/runsc", ErrInvalidHandler, s)
	}
	if err := checkHandlerName(name); err != nil {
		return Handler{}, err
	}
	h := Handler{Name: name, State: runcStateFile, ExecFifo: runcFifoFile}
	if i := slices.IndexFunc(defaults, func(d Handler) bool { return d.Name == name }); i >= 0 {
		h = defaults[i]
		h.Args = slices.Clone(h.Args)
	} else {
		// A new name runs a binary like one of the defaults when its file
		// is called so (runsc-debug=/opt/runsc: runsc's settings).
		base := filepath.Base(path)
		for _, d := range defaults {
			if d.Name == base {
				h = d
				h.Name, h.Args = name, slices.Clone(d.Args)
			}
		}
	}
	h.Binary = path
	return h, nil
}

// checkHandlerName refuses names that are not a DNS label, as RuntimeClass
// validation refuses such handlers.
func checkHandlerName(name string) error {
	if len(name) > 63 || name == "" {
		return fmt.Errorf("%w %q: a handler is a DNS label (lower-case letters, digits, '-'), at most 63 characters", ErrInvalidHandler, name)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(name)-1
		if !ok {
			return fmt.Errorf("%w %q: a handler is a DNS label (lower-case letters, digits, '-'), at most 63 characters", ErrInvalidHandler, name)
		}
	}
	return nil
}

// MergeHandlers returns defaults with each of extra replacing the one of
// its name, or added after them.
func MergeHandlers(defaults, extra []Handler) []Handler {
	out := slices.Clone(defaults)
	for _, h := range extra {
		if i := slices.IndexFunc(out, func(d Handler) bool { return d.Name == h.Name }); i >= 0 {
			out[i] = h
		} else {
			out = append(out, h)
		}
	}
	return out
}

// LookupHandler finds the handler called name in handlers; "" is
// DefaultHandler. An unknown name fails as containerd's RunPodSandbox
// fails: a *NoHandlerError, which errors.Is ErrNoHandler.
func LookupHandler(handlers []Handler, name string) (Handler, error) {
	if name == "" {
		name = DefaultHandler
	}
	for _, h := range handlers {
		if h.Name == name {
			return h, nil
		}
	}
	e := &NoHandlerError{Name: name}
	for _, h := range handlers {
		e.Known = append(e.Known, h.Name)
	}
	return Handler{}, e
}

// NoHandlerError is an unknown handler name. Its text is containerd's
// (internal/cri/config's "no runtime for %q is configured"); Hint says what
// the node knows and how to add one.
type NoHandlerError struct {
	Name  string
	Known []string
}

func (e *NoHandlerError) Error() string {
	return fmt.Sprintf("no runtime for %q is configured", e.Name)
}

// Is makes errors.Is(err, ErrNoHandler) true.
func (e *NoHandlerError) Is(target error) bool { return target == ErrNoHandler }

// Hint names the handlers the node knows and how to add one.
func (e *NoHandlerError) Hint() string {
	return fmt.Sprintf("this node knows %s; add one with the kubelet's --runtime-handler %s=PATH", strings.Join(e.Known, ", "), e.Name)
}

// Preflight checks, before anything is made, that the handler can run
// containers on this host: its binary is there (ErrRuntimeNotFound, naming
// the package that installs it), and the host's cgroups are a kind it
// accepts (ErrHybridCgroups). cgroupRoot is where cgroups are mounted
// (/sys/fs/cgroup).
func (h Handler) Preflight(cgroupRoot string) error {
	if _, err := exec.LookPath(h.Binary); err != nil {
		return h.notFound(err)
	}
	if h.RefusesHybridCgroups {
		if mode, err := CgroupModeAt(cgroupRoot); err == nil && mode == CgroupHybridWithControllers {
			name := h.Name
			if out, err := exec.Command(h.Binary, "--version").Output(); err == nil {
				if n, v := ParseRuntimeVersion(string(out)); n != "" {
					name = n + " " + v
				}
			}
			return &RefusalError{Msg: fmt.Sprintf("%s refuses hosts with hybrid cgroups (v1 controllers + a v2 mount with controllers, %s): use runc or a pure cgroup v2 host",
				name, filepath.Join(cgroupRoot, "unified"))}
		}
	}
	return nil
}

// RefusalError is a runtime's refusal of this host, found before it runs,
// in one line that says why and what to do. It errors.Is ErrHybridCgroups.
type RefusalError struct{ Msg string }

func (e *RefusalError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrHybridCgroups) true.
func (e *RefusalError) Is(target error) bool { return target == ErrHybridCgroups }

func (h Handler) notFound(err error) error {
	hint := "`make deps` installs runc 1.5.3 into bin/"
	if h.Package != "" && h.Package != "runc" {
		hint = fmt.Sprintf("install Debian's %s package (apt-get install %s)", h.Package, h.Package)
	}
	return fmt.Errorf("%w: handler %s: %s: %v; %s, or point the handler elsewhere (--runtime-handler %s=PATH)",
		ErrRuntimeNotFound, h.Name, h.Binary, unwrapExecErr(err), hint, h.Name)
}

// CgroupMode is how the host's cgroups are mounted, as crun tells them
// apart.
type CgroupMode string

// The modes CgroupModeAt tells apart.
const (
	CgroupModeUnified CgroupMode = "unified" // cgroup2 at the root
	CgroupModeLegacy  CgroupMode = "legacy"  // v1 hierarchies only
	// CgroupHybridNoControllers is v1 plus a cgroup2 mount at unified/
	// with no controllers: crun accepts it (systemd's hybrid default).
	CgroupHybridNoControllers CgroupMode = "hybrid"
	// CgroupHybridWithControllers is v1 plus a cgroup2 mount that has
	// controllers (here, hugetlb): crun refuses every container.
	CgroupHybridWithControllers CgroupMode = "hybrid with v2 controllers"
)

// CgroupModeAt tells the cgroup mode of the hierarchy mounted at root as
// crun does (libcrun's cgroup mode, then its hybrid check): root is
// cgroup2 (unified); else a tmpfs with root/unified a cgroup2 mount is
// hybrid, refused when root/unified/cgroup.controllers names any; else
// legacy.
func CgroupModeAt(root string) (CgroupMode, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return "", fmt.Errorf("reading the cgroup mount %s: %w", root, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return CgroupModeUnified, nil
	}
	unified := filepath.Join(root, "unified")
	if err := unix.Statfs(unified, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return CgroupModeLegacy, nil
		}
		return "", fmt.Errorf("reading the cgroup mount %s: %w", unified, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return CgroupModeLegacy, nil
	}
	b, err := os.ReadFile(filepath.Join(unified, "cgroup.controllers"))
	if err != nil {
		return "", fmt.Errorf("reading the cgroup v2 controllers: %w", err)
	}
	if strings.TrimSpace(string(b)) != "" {
		return CgroupHybridWithControllers, nil
	}
	return CgroupHybridNoControllers, nil
}

// NewRuntime is a Runtime that runs containers with h: its binary and
// flags, its own --root (root: one per handler, so two runtimes never read
// each other's state), containers/<id> under stateDir as every handler's.
func NewRuntime(h Handler, root, stateDir string) *Runtime {
	return &Runtime{
		Binary: h.Binary, Args: slices.Clone(h.Args), Root: root, StateDir: stateDir,
		Handler: h.Name, StateLayout: h.State, FifoLayout: h.ExecFifo,
	}
}

// FindHandlerRuntime picks the binary of `podlab runc --runtime NAME|PATH`:
// a handler's name from handlers, or a path (anything with a '/').
func FindHandlerRuntime(handlers []Handler, nameOrPath string) (Handler, error) {
	if nameOrPath == "" || strings.Contains(nameOrPath, "/") {
		bin, err := FindRuntime(nameOrPath)
		if err != nil {
			return Handler{}, err
		}
		h := Handler{Name: DefaultHandler, Binary: bin, State: runcStateFile, ExecFifo: runcFifoFile}
		// a path to one of the known runtimes gets its settings
		for _, d := range handlers {
			if d.Name == filepath.Base(bin) {
				h = d
				h.Binary = bin
			}
		}
		return h, nil
	}
	h, err := LookupHandler(handlers, nameOrPath)
	var nh *NoHandlerError
	if errors.As(err, &nh) {
		return Handler{}, fmt.Errorf("--runtime %s: %w: give a path, or one of %s", nameOrPath, err, strings.Join(nh.Known, ", "))
	}
	return h, nil
}

// HandlerFor is the handler `--runtime NAME|PATH` names for the by-hand
// commands (podlab runc, podlab-runc): a handler's name, or a path (runc's
// settings, or those of the runtime the file is called after). A handler
// whose runtime cannot run here fails now, saying why (Preflight).
func HandlerFor(nameOrPath string) (Handler, error) {
	def, _ := FindRuntime("") // runc's path, when there is one
	h, err := FindHandlerRuntime(DefaultHandlers(def), nameOrPath)
	if err != nil {
		return h, err
	}
	if h.Name != DefaultHandler {
		if err := h.Preflight(CgroupMountRoot); err != nil {
			return h, err
		}
	}
	return h, nil
}

// CgroupMountRoot is where the host's cgroups are mounted.
const CgroupMountRoot = "/sys/fs/cgroup"
