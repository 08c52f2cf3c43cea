// Command app is the tiny static program podlab's runc tests run inside a
// container:
//
//	app exit N      print to stdout and stderr, exit with N
//	app partial     print a line longer than 16 KiB, then text without a newline
//	app sleep       print "ready", wait for SIGTERM, print "terminating", exit 7
//	app size        print the size of the terminal on stdin: "ROWS COLS"
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: app exit N | partial | sleep | size")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "exit":
		n := 0
		if len(os.Args) > 2 {
			n, _ = strconv.Atoi(os.Args[2])
		}
		host, _ := os.Hostname()
		fmt.Printf("hello from pid %d on %s\n", os.Getpid(), host)
		fmt.Fprintln(os.Stderr, "a line on stderr")
		os.Exit(n)
	case "partial":
		fmt.Println(strings.Repeat("x", 20000))
		fmt.Print("no newline at the end")
	case "sleep":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Println("ready")
		<-sigs
		fmt.Println("terminating")
		os.Exit(7)
	case "size":
		var ws struct{ Row, Col, X, Y uint16 }
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); e != 0 {
			fmt.Fprintln(os.Stderr, "stdin is not a terminal:", e)
			os.Exit(1)
		}
		fmt.Printf("%d %d\n", ws.Row, ws.Col)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
