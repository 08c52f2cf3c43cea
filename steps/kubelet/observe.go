package kubelet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/runc"
	"github.com/podlab/podlab/steps/unpack"
)

// PodState is what a node holds of a pod, plus the kubelet's memory of its
// image pull back-offs: everything NextStage needs besides the pod itself.
// Observe reads it from the node directory; nothing here is stored by the
// kubelet for its own use.
type PodState struct {
	// Now is when the state was read; back-offs are compared with it.
	Now    time.Time
	Node   string
	Layout Layout
	// Sandbox is the pod's pinned namespaces.
	Sandbox Sandbox
	// Containers are the pod's containers, in the spec's order.
	Containers []ContainerState
	// Leftovers is true while anything of the pod remains on the node:
	// runtime containers, bundles, namespace mounts, volumes.
	Leftovers bool
}

// Container returns the state of the container called name, or nil.
func (s *PodState) Container(name string) *ContainerState {
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}

// ContainerState is one container of a pod as the node holds it.
type ContainerState struct {
	Name string
	// Image is the image as the spec names it ("nginx"); Ref is its
	// normalized reference ("docker.io/library/nginx:latest"), empty when
	// it does not parse (RefErr says why).
	Image  string
	Ref    string
	RefErr error
	Policy corev1.PullPolicy
	// Present: the node's content store has the image. ImageID is its
	// repository@digest, ImageSize its config and layers, compressed.
	Present   bool
	ImageID   string
	ImageSize int64

	// Bundle is the container's bundle directory; Rootfs tells whether its
	// rootfs/ exists; Config is its config.json when that exists, written
	// for restart ConfigRestart (-1 when there is none).
	Bundle        string
	Rootfs        bool
	Config        string
	ConfigRestart int
	ConfigImageID string

	// Runs are the runtime's containers for it, one per restart, oldest
	// first (the kubelet keeps the latest and the one before).
	Runs []Run

	// CrashBackOff is the delay before the next restart after the latest
	// run exited, and CrashBackOffUntil when it ends (derived from the
	// restart count and the exit time, as the kubelet's back-off does).
	CrashBackOff      time.Duration
	CrashBackOffUntil time.Time
	// FailedStage, FailedReason and FailedErr are this kubelet's memory of
	// the last failure of a stage before the container runs (a pull, a
	// config error, runc create), and BackOff and BackOffUntil the wait
	// before the next try. A kubelet started afresh remembers none, as in
	// Kubernetes.
	FailedStage  StageName
	FailedReason string
	FailedErr    string
	BackOff      time.Duration
	BackOffUntil time.Time
}

// Latest is the newest run, or nil.
func (c *ContainerState) Latest() *Run {
	if len(c.Runs) == 0 {
		return nil
	}
	return &c.Runs[len(c.Runs)-1]
}

// Previous is the run before the newest, or nil.
func (c *ContainerState) Previous() *Run {
	if len(c.Runs) < 2 {
		return nil
	}
	return &c.Runs[len(c.Runs)-2]
}

// Run states, as the CRI reports a container's.
const (
	RunCreated = "created" // runc create done, the app not started
	RunRunning = "running"
	RunExited  = "exited"
)

// Run is one runtime container of a pod's container: one per restart.
type Run struct {
	ID           string
	RestartCount int
	State        string
	// Exit is how it ended, from the shim's exit.json (State exited).
	Exit    *runc.Exit
	LogPath string
}

// Observe reads what the node holds of pod: sandbox, images, bundles,
// runtime containers and their exits.
func (k *Kubelet) Observe(pod *corev1.Pod) (*PodState, error) {
	now := k.now()
	st := &PodState{Now: now, Node: k.node, Layout: k.layout, Sandbox: k.layout.observeSandbox(pod)}
	k.observeNetwork(pod, &st.Sandbox)
	runs, err := k.listRuns()
	if err != nil {
		return nil, err
	}
	rt := k.runtimeOrDefault(pod.UID)
	for _, c := range pod.Spec.Containers {
		cs := ContainerState{Name: c.Name, Image: c.Image, Policy: c.ImagePullPolicy, ConfigRestart: -1,
			Bundle: k.layout.Bundle(pod.UID, c.Name)}
		if r, err := pull.ParseReference(c.Image); err != nil {
			cs.RefErr = err
		} else {
			cs.Ref = r.String()
			if d, err := k.store.Inspect(cs.Ref); err == nil {
				cs.Present = true
				cs.ImageID = imageID(d)
				cs.ImageSize = d.Config.Size
				for _, l := range d.Layers {
					cs.ImageSize += l.Size
				}
			}
		}
		// A rootfs is there when its directory is, and, for an overlay
		// (the bundle's snapshot.json), when it is mounted: after a reboot
		// the directory stays and the mount does not.
		cs.Rootfs = unpack.RootfsReady(cs.Bundle)
		if n, img, ok := readBundleConfig(filepath.Join(cs.Bundle, "config.json")); ok {
			cs.Config, cs.ConfigRestart, cs.ConfigImageID = filepath.Join(cs.Bundle, "config.json"), n, img
		}
		for _, r := range runs {
			if r.name.UID == pod.UID && r.name.Container == c.Name {
				cs.Runs = append(cs.Runs, k.readRun(rt, r.id, r.name.RestartCount))
			}
		}
		if l := cs.Latest(); l != nil && l.State == RunExited && shouldRestart(pod, l.Exit) {
			cs.CrashBackOff = k.crashDelay(l.RestartCount)
			cs.CrashBackOffUntil = l.Exit.ExitedAt.Add(cs.CrashBackOff)
		}
		if f, ok := k.failures.get(failureKey(pod, c.Name, c.Image)); ok {
			cs.FailedStage, cs.FailedReason, cs.FailedErr = f.stage, f.reason, f.err
			cs.BackOff, cs.BackOffUntil = f.delay, f.until
		}
		st.Containers = append(st.Containers, cs)
	}
	st.Leftovers = k.podLeftovers(pod.UID)
	return st, nil
}

