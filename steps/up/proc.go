package up

// What runc did to a process, read back from the kernel: /proc/<pid>/ns/*
// (its namespaces, each named by an inode), /proc/<pid>/root (its root
// directory after pivot_root), /proc/<pid>/cgroup and /proc/<pid>/status
// (capabilities, user, no_new_privs, seccomp).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Namespace is one namespace of a process, compared with podlab's own.
type Namespace struct {
	Kind string // net, ipc, uts, pid, mnt, cgroup, user
	// ID is the kernel's name for it, "net:[4026532281]".
	ID string
	// Host is true when it is the namespace podlab itself runs in (the
	// node's).
	Host bool
	// Pinned is the sandbox's bind mount of the same namespace, when the
	// process shares the pod's.
	Pinned string
}

// Process is what the kernel says about a container's process.
type Process struct {
	Pid        int
	Command    string // /proc/<pid>/cmdline
	Namespaces []Namespace
	// Root is the directory /proc/<pid>/root is (RootIs true when it is
	// the rootfs given: same device and inode, the pivot_root done).
	Root   string
	RootIs bool
	// Cgroup is the process's cgroup (the unified hierarchy's path, else
	// the memory controller's).
	Cgroup string
	// CapEff and CapBnd are the effective and bounding capability sets.
	CapEff, CapBnd uint64
	// UID and GID are the real, effective, saved and filesystem ids.
	UID, GID   string
	NoNewPrivs string // "1": execve cannot gain privileges
	Seccomp    string // "2": a seccomp filter is on
}

// namespaceKinds are the namespaces a container may have.
var namespaceKinds = []string{"pid", "mnt", "net", "ipc", "uts", "cgroup", "user"}

// ReadProcess reads what the kernel says about pid. rootfs is the
// container's root file system, pinned the sandbox's bind mounts by kind.
func ReadProcess(pid int, rootfs string, pinned map[string]string) (*Process, error) {
	p := &Process{Pid: pid, Root: rootfs}
	dir := fmt.Sprintf("/proc/%d", pid)
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		p.Command = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	} else {
		return nil, fmt.Errorf("reading process %d: %w", pid, err)
	}
	for _, kind := range namespaceKinds {
		id, err := os.Readlink(filepath.Join(dir, "ns", kind))
		if err != nil {
			continue // a kernel without that kind
		}
		ns := Namespace{Kind: kind, ID: id}
		if self, err := os.Readlink(filepath.Join("/proc/self/ns", kind)); err == nil && self == id {
			ns.Host = true
		}
		if path, ok := pinned[kind]; ok && sameNamespace(path, id) {
			ns.Pinned = path
		}
		p.Namespaces = append(p.Namespaces, ns)
	}
	var root, fsRoot unix.Stat_t
	if unix.Stat(filepath.Join(dir, "root"), &root) == nil && unix.Stat(rootfs, &fsRoot) == nil {
		p.RootIs = root.Dev == fsRoot.Dev && root.Ino == fsRoot.Ino
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
		p.Cgroup = cgroupOf(string(b))
	}
	f, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		return nil, fmt.Errorf("reading process %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CapEff":
			p.CapEff, _ = strconv.ParseUint(v, 16, 64)
		case "CapBnd":
			p.CapBnd, _ = strconv.ParseUint(v, 16, 64)
		case "Uid":
			p.UID = strings.Join(strings.Fields(v), " ")
		case "Gid":
			p.GID = strings.Join(strings.Fields(v), " ")
		case "NoNewPrivs":
			p.NoNewPrivs = v
		case "Seccomp":
			p.Seccomp = v
		}
	}
	return p, sc.Err()
}

// sameNamespace reports whether the bind mount at path is the namespace
// id ("net:[4026532281]"): an nsfs file's inode is the namespace's.
func sameNamespace(path, id string) bool {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return false
	}
	_, rest, ok := strings.Cut(id, "[")
	return ok && strings.TrimSuffix(rest, "]") == strconv.FormatUint(st.Ino, 10)
}

// cgroupOf is the cgroup a /proc/<pid>/cgroup text names: the unified
// hierarchy's ("0::/path"), else the memory controller's.
func cgroupOf(text string) string {
	var memory string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" && f[2] != "/" {
			return f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				memory = f[2]
			}
		}
	}
	return memory
}

// capNames are the capabilities by bit, as <linux/capability.h> names them.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// CapNames names the capabilities of a set read from /proc/<pid>/status.
func CapNames(set uint64) []string {
	var out []string
	for bit := 0; bit < 64; bit++ {
		if set&(1<<bit) == 0 {
			continue
		}
		if bit < len(capNames) {
			out = append(out, capNames[bit])
		} else {
			out = append(out, fmt.Sprintf("cap_%d", bit))
		}
	}
	return out
}
