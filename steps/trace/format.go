package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ErrFormat: an output format other than Formats.
var ErrFormat = errors.New("unknown output format")

// Formats are the output formats Write knows.
func Formats() []string { return []string{"text", "mermaid", "json"} }

// Write formats tl as format: "text" (or ""), "mermaid" or "json".
func Write(w io.Writer, tl *Timeline, format string) error {
	switch format {
	case "", "text":
		return WriteText(w, tl)
	case "mermaid":
		return WriteMermaid(w, tl)
	case "json":
		return WriteJSON(w, tl)
	}
	return fmt.Errorf("-o %s: %w: choose one of %s", format, ErrFormat, strings.Join(Formats(), ", "))
}

// ValidFormat checks a format before any work is done.
func ValidFormat(format string) error {
	if format == "" {
		return nil
	}
	for _, f := range Formats() {
		if f == format {
			return nil
		}
	}
	return fmt.Errorf("-o %s: %w: choose one of %s", format, ErrFormat, strings.Join(Formats(), ", "))
}

// ms is a duration in whole milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// WriteText writes the timeline as a table, T+ms REVISION COMPONENT STAGE
// DETAIL, then how long create -> Running (and -> deleted) took and the
// stretches in between.
func WriteText(w io.Writer, tl *Timeline) error {
	var b strings.Builder
	what := strings.ToLower(tl.Kind) + " " + tl.Namespace + "/" + tl.Name
	switch {
	case tl.Kind == "Pod" && len(tl.Pods) == 1 && tl.Pods[0].Node != "":
		fmt.Fprintf(&b, "%s (uid %s), node %s: %d writes, from the store's watch log and the Events\n", what, tl.UID, tl.Pods[0].Node, len(tl.Entries))
	case tl.Kind == "Pod":
		fmt.Fprintf(&b, "%s (uid %s): %d writes, from the store's watch log and the Events\n", what, tl.UID, len(tl.Entries))
	default:
		fmt.Fprintf(&b, "%s (uid %s) and its %d pod(s): %d writes, from the store's watch log and the Events\n", what, tl.UID, len(tl.Pods), len(tl.Entries))
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "T+ms\tREVISION\tCOMPONENT\tSTAGE\tDETAIL")
	estimated := false
	for _, e := range tl.Entries {
		t := fmt.Sprint(ms(e.T))
		if e.Estimated {
			t, estimated = "~"+t, true
		}
		rev := "-"
		if e.Revision > 0 {
			rev = fmt.Sprint(e.Revision)
		}
		detail := e.Detail
		if tl.Kind != "Pod" {
			detail = e.Object + ": " + detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t, rev, e.Component, e.Stage, detail)
	}
	tw.Flush()
	b.WriteString("\n")
	if tl.Kind == "Pod" && len(tl.Pods) == 1 {
		p := tl.Pods[0]
		writeTotal(&b, "create -> Running", p.Created, p.Running, "not reached")
		if p.Deleted != nil {
			writeTotal(&b, "create -> deleted", p.Created, p.Deleted, "")
		}
	} else {
		var last *Entry
		for _, p := range tl.Pods {
			fmt.Fprintf(&b, "pod %s", p.Name)
			if p.Node != "" {
				fmt.Fprintf(&b, " (node %s)", p.Node)
			}
			b.WriteString(":")
			for _, m := range []struct {
				name string
				e    *Entry
			}{{"created", p.Created}, {"Running", p.Running}, {"deleted", p.Deleted}} {
				if m.e != nil {
					fmt.Fprintf(&b, " %s at T+%s (revision %d)", m.name, approx(m.e.T, m.e.Estimated), m.e.Revision)
				}
			}
			b.WriteString("\n")
			if p.Running != nil && (last == nil || p.Running.Revision > last.Revision) {
				last = p.Running
			}
		}
		if last != nil {
			fmt.Fprintf(&b, "create -> the last pod Running: %sms (revision %d)\n", approx(last.T, last.Estimated), last.Revision)
		}
	}
	if len(tl.Spans) > 0 {
		b.WriteString("\nstretches:\n")
		sw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, s := range tl.Spans {
			fmt.Fprintf(sw, "  %s\t%s -> %s\t%sms\n", s.Name, s.From, s.To, approx(s.Took, s.Estimated))
		}
		sw.Flush()
	}
	b.WriteString("\n")
	if estimated {
		b.WriteString("~ : the store keeps revisions, not times, and objects keep times to the second (T=0 is the\n" +
			"    creationTimestamp): such a write is placed at the earliest moment between the timed Events\n" +
			"    around it, or next to its own component's Event (an Event's name holds its time to the ns).\n")
	}
	if tl.Compacted {
		fmt.Fprintf(&b, "The watch log was compacted: it is complete after revision %d only; earlier writes are missing.\n", tl.CompleteAfter)
	} else {
		fmt.Fprintf(&b, "The watch log is complete: every write after revision %d, up to revision %d.\n", tl.CompleteAfter, tl.Revision)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTotal writes "create -> Running: 812ms (revision 12 -> 22)".
func writeTotal(b *strings.Builder, name string, from, to *Entry, missing string) {
	switch {
	case from != nil && to != nil:
		d := to.Time.Sub(from.Time)
		fmt.Fprintf(b, "%s: %sms (revision %s -> %s)\n", name, approx(d, from.Estimated || to.Estimated), revString(from.Revision), revString(to.Revision))
	case missing != "":
		fmt.Fprintf(b, "%s: %s\n", name, missing)
	}
}

func approx(d time.Duration, estimated bool) string {
	if estimated {
		return fmt.Sprintf("~%d", ms(d))
	}
	return fmt.Sprint(ms(d))
}

func revString(rev int64) string {
	if rev == 0 {
		return "?"
	}
	return fmt.Sprint(rev)
}

// Record is one entry as WriteJSON writes it.
type Record struct {
	TMs       int64     `json:"t_ms"`
	Time      time.Time `json:"time"`
	Revision  int64     `json:"revision"`
	Component string    `json:"component"`
	Stage     string    `json:"stage"`
	Detail    string    `json:"detail"`
	// Object is set in a Deployment's timeline: "pod/web-6d9f7c8b4-x2kqz".
	Object string `json:"object,omitempty"`
}

// Records are tl's entries as WriteJSON writes them.
func Records(tl *Timeline) []Record {
	out := make([]Record, 0, len(tl.Entries))
	for _, e := range tl.Entries {
		r := Record{TMs: ms(e.T), Time: e.Time.UTC().Round(0), Revision: e.Revision, Component: e.Component, Stage: e.Stage, Detail: e.Detail}
		if tl.Kind != "Pod" {
			r.Object = e.Object
		}
		out = append(out, r)
	}
	return out
}

// WriteJSON writes the entries as a JSON array of Record, for tools.
func WriteJSON(w io.Writer, tl *Timeline) error {
	data, err := json.MarshalIndent(Records(tl), "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// mermaidID is a participant's id in the diagram.
func mermaidID(p Participant) string {
	switch p {
	case User:
		return "U"
	case APIServer:
		return "API"
	case Store:
		return "ETCD"
	case ControllerManager:
		return "CM"
	case Scheduler:
		return "SCHED"
	case Kubelet:
		return "KUBELET"
	case Runtime:
		return "RUNTIME"
	case Runc:
		return "RUNC"
	}
	return ""
}

// WriteMermaid writes a Mermaid sequenceDiagram of the timeline, in the
// plain syntax GitHub renders: who asked the API server for each write,
// the revision the store gave it, whom the watch told, and what the
// kubelet asked of the runtime and runc.
func WriteMermaid(w io.Writer, tl *Timeline) error {
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	for _, p := range Participants() {
		fmt.Fprintf(&b, "    participant %s as %s\n", mermaidID(p), p)
	}
	all := "U,RUNC"
	fmt.Fprintf(&b, "    Note over %s: %s %s/%s\n", all, strings.ToLower(tl.Kind), tl.Namespace, tl.Name)
	for _, e := range tl.Entries {
		for _, line := range arrows(e) {
			b.WriteString("    " + line + "\n")
		}
		if e.Resource == "pods" && (e.Stage == StageRunning || e.Stage == StageDeleted) {
			fmt.Fprintf(&b, "    Note over %s: %s %s at T+%sms\n", all, e.Object, e.Stage, approx(e.T, e.Estimated))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// arrows are one entry's lines of the diagram.
func arrows(e Entry) []string {
	id := mermaidID
	actor := id(e.Actor)
	if actor == "" {
		actor = id(User)
	}
	rev := fmt.Sprintf("rev %s", revString(e.Revision))
	msg := func(from, to, arrow, text string) string {
		return from + arrow + to + ": " + mermaidText(text)
	}
	_, name, _ := strings.Cut(e.Object, "/")
	if e.Resource == "events" {
		switch e.Stage {
		case ReasonPulling:
			return []string{msg(id(Kubelet), id(Runtime), "->>", fmt.Sprintf("PullImage for %s (event Pulling, %s)", name, rev))}
		case ReasonPulled:
			return []string{msg(id(Runtime), id(Kubelet), "-->>", fmt.Sprintf("image ready (event Pulled, %s)", rev))}
		case ReasonCreated:
			return []string{
				msg(id(Kubelet), id(Runtime), "->>", "CreateContainer: unpack, spec"),
				msg(id(Runtime), id(Runc), "->>", fmt.Sprintf("runc create %s (event Created, %s)", name, rev)),
			}
		case ReasonStarted:
			return []string{
				msg(id(Kubelet), id(Runtime), "->>", "StartContainer"),
				msg(id(Runtime), id(Runc), "->>", fmt.Sprintf("runc start %s (event Started, %s)", name, rev)),
			}
		case ReasonKilling:
			return []string{
				msg(id(Kubelet), id(Runtime), "->>", "StopContainer"),
				msg(id(Runtime), id(Runc), "->>", fmt.Sprintf("runc kill SIGTERM %s (event Killing, %s)", name, rev)),
			}
		}
		return []string{msg(actor, id(APIServer), "->>", fmt.Sprintf("event %s about %s (%s)", e.Stage, name, rev))}
	}
	kind, _, _ := strings.Cut(e.Object, "/")
	var out []string
	switch e.Stage {
	case StageCreated:
		out = append(out,
			msg(actor, id(APIServer), "->>", fmt.Sprintf("create %s %s", kind, name)),
			msg(id(APIServer), id(Store), "->>", fmt.Sprintf("%s: %s %s created", rev, kind, name)))
		switch {
		case kind != "pod":
			out = append(out, msg(id(Store), id(ControllerManager), "-->>", fmt.Sprintf("watch: ADDED %s %s (%s)", kind, name, rev)))
		case strings.Contains(e.Detail, "no node yet"):
			out = append(out, msg(id(Store), id(Scheduler), "-->>", fmt.Sprintf("watch: ADDED pod %s, no node (%s)", name, rev)))
		default:
			out = append(out, msg(id(Store), id(Kubelet), "-->>", fmt.Sprintf("watch: ADDED pod %s on its node (%s)", name, rev)))
		}
	case StageBound:
		node := strings.TrimPrefix(strings.Fields(e.Detail)[0], "spec.nodeName=")
		out = append(out,
			msg(id(Scheduler), id(APIServer), "->>", fmt.Sprintf("bind %s to %s (pods/binding)", name, node)),
			msg(id(APIServer), id(Store), "->>", fmt.Sprintf("%s: spec.nodeName %s", rev, node)),
			msg(id(Store), id(Kubelet), "-->>", fmt.Sprintf("watch: %s bound to %s (%s)", name, node, rev)))
	case StageSandbox:
		out = append(out,
			msg(id(Kubelet), id(Runtime), "->>", fmt.Sprintf("RunPodSandbox %s", name)),
			msg(id(Kubelet), id(APIServer), "->>", fmt.Sprintf("status of %s: sandbox ready", name)),
			msg(id(APIServer), id(Store), "->>", rev+": status"))
	case StageDeleteRequested:
		out = append(out,
			msg(actor, id(APIServer), "->>", fmt.Sprintf("delete %s %s", kind, name)),
			msg(id(APIServer), id(Store), "->>", rev+": deletionTimestamp set"),
			msg(id(Store), id(Kubelet), "-->>", fmt.Sprintf("watch: %s is being deleted (%s)", name, rev)))
	case StageDeleted:
		ask := fmt.Sprintf("delete %s %s", kind, name)
		if e.Actor == Kubelet {
			ask += ", grace period 0"
		}
		out = append(out,
			msg(actor, id(APIServer), "->>", ask),
			msg(id(APIServer), id(Store), "->>", rev+": key deleted"))
	case StageUpdated:
		out = append(out,
			msg(actor, id(APIServer), "->>", fmt.Sprintf("update %s %s", kind, name)),
			msg(id(APIServer), id(Store), "->>", fmt.Sprintf("%s: %s", rev, strings.Split(e.Detail, ", asked")[0])))
	default: // status writes: Running, status, unschedulable, Succeeded, Failed
		what := e.Short
		if what == "" {
			what = e.Stage
		}
		stored := rev + ": status"
		if e.Stage != StageStatus {
			stored += " (" + e.Stage + ")"
		}
		out = append(out,
			msg(actor, id(APIServer), "->>", fmt.Sprintf("status of %s: %s", name, what)),
			msg(id(APIServer), id(Store), "->>", stored))
	}
	return out
}

// mermaidText keeps a label to what every Mermaid renders: one line, no
// statement separator, no entity code, no arrow.
func mermaidText(s string) string {
	return strings.NewReplacer("\n", " ", ";", ",", "#", "", "->", "to", "<", "", ">", "", "\"", "'").Replace(s)
}
