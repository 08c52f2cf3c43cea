package trace

import (
	"time"
)

// clockKind says how much a write tells of its own time.
type clockKind int

const (
	// clockNone: nothing (a deletion, a status write with no new
	// timestamp).
	clockNone clockKind = iota
	// clockSecond: the second it happened in (Kubernetes timestamps in
	// objects are stored to the second).
	clockSecond
	// clockPrecise: the nanosecond (an Event, from its name).
	clockPrecise
)

type clock struct {
	kind clockKind
	t    time.Time
}

// second is a clock that knows t's second.
func second(t time.Time) clock {
	if t.IsZero() {
		return clock{}
	}
	return clock{kind: clockSecond, t: t.Truncate(time.Second)}
}

// row is an Entry being built, with what it knows of its time.
type row struct {
	Entry
	clock clock
	// by is who acted, to find the writes made one after the other by the
	// same component: a status write follows its kubelet's event, a
	// binding precedes its scheduler's Scheduled event.
	by string
}

// place sets every row's Time. Rows are in revision order. A precise row
// keeps its time. Any other row lies after the precise row before it, and
// before the precise row after it (revisions order all writes), and
// within its own second if it knows one. Within those bounds, it goes next
// to a neighbour the same component wrote (the nearer one by revision if
// both sides qualify), else at the earliest moment possible: for a create,
// that is its creationTimestamp, as kubectl shows it. Placed times never
// run backwards.
func place(rows []row) {
	last := -1
	prev := make([]int, len(rows))
	for i := range rows {
		prev[i] = last
		if rows[i].clock.kind == clockPrecise {
			rows[i].Time = rows[i].clock.t
			last = i
		}
	}
	next := -1
	for i := len(rows) - 1; i >= 0; i-- {
		r := &rows[i]
		if r.clock.kind == clockPrecise {
			next = i
			continue
		}
		p := prev[i]
		var lo, hi time.Time // zero: unbounded
		if p >= 0 {
			lo = rows[p].Time
		}
		if next >= 0 {
			hi = rows[next].Time
		}
		if r.clock.kind == clockSecond {
			s, e := r.clock.t, r.clock.t.Add(time.Second-time.Nanosecond)
			if lo.IsZero() || lo.Before(s) {
				lo = s
			}
			if hi.IsZero() || hi.After(e) {
				hi = e
			}
		}
		sameP := p >= 0 && rows[p].by == r.by
		sameN := next >= 0 && rows[next].by == r.by
		switch {
		case !lo.IsZero() && !hi.IsZero() && hi.Before(lo):
			// the bounds disagree (one process read its clock before
			// another's write, and wrote after it): keep the row's own
			// second, or the write before
			r.Time = lo
			if r.clock.kind == clockSecond {
				r.Time = r.clock.t
			}
		case lo.IsZero():
			r.Time = hi
		case sameN && !hi.IsZero() && (!sameP || rows[next].Revision-r.Revision < r.Revision-rows[p].Revision):
			r.Time = hi
		default:
			r.Time = lo
		}
		r.Estimated = true
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].Estimated && rows[i].Time.Before(rows[i-1].Time) {
			rows[i].Time = rows[i-1].Time
		}
	}
}
