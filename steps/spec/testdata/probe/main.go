// Command probe runs inside a container in the spec package's runc test and
// prints, one key=value a line, what the kernel gave it: hostname, ids,
// capability sets, no_new_privs, cgroup and limits as seen from inside.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
)

func main() {
	host, err := os.Hostname()
	if err != nil {
		host = "error: " + err.Error()
	}
	fmt.Printf("hostname=%s\n", host)
	fmt.Printf("uid=%d\n", os.Getuid())
	fmt.Printf("gid=%d\n", os.Getgid())
	groups, _ := os.Getgroups()
	fmt.Printf("groups=%v\n", groups)
	cwd, _ := os.Getwd()
	fmt.Printf("cwd=%s\n", cwd)
	fmt.Printf("env.HOSTNAME=%s\n", os.Getenv("HOSTNAME"))
	fmt.Printf("env.PATH=%s\n", os.Getenv("PATH"))
	fmt.Printf("env.GREETING=%s\n", os.Getenv("GREETING"))
	fmt.Printf("pid=%d\n", os.Getpid())
	fmt.Printf("args=%q\n", os.Args)

	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch k {
			case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp":
				fmt.Printf("%s=%s\n", k, strings.TrimSpace(v))
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, "0::") {
				fmt.Printf("cgroup2=%s\n", strings.TrimPrefix(l, "0::"))
			}
		}
	}
	// System calls containerd's default seccomp profile refuses (without
	// CAP_SYS_ADMIN): "ok" or the errno's name.
	fmt.Printf("unshare=%s\n", errnoText(unshareUser()))
	_, _, e := syscall.Syscall(syscall.SYS_KEYCTL, 0 /* KEYCTL_GET_KEYRING_ID */, ^uintptr(0) /* thread keyring */, 0)
	fmt.Printf("keyctl=%s\n", errnoText(e))

	// Whether the container can write under /sys/fs/cgroup (it must not:
	// the whole of it is read-only, the tmpfs runc makes on cgroup v1 too).
	fmt.Printf("cgroupfs.mkdir=%s\n", errnoOf(os.Mkdir("/sys/fs/cgroup/probe-dir", 0o755)))
	f, err := os.Create("/sys/fs/cgroup/probe-file")
	if err == nil {
		f.Close()
	}
	fmt.Printf("cgroupfs.create=%s\n", errnoOf(err))

	// The limits, read where cgroup v2 or v1 puts them in the container.
	for key, files := range map[string][]string{
		"memory": {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		"pids":   {"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"},
		"cpu":    {"/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"},
	} {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				fmt.Printf("limit.%s=%s\n", key, strings.TrimSpace(string(b)))
				break
			}
		}
	}
}

// unshareUser makes a new user namespace (unshare -U) in a locked thread
// that is then thrown away.
func unshareUser() syscall.Errno {
	done := make(chan syscall.Errno)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		_, _, e := syscall.RawSyscall(syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER, 0, 0)
		done <- e
	}()
	return <-done
}

// errnoOf is errnoText of the errno in err ("ok" for nil).
func errnoOf(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return errnoText(e)
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func errnoText(e syscall.Errno) string {
	switch e {
	case 0:
		return "ok"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EROFS:
		return "EROFS"
	}
	return e.Error()
}
