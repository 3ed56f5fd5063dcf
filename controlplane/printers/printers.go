// Package printers produces the server-side tables (`as=Table`) that kubectl prints: the same
// columns as upstream's printers for each resource, wide columns marked with priority 1.
package printers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Column is a table column; Wide columns only show with `-o wide`.
type Column struct {
	Name, Type, Format, Description string
	Wide                            bool
}

// Printer converts one resource's objects into table rows.
type Printer struct {
	columns []metav1.TableColumnDefinition
	row     func(obj runtime.Object) []any
}

var _ rest.TableConvertor = Printer{}

// New builds a printer whose first column is NAME; row returns the cells after it.
func New(row func(obj runtime.Object) []any, cols ...Column) Printer {
	p := Custom(func(o runtime.Object) []any {
		m, _ := meta.Accessor(o)
		return append([]any{m.GetName()}, row(o)...)
	}, append([]Column{{Name: "Name", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}}, cols...)...)
	return p
}

// Custom builds a printer with exactly the given columns (events put NAME last, as upstream).
func Custom(row func(obj runtime.Object) []any, cols ...Column) Printer {
	var defs []metav1.TableColumnDefinition
	for _, c := range cols {
		typ := c.Type
		if typ == "" {
			typ = "string"
		}
		d := metav1.TableColumnDefinition{Name: c.Name, Type: typ, Format: c.Format, Description: c.Description}
		if c.Wide {
			d.Priority = 1
		}
		defs = append(defs, d)
	}
	return Printer{columns: defs, row: row}
}

// ConvertToTable implements rest.TableConvertor for single objects and lists.
func (p Printer) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{}
	if o, ok := opts.(*metav1.TableOptions); !ok || !o.NoHeaders {
		t.ColumnDefinitions = p.columns
	}
	add := func(o runtime.Object) error {
		cells := p.row(o)
		if len(cells) != len(p.columns) {
			return fmt.Errorf("printer for %T produced %d cells for %d columns", o, len(cells), len(p.columns))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: o}})
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, add); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			t.ResourceVersion = l.GetResourceVersion()
			t.Continue = l.GetContinue()
			t.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		if err := add(obj); err != nil {
			return nil, err
		}
		if m, err := meta.Accessor(obj); err == nil {
			t.ResourceVersion = m.GetResourceVersion()
		}
	}
	return t, nil
}

// Age renders a creation time the way kubectl does ("5m", "3d4h").
func Age(ts metav1.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(ts.Time))
}

// AgeColumn is the trailing AGE column.
var AgeColumn = Column{Name: "Age", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}

// none renders empty values as upstream does.
func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
