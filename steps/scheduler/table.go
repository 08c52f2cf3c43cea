package scheduler

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
)

// WriteTable writes the cycle as a table, one row per node: each filter's
// verdict (ok, the reason, or - when an earlier filter had failed and it
// did not run), each score plugin's score (0-100, before its weight, x the
// weight in the header), and the weighted TOTAL. Then a line per taint the
// scheduler assumed from a node's conditions.
func (r Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"NODE"}
	header = append(header, r.Filters...)
	header = append(header, "|")
	for _, c := range r.Scores {
		header = append(header, fmt.Sprintf("%s x%d", c.Name, c.Weight))
	}
	header = append(header, "|", "TOTAL")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, n := range r.Nodes {
		row := []string{n.Name}
		for i := range r.Filters {
			switch {
			case i >= n.FiltersRun:
				row = append(row, "-")
			case n.Filters[i] == nil:
				row = append(row, "ok")
			default:
				row = append(row, strings.Join(n.Filters[i], "; "))
			}
		}
		row = append(row, "|")
		for i, c := range r.Scores {
			switch {
			case n.Scores == nil:
				row = append(row, "-")
			case c.Skipped:
				row = append(row, "skip")
			default:
				row = append(row, fmt.Sprint(n.Scores[i]))
			}
		}
		total := "-"
		if n.Scores != nil {
			total = fmt.Sprint(n.Total)
		}
		row = append(row, "|", total)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Nodes {
		for _, t := range n.ImpliedTaints {
			if _, err := fmt.Fprintf(w, "%s: %s, so it counts as tainted %s:%s (what the node lifecycle controller would add; podlab runs none)\n",
				n.Name, impliedWhy(t.Key), t.Key, t.Effect); err != nil {
				return err
			}
		}
	}
	return nil
}

// impliedWhy says which condition an implied taint comes from.
func impliedWhy(key string) string {
	switch key {
	case corev1.TaintNodeNotReady:
		return "its Ready condition is False"
	case corev1.TaintNodeUnreachable:
		return "its kubelet has not reported it Ready (Ready is Unknown or missing)"
	case corev1.TaintNodeMemoryPressure:
		return "its MemoryPressure condition is True"
	case corev1.TaintNodeDiskPressure:
		return "its DiskPressure condition is True"
	case corev1.TaintNodePIDPressure:
		return "its PIDPressure condition is True"
	case corev1.TaintNodeNetworkUnavailable:
		return "its NetworkUnavailable condition is True"
	case corev1.TaintNodeUnschedulable:
		return "it is cordoned (spec.unschedulable)"
	}
	return "a condition"
}
