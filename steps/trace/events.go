package trace

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/apiserver"
)

// occurrence is one time an Event happened: its creation, or a later
// repeat that bumped its count.
type occurrence struct {
	ev  *corev1.Event
	rev int64 // the write that recorded it; 0 if the log lost it
	// repeat: a bump of the count (its time is lastTimestamp).
	repeat bool
}

// listEvents lists the namespace's events, and returns the newest
// revision among them: the events log needs nothing after it, as events
// are created and updated, never deleted (but with their namespace).
func listEvents(ctx context.Context, c apiserver.Interface, namespace string) ([]*corev1.Event, int64, error) {
	list, err := c.List(ctx, "events", namespace, apiserver.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("listing events: %w", forbiddenHint(err))
	}
	var out []*corev1.Event
	var newest int64
	for _, obj := range list.Items {
		ev := obj.(*corev1.Event)
		rev, _ := revisionOf(ev.ResourceVersion)
		newest = max(newest, rev)
		out = append(out, ev)
	}
	return out, newest, nil
}

// eventOccurrences reads the events log into occurrences. Events the
// compacted log lost come from listed, the events stored now (one
// occurrence each, at their first time).
func eventOccurrences(log *watchLog, listed []*corev1.Event) []occurrence {
	var out []occurrence
	counts := map[types.UID]int32{}
	for _, we := range log.events {
		ev, ok := we.Object.(*corev1.Event)
		if !ok || we.Type == apiserver.Deleted {
			continue
		}
		rev, _ := revisionOf(ev.ResourceVersion)
		prev, seen := counts[ev.UID]
		counts[ev.UID] = ev.Count
		switch {
		case we.Type == apiserver.Added:
			out = append(out, occurrence{ev: ev, rev: rev})
		case !seen:
			// created before the compacted revision: its creation's
			// revision is lost, this write is a repeat
			out = append(out, occurrence{ev: ev})
			if ev.Count > 1 {
				out = append(out, occurrence{ev: ev, rev: rev, repeat: true})
			}
		case ev.Count > prev:
			out = append(out, occurrence{ev: ev, rev: rev, repeat: true})
		}
	}
	if !log.compacted {
		return out
	}
	for _, ev := range listed {
		if _, seen := counts[ev.UID]; seen {
			continue
		}
		o := occurrence{ev: ev}
		if ev.Count <= 1 {
			o.rev, _ = revisionOf(ev.ResourceVersion) // never written again: its creation
		}
		out = append(out, o)
	}
	return out
}

// eventsLog asks for the events log, up to the newest listed event.
func eventsLog(namespace string, newest int64) logRequest {
	r := logRequest{resource: "events", namespace: namespace}
	if newest > 0 {
		r.done = func(_ apiserver.WatchEvent, rev int64) bool { return rev >= newest }
	}
	return r
}

// about reports whether the event is about the object (kind, name, uid).
func (o occurrence) about(kind, name string, uid types.UID) bool {
	io := o.ev.InvolvedObject
	return io.Kind == kind && io.Name == name && (io.UID == "" || uid == "" || io.UID == uid)
}

// row is the occurrence as a timeline row.
func (o occurrence) row(object string) row {
	e := o.ev
	comp := e.Source.Component
	if comp == "" {
		comp = e.ReportingController
	}
	if e.Source.Host != "" {
		comp += "/" + e.Source.Host
	}
	detail := e.Message
	if e.Type == corev1.EventTypeWarning {
		detail = "Warning: " + detail
	}
	r := row{Entry: Entry{Revision: o.rev, Resource: "events", Component: comp, Actor: actorOf(e.Source.Component),
		Stage: e.Reason, Detail: detail, Object: object}, by: comp}
	switch {
	case o.repeat:
		r.Detail += fmt.Sprintf(" (again: x%d)", e.Count)
		r.clock = second(e.LastTimestamp.Time)
	default:
		r.clock = eventTime(e)
	}
	return r
}

// eventTime is when the event was first recorded: to the nanosecond from
// its name, as client-go names events (<object>.<UnixNano in hex>) when the
// name agrees with firstTimestamp, else firstTimestamp's second.
func eventTime(e *corev1.Event) clock {
	first := e.FirstTimestamp.Time
	if first.IsZero() {
		first = e.EventTime.Time
	}
	i := strings.LastIndexByte(e.Name, '.')
	if i < 0 {
		return second(first)
	}
	n, err := strconv.ParseInt(e.Name[i+1:], 16, 64)
	if err != nil {
		return second(first)
	}
	t := time.Unix(0, n)
	if first.IsZero() || t.Before(first) || !t.Before(first.Add(time.Second)) {
		return second(first)
	}
	return clock{kind: clockPrecise, t: t}
}

// actorOf maps an event's source component to a participant.
func actorOf(component string) Participant {
	switch {
	case component == "kubelet":
		return Kubelet
	case strings.Contains(component, "scheduler"):
		return Scheduler
	case strings.HasSuffix(component, "-controller") || strings.Contains(component, "controller-manager"):
		return ControllerManager
	}
	return APIServer
}
