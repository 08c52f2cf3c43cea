package klog

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	realklog "k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

var excerptTime = time.Date(2025, 5, 28, 8, 1, 29, 555150000, time.UTC)

func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }

// The three lines of the kube-controller-manager log the chain's
// description quotes (lessons/11-deployments.md shows them), reproduced
// byte for byte with a fixed clock and pid 1.
func TestLogger_Info_DescriptionExcerpt(t *testing.T) {
	var buf bytes.Buffer
	start := time.Date(2025, 5, 28, 8, 1, 29, 555171072, time.UTC)
	w := New(&buf, WithPID(1), WithVerbosity(4), WithClock(fixed(excerptTime)))
	log := w.Logger("deployment-controller")
	log.V(4).Info(Source{"deployment_controller.go", 189}, "Adding deployment", "deployment", KRef("default", "test"))
	w.now = fixed(time.Date(2025, 5, 28, 8, 1, 29, 555175000, time.UTC))
	// The description's startTime carries a monotonic reading (m=+807.05...),
	// which only time.Now() has; a fixed time prints without it.
	log.V(4).Info(Source{"deployment_controller.go", 599}, "Started syncing deployment", "deployment", KRef("default", "test"), "startTime", start)
	w.now = fixed(time.Date(2025, 5, 28, 8, 1, 29, 555350000, time.UTC))
	log.V(4).Info(Source{"deployment_util.go", 262}, "Updating replica set revision", "replicaSet", KRef("default", "test-56744d8b7b"), "newRevision", "1")
	want := `I0528 08:01:29.555150       1 deployment_controller.go:189] "Adding deployment" logger="deployment-controller" deployment="default/test"
I0528 08:01:29.555175       1 deployment_controller.go:599] "Started syncing deployment" logger="deployment-controller" deployment="default/test" startTime="2025-05-28 08:01:29.555171072 +0000 UTC"
I0528 08:01:29.555350       1 deployment_util.go:262] "Updating replica set revision" logger="deployment-controller" replicaSet="default/test-56744d8b7b" newRevision="1"
`
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Every kind of value, formatted by this package and by klog's own text
// logger (k8s.io/klog/v2/textlogger, told the same time, call site and
// logger name): the bytes must be the same.
func TestLogger_Info_MatchesKlogTextlogger(t *testing.T) {
	type named string
	cases := []struct {
		name string
		msg  string
		kv   []any
	}{
		{"object reference", "Adding deployment", []any{"deployment", realklog.KRef("default", "web")}},
		{"cluster-scoped reference", "Syncing node", []any{"node", realklog.KRef("", "node-1")}},
		{"numbers bare", "Too few replicas", []any{"replicaSet", realklog.KRef("default", "web-7d4b9c8f6"), "need", int32(3), "creating", 2}},
		{"string quoted", "Updating replica set revision", []any{"newRevision", "1"}},
		{"quotes escaped", `say "hi"`, []any{"msg", `a "quoted" word`, "tab", "a\tb"}},
		{"multi-line string", "Multi", []any{"text", "line 1\nline 2", "ended", "x\n"}},
		{"duration and time are Stringers", "Finished syncing deployment", []any{"duration", 1500 * time.Microsecond, "startTime", excerptTime}},
		{"bool and float", "Processing item", []any{"virtual", false, "ratio", 0.5}},
		{"named string as JSON", "Deleting item", []any{"propagationPolicy", named("Background")}},
		{"struct and map as JSON", "Detail", []any{"labels", map[string]string{"app": "web", "<b>": "&"}, "pair", struct{ A int }{1}}},
		{"bytes with %+q", "Bytes", []any{"data", []byte("hi\x00")}},
		{"nil", "Nil", []any{"v", nil}},
		{"missing value", "Odd", []any{"alone"}},
		{"unicode message", "héllo\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := Source{"replica_set.go", 590}
			var ours bytes.Buffer
			New(&ours, WithPID(os.Getpid()), WithVerbosity(4), WithClock(fixed(excerptTime))).
				Logger("replicaset-controller").V(2).Info(src, c.msg, c.kv...)

			var theirs bytes.Buffer
			cfg := textlogger.NewConfig(
				textlogger.Output(&theirs),
				textlogger.FixedTime(excerptTime),
				textlogger.Verbosity(4),
				textlogger.Backtrace(func(int) (string, int) { return src.File, src.Line }),
			)
			textlogger.NewLogger(cfg).WithName("replicaset-controller").V(2).Info(c.msg, c.kv...)

			if ours.String() != theirs.String() {
				t.Errorf("ours:\n%q\nklog's:\n%q", ours.String(), theirs.String())
			}
		})
	}
}

