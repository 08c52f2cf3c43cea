// Command seccompprobe runs inside a pod's container in the kubelet's
// seccomp test and prints, one key=value a line, the Seccomp line of its
// /proc/self/status (0: no filter, 2: a filter) and what two system calls
// that containerd's default profile refuses returned: "ok", "EPERM" or the
// kernel's own error.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
)

func main() {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fmt.Printf("error=%v\n", err)
		os.Exit(1)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && (k == "Seccomp" || k == "Seccomp_filters") {
			fmt.Printf("%s=%s\n", k, strings.TrimSpace(v))
		}
	}
	f.Close()

	// unshare -U: without a filter the kernel itself refuses it with EINVAL
	// (a Go program has several threads); the filter answers EPERM first.
	done := make(chan syscall.Errno)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		_, _, e := syscall.RawSyscall(syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER, 0, 0)
		done <- e
	}()
	fmt.Printf("unshare=%s\n", errnoText(<-done))
	// keyctl(KEYCTL_GET_KEYRING_ID, thread keyring, no create).
	_, _, e := syscall.Syscall(syscall.SYS_KEYCTL, 0, ^uintptr(0), 0)
	fmt.Printf("keyctl=%s\n", errnoText(e))
}

func errnoText(e syscall.Errno) string {
	switch e {
	case 0:
		return "ok"
	case syscall.EPERM:
		return "EPERM"
	}
	return e.Error()
}
