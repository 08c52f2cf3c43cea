package trace

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlace: how a write without a precise time is placed among the
// writes around it.
func TestPlace(t *testing.T) {
	base := time.Date(2025, 5, 28, 8, 1, 29, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	precise := func(rev int64, by string, ms int) row {
		return row{Entry: Entry{Revision: rev}, by: by, clock: clock{kind: clockPrecise, t: at(ms)}}
	}
	inSecond := func(rev int64, by string, ms int) row {
		return row{Entry: Entry{Revision: rev}, by: by, clock: second(at(ms))}
	}
	none := func(rev int64, by string) row { return row{Entry: Entry{Revision: rev}, by: by} }
	for _, tc := range []struct {
		name string
		rows []row
		want []int // ms after base, per row
	}{
		{"a create before its creator's event takes the event's time",
			[]row{inSecond(2, "rs", 400), precise(3, "rs", 420)}, []int{420, 420}},
		{"a user's create is its creationTimestamp",
			[]row{inSecond(2, "user", 400), precise(4, "sched", 950)}, []int{0, 950}},
		{"a status write follows its kubelet's event",
			[]row{precise(7, "kubelet", 100), none(8, "kubelet"), precise(9, "kubelet", 300)}, []int{100, 100, 300}},
		{"a binding precedes its scheduler's event",
			[]row{precise(3, "kubelet", 100), none(4, "sched"), precise(5, "sched", 300)}, []int{100, 300, 300}},
		{"the nearer of two same-component neighbours",
			[]row{precise(10, "kubelet", 100), none(13, "kubelet"), precise(14, "kubelet", 300)}, []int{100, 300, 300}},
		{"never before its own second",
			[]row{precise(10, "kubelet", 100), inSecond(11, "kubelet", 1500)}, []int{100, 1000}},
		{"no later than the next timed write of its own component",
			[]row{inSecond(2, "rs", 400), precise(3, "rs", 1420)}, []int{999, 1420}},
		{"bounds that disagree (clocks read before writes): its own second",
			[]row{inSecond(2, "user", 1900), precise(3, "other", 50)}, []int{1000, 50}},
		{"placed times never run backwards",
			[]row{precise(1, "a", 500), none(2, "b"), inSecond(3, "c", 200)}, []int{500, 500, 500}},
		{"no clock at all and no neighbour: zero time",
			[]row{none(1, "a")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			place(tc.rows)
			for i, r := range tc.rows {
				switch {
				case tc.want == nil && !r.Time.IsZero():
					t.Errorf("row %d at %s, want no time", i, r.Time)
				case tc.want != nil && !r.Time.Truncate(time.Millisecond).Equal(at(tc.want[i])):
					t.Errorf("row %d at +%s, want +%dms", i, r.Time.Sub(base), tc.want[i])
				}
				if r.Estimated == (r.clock.kind == clockPrecise) {
					t.Errorf("row %d: estimated %v with clock %d", i, r.Estimated, r.clock.kind)
				}
			}
		})
	}
}

// TestEventTime: an event's name holds its time to the nanosecond, when it
// agrees with firstTimestamp.
func TestEventTime(t *testing.T) {
	first := time.Date(2025, 5, 28, 8, 1, 29, 0, time.UTC)
	exact := first.Add(555150 * time.Microsecond)
	for _, tc := range []struct {
		name, eventName string
		want            clock
	}{
		{"named after its time", fmt.Sprintf("web.%x", exact.UnixNano()), clock{kind: clockPrecise, t: exact}},
		{"a name from another second", fmt.Sprintf("web.%x", exact.Add(-2*time.Second).UnixNano()), second(first)},
		{"a name without a time", "web-started", second(first)},
		{"a name not in hex", "web.zz", second(first)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: tc.eventName}, FirstTimestamp: metav1.NewTime(first)}
			if got := eventTime(ev); got.kind != tc.want.kind || !got.t.Equal(tc.want.t) {
				t.Errorf("eventTime(%s) = %v, want %v", tc.eventName, got, tc.want)
			}
		})
	}
}
