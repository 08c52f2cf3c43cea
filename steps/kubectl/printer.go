package kubectl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// PrintOptions are kubectl get's output flags.
type PrintOptions struct {
	// Output is -o: "" (the table), "wide" (the table with more columns),
	// "yaml", "json" or "name" (pod/web).
	Output string
	// AllNamespaces (-A) adds a NAMESPACE column for namespaced resources.
	AllNamespaces bool
	// NoHeaders (--no-headers) leaves the header line out.
	NoHeaders bool
	// ShowLabels (--show-labels) adds a LABELS column.
	ShowLabels bool
	// WatchEvents (--output-watch-events) adds an EVENT column (ADDED,
	// MODIFIED, DELETED) to `get -w` output; -o yaml and json then print
	// each change as a watch event {type, object}.
	WatchEvents bool
	// Now is the time AGE columns count from; zero means the clock's time
	// at each Print.
	Now time.Time
	// ShowKind (--show-kind, and always when several resource types are
	// printed) writes the NAME column as kind/name: pod/web,
	// deployment.apps/web.
	ShowKind bool
	// ShowManagedFields (--show-managed-fields) keeps metadata.managedFields
	// in -o yaml and json: who changed which fields (kubectl hides them).
	ShowManagedFields bool
}

// Printer prints objects of one resource the way kubectl get does. It
// remembers what it printed: the table's header comes once and the columns
// keep their widths from one Print (or PrintEvent) to the next. A Printer
// is not safe for concurrent use.
type Printer struct {
	w       io.Writer
	res     apiserver.Resource
	opts    PrintOptions
	columns []column // the table's columns, for table outputs
	header  bool     // the header is printed
	align   aligner
	docs    int // YAML documents printed, for "---" between them
}

// NewPrinter returns a Printer of res's objects to w.
func NewPrinter(w io.Writer, res apiserver.Resource, opts PrintOptions) (*Printer, error) {
	p := &Printer{w: w, res: res, opts: opts}
	switch opts.Output {
	case "", "wide":
		cols, err := columnsFor(res.Kind)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if !c.wide || opts.Output == "wide" {
				p.columns = append(p.columns, c)
			}
		}
	case "yaml", "json", "name":
	default:
		return nil, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: wide,yaml,json,name", opts.Output)
	}
	return p, nil
}

