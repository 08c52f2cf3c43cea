package kubelet

// The pod sandbox: what CRI's RunPodSandbox makes. A pod's containers share
// its network namespace (one IP, one localhost, one set of ports), its IPC
// namespace (System V IPC, POSIX message queues) and its UTS namespace (the
// hostname, the pod's name). containerd keeps them alive with a "pause"
// container; CRI-O, with its pinns helper, without one: it unshares the
// namespaces in a short-lived process and bind-mounts /proc/<pid>/ns/<kind>
// onto a file, which keeps a namespace alive with no process in it. podlab
// does what pinns does, in a locked OS thread of its own process.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/cni"
	"github.com/podlab/podlab/steps/statedir"
)

// Sandbox is a pod's sandbox as found on the node.
type Sandbox struct {
	// Ready is true when every namespace the pod needs is pinned.
	Ready bool
	// HostNetwork: the pod uses the node's network namespace, no netns of its own.
	HostNetwork bool
	// Hostname is the pod's hostname, set in its UTS namespace.
	Hostname string
	// Namespaces maps each pinned kind (user, net, ipc, uts) to its bind
	// mount; a kind is missing while it is not pinned.
	Namespaces map[string]string
	// UserNamespace is the pod's range of host ids (hostUsers: false), once
	// allocated.
	UserNamespace *UserNamespace
	// Network is the sandbox's attachment to the pod network (its IPs, the
	// CNI result JSON), nil while it has none.
	Network *cni.Result
	// RuntimeHandler is the runtime handler the sandbox was made with, as
	// recorded (runc when none is).
	RuntimeHandler string
}

// podHostname is the hostname of a pod's UTS namespace: spec.hostname, else
// the pod's name, cut to 63 characters as the kubelet does.
func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// sandboxKinds are the namespaces a pod's sandbox pins.
func sandboxKinds(pod *corev1.Pod) []string {
	var kinds []string
	if usesUserNamespace(pod) {
		kinds = append(kinds, "user") // first: it owns the others
	}
	if !pod.Spec.HostNetwork {
		kinds = append(kinds, "net")
	}
	if !pod.Spec.HostIPC {
		kinds = append(kinds, "ipc")
	}
	if !pod.Spec.HostNetwork {
		// A hostNetwork pod shares the node's hostname too, as in Kubernetes.
		kinds = append(kinds, "uts")
	}
	return kinds
}

// observeSandbox reads which of the pod's namespaces are pinned.
func (l Layout) observeSandbox(pod *corev1.Pod) Sandbox {
	sb := Sandbox{HostNetwork: pod.Spec.HostNetwork, Hostname: podHostname(pod), Namespaces: map[string]string{}}
	sb.Ready = true
	sb.RuntimeHandler, _ = l.sandboxHandler(pod.UID)
	if usesUserNamespace(pod) {
		if u, ok, err := readUserNamespace(l.UserNamespaceFile(pod.UID)); err == nil && ok {
			sb.UserNamespace = &u
		}
	}
	for _, kind := range sandboxKinds(pod) {
		p := l.NamespacePath(kind, pod.UID)
		if isNamespaceMount(p) {
			sb.Namespaces[kind] = p
		} else {
			sb.Ready = false
		}
	}
	return sb
}

