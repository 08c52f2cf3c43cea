package pull

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/podlab/podlab/internal/units"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal, where Pull can draw one
// progress bar per layer.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows blob downloads: bars on a terminal, else one line per blob.
type progress interface {
	// start begins showing a download of size bytes.
	start(kind string, d v1.Hash, size int64) tracker
	// present tells that a blob is already in the store.
	present(kind string, d v1.Hash, size int64)
	// wait flushes the display.
	wait()
}

type tracker interface {
	add(n int)
	done(err error)
}

func newProgress(w io.Writer, bars bool) progress {
	switch {
	case w == nil:
		return noProgress{}
	case bars:
		return &barProgress{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(100*time.Millisecond))}
	default:
		return &lineProgress{w: w}
	}
}

type noProgress struct{}

func (noProgress) start(string, v1.Hash, int64) tracker { return noTracker{} }
func (noProgress) present(string, v1.Hash, int64)       {}
func (noProgress) wait()                                {}

type noTracker struct{}

func (noTracker) add(int)    {}
func (noTracker) done(error) {}

// lineProgress writes one line per blob when it is done, for logs and pipes.
type lineProgress struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineProgress) start(kind string, d v1.Hash, size int64) tracker {
	return &lineTracker{l: l, kind: kind, d: d, size: size, began: time.Now()}
}

func (l *lineProgress) present(kind string, d v1.Hash, size int64) {
	l.printf("%-6s %s %9s already present\n", kind, ShortDigest(d), units.HumanSize(size))
}

func (l *lineProgress) wait() {}

func (l *lineProgress) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

type lineTracker struct {
	l     *lineProgress
	kind  string
	d     v1.Hash
	size  int64
	began time.Time
}

func (t *lineTracker) add(int) {}

func (t *lineTracker) done(err error) {
	if err != nil {
		t.l.printf("%-6s %s %9s failed\n", t.kind, ShortDigest(t.d), units.HumanSize(t.size))
		return
	}
	t.l.printf("%-6s %s %9s done in %s\n", t.kind, ShortDigest(t.d), units.HumanSize(t.size), time.Since(t.began).Round(time.Millisecond))
}

// barProgress draws one mpb bar per blob on a terminal.
type barProgress struct {
	p *mpb.Progress
}

func (b *barProgress) start(kind string, d v1.Hash, size int64) tracker {
	bar := b.p.AddBar(size,
		mpb.PrependDecorators(decor.Name(fmt.Sprintf("%-6s %s ", kind, ShortDigest(d)))),
		mpb.AppendDecorators(
			decor.OnComplete(decor.Counters(decor.SizeB1000(0), "% .1f / % .1f"), units.HumanSize(size)+" done"),
			decor.OnComplete(decor.Name(" "), " "),
			decor.OnComplete(decor.EwmaSpeed(decor.SizeB1000(0), "% .1f", 30), ""),
		),
		mpb.BarFillerOnAbort("failed"),
	)
	return &barTracker{bar: bar, last: time.Now()}
}

func (b *barProgress) present(kind string, d v1.Hash, size int64) {
	bar := b.p.AddBar(size,
		mpb.PrependDecorators(decor.Name(fmt.Sprintf("%-6s %s ", kind, ShortDigest(d)))),
		mpb.BarFillerOnComplete("already present"),
		mpb.AppendDecorators(decor.Name(units.HumanSize(size))),
	)
	bar.SetTotal(size, true)
}

func (b *barProgress) wait() { b.p.Wait() }

type barTracker struct {
	bar  *mpb.Bar
	last time.Time
}

func (t *barTracker) add(n int) {
	now := time.Now()
	t.bar.EwmaIncrBy(n, now.Sub(t.last))
	t.last = now
}

func (t *barTracker) done(err error) {
	if err != nil {
		t.bar.Abort(false)
		return
	}
	t.bar.SetTotal(-1, true)
}

// ShortDigest is "sha256:" and the first 12 hex digits, as `crictl images`
// and `docker images` show digests.
func ShortDigest(d v1.Hash) string {
	h := d.Hex
	if len(h) > 12 {
		h = h[:12]
	}
	return d.Algorithm + ":" + h
}
