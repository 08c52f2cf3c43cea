package runc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/runc"
)

// TestRuntime_List: the real runc's list, read back: nothing before the
// root exists, then a created container, then the same one running.
func TestRuntime_List(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	r := newRuntime(t)
	ls, err := r.List(ctx)
	if err != nil || ls != nil {
		t.Fatalf("List before anything was created = %+v, %v; want nothing, no error", ls, err)
	}

	id := containerID(t, r)
	b := bundle(t, id, "sleep")
	c, err := r.Create(ctx, id, b)
	if err != nil {
		t.Fatal(err)
	}
	find := func(want string) {
		t.Helper()
		ls, err := r.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 1 {
			t.Fatalf("List = %+v, want one container", ls)
		}
		l := ls[0]
		if l.ID != id || l.Pid != c.Pid || l.Status != want || l.Bundle != b ||
			l.Rootfs != filepath.Join(b, "rootfs") || l.Owner != "root" || time.Since(l.Created) > time.Hour {
			t.Errorf("List = %+v; want %s, pid %d, %s, bundle %s, owner root, created just now", l, id, c.Pid, want, b)
		}
	}
	find("created")
	if _, err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	find("running")
}

// TestRuntime_List_Bad: what List refuses, and says why.
func TestRuntime_List_Bad(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		r    runc.Runtime
		want error
		text string
	}{
		{"runtime binary missing", runc.Runtime{Binary: "/nonexistent/bin/runc", StateDir: t.TempDir()},
			runc.ErrRuntimeNotFound, "/nonexistent/bin/runc"},
		{"root is a file", runc.Runtime{Binary: testenv.Runc(t), Root: writeFile(t, "not a directory")},
			nil, "listing the containers under "},
		{"a runtime that does not print JSON", runc.Runtime{Binary: "/bin/echo", StateDir: t.TempDir(), Root: t.TempDir()},
			nil, "reading /bin/echo list's JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := tt.r.List(ctx)
			if err == nil {
				t.Fatalf("List = %+v, want an error", ls)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %q is not %q", err, tt.want)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tt.text)) {
				t.Errorf("error %q lacks %q", err, tt.text)
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteListTable: runc list's table, as runc 1.5.3 prints it
// (cmd/podlab's TestRunc_List compares it with the real runc byte for byte).
func TestWriteListTable(t *testing.T) {
	created := time.Date(2026, 12, 3, 19, 20, 1, 123456780, time.UTC)
	tests := []struct {
		name string
		ls   []runc.Listed
		want string
	}{
		{"no container: the header alone", nil,
			"ID          PID         STATUS      BUNDLE      CREATED     OWNER\n"},
		{"one, created", []runc.Listed{{ID: "hello", Pid: 4242, Status: "created", Bundle: "/b/hello", Created: created, Owner: "root"}},
			"ID          PID         STATUS      BUNDLE      CREATED                         OWNER\n" +
				"hello       4242        created     /b/hello    2026-12-03T19:20:01.12345678Z   root\n"},
		{"a stopped one has pid 0; long fields widen their column", []runc.Listed{
			{ID: "a-container-with-a-long-id", Status: "stopped", Bundle: "/var/lib/podlab/bundles/nginx", Created: created.Truncate(time.Second), Owner: "root"},
			{ID: "web", Pid: 7, Status: "running", Bundle: "/b/web", Created: created, Owner: "podlab"},
		},
			"ID                           PID         STATUS      BUNDLE                          CREATED                         OWNER\n" +
				"a-container-with-a-long-id   0           stopped     /var/lib/podlab/bundles/nginx   2026-12-03T19:20:01Z            root\n" +
				"web                          7           running     /b/web                          2026-12-03T19:20:01.12345678Z   podlab\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := runc.WriteListTable(&b, tt.ls); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("WriteListTable printed\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

// TestWriteListJSON: runc list --format json's array, and its null when
// there is nothing.
func TestWriteListJSON(t *testing.T) {
	created := time.Date(2026, 12, 3, 19, 20, 1, 5, time.UTC)
	tests := []struct {
		name string
		ls   []runc.Listed
		want string
	}{
		{"no container", nil, "null\n"},
		{"one", []runc.Listed{{Version: "1.3.0", ID: "hello", Pid: 9, Status: "running", Bundle: "/b", Rootfs: "/b/rootfs", Created: created, Owner: "root"}},
			`[{"ociVersion":"1.3.0","id":"hello","pid":9,"status":"running","bundle":"/b","rootfs":"/b/rootfs","created":"2026-12-03T19:20:01.000000005Z","owner":"root"}]` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := runc.WriteListJSON(&b, tt.ls); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("WriteListJSON printed %s, want %s", b.String(), tt.want)
			}
		})
	}
}
