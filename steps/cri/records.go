package cri

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The lifecycle of a record. A record is written "creating" before the
// runtime makes anything of the object, and moves on once it is whole: a
// server killed in between finds a "creating" record when it starts again,
// and removes what that create had made (cleanHalfMade).
const (
	stateCreating = "creating"
	stateReady    = "ready"    // a sandbox, whole
	stateNotReady = "notready" // a sandbox, stopped
	stateCreated  = "created"  // a container, whole (runc create done)
)

// sandboxRecord is one pod sandbox, <node>/cri/sandboxes/<id>.json.
type sandboxRecord struct {
	ID             string `json:"id"`
	State          string `json:"state"`
	CreatedAt      int64  `json:"createdAt"` // unix nanoseconds, as CRI says times
	RuntimeHandler string `json:"runtimeHandler,omitempty"`
	// Config is the PodSandboxConfig as RunPodSandbox got it (protojson).
	Config json.RawMessage `json:"config"`
	// Namespaces are the pinned namespaces, kind → bind mount; a kind the
	// pod shares with the node (NODE mode) is absent.
	Namespaces map[string]string `json:"namespaces,omitempty"`
	// CgroupParent is the pod's cgroup (LinuxPodSandboxConfig.cgroup_parent,
	// or the node's kubepods when the config names none).
	CgroupParent string `json:"cgroupParent"`
	// IPs are the pod's addresses from CNI ADD, the first is its IP.
	IPs []string `json:"ips,omitempty"`
	// Network is the CNI network's name, when attached.
	Network string `json:"network,omitempty"`
	// UserNS is the sandbox's own user namespace (userns_options mode
	// POD), pinned at Namespaces["user"]; nil: the host's.
	UserNS *userNamespace `json:"userNamespace,omitempty"`

	config *runtimeapi.PodSandboxConfig
}

// containerRecord is one container, <node>/cri/containers/<id>.json. Its
// running or exited state is runc's and the shim's (exit.json), read when
// asked.
type containerRecord struct {
	ID        string          `json:"id"`
	SandboxID string          `json:"sandboxId"`
	State     string          `json:"state"`
	CreatedAt int64           `json:"createdAt"`
	StartedAt int64           `json:"startedAt,omitempty"`
	Config    json.RawMessage `json:"config"` // the ContainerConfig (protojson)
	// Image is the image as the config named it; ImageRef the image's id
	// (the config's digest, as containerd reports imageRef's id).
	Image    string `json:"image"`
	ImageRef string `json:"imageRef"`
	// RepoDigest is repository@sha256:..., the image the kubelet reports.
	RepoDigest string `json:"repoDigest,omitempty"`
	Bundle     string `json:"bundle"`
	// LogPath is log_directory/log_path of the sandbox and container
	// configs; empty when they name none.
	LogPath string `json:"logPath,omitempty"`
	// RuntimeHandler is its sandbox's handler (runc when empty): the
	// runtime that runs it.
	RuntimeHandler string `json:"runtimeHandler,omitempty"`

	config *runtimeapi.ContainerConfig
}

// marshalConfig writes a CRI config into a record, readable.
func marshalConfig(m proto.Message) ([]byte, error) {
	return protojson.MarshalOptions{Indent: "  "}.Marshal(m)
}

// records keeps the records in two directories.
type records struct {
	sandboxes, containers string
}

func (r records) sandboxPath(id string) string   { return filepath.Join(r.sandboxes, id+".json") }
func (r records) containerPath(id string) string { return filepath.Join(r.containers, id+".json") }

func (r records) putSandbox(s *sandboxRecord) error {
	if s.config != nil {
		b, err := marshalConfig(s.config)
		if err != nil {
			return err
		}
		s.Config = b
	}
	return writeJSONAtomic(r.sandboxPath(s.ID), s)
}

func (r records) putContainer(c *containerRecord) error {
	if c.config != nil {
		b, err := marshalConfig(c.config)
		if err != nil {
			return err
		}
		c.Config = b
	}
	return writeJSONAtomic(r.containerPath(c.ID), c)
}

func (r records) sandbox(id string) (*sandboxRecord, error) {
	var s sandboxRecord
	if err := readJSON(r.sandboxPath(id), &s); err != nil {
		return nil, err
	}
	s.config = &runtimeapi.PodSandboxConfig{}
	if err := unmarshalConfig(s.Config, s.config); err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.sandboxPath(id), err)
	}
	return &s, nil
}

func (r records) container(id string) (*containerRecord, error) {
	var c containerRecord
	if err := readJSON(r.containerPath(id), &c); err != nil {
		return nil, err
	}
	c.config = &runtimeapi.ContainerConfig{}
	if err := unmarshalConfig(c.Config, c.config); err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.containerPath(id), err)
	}
	return &c, nil
}

func unmarshalConfig(b []byte, m proto.Message) error {
	if len(b) == 0 {
		return nil
	}
	return protojson.Unmarshal(b, m)
}

func (r records) removeSandbox(id string) error   { return removeIfExists(r.sandboxPath(id)) }
func (r records) removeContainer(id string) error { return removeIfExists(r.containerPath(id)) }

// ids lists the records of dir, sorted.
func ids(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (r records) sandboxIDs() ([]string, error)   { return ids(r.sandboxes) }
func (r records) containerIDs() ([]string, error) { return ids(r.containers) }

// writeJSONAtomic writes v to path through a synced temporary file renamed
// over it: a reader sees the old record or the new one, never half of one.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
