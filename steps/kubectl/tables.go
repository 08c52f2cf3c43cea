package kubectl

import (
	"fmt"
	"strings"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/printers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// column is one column of a kubectl table. A wide column is shown only with
// -o wide (a column of priority 1 in the Table format's definitions).
type column struct {
	name string
	wide bool
}

// columnsFor returns the columns kubectl shows for a kind, in order, wide
// ones included: the API server's column definitions (printers.Columns),
// with the names upper-cased as kubectl prints them.
func columnsFor(kind string) ([]column, error) {
	defs, err := printers.Columns(kind)
	if err != nil {
		return nil, err
	}
	cols := make([]column, len(defs))
	for i, d := range defs {
		cols[i] = column{name: strings.ToUpper(d.Name), wide: d.Priority > 0}
	}
	return cols, nil
}

// rowFor computes an object's cells, one per column of columnsFor, as the
// API server's Table conversion does (printers.Cells), formatted as kubectl
// prints them.
func rowFor(obj apiserver.Object, now time.Time) ([]string, error) {
	cells, err := printers.Cells(obj, now)
	if err != nil {
		return nil, err
	}
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	return row, nil
}

// PodStatus is the STATUS column of `kubectl get pods` (printers.PodStatus).
func PodStatus(pod *corev1.Pod) string { return printers.PodStatus(pod) }

// age is kubectl's AGE: 5s, 3m2s, 45m, 3h20m, 2d3h, 100d.
func age(t metav1.Time, now time.Time) string { return printers.Age(t, now) }

func microAge(t metav1.MicroTime, now time.Time) string { return printers.MicroAge(t, now) }

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
