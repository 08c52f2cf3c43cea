package kubelet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerID is a container's ID in a pod's status (containerID,
// lastState.terminated.containerID): TYPE://ID, TYPE the runtime's name as
// its CRI Version answers it (runtime_name: podlab://, containerd://) and
// ID the runtime's id of the container, as Kubernetes'
// kubecontainer.ContainerID{Type: runtimeName, ID} is.
type ContainerID struct {
	Type, ID string
}

// String is TYPE://ID, what a status says.
func (c ContainerID) String() string { return c.Type + "://" + c.ID }

// ParseContainerID reads a status's containerID, TYPE://ID, as
// kubecontainer.ParseContainerID does; anything else, or an empty TYPE or
// ID, is an error. It is the one place that reads a containerID: the
// kubelet, exec, logs and the lessons' checks all go through it.
func ParseContainerID(s string) (ContainerID, error) {
	parts := strings.Split(s, "://")
	if len(parts) != 2 {
		return ContainerID{}, fmt.Errorf("containerID %q: want <runtime name>://<id>", s)
	}
	c := ContainerID{Type: parts[0], ID: parts[1]}
	switch {
	case c.Type == "":
		return ContainerID{}, fmt.Errorf("containerID %q: no runtime name before ://", s)
	case c.ID == "":
		return ContainerID{}, fmt.Errorf("containerID %q: no container id after ://", s)
	}
	return c, nil
}

// isRun reports whether a status's containerID names the runtime's
// container id, whatever runtime name it has.
func isRun(containerID, id string) bool {
	c, err := ParseContainerID(containerID)
	return err == nil && c.ID == id
}

// runtimeName is the name the kubelet's runtime answers CRI Version with
// (runtime_name), the TYPE of the containerIDs it writes: asked once, as
// the kubelet's runtime manager keeps it from its first Version call.
type runtimeName struct {
	mu   sync.Mutex
	name string
}

// get is the runtime's name, asking rt's Version the first time (and again
// after a failure).
func (n *runtimeName) get(ctx context.Context, rt runtimeapi.RuntimeServiceClient) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.name != "" {
		return n.name, nil
	}
	v, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", fmt.Errorf("asking the runtime its name (CRI Version), the type of the containerIDs: %w", err)
	}
	if v.RuntimeName == "" {
		return "", errors.New("asking the runtime its name (CRI Version): it answers no runtime_name, which the containerIDs need")
	}
	n.name = v.RuntimeName
	return n.name, nil
}

// remember records the name a Version call made elsewhere answered (the
// node status asks it at every heartbeat); "" changes nothing.
func (n *runtimeName) remember(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name != "" {
		n.name = name
	}
}