// isNamespaceMount reports whether path is a bind mount of a namespace
// (a file on the nsfs file system).
func isNamespaceMount(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// pinNamespaces creates the pod's namespaces and pins each at its path. A
// goroutine locks itself to its OS thread, unshares the namespaces (they
// belong to that thread alone), sets the hostname, brings up lo, and
// bind-mounts /proc/self/task/<tid>/ns/<kind> onto each path. It then ends
// without unlocking: Go ends the thread, and the namespaces live on in the
// bind mounts. With a user namespace u (hostUsers: false), pinInUserNamespace
// makes and pins them all, and the thread only joins the network and UTS
// namespaces to bring up lo and set the hostname.
func (l Layout) pinNamespaces(pod *corev1.Pod, u *UserNamespace) (Sandbox, error) {
	kinds := sandboxKinds(pod)
	if len(kinds) == 0 { // hostNetwork and hostIPC: the node's namespaces are the sandbox
		return l.observeSandbox(pod), nil
	}
	flags := 0
	for _, k := range kinds {
		flags |= map[string]int{"net": unix.CLONE_NEWNET, "ipc": unix.CLONE_NEWIPC, "uts": unix.CLONE_NEWUTS}[k]
	}
	for _, k := range kinds {
		p := l.NamespacePath(k, pod.UID)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Sandbox{}, err
		}
		if isNamespaceMount(p) { // half-made earlier: start over
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o444)
		if err != nil {
			return Sandbox{}, err
		}
		f.Close()
	}
	threadKinds := kinds
	if u != nil {
		if err := l.pinInUserNamespace(pod, *u, kinds); err != nil {
			_ = l.removeSandbox(pod.UID)
			return Sandbox{}, fmt.Errorf("creating the sandbox of pod %s: %w", podKey(pod), err)
		}
		threadKinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k != "net" && k != "uts" })
	}
	hostname := podHostname(pod)
	done := make(chan error, 1)
	go func() {
		// The thread that unshares must never run other goroutines while it
		// is in the pod's namespaces. It goes back to the host's before it
		// is unlocked; if it cannot, it stays locked and dies with this
		// goroutine. (Leaving it locked is not enough on its own: when the
		// goroutine happens to run on the main thread, Go keeps that thread,
		// and /proc/<pid>/ns would then name the pod's namespaces.)
		runtime.LockOSThread()
		var orig []int // the thread's own namespaces, to go back to
		restored := false
		defer func() {
			for _, fd := range orig {
				unix.Close(fd)
			}
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		for _, k := range threadKinds {
			fd, err := unix.Open(fmt.Sprintf("/proc/thread-self/ns/%s", k), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				done <- fmt.Errorf("opening the thread's %s namespace: %w", k, err)
				return
			}
			orig = append(orig, fd)
		}
		done <- func() error {
			defer func() {
				for _, fd := range orig {
					if err := unix.Setns(fd, 0); err != nil {
						return
					}
				}
				restored = true
			}()
			if u != nil {
				if err := joinNamespaces(l, pod, threadKinds); err != nil {
					return err
				}
			} else if err := unix.Unshare(flags); err != nil {
				return fmt.Errorf("unshare(%s): %w", strings.Join(kinds, ", "), err)
			}
			if flags&unix.CLONE_NEWUTS != 0 {
				if err := unix.Sethostname([]byte(hostname)); err != nil {
					return fmt.Errorf("setting the hostname %q: %w", hostname, err)
				}
			}
			if flags&unix.CLONE_NEWNET != 0 {
				if err := loopbackUp(); err != nil {
					return fmt.Errorf("bringing up lo in the pod's network namespace: %w", err)
				}
			}
			if u != nil {
				return nil // pinned already
			}
			tid := unix.Gettid()
			for _, k := range kinds {
				src := fmt.Sprintf("/proc/self/task/%d/ns/%s", tid, k)
				if err := unix.Mount(src, l.NamespacePath(k, pod.UID), "", unix.MS_BIND, ""); err != nil {
					return fmt.Errorf("bind-mounting %s onto %s: %w", src, l.NamespacePath(k, pod.UID), err)
				}
			}
			return nil
		}()
	}()
	if err := <-done; err != nil {
		_ = l.removeSandbox(pod.UID)
		return Sandbox{}, fmt.Errorf("creating the sandbox of pod %s: %w", podKey(pod), err)
	}
	return l.observeSandbox(pod), nil
}

// joinNamespaces moves the calling thread into the pod's pinned namespaces
// of kinds.
func joinNamespaces(l Layout, pod *corev1.Pod, kinds []string) error {
	for _, k := range kinds {
		p := l.NamespacePath(k, pod.UID)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = unix.Setns(fd, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("joining the %s namespace at %s: %w", k, p, err)
		}
	}
	return nil
}

// loopbackUp sets IFF_UP on lo, in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// removeSandbox unmounts and removes a pod's namespace files: the
// namespaces go away with the last process in them.
func (l Layout) removeSandbox(uid types.UID) error {
	var errs []error
	for _, kind := range statedir.NamespaceKinds() {
		p := l.NamespacePath(kind, uid)
		if isNamespaceMount(p) {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
				continue
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
