// Command hello is the program inside podlab's demo image podlab/hello:1.0.
//
// It prints who and where it is, as a container sees itself: its hostname
// (the pod's UTS namespace), its PID (1 in its own PID namespace), its user
// (uid and gid, named from the image's /etc/passwd and /etc/group) and the
// cgroup limits the runtime put it under (memory, pids, cpu). Then it serves
// the same greeting over HTTP, on --listen (default :8080).
//
//	hello --once            print the greeting and exit 0
//	hello --listen :8080    print it, then answer GET / with it until SIGTERM
//
// It is built static (CGO_ENABLED=0), so the image needs no libc.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultGreeting is used when the image's Env sets no GREETING.
const defaultGreeting = "Hello from podlab/hello"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "hello: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("hello", flag.ContinueOnError)
	listen := flags.String("listen", ":8080", "address to serve the greeting on over HTTP")
	once := flags.Bool("once", false, "print the greeting and exit instead of serving")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}

	writeInfo(stdout, gather(""))
	if *once {
		return nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serving this greeting on http://%s/ (GET /)\n", ln.Addr())
	srv := &http.Server{Handler: handler(stdout), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown) //nolint:errcheck // the process is leaving
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(stdout, "stopped by signal, bye")
	return nil
}

func handler(log io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeInfo(w, gather(""))
		fmt.Fprintf(log, "%s %s %s\n", r.RemoteAddr, r.Method, r.URL.Path)
	})
}

// info is everything the greeting shows.
type info struct {
	Greeting string
	Hostname string
	PID      int
	UID, GID int
	User     string // from /etc/passwd; "" when the uid has no entry
	Group    string // from /etc/group
	Cgroup   Limits
}

// gather collects info about this process; root prefixes the files it reads.
func gather(root string) info {
	i := info{
		Greeting: os.Getenv("GREETING"),
		PID:      os.Getpid(),
		UID:      os.Getuid(),
		GID:      os.Getgid(),
	}
	if i.Greeting == "" {
		i.Greeting = defaultGreeting
	}
	if h, err := os.Hostname(); err == nil {
		i.Hostname = h
	}
	i.User = lookupName(root+"/etc/passwd", i.UID)
	i.Group = lookupName(root+"/etc/group", i.GID)
	i.Cgroup = readLimits(root)
	return i
}

// lookupName finds the name for id in a passwd or group file: both have
// "name:password:id:..." lines.
func lookupName(file string, id int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[2] == strconv.Itoa(id) {
			return f[0]
		}
	}
	return ""
}

// writeInfo prints the greeting, one fact a line.
func writeInfo(w io.Writer, i info) {
	fmt.Fprintf(w, "%s!\n", i.Greeting)
	fmt.Fprintf(w, "  hostname  %s\n", i.Hostname)
	fmt.Fprintf(w, "  pid       %d\n", i.PID)
	fmt.Fprintf(w, "  user      %s (uid %d), group %s (gid %d)\n",
		nameOr(i.User, "/etc/passwd"), i.UID, nameOr(i.Group, "/etc/group"), i.GID)
	c := i.Cgroup
	if c.Err != nil {
		fmt.Fprintf(w, "  cgroup    unknown: %v\n", c.Err)
		return
	}
	fmt.Fprintf(w, "  cgroup    %s (cgroup %s)\n", c.Path, c.Version)
	fmt.Fprintf(w, "  memory    %s\n", formatLimit(c.Memory, formatBytes))
	fmt.Fprintf(w, "  pids      %s\n", formatLimit(c.Pids, func(n int64) string { return strconv.FormatInt(n, 10) }))
	fmt.Fprintf(w, "  cpu       %s\n", formatCPU(c.CPU))
}

func nameOr(name, file string) string {
	if name == "" {
		return "(not in " + file + ")"
	}
	return name
}

func formatLimit(l Limit, format func(int64) string) string {
	switch {
	case errors.Is(l.Err, fs.ErrNotExist):
		return fmt.Sprintf("no limit (no %s: a hierarchy's top cgroup has no limit files)", l.File)
	case l.Err != nil:
		return fmt.Sprintf("unknown: %v", l.Err)
	case l.Max:
		return fmt.Sprintf("no limit (%s: %s)", l.File, l.Raw)
	default:
		return fmt.Sprintf("%s (%s: %s)", format(l.Value), l.File, l.Raw)
	}
}

func formatCPU(c CPULimit) string {
	switch {
	case errors.Is(c.Err, fs.ErrNotExist):
		return fmt.Sprintf("no limit (no %s: a hierarchy's top cgroup has no limit files)", c.File)
	case c.Err != nil:
		return fmt.Sprintf("unknown: %v", c.Err)
	case c.Max || c.Period <= 0:
		return fmt.Sprintf("no limit (%s: %s)", c.File, c.Raw)
	default:
		return fmt.Sprintf("%.2f CPUs (%s: %s)", float64(c.Quota)/float64(c.Period), c.File, c.Raw)
	}
}

// formatBytes formats n in binary units: "64.0 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
