package runc

// Container logs in the CRI format, as the kubelet reads them from
// /var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log:
//
//	2026-12-02T12:00:00.123456789Z stdout F hello
//	2026-12-02T12:00:00.12345679Z stderr P a long line, cut here
//	2026-12-02T12:00:00.123456791Z stderr F  and its end
//
// The runtime's shim writes them: it holds the container's stdout and stderr
// pipes and stamps each line with the time, the stream and a tag, F for a full
// line or P for part of one (a line longer than MaxLogLine, or the last bytes
// before the stream closed without a newline).
//
// The time is the runtime's clock in Go's time.RFC3339Nano, as containerd's
// CRI logger writes it (internal/cri/io/logger.go, timestampFormat): trailing
// zeros of the fraction dropped, so the second line's .123456790 is
// .12345679. The kubelet reads it leniently and, for kubectl logs
// --timestamps, prints it again in its own fixed width (steps/kubelet).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/podlab/podlab/internal/crilog"
)

// MaxLogLine is the longest log line written in one piece; a longer line is
// split into partial (P) lines, as containerd does with 16 KiB.
const MaxLogLine = 16 * 1024

// LogLine is one line of a CRI log file (crilog.Line).
type LogLine = crilog.Line

// ParseLogLine parses one line of a CRI log file (crilog.Parse).
func ParseLogLine(s string) (LogLine, error) { return crilog.Parse(s) }

// criWriter writes the lines of several streams into one CRI log file.
type criWriter struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// swap makes w the file the lines go to, from the next line on (the log
// was reopened after a rotation).
func (cw *criWriter) swap(w io.Writer) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.w = w
}

func (cw *criWriter) write(stream string, partial bool, msg []byte) error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	line := LogLine{Time: cw.now(), Stream: stream, Partial: partial, Message: string(msg)}
	_, err := io.WriteString(cw.w, line.String()+"\n")
	return err
}

// copy reads stream r line by line into the log until r ends.
func (cw *criWriter) copy(stream string, r io.Reader) error {
	br := bufio.NewReaderSize(r, MaxLogLine)
	for {
		b, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if werr := cw.write(stream, false, bytes.TrimSuffix(b, []byte("\n"))); werr != nil {
				return werr
			}
		case errors.Is(err, bufio.ErrBufferFull):
			if werr := cw.write(stream, true, b); werr != nil {
				return werr
			}
		default:
			if len(b) > 0 {
				if werr := cw.write(stream, true, b); werr != nil {
					return werr
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
	}
}

// LogsOptions says how to print a container's log.
type LogsOptions struct {
	// Follow keeps printing new lines until the container exits (its
	// exit.json appears) or ctx ends, as `kubectl logs -f`.
	Follow bool
	// Timestamps prints each line as stored, with the CRI prefix
	// (time, stream, tag); otherwise only the messages, as the app wrote them.
	Timestamps bool
}

// writeLogLines writes the complete lines of data to w and returns how many
// bytes it consumed (a trailing line without newline is left for later).
func writeLogLines(w io.Writer, data []byte, timestamps bool) (int, error) {
	used := 0
	for {
		i := bytes.IndexByte(data[used:], '\n')
		if i < 0 {
			return used, nil
		}
		raw := string(data[used : used+i])
		used += i + 1
		l, err := ParseLogLine(raw)
		if err != nil {
			return used, err
		}
		out := l.Message
		if timestamps {
			out = raw + "\n"
		} else if !l.Partial {
			out += "\n"
		}
		if _, err := io.WriteString(w, out); err != nil {
			return used, err
		}
	}
}

// followLog prints the log at path to w; with follow it polls for new lines
// until done reports the container exited (then prints the rest) or ctx ends.
func followLog(ctx context.Context, path string, w io.Writer, opts LogsOptions, done func() bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var pending []byte
	buf := make([]byte, 64*1024)
	for {
		finished := !opts.Follow || done()
		for {
			n, err := f.Read(buf)
			pending = append(pending, buf[:n]...)
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				return err
			}
		}
		used, err := writeLogLines(w, pending, opts.Timestamps)
		if err != nil {
			return fmt.Errorf("reading log %s: %w", path, err)
		}
		pending = pending[used:]
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
