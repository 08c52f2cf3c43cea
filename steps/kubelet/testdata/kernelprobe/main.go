// Command kernelprobe runs inside a pod's container in the kubelet's
// RuntimeClass tests and prints which kernel answers its system calls:
// kernel=<uname -r> (gVisor's user-space kernel says 4.4.0, runc's and
// crun's containers the host's), and pid=<its pid>. Each --sysctl=NAME
// prints sysctl.NAME=<its value, read from /proc/sys>. With --wait it then
// waits for SIGTERM, so that the pod stays Running.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		fmt.Printf("error=%v\n", err)
		os.Exit(1)
	}
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	fmt.Printf("kernel=%s\npid=%d\n", b, os.Getpid())
	wait := false
	for _, a := range os.Args[1:] {
		if name, ok := strings.CutPrefix(a, "--sysctl="); ok {
			v, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
			if err != nil {
				fmt.Printf("sysctl.%s=error: %v\n", name, err)
				continue
			}
			fmt.Printf("sysctl.%s=%s\n", name, strings.TrimSpace(string(v)))
		}
		wait = wait || a == "--wait"
	}
	if wait {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		<-sigs
	}
}
