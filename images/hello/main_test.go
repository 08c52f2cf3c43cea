package main

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriteInfo(t *testing.T) {
	i := info{
		Greeting: "Hello from podlab/hello",
		Hostname: "web",
		PID:      1,
		UID:      10001,
		GID:      10001,
		User:     "app",
		Group:    "app",
		Cgroup: Limits{
			Version: "v2",
			Path:    "/",
			Memory:  Limit{File: "/sys/fs/cgroup/memory.max", Raw: "67108864", Value: 64 << 20},
			Pids:    Limit{File: "/sys/fs/cgroup/pids.max", Raw: "max", Max: true},
			CPU:     CPULimit{File: "/sys/fs/cgroup/cpu.max", Raw: "50000 100000", Quota: 50000, Period: 100000},
		},
	}
	want := `Hello from podlab/hello!
  hostname  web
  pid       1
  user      app (uid 10001), group app (gid 10001)
  cgroup    / (cgroup v2)
  memory    64.0 MiB (/sys/fs/cgroup/memory.max: 67108864)
  pids      no limit (/sys/fs/cgroup/pids.max: max)
  cpu       0.50 CPUs (/sys/fs/cgroup/cpu.max: 50000 100000)
`
	var b bytes.Buffer
	writeInfo(&b, i)
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	// A uid without a name, a missing limit file and an unreadable cgroup.
	i.User, i.Group = "", ""
	i.Cgroup.Memory = Limit{File: "/sys/fs/cgroup/memory/memory.limit_in_bytes", Err: fs.ErrNotExist}
	b.Reset()
	writeInfo(&b, i)
	for _, s := range []string{
		"user      (not in /etc/passwd) (uid 10001), group (not in /etc/group) (gid 10001)",
		"memory    no limit (no /sys/fs/cgroup/memory/memory.limit_in_bytes: a hierarchy's top cgroup has no limit files)",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, b.String())
		}
	}
	i.Cgroup = Limits{Err: fs.ErrPermission}
	b.Reset()
	writeInfo(&b, i)
	if !strings.HasSuffix(b.String(), "  cgroup    unknown: permission denied\n") {
		t.Errorf("unreadable cgroup:\n%s", b.String())
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		512:        "512 B",
		1024:       "1.0 KiB",
		64 << 20:   "64.0 MiB",
		3 << 30:    "3.0 GiB",
		1536 << 10: "1.5 MiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestGather_NamesFromPasswd(t *testing.T) {
	root := tree(t, map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\napp:x:10001:10001::/nonexistent:/sbin/nologin\n",
		"etc/group":  "root:x:0:\napp:x:10001:\n",
	})
	if got := lookupName(root+"/etc/passwd", 10001); got != "app" {
		t.Errorf("user 10001 = %q, want app", got)
	}
	if got := lookupName(root+"/etc/group", 0); got != "root" {
		t.Errorf("group 0 = %q, want root", got)
	}
	if got := lookupName(root+"/etc/passwd", 4242); got != "" {
		t.Errorf("user 4242 = %q, want none", got)
	}
}

func TestRun(t *testing.T) {
	t.Setenv("GREETING", "Hi from a test")
	var out bytes.Buffer
	if err := run([]string{"--once"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Hi from a test!\n", "  hostname  ", "  pid       ", "  cgroup    "} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}

	for _, args := range [][]string{{"--nope"}, {"--once", "extra"}, {"--listen", "256.0.0.1:bad"}} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(handler(io.Discard))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), defaultGreeting+"!\n") {
		t.Errorf("GET / = %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other = %d, want 404", resp.StatusCode)
	}
}