func TestLogger_Error_MatchesKlogTextlogger(t *testing.T) {
	src := Source{"deployment_controller.go", 512}
	err := errors.New(`Operation cannot be fulfilled on replicasets.apps "web-7d4b9c8f6": the object has been modified`)
	var ours bytes.Buffer
	New(&ours, WithClock(fixed(excerptTime))).Logger("deployment-controller").Error(src, err, "Error syncing deployment", "deployment", KRef("default", "web"))
	var theirs bytes.Buffer
	cfg := textlogger.NewConfig(textlogger.Output(&theirs), textlogger.FixedTime(excerptTime),
		textlogger.Backtrace(func(int) (string, int) { return src.File, src.Line }))
	textlogger.NewLogger(cfg).WithName("deployment-controller").Error(err, "Error syncing deployment", "deployment", realklog.KRef("default", "web"))
	if ours.String() != theirs.String() {
		t.Errorf("ours:\n%q\nklog's:\n%q", ours.String(), theirs.String())
	}
}

func TestLogger_V_HidesAboveVerbosity(t *testing.T) {
	cases := []struct {
		name      string
		verbosity int
		level     int
		want      bool
	}{
		{"v0 prints V(0)", 0, 0, true},
		{"v0 hides V(2)", 0, 2, false},
		{"v4 prints V(4)", 4, 4, true},
		{"v4 hides V(5)", 4, 5, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(&buf, WithVerbosity(c.verbosity)).Logger("x").V(c.level)
			l.Info(Source{"a.go", 1}, "msg")
			if got := buf.Len() > 0; got != c.want || l.Enabled() != c.want {
				t.Errorf("printed=%v Enabled=%v, want %v", got, l.Enabled(), c.want)
			}
		})
	}
	var buf bytes.Buffer
	New(&buf).Logger("x").V(9).Error(Source{"a.go", 1}, errors.New("boom"), "failed")
	if !strings.Contains(buf.String(), `err="boom"`) {
		t.Errorf("an error at V(9) with verbosity 0 was not printed: %q", buf.String())
	}
}

func TestWriter_Printf_Unstructured(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf, WithPID(1), WithClock(fixed(excerptTime)))
	w.Printf(Warning, Source{"shared_informer.go", 350}, "Waiting for caches to sync for %s", "deployment")
	want := "W0528 08:01:29.555150       1 shared_informer.go:350] Waiting for caches to sync for deployment\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

// The header's fixed-width columns: a pid wider than 7 digits keeps its
// lowest 7 (klog's nDigits), a short one is right-aligned; a negative line
// prints 0.
func TestHeader_Columns(t *testing.T) {
	cases := []struct {
		name string
		pid  int
		line int
		want string
	}{
		{"pid 1", 1, 189, "I0528 08:01:29.555150       1 f.go:189] "},
		{"pid 4194304", 4194304, 7, "I0528 08:01:29.555150 4194304 f.go:7] "},
		{"pid wider than the column", 123456789, 7, "I0528 08:01:29.555150 3456789 f.go:7] "},
		{"negative line", 1, -3, "I0528 08:01:29.555150       1 f.go:0] "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(appendHeader(nil, Info, excerptTime, c.pid, Source{"f.go", c.line})); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestObjectRef_String(t *testing.T) {
	if got := KRef("", "node-1").String(); got != "node-1" {
		t.Errorf("cluster-scoped: %q", got)
	}
	if got := KRef("default", "web").String(); got != "default/web" {
		t.Errorf("namespaced: %q", got)
	}
}
