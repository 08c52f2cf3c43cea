package kubectl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/podlab/podlab/steps/apiserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// DescribeOption hands Describe the other objects kubectl describe fetches
// for some kinds: the pods of a ReplicaSet, the ReplicaSets of a Deployment,
// the quotas and limit ranges of a Namespace.
type DescribeOption func(*describeConfig)

type describeConfig struct {
	pods             []*corev1.Pod
	podsGiven        bool
	replicaSets      []*appsv1.ReplicaSet
	quotas           []*corev1.ResourceQuota
	quotasGiven      bool
	limitRanges      []*corev1.LimitRange
	limitRangesGiven bool
}

// WithPods gives the pods of the namespace, for a ReplicaSet's
// "Pods Status" line (only the pods it controls are counted).
func WithPods(pods ...*corev1.Pod) DescribeOption {
	return func(c *describeConfig) { c.pods, c.podsGiven = pods, true }
}

// WithReplicaSets gives the ReplicaSets of the namespace, for a Deployment's
// OldReplicaSets and NewReplicaSet lines (only those it controls count).
func WithReplicaSets(rs ...*appsv1.ReplicaSet) DescribeOption {
	return func(c *describeConfig) { c.replicaSets = rs }
}

// WithResourceQuotas gives a Namespace's ResourceQuotas.
func WithResourceQuotas(q ...*corev1.ResourceQuota) DescribeOption {
	return func(c *describeConfig) { c.quotas, c.quotasGiven = q, true }
}

// WithLimitRanges gives a Namespace's LimitRanges.
func WithLimitRanges(l ...*corev1.LimitRange) DescribeOption {
	return func(c *describeConfig) { c.limitRanges, c.limitRangesGiven = l, true }
}

