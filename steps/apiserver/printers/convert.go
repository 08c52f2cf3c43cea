package printers

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/podlab/podlab/steps/apiserver"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The includeObject values (metav1.IncludeObjectPolicy): what each row
// carries besides its cells.
const (
	IncludeNone     = string(metav1.IncludeNone)     // nothing
	IncludeMetadata = string(metav1.IncludeMetadata) // a PartialObjectMetadata: the default
	IncludeObject   = string(metav1.IncludeObject)   // the whole object
)

// TableConvertor converts objects to kube's Table. Now is the time AGE
// columns count from; nil means the clock.
type TableConvertor struct {
	Now func() time.Time
}

// ConvertToTable converts one object, or a list (one row per item, in
// order), to a Table with kube's columns for its kind. includeObject is
// the request's includeObject parameter: "None", "Object", or "Metadata"
// (also when ""), as kube-apiserver applies it. The Table's
// resourceVersion and continue are the list's (or the object's). In a
// watch, kube-apiserver sends the column definitions with the first event
// only (TableOptions.NoHeaders for the rest): the caller sets
// ColumnDefinitions to nil on later events.
func (c TableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, includeObject string) (*metav1.Table, error) {
	if obj == nil {
		return nil, fmt.Errorf("converting to a Table: no object")
	}
	switch includeObject {
	case "":
		includeObject = IncludeMetadata
	case IncludeNone, IncludeMetadata, IncludeObject:
	default:
		return nil, fmt.Errorf("converting to a Table: includeObject %q is not one of %s, %s, %s", includeObject, IncludeNone, IncludeMetadata, IncludeObject)
	}
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}

	var items []runtime.Object
	table := &metav1.Table{TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "Table"}}
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, fmt.Errorf("converting %T to a Table: %w", obj, err)
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		items = []runtime.Object{obj}
		if m, err := meta.Accessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}

	kind, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	if table.ColumnDefinitions, err = Columns(kind); err != nil {
		return nil, fmt.Errorf("converting %s to a Table: %w", kind, err)
	}
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for i, item := range items {
		if i%100 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		o, ok := item.(apiserver.Object)
		if !ok {
			return nil, fmt.Errorf("converting to a Table: item %d is a %T, not an API object", i, item)
		}
		cells, err := Cells(o, now)
		if err != nil {
			return nil, err
		}
		row := metav1.TableRow{Cells: cells}
		switch includeObject {
		case IncludeObject:
			row.Object.Object = o
		case IncludeMetadata:
			partial := meta.AsPartialObjectMetadata(o)
			partial.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
			row.Object.Object = partial
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// kindOf is the kind of the object, or of the list's items: a PodList
// holds Pods. An empty list still gets its columns.
func kindOf(obj runtime.Object) (string, error) {
	t := reflect.TypeOf(obj)
	if meta.IsListType(obj) {
		v := reflect.ValueOf(obj)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if items := v.FieldByName("Items"); v.Kind() == reflect.Struct && items.IsValid() && items.Kind() == reflect.Slice {
			t = reflect.PointerTo(items.Type().Elem())
		}
	}
	for _, r := range apiserver.Resources() {
		if reflect.TypeOf(r.New()) == t {
			return r.Kind, nil
		}
	}
	return "", fmt.Errorf("converting %T to a Table: not a kind podlab serves", obj)
}
