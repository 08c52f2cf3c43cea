package runc

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fixedClock() func() time.Time {
	t := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
	return func() time.Time { t = t.Add(time.Nanosecond); return t }
}

func TestCRIWriter_Copy(t *testing.T) {
	long := strings.Repeat("x", MaxLogLine+10)
	tests := []struct {
		name string
		in   string
		want []string // the lines written, after the timestamp
	}{
		{"full lines", "a\nb c\n", []string{"stdout F a", "stdout F b c"}},
		{"empty line", "\n", []string{"stdout F "}},
		{"no newline at the end", "a\nrest", []string{"stdout F a", "stdout P rest"}},
		{"long line split", long + "\n", []string{"stdout P " + long[:MaxLogLine], "stdout F " + long[MaxLogLine:]}},
		{"nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cw := &criWriter{w: &out, now: fixedClock()}
			if err := cw.copy("stdout", strings.NewReader(tt.in)); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d lines %q, want %d", len(lines), lines, len(tt.want))
			}
			for i, l := range lines {
				ts, rest, _ := strings.Cut(l, " ")
				if rest != tt.want[i] {
					t.Errorf("line %d = %.60q, want %.60q", i, rest, tt.want[i])
				}
				// containerd's time.RFC3339Nano: the first line's
				// .123456790 without its trailing zero
				if p, err := time.Parse(time.RFC3339Nano, ts); err != nil || ts != p.Format(time.RFC3339Nano) || (i == 0 && ts != "2026-12-02T12:00:00.12345679Z") {
					t.Errorf("line %d timestamp %q is not containerd's RFC 3339 (trailing zeros dropped; the first 2026-12-02T12:00:00.12345679Z)", i, ts)
				}
			}
			// What the app wrote comes back, byte for byte.
			var back bytes.Buffer
			if _, err := writeLogLines(&back, out.Bytes(), false); err != nil {
				t.Fatal(err)
			}
			if back.String() != tt.in {
				t.Errorf("messages = %.60q, want %.60q", back.String(), tt.in)
			}
		})
	}
}

// TestLogLine_String: a line as containerd's CRI logger writes it, the
// time in time.RFC3339Nano (trailing zeros dropped, the clock's own zone),
// and read back.
func TestLogLine_String(t *testing.T) {
	taipei := time.FixedZone("CST", 8*3600)
	tests := []struct {
		name string
		l    LogLine
		want string
	}{
		{"milliseconds", LogLine{Time: time.Date(2026, 12, 2, 12, 0, 0, 123000000, time.UTC), Stream: "stderr", Message: "boom"},
			"2026-12-02T12:00:00.123Z stderr F boom"},
		{"nanoseconds ending in 0", LogLine{Time: time.Date(2026, 12, 2, 12, 0, 0, 123456780, time.UTC), Stream: "stdout", Message: "hi"},
			"2026-12-02T12:00:00.12345678Z stdout F hi"},
		{"a whole second", LogLine{Time: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), Stream: "stdout", Partial: true, Message: "part"},
			"2026-12-02T12:00:00Z stdout P part"},
		{"the local zone kept", LogLine{Time: time.Date(2026, 12, 2, 20, 0, 0, 500000000, taipei), Stream: "stdout", Message: "夜"},
			"2026-12-02T20:00:00.5+08:00 stdout F 夜"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseLogLine(tt.l.String())
			if err != nil || !back.Time.Equal(tt.l.Time) || back.Stream != tt.l.Stream || back.Partial != tt.l.Partial || back.Message != tt.l.Message {
				t.Errorf("ParseLogLine(String()) = %+v, %v; want %+v", back, err, tt.l)
			}
		})
	}
}

func TestParseLogLine_Bad(t *testing.T) {
	for name, in := range map[string]string{
		"empty":      "",
		"no tag":     "2026-12-02T12:00:00.123456789Z stdout",
		"bad time":   "yesterday stdout F hi",
		"bad stream": "2026-12-02T12:00:00.123456789Z stdin F hi",
		"bad tag":    "2026-12-02T12:00:00.123456789Z stdout X hi",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseLogLine(in); err == nil {
				t.Errorf("ParseLogLine(%q) succeeded, want an error", in)
			}
		})
	}
}

func TestFollowLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "container.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cw := &criWriter{w: f, now: fixedClock()}
	if err := cw.copy("stdout", strings.NewReader("one\n")); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	done := func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- followLog(context.Background(), path, pw, LogsOptions{Follow: true}, done)
		pw.Close()
	}()
	buf := make([]byte, 100)
	n, _ := io.ReadAtLeast(pr, buf, 4)
	if got := string(buf[:n]); got != "one\n" {
		t.Fatalf("first read %q, want %q", got, "one\n")
	}
	// A line written later is followed, then the container exits.
	if err := cw.copy("stderr", strings.NewReader("two\n")); err != nil {
		t.Fatal(err)
	}
	close(exited)
	rest, _ := io.ReadAll(pr)
	if string(rest) != "two\n" {
		t.Errorf("followed %q, want %q", rest, "two\n")
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	var ts bytes.Buffer
	if err := followLog(context.Background(), path, &ts, LogsOptions{Timestamps: true}, done); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ts.String(), "Z stderr F two\n") || strings.Count(ts.String(), "\n") != 2 {
		t.Errorf("with timestamps: %q, want both CRI lines", ts.String())
	}
}

func TestRuncMessage(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"logfmt", `time="2026-12-02T12:00:08Z" level=error msg="container does not exist"`, "container does not exist"},
		{"logfmt quoted", `time="x" level=error msg="exec: \"sh\": not found"`, `exec: "sh": not found`},
		{"logfmt warning skipped", "time=\"x\" level=warning msg=\"meh\"\ntime=\"x\" level=error msg=\"bad\"", "bad"},
		{"json", `{"level":"error","msg":"runc run failed: no such file","time":"x"}`, "runc run failed: no such file"},
		{"plain (crun)", "error: container `x` does not exist\n", "error: container `x` does not exist"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runcMessage([]byte(tt.in)); got != tt.want {
				t.Errorf("runcMessage = %q, want %q", got, tt.want)
			}
		})
	}
}
