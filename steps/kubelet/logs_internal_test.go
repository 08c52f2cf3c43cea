package kubelet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/runc"
)

// TestReadLog is the kubelet API's reading of a CRI log file, as the
// kubelet's ReadLogs does it for tailLines, sinceTime, limitBytes and
// timestamps, on a real file in the runtime's format.
func TestReadLog(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	lines := []runc.LogLine{
		{Time: t0, Stream: "stdout", Message: "one"},
		{Time: t0.Add(time.Second), Stream: "stderr", Message: "two"},
		{Time: t0.Add(2 * time.Second), Stream: "stdout", Partial: true, Message: "thr"},
		{Time: t0.Add(2 * time.Second), Stream: "stdout", Message: "ee"},
		{Time: t0.Add(3 * time.Second), Stream: "stdout", Message: "four"},
	}
	var file strings.Builder
	for _, l := range lines {
		file.WriteString(l.String() + "\n")
	}
	path := filepath.Join(t.TempDir(), "container.log")
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	n := func(v int64) *int64 { return &v }
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	tests := []struct {
		name string
		opts LogsOptions
		want string
	}{
		{"all", LogsOptions{}, "one\ntwo\nthree\nfour\n"},
		{"tail 1", LogsOptions{TailLines: n(1)}, "four\n"},
		{"tail 2 keeps a split line whole", LogsOptions{TailLines: n(2)}, "three\nfour\n"},
		{"tail 0", LogsOptions{TailLines: n(0)}, ""},
		{"tail more than there is", LogsOptions{TailLines: n(10)}, "one\ntwo\nthree\nfour\n"},
		{"since", LogsOptions{SinceTime: at(time.Second)}, "two\nthree\nfour\n"},
		{"limit", LogsOptions{LimitBytes: n(6)}, "one\ntw"},
		{"timestamps", LogsOptions{TimestampPrefix: true, TailLines: n(1)}, "2026-12-03T10:00:03Z four\n"},
		{"tail and limit", LogsOptions{TailLines: n(2), LimitBytes: n(3)}, "thr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := readLog(context.Background(), path, &out, tt.opts, func() bool { return true }); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("%q, want %q", out.String(), tt.want)
			}
		})
	}

	t.Run("follow ends when the container exits", func(t *testing.T) {
		exited := make(chan struct{})
		var out safeBuffer
		errc := make(chan error, 1)
		go func() {
			errc <- readLog(context.Background(), path, &out, LogsOptions{Follow: true, TailLines: n(1)}, func() bool {
				select {
				case <-exited:
					return true
				default:
					return false
				}
			})
		}()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		time.Sleep(300 * time.Millisecond)
		f.WriteString(runc.LogLine{Time: t0.Add(4 * time.Second), Stream: "stdout", Message: "five"}.String() + "\n")
		time.Sleep(300 * time.Millisecond)
		close(exited)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if out.String() != "four\nfive\n" {
			t.Errorf("followed %q, want the last line, then the one written later", out.String())
		}
	})

	bad := filepath.Join(t.TempDir(), "bad.log")
	os.WriteFile(bad, []byte("not a CRI line\n"), 0o644)
	for name, p := range map[string]string{"missing file": filepath.Join(t.TempDir(), "nope"), "not CRI": bad} {
		t.Run("bad: "+name, func(t *testing.T) {
			if err := readLog(context.Background(), p, &bytes.Buffer{}, LogsOptions{TailLines: n(1)}, func() bool { return true }); err == nil {
				t.Error("no error")
			}
		})
	}
}

// safeBuffer is a bytes.Buffer written by one goroutine and read by another.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
