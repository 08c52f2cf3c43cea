// Command kernelprobe runs inside a pod's container in the kubelet's
// RuntimeClass tests and prints which kernel answers its system calls:
// kernel=<uname -r> (gVisor's user-space kernel says 4.4.0, runc's and
// crun's containers the host's), and pid=<its pid>. With --wait it then
// waits for SIGTERM, so that the pod stays Running.
package main

import (
	"fmt"
	"os"
	"os/signal"
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
	if len(os.Args) > 1 && os.Args[1] == "--wait" {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		<-sigs
	}
}
