package statedir

import "path/filepath"

// The node's CRI runtime (steps/cri): its socket, and its records of the
// sandboxes and containers it made, one JSON file per object, so that a
// restarted runtime knows them again (containerd keeps the same in its
// metadata store, /var/lib/containerd/io.containerd.metadata.v1.bolt).
const (
	criSocket        = "cri.sock"
	criDir           = "cri"
	criSandboxesDir  = "sandboxes"
	criContainersDir = "containers"
	criLogsDir       = "logs"
	podLogsDir       = "logs"
	podLogsPods      = "pods"
)

// CRISocket is the node's CRI socket, <node>/cri.sock, as
// /run/containerd/containerd.sock is a node's containerd.
func (n Node) CRISocket() string { return filepath.Join(n.Dir, criSocket) }

// CRIDir holds the CRI runtime's records.
func (n Node) CRIDir() string { return filepath.Join(n.Dir, criDir) }

// CRISandboxesDir holds one <id>.json per pod sandbox.
func (n Node) CRISandboxesDir() string { return filepath.Join(n.CRIDir(), criSandboxesDir) }

// CRIContainersDir holds one <id>.json per container.
func (n Node) CRIContainersDir() string { return filepath.Join(n.CRIDir(), criContainersDir) }

// CRILogsDir is where a sandbox's container logs go when its config names
// no log_directory (crictl's pod configs often do not).
func (n Node) CRILogsDir() string { return filepath.Join(n.CRIDir(), criLogsDir) }

// PodLogsDir is the kubelet's pod log root, <node>/logs/pods (a real
// node's /var/log/pods): each sandbox's log_directory is
// <PodLogsDir>/NAMESPACE_NAME_UID, its containers' logs NAME/N.log there.
func (n Node) PodLogsDir() string { return filepath.Join(n.Dir, podLogsDir, podLogsPods) }

// CRIBundle is the bundle of a CRI container: <node>/bundles/<sandbox-id>/<container-id>.
func (n Node) CRIBundle(sandboxID, containerID string) string {
	return n.Bundle(sandboxID, containerID)
}

// The node's runtime as a process of its own (started by the kubelet when
// nothing answers on CRISocket, as a node's systemd starts
// containerd.service before kubelet.service): its output and its pid.
const (
	runtimeLog = "runtime.log"
	runtimePid = "runtime.pid"
)

// RuntimeLog is the output of the runtime process the kubelet started,
// <node>/runtime.log (journalctl -u containerd on a real node).
func (n Node) RuntimeLog() string { return filepath.Join(n.Dir, runtimeLog) }

// RuntimePidFile records the runtime process the kubelet started (its pid
// and start time), so that podlab reset and podlab node leave stop it.
func (n Node) RuntimePidFile() string { return filepath.Join(n.Dir, runtimePid) }

// The pause process of a CRI sandbox of pid mode POD (steps/runc's
// pause.go), whose files are in the sandbox's pod directory.
const (
	pausePid  = "pause.pid"
	pauseLog  = "pause.log"
	pauseRoot = "pause-root"
)

// PausePidFile holds the PID on the node of the pause process of a sandbox
// (PID 1 of its namespace pinned at NamespaceFile("pid", id)): what the
// runtime stops with the sandbox, and podlab reset when the runtime is gone.
func (n Node) PausePidFile(sandboxID string) string {
	return filepath.Join(n.PodDir(sandboxID), pausePid)
}

// PauseLog is what the pause process says if it fails.
func (n Node) PauseLog(sandboxID string) string { return filepath.Join(n.PodDir(sandboxID), pauseLog) }

// PauseRoot is the empty directory the pause process chroots into.
func (n Node) PauseRoot(sandboxID string) string {
	return filepath.Join(n.PodDir(sandboxID), pauseRoot)
}
