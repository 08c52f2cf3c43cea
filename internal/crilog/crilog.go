// Package crilog is the CRI log file's line format, the contract between
// the runtime that writes a container's log (podlab's shim, containerd's
// CRI plugin) and the kubelet that reads it:
//
//	2026-12-02T12:00:00.123456789Z stdout F hello
//
// the time, the stream, F for a full line or P for part of a longer one,
// and the text.
package crilog

import (
	"fmt"
	"strings"
	"time"
)

// TimeFormat is the line's timestamp as containerd writes it: RFC 3339
// with up to nine digits of nanoseconds, trailing zeros dropped.
const TimeFormat = time.RFC3339Nano

// Line is one line of a CRI log file.
type Line struct {
	Time    time.Time
	Stream  string // "stdout" or "stderr"
	Partial bool   // tag P: the line goes on in the next Line of the stream
	Message string // without the newline
}

// String is the line as written in the log file, without its newline; the
// time in its own zone (a shim's clock is the host's local time, as
// containerd's time.Now()).
func (l Line) String() string {
	tag := "F"
	if l.Partial {
		tag = "P"
	}
	return l.Time.Format(TimeFormat) + " " + l.Stream + " " + tag + " " + l.Message
}

// Parse parses one line of a CRI log file (without its newline).
func Parse(s string) (Line, error) {
	f := strings.SplitN(s, " ", 4)
	if len(f) < 3 {
		return Line{}, fmt.Errorf("parsing CRI log line %q: want TIME STREAM TAG MESSAGE", s)
	}
	t, err := time.Parse(TimeFormat, f[0])
	if err != nil {
		return Line{}, fmt.Errorf("parsing CRI log line %q: %w", s, err)
	}
	l := Line{Time: t, Stream: f[1]}
	if l.Stream != "stdout" && l.Stream != "stderr" {
		return Line{}, fmt.Errorf("parsing CRI log line %q: stream %q is neither stdout nor stderr", s, f[1])
	}
	switch f[2] {
	case "F":
	case "P":
		l.Partial = true
	default:
		return Line{}, fmt.Errorf("parsing CRI log line %q: tag %q is neither F nor P", s, f[2])
	}
	if len(f) == 4 {
		l.Message = f[3]
	}
	return l, nil
}
