// Package klog writes log lines in Kubernetes' klog text format, the format
// every Kubernetes component prints by default:
//
//	I0528 08:01:29.555150       1 deployment_controller.go:189] "Adding deployment" logger="deployment-controller" deployment="default/test"
//
// That is: the severity (I, W or E), the month and day, the time to the
// microsecond, the thread id right-aligned in 7 columns (klog prints the
// process id there; in a container the component is pid 1), the file and line
// of the call that logged, "] ", then the message, quoted, and the key/value
// pairs of structured logging. Values follow klog's serialize package:
// strings, errors and anything with a String method are quoted with
// strconv.Quote (a string with line breaks becomes an indented block),
// []byte is printed with %+q, and everything else (numbers, booleans, named
// string types, structs) as JSON, so numbers stay bare.
//
// podlab re-enacts kube-controller-manager, so the file:line a line carries
// is not podlab's own call site but the one in Kubernetes' source that logs
// the same message: callers pass a Source (deployment_controller.go:189).
// The package is a tiny reproduction of k8s.io/klog/v2's text output,
// checked byte for byte against klog's textlogger in the tests; it keeps no
// global state.
package klog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// Severity is klog's first column.
type Severity byte

// The severities podlab prints.
const (
	Info    Severity = 'I'
	Warning Severity = 'W'
	Error   Severity = 'E'
)

// Source is a call site as klog prints it: the file's base name and the
// line number, "deployment_controller.go:189".
type Source struct {
	File string
	Line int
}

func (s Source) String() string { return s.File + ":" + strconv.Itoa(s.Line) }

// Writer formats klog lines and writes each with one Write call, so that
// lines from concurrent loggers never interleave.
type Writer struct {
	mu        sync.Mutex
	out       io.Writer
	now       func() time.Time
	pid       int
	verbosity int
}

// Option configures a Writer.
type Option func(*Writer)

// WithClock sets the clock the header's time comes from (tests use a fixed
// one). The time is printed in the clock's location, as klog does.
func WithClock(now func() time.Time) Option { return func(w *Writer) { w.now = now } }

// WithPID sets the number printed in the thread id column (default: this
// process's id; kube-controller-manager in its container prints 1).
func WithPID(pid int) Option { return func(w *Writer) { w.pid = pid } }

// WithVerbosity sets the highest V level printed, klog's -v (default 0:
// only unconditional lines).
func WithVerbosity(v int) Option { return func(w *Writer) { w.verbosity = v } }

