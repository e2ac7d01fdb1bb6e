package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Names of the drain shapes, as --shapes takes them.
const (
	ShapeNameBulk   = "bulk"   // 1,000-row transactions (ShapeBulk)
	ShapeNameSingle = "single" // single-row transactions with an orders row (ShapeSingle)
)

// shapeNamed is the drain shape called name.
func shapeNamed(name string) (backlogShape, error) {
	switch name {
	case ShapeNameBulk:
		return backlogShape{Name: ShapeBulk, RowsPerTxn: 1000}, nil
	case ShapeNameSingle:
		return backlogShape{Name: ShapeSingle, RowsPerTxn: 1}, nil
	}
	return backlogShape{}, fmt.Errorf("unknown shape %q: want %s or %s", name, ShapeNameBulk, ShapeNameSingle)
}

// ParseShapes reads a comma-separated subset of bulk, single.
func ParseShapes(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.Contains(out, name) {
			continue
		}
		if _, err := shapeNamed(name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, errors.New("no shapes selected")
	}
	return out, nil
}
