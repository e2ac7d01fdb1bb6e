package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Names of the drain shapes, as --shapes takes them.
const (
	ShapeNameBulk   = "bulk"   // 1,000-row transactions (ShapeBulk)
	ShapeNameSingle = "single" // single-row transactions with an orders row (ShapeSingle)
)

// shapeNamed is the drain shape called name: bulk, single, or bulk:K,
// 1,000-row transactions whose rows cycle over K keys (every transaction
// touches the same keys: a hot-key or batch-job backlog).
func shapeNamed(name string) (backlogShape, error) {
	if base, keys, ok := strings.Cut(name, ":"); ok && base == ShapeNameBulk {
		k, err := strconv.Atoi(keys)
		if err != nil || k < 1 {
			return backlogShape{}, fmt.Errorf("shape %q: the key count after %s: must be a positive integer", name, base)
		}
		return backlogShape{Name: fmt.Sprintf("%s, %d keys", ShapeBulk, k), RowsPerTxn: 1000, Keys: k}, nil
	}
	switch name {
	case ShapeNameBulk:
		return backlogShape{Name: ShapeBulk, RowsPerTxn: 1000}, nil
	case ShapeNameSingle:
		return backlogShape{Name: ShapeSingle, RowsPerTxn: 1}, nil
	}
	return backlogShape{}, fmt.Errorf("unknown shape %q: want %s, %s:KEYS or %s", name, ShapeNameBulk, ShapeNameBulk, ShapeNameSingle)
}

// ParseShapes reads a comma-separated list of bulk, bulk:KEYS and single.
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