// Describe writes kubectl describe's report of obj: its fields laid out for
// people, then the events about it (those whose involvedObject is obj; the
// caller finds them) as a table, oldest first. now is the time ages count
// from. Pods, Nodes, Deployments, ReplicaSets, Namespaces, RBAC objects,
// ResourceQuotas and LimitRanges have kubectl's layouts; other kinds get its
// generic one (metadata, then the rest of the object).
func Describe(w io.Writer, obj apiserver.Object, events []corev1.Event, now time.Time, opts ...DescribeOption) error {
	if obj == nil {
		return fmt.Errorf("describe: nil object")
	}
	var cfg describeConfig
	for _, o := range opts {
		o(&cfg)
	}
	// kubectl's describe layout: text/tabwriter, padding 2.
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), now: now}
	switch o := obj.(type) {
	case *corev1.Pod:
		d.pod(o)
		d.events(events)
	case *corev1.Node:
		d.node(o)
		d.events(events)
	case *appsv1.Deployment:
		d.deployment(o, cfg.replicaSets)
		d.events(events)
	case *appsv1.ReplicaSet:
		d.replicaSet(o, cfg)
		d.events(events)
	case *corev1.Namespace:
		d.namespace(o, cfg)
	case *rbacv1.Role:
		d.role(o.Name, o.Labels, o.Annotations, o.Rules)
	case *rbacv1.ClusterRole:
		d.role(o.Name, o.Labels, o.Annotations, o.Rules)
	case *rbacv1.RoleBinding:
		d.binding(o.Name, o.Labels, o.Annotations, o.RoleRef, o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		d.binding(o.Name, o.Labels, o.Annotations, o.RoleRef, o.Subjects)
	case *corev1.ResourceQuota:
		d.quota(o)
	case *corev1.LimitRange:
		d.write(0, "Name:\t%s\n", o.Name)
		d.write(0, "Namespace:\t%s\n", o.Namespace)
		d.write(0, "Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n")
		d.write(0, "----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
		d.limitRangeSpec(o.Spec, "")
	default:
		if err := d.generic(obj); err != nil {
			return err
		}
		d.events(events)
	}
	if err := d.tw.Flush(); err != nil && d.err == nil {
		d.err = err
	}
	return d.err
}

// describer writes kubectl describe's indented "Field:\tvalue" lines; each
// level of indentation is two spaces (kubectl's PrefixWriter).
type describer struct {
	tw  *tabwriter.Writer
	now time.Time
	err error
}

func (d *describer) write(level int, format string, args ...any) {
	if d.err != nil {
		return
	}
	_, d.err = fmt.Fprintf(d.tw, strings.Repeat("  ", level)+format, args...)
}

// flush ends a block of aligned columns: what follows is aligned on its own.
func (d *describer) flush() {
	if err := d.tw.Flush(); err != nil && d.err == nil {
		d.err = err
	}
}

func (d *describer) age(t metav1.Time) string { return age(t, d.now) }

// labels prints a map as "Title:\tk=v" lines, sorted, or <none>.
func (d *describer) labels(title string, m map[string]string) {
	d.write(0, "%s:\t", title)
	if len(m) == 0 {
		d.write(0, "<none>\n")
		return
	}
	for i, k := range sortedKeys(m) {
		if i > 0 {
			d.write(0, "\t")
		}
		d.write(0, "%s=%s\n", k, m[k])
	}
}

// annotations prints annotations as "key: value", leaving out
// kubectl.kubernetes.io/last-applied-configuration as kubectl does, and
// folding long or multi-line values.
func (d *describer) annotations(title string, m map[string]string) {
	const maxLen = 140
	d.write(0, "%s:\t", title)
	var keys []string
	for _, k := range sortedKeys(m) {
		if k != corev1.LastAppliedConfigAnnotation {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		d.write(0, "<none>\n")
		return
	}
	for i, k := range keys {
		if i > 0 {
			d.write(0, "\t")
		}
		v := strings.TrimSuffix(m[k], "\n")
		if len(v)+len(k)+2 > maxLen || strings.Contains(v, "\n") {
			d.write(0, "%s:\n", k)
			for _, s := range strings.Split(v, "\n") {
				if len(s) > maxLen-2 {
					s = s[:maxLen-2] + "..."
				}
				d.write(0, "\t  %s\n", s)
			}
			continue
		}
		d.write(0, "%s: %s\n", k, v)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// events is kubectl's Events table: Type, Reason, Age ("2m (x3 over 5m)"
// for a repeated event), From and Message, oldest first.
func (d *describer) events(events []corev1.Event) {
	if len(events) == 0 {
		d.write(0, "Events:\t<none>\n")
		return
	}
	d.flush() // the events table is aligned on its own
	sorted := append([]corev1.Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return eventTime(sorted[i]).Before(eventTime(sorted[j])) })
	d.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
	d.write(1, "----\t------\t----\t----\t-------\n")
	for _, e := range sorted {
		first := microAge(e.EventTime, d.now)
		if e.EventTime.IsZero() {
			first = d.age(e.FirstTimestamp)
		}
		interval := first
		switch {
		case e.Series != nil:
			interval = fmt.Sprintf("%s (x%d over %s)", microAge(e.Series.LastObservedTime, d.now), e.Series.Count, first)
		case e.Count > 1:
			interval = fmt.Sprintf("%s (x%d over %s)", d.age(e.LastTimestamp), e.Count, first)
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		d.write(1, "%v\t%v\t%s\t%v\t%v\n", e.Type, e.Reason, interval, from, strings.TrimSpace(e.Message))
	}
}

// eventTime is when an event last happened, for sorting.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func controlledBy(o metav1.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.Kind + "/" + ref.Name
	}
	return ""
}

func rfc1123(t metav1.Time) string { return t.Time.Format(time.RFC1123Z) }

// generic is kubectl's describe of a kind it has no layout for: the
// metadata it always shows, then every other top-level field, named as
// kubectl names them ("involvedObject" is "Involved Object"), with the
// nested ones as YAML.
func (d *describer) generic(obj apiserver.Object) error {
	d.write(0, "Name:\t%s\n", obj.GetName())
	d.write(0, "Namespace:\t%s\n", obj.GetNamespace())
	d.labels("Labels", obj.GetLabels())
	d.annotations("Annotations", obj.GetAnnotations())
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("describing %s: %w", obj.GetName(), err)
	}
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // 1000000, not 1e+06
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("describing %s: %w", obj.GetName(), err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := fields[k].(type) {
		case map[string]any, []any:
			if m, ok := v.(map[string]any); ok && len(m) == 0 {
				continue // status: {}
			}
			out, err := yaml.Marshal(v)
			if err != nil {
				return fmt.Errorf("describing %s: %w", obj.GetName(), err)
			}
			d.write(0, "%s:\n", smartLabel(k))
			for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
				d.write(1, "%s\n", line)
			}
		case nil:
		default:
			d.write(0, "%s:\t%v\n", smartLabel(k), v)
		}
	}
	return nil
}

// smartLabel turns a field name into kubectl's label: "involvedObject" is
// "Involved Object", "apiVersion" is "API Version".
func smartLabel(field string) string {
	var words []string
	start := 0
	runes := []rune(field)
	for i := 1; i < len(runes); i++ {
		if unicode.IsUpper(runes[i]) && (!unicode.IsUpper(runes[i-1]) || (i+1 < len(runes) && unicode.IsLower(runes[i+1]))) {
			words = append(words, string(runes[start:i]))
			start = i
		}
	}
	words = append(words, string(runes[start:]))
	for i, w := range words {
		switch up := strings.ToUpper(w); up {
		case "API", "URL", "UID", "OSB", "GUID":
			words[i] = up
		default:
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}