// New returns a Writer printing to out.
func New(out io.Writer, opts ...Option) *Writer {
	w := &Writer{out: out, now: time.Now, pid: os.Getpid()}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Enabled reports whether lines logged at V(level) are printed.
func (w *Writer) Enabled(level int) bool { return level <= w.verbosity }

// Logger returns a named logger, as klog.LoggerWithName: its lines carry
// logger="name" before their own key/value pairs. An empty name is the
// process's background logger, without the key.
func (w *Writer) Logger(name string) Logger { return Logger{w: w, name: name} }

// Printf writes an unstructured line, as klog.Infof does: the formatted
// message is printed as is, unquoted, without key/value pairs.
func (w *Writer) Printf(s Severity, src Source, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b := appendHeader(nil, s, w.now(), w.pid, src)
	b = append(b, msg...)
	if len(msg) == 0 || msg[len(msg)-1] != '\n' {
		b = append(b, '\n')
	}
	w.write(b)
}

func (w *Writer) write(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.out.Write(b) // a log line that cannot be written is dropped, as klog drops it
}

// Logger logs structured lines through a Writer.
type Logger struct {
	w     *Writer
	name  string
	level int
}

// V returns the logger for verbosity level: its Info lines are printed only
// when the writer's verbosity is at least level (klog's logger.V(4)).
func (l Logger) V(level int) Logger {
	l.level = level
	return l
}

// Enabled reports whether this logger's Info lines are printed.
func (l Logger) Enabled() bool { return l.w != nil && l.w.Enabled(l.level) }

// Info logs msg with key/value pairs at the logger's level.
func (l Logger) Info(src Source, msg string, kv ...any) {
	if !l.Enabled() {
		return
	}
	l.w.write(l.format(Info, src, nil, msg, kv))
}

// Error logs msg with err as err="..." right after the message. Errors are
// printed whatever the level, as logr does.
func (l Logger) Error(src Source, err error, msg string, kv ...any) {
	if l.w == nil {
		return
	}
	l.w.write(l.format(Error, src, err, msg, kv))
}

func (l Logger) format(s Severity, src Source, err error, msg string, kv []any) []byte {
	b := appendHeader(make([]byte, 0, 256), s, l.w.now(), l.w.pid, src)
	b = strconv.AppendQuote(b, msg)
	if err != nil {
		b = appendKV(b, "err", err)
	}
	if l.name != "" {
		b = appendKV(b, "logger", l.name)
	}
	for i := 0; i < len(kv); i += 2 {
		var v any = "(MISSING)"
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		b = appendKV(b, kv[i], v)
	}
	return append(b, '\n')
}

// appendHeader is klog's FormatHeader:
// "Lmmdd hh:mm:ss.uuuuuu threadid file:line] ".
func appendHeader(b []byte, s Severity, t time.Time, pid int, src Source) []byte {
	_, month, day := t.Date()
	hour, minute, second := t.Clock()
	b = append(b, byte(s))
	b = appendDigits(b, 2, int(month), '0')
	b = appendDigits(b, 2, day, '0')
	b = append(b, ' ')
	b = appendDigits(b, 2, hour, '0')
	b = append(b, ':')
	b = appendDigits(b, 2, minute, '0')
	b = append(b, ':')
	b = appendDigits(b, 2, second, '0')
	b = append(b, '.')
	b = appendDigits(b, 6, t.Nanosecond()/1000, '0')
	b = append(b, ' ')
	b = appendDigits(b, 7, pid, ' ')
	b = append(b, ' ')
	b = append(b, src.File...)
	b = append(b, ':')
	line := src.Line
	if line < 0 {
		line = 0
	}
	b = strconv.AppendInt(b, int64(line), 10)
	return append(b, ']', ' ')
}

// appendDigits writes the n lowest decimal digits of d, padded on the left
// with pad, as klog's nDigits.
func appendDigits(b []byte, n, d int, pad byte) []byte {
	var tmp [10]byte
	j := n - 1
	for ; j >= 0 && d > 0; j-- {
		tmp[j] = byte('0' + d%10)
		d /= 10
	}
	for ; j >= 0; j-- {
		tmp[j] = pad
	}
	return append(b, tmp[:n]...)
}

// appendKV is klog's serialize.KVFormat: " key=value".
func appendKV(b []byte, k, v any) []byte {
	b = append(b, ' ')
	if s, ok := k.(string); ok {
		b = append(b, s...)
	} else {
		b = fmt.Appendf(b, "%s", k)
	}
	switch v := v.(type) {
	case fmt.Stringer:
		return appendString(b, stringerToString(v))
	case string:
		return appendString(b, v)
	case error:
		return appendString(b, errorToString(v))
	case []byte:
		return fmt.Appendf(append(b, '='), "%+q", v)
	default:
		return appendJSON(append(b, '='), v)
	}
}

// appendString is klog's writeStringValue: a one-line string is quoted; one
// with line breaks is printed as a block, each line indented with a tab:
//
//	key=<
//		line 1
//		line 2
//	 >
func appendString(b []byte, s string) []byte {
	i := bytes.IndexByte([]byte(s), '\n')
	if i < 0 {
		return strconv.AppendQuote(append(b, '='), s)
	}
	b = append(b, "=<\n"...)
	for i >= 0 {
		b = append(b, '\t')
		b = append(b, s[:i+1]...)
		s = s[i+1:]
		i = bytes.IndexByte([]byte(s), '\n')
	}
	if s == "" {
		return append(b, " >"...)
	}
	b = append(b, '\t')
	b = append(b, s...)
	return append(b, "\n >"...)
}

// appendJSON is klog's formatAsJSON: json.Encoder (which escapes <, > and
// &), without the encoder's final newline.
func appendJSON(b []byte, v any) []byte {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return fmt.Appendf(b, `"<internal error: %v>"`, err)
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func stringerToString(s fmt.Stringer) (ret string) {
	defer func() {
		if err := recover(); err != nil {
			ret = fmt.Sprintf("<panic: %s>", err)
		}
	}()
	return s.String()
}

func errorToString(err error) (ret string) {
	defer func() {
		if r := recover(); r != nil {
			ret = fmt.Sprintf("<panic: %s>", r)
		}
	}()
	return err.Error()
}

// ObjectRef names an object in log lines, as klog.KObj and klog.KRef:
// "namespace/name", or "name" for a cluster-scoped object.
type ObjectRef struct {
	Namespace string
	Name      string
}

func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// KRef is klog.KRef.
func KRef(namespace, name string) ObjectRef { return ObjectRef{Namespace: namespace, Name: name} }

// KObj is klog.KObj, for anything with a namespace and a name (every
// Kubernetes object).
func KObj(obj interface {
	GetNamespace() string
	GetName() string
}) ObjectRef {
	return ObjectRef{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