// Print prints objects: table rows (after the header, the first time), or
// the object as YAML or JSON (several objects as a List, kubectl's
// apiVersion: v1, kind: List), or kind/name lines.
func (p *Printer) Print(objs ...apiserver.Object) error {
	for _, o := range objs {
		if err := p.check(o); err != nil {
			return err
		}
	}
	switch p.opts.Output {
	case "yaml", "json":
		if p.opts.WatchEvents {
			// kubectl get -w --output-watch-events prints the initial list
			// as ADDED events.
			for _, o := range objs {
				if err := p.PrintEvent(apiserver.WatchEvent{Type: apiserver.Added, Object: o}); err != nil {
					return err
				}
			}
			return nil
		}
		if len(objs) == 1 {
			return p.document(p.forOutput(objs[0]))
		}
		items := make([]apiserver.Object, len(objs))
		for i, o := range objs {
			items[i] = p.forOutput(o)
		}
		return p.document(outputList{APIVersion: "v1", Items: items, Kind: "List"})
	case "name":
		var b strings.Builder
		for _, o := range objs {
			b.WriteString(p.name(o) + "\n")
		}
		_, err := io.WriteString(p.w, b.String())
		return err
	}
	event := ""
	if p.opts.WatchEvents {
		event = string(apiserver.Added)
	}
	if len(objs) == 0 {
		return nil // the caller says NoResources; kubectl prints no header
	}
	rows := make([][]string, 0, len(objs))
	for _, o := range objs {
		row, err := p.row(o, event)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	return p.table(rows)
}

// PrintEvent prints one change seen by `get -w`: a table row (the header is
// printed only if nothing was printed before), prefixed by the event type
// with WatchEvents; or the object as one more YAML document (after "---"),
// JSON object or name.
func (p *Printer) PrintEvent(ev apiserver.WatchEvent) error {
	if ev.Object == nil {
		return fmt.Errorf("watch event %s has no object", ev.Type)
	}
	if err := p.check(ev.Object); err != nil {
		return err
	}
	switch p.opts.Output {
	case "yaml", "json":
		if p.opts.WatchEvents {
			return p.document(watchEvent{Type: string(ev.Type), Object: p.forOutput(ev.Object)})
		}
		return p.document(p.forOutput(ev.Object))
	case "name":
		_, err := io.WriteString(p.w, p.name(ev.Object)+"\n")
		return err
	}
	event := ""
	if p.opts.WatchEvents {
		event = string(ev.Type)
	}
	row, err := p.row(ev.Object, event)
	if err != nil {
		return err
	}
	return p.table([][]string{row})
}

// NoResources is what kubectl says when get finds nothing: "No resources
// found in default namespace." in one namespace, "No resources found" for
// all namespaces (-A) or a cluster-scoped resource (namespace "").
func NoResources(namespace string, all bool) string {
	if all || namespace == "" {
		return "No resources found"
	}
	return fmt.Sprintf("No resources found in %s namespace.", namespace)
}

// outputList is kubectl's List for -o yaml/json of several objects; the
// fields are in the order kubectl prints them.
type outputList struct {
	APIVersion string             `json:"apiVersion"`
	Items      []apiserver.Object `json:"items"`
	Kind       string             `json:"kind"`
	Metadata   listMeta           `json:"metadata"`
}

type listMeta struct {
	ResourceVersion string `json:"resourceVersion"`
}

// watchEvent is a change as -o yaml/json --output-watch-events prints it
// (metav1.WatchEvent).
type watchEvent struct {
	Type   string           `json:"type"`
	Object apiserver.Object `json:"object"`
}

// check refuses an object that is not of the printer's resource.
func (p *Printer) check(o apiserver.Object) error {
	if o == nil {
		return fmt.Errorf("printing %s: nil object", p.res.Name)
	}
	if want := reflect.TypeOf(p.res.New()); reflect.TypeOf(o) != want {
		return fmt.Errorf("printing %s: got a %T, want a %v", p.res.Name, o, want)
	}
	return nil
}

// forOutput is the object as -o yaml/json show it: a copy with apiVersion
// and kind set, and without metadata.managedFields, which kubectl hides
// unless --show-managed-fields.
func (p *Printer) forOutput(o apiserver.Object) apiserver.Object {
	c := o.DeepCopyObject().(apiserver.Object)
	if c.GetObjectKind().GroupVersionKind().Empty() {
		c.GetObjectKind().SetGroupVersionKind(p.res.GroupVersion().WithKind(p.res.Kind))
	}
	if !p.opts.ShowManagedFields {
		c.SetManagedFields(nil)
	}
	return c
}

// document writes one YAML document (with "---" before all but the first)
// or one JSON value indented by 4 spaces, as kubectl does.
func (p *Printer) document(v any) error {
	var out []byte
	var err error
	if p.opts.Output == "yaml" {
		out, err = yaml.Marshal(v)
		if err == nil && p.docs > 0 {
			out = append([]byte("---\n"), out...)
		}
	} else {
		out, err = indentJSON(v)
	}
	if err != nil {
		return fmt.Errorf("encoding %s as %s: %w", p.res.Name, p.opts.Output, err)
	}
	p.docs++
	_, err = p.w.Write(out)
	return err
}

// indentJSON is kubectl's -o json: the object's fields in alphabetical order
// (kubectl prints the unstructured object it received), indented by 4
// spaces.
func indentJSON(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(generic, "", "    ")
	return append(out, '\n'), err
}

// name is -o name's "pod/web", "deployment.apps/web".
func (p *Printer) name(o apiserver.Object) string {
	kind := strings.ToLower(p.res.Kind)
	if p.res.Group != "" {
		kind += "." + p.res.Group
	}
	return kind + "/" + o.GetName()
}

// now is the time ages count from.
func (p *Printer) now() time.Time {
	if p.opts.Now.IsZero() {
		return time.Now()
	}
	return p.opts.Now
}

// row is one table row with the event, namespace and label cells the
// options ask for.
func (p *Printer) row(o apiserver.Object, event string) ([]string, error) {
	cells, err := rowFor(o, p.now())
	if err != nil {
		return nil, err
	}
	cols, err := columnsFor(p.res.Kind)
	if err != nil {
		return nil, err
	}
	var row []string
	if p.opts.WatchEvents {
		row = append(row, event)
	}
	if p.namespaceColumn() {
		row = append(row, o.GetNamespace())
	}
	for i, c := range cols {
		if !c.wide || p.opts.Output == "wide" {
			cell := cleanCell(cells[i])
			if c.name == "NAME" && p.opts.ShowKind {
				cell = p.name(o)
			}
			row = append(row, cell)
		}
	}
	if p.opts.ShowLabels {
		row = append(row, labels.FormatLabels(o.GetLabels()))
	}
	return row, nil
}

func (p *Printer) namespaceColumn() bool {
	return p.opts.AllNamespaces && p.res.Namespaced
}

// table writes rows, after the header the first time.
func (p *Printer) table(rows [][]string) error {
	if !p.header && !p.opts.NoHeaders {
		var h []string
		if p.opts.WatchEvents {
			h = append(h, "EVENT")
		}
		if p.namespaceColumn() {
			h = append(h, "NAMESPACE")
		}
		for _, c := range p.columns {
			h = append(h, c.name)
		}
		if p.opts.ShowLabels {
			h = append(h, "LABELS")
		}
		rows = append([][]string{h}, rows...)
	}
	p.header = true
	return p.align.write(p.w, rows)
}

// ResourceObjects are the objects of one resource, as one list returned them.
type ResourceObjects struct {
	Resource apiserver.Resource
	Objects  []apiserver.Object
}

// PrintLists prints the objects of several resources at once, as
// `kubectl get deploy,rs,pods` does: a table per resource that has objects,
// separated by blank lines, each NAME written kind/name; with -o yaml or
// json one List holding every object; with -o name a kind/name line each.
func PrintLists(w io.Writer, lists []ResourceObjects, opts PrintOptions) error {
	if len(lists) > 1 {
		opts.ShowKind = true
	}
	var items []apiserver.Object
	var first *Printer
	tables := 0
	for _, l := range lists {
		p, err := NewPrinter(w, l.Resource, opts)
		if err != nil {
			return err
		}
		if first == nil {
			first = p
		}
		if len(l.Objects) == 0 {
			continue
		}
		switch opts.Output {
		case "yaml", "json":
			for _, o := range l.Objects {
				if err := p.check(o); err != nil {
					return err
				}
				items = append(items, p.forOutput(o))
			}
			continue
		case "", "wide":
			if tables > 0 {
				if _, err := io.WriteString(w, "\n"); err != nil {
					return err
				}
			}
			tables++
		}
		if err := p.Print(l.Objects...); err != nil {
			return err
		}
	}
	if first != nil && (opts.Output == "yaml" || opts.Output == "json") {
		if items == nil {
			items = []apiserver.Object{}
		}
		return first.document(outputList{APIVersion: "v1", Items: items, Kind: "List"})
	}
	return nil
}