// imageID is the status's imageID: repository@digest, the digest the
// registry resolved the reference to.
func imageID(d *pull.ImageDetails) string {
	dig := d.Resolved
	if dig == "" {
		dig = d.Manifest.Digest.String()
	}
	repo := d.Reference
	if r, err := pull.ParseReference(d.Reference); err == nil {
		repo = r.Registry + "/" + r.Repository
	}
	return repo + "@" + dig
}

// readBundleConfig reads the restartCount and image annotations of a
// bundle's config.json.
func readBundleConfig(path string) (restart int, image string, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1, "", false
	}
	var s struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(b, &s) != nil {
		return -1, "", false
	}
	n, err := strconv.Atoi(s.Annotations[AnnotationRestartCount])
	if err != nil {
		return -1, "", false
	}
	return n, s.Annotations[AnnotationImageID], true
}

// runEntry is a runtime container found on the node.
type runEntry struct {
	id   string
	name ContainerName
}

// listRuns lists the node's runtime containers made by a kubelet, from
// podlab's containers/ and runc's root, sorted by pod, container and
// restart count.
func (k *Kubelet) listRuns() ([]runEntry, error) { return k.layout.runs() }

func (l Layout) runs() ([]runEntry, error) {
	seen := map[string]bool{}
	var out []runEntry
	for _, dir := range []string{l.ContainersDir(), l.RuncRoot()} {
		ents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("listing the node's containers: %w", err)
		}
		for _, e := range ents {
			n, ok := ParseContainerID(e.Name())
			if !ok || !e.IsDir() || seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			out = append(out, runEntry{id: e.Name(), name: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].name, out[j].name
		if a.UID != b.UID || a.Container != b.Container {
			return out[i].id < out[j].id
		}
		return a.RestartCount < b.RestartCount
	})
	return out, nil
}

// readRun reads a runtime container's state from its files: runc's
// exec.fifo exists while it is created and not started; the shim writes
// exit.json when it exits. A container whose shim is gone without an
// exit.json (the machine restarted, the shim was killed) counts as exited
// with code 255, as containerd reports a container whose shim died.
func (k *Kubelet) readRun(rt *runc.Runtime, id string, restart int) Run {
	r := Run{ID: id, RestartCount: restart, LogPath: rt.LogPath(id)}
	if b, err := os.ReadFile(rt.ExitPath(id)); err == nil {
		var ex runc.Exit
		if json.Unmarshal(b, &ex) == nil {
			r.State, r.Exit = RunExited, &ex
			return r
		}
	}
	if rt.Created(id) {
		r.State = RunCreated
		return r
	}
	if _, err := os.Stat(rt.StateFile(id)); err == nil && processAlive(readPidFile(filepath.Join(rt.ContainerDir(id), "shim.pid"))) {
		r.State = RunRunning
		return r
	}
	// Exited, but not through the shim; or exit.json is being written.
	if b, err := os.ReadFile(rt.ExitPath(id)); err == nil {
		var ex runc.Exit
		if json.Unmarshal(b, &ex) == nil {
			r.State, r.Exit = RunExited, &ex
			return r
		}
	}
	r.State, r.Exit = RunExited, &runc.Exit{Code: 255, ExitedAt: k.now().UTC()}
	if fi, err := os.Stat(rt.ContainerDir(id)); err == nil {
		r.Exit.ExitedAt = fi.ModTime().UTC()
	}
	return r
}

func readPidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(string(bytes.TrimSpace(b)))
	return n
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
