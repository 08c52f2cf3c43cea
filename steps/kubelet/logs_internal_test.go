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
		{"timestamps", LogsOptions{TimestampPrefix: true, TailLines: n(1)}, "2026-12-03T10:00:03.000000000Z four\n"},
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

// TestReadLog_Timestamps: kubectl logs --timestamps prints each line's time
// as the kubelet does (k8s.io/cri-client/pkg/logs: parsed leniently from the
// runtime's RFC3339Nano, written in RFC3339NanoFixed, the zone kept), where
// the file, as containerd writes it, drops trailing zeros.
func TestReadLog_Timestamps(t *testing.T) {
	taipei := time.FixedZone("CST", 8*3600)
	tests := []struct {
		name string
		at   time.Time
		file string // the line's time in the file
		want string // kubectl logs --timestamps
	}{
		{"nanoseconds", time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC),
			"2026-12-03T10:00:00.123456789Z", "2026-12-03T10:00:00.123456789Z"},
		{"nanoseconds ending in 0", time.Date(2026, 12, 3, 10, 0, 0, 123456780, time.UTC),
			"2026-12-03T10:00:00.12345678Z", "2026-12-03T10:00:00.123456780Z"},
		{"milliseconds", time.Date(2026, 12, 3, 10, 0, 0, 120000000, time.UTC),
			"2026-12-03T10:00:00.12Z", "2026-12-03T10:00:00.120000000Z"},
		{"a whole second", time.Date(2026, 12, 3, 10, 0, 1, 0, time.UTC),
			"2026-12-03T10:00:01Z", "2026-12-03T10:00:01.000000000Z"},
		{"a node in another zone", time.Date(2026, 12, 3, 18, 0, 2, 5000, taipei),
			"2026-12-03T18:00:02.000005+08:00", "2026-12-03T18:00:02.000005000+08:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := runc.LogLine{Time: tt.at, Stream: "stdout", Message: "hello"}.String()
			if !strings.HasPrefix(line, tt.file+" stdout F ") {
				t.Errorf("the runtime wrote %q, want the time %s (containerd's RFC3339Nano)", line, tt.file)
			}
			path := filepath.Join(t.TempDir(), "container.log")
			if err := os.WriteFile(path, []byte(line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := readLog(context.Background(), path, &out, LogsOptions{TimestampPrefix: true}, func() bool { return true }); err != nil {
				t.Fatal(err)
			}
			if want := tt.want + " hello\n"; out.String() != want {
				t.Errorf("kubectl logs --timestamps printed %q, want %q", out.String(), want)
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
