// Package fielderr is the error convention of the library configurations
// (cdc.Config, worker.Config, api.Config): Validate reports every problem at
// once, each naming the Go field to fix ("Config.Group: required"), and a
// command line maps the field names to its flags ("--group: required").
//
// Imports (floor: shared library): no other EventForge package.
package fielderr

import (
	"errors"
	"fmt"
	"regexp"
)

// Error is a problem with one field of a configuration. Field is the field
// as Go spells it from the configuration type ("Config.Group",
// "Config.Kafka"); Problem may name other fields the same way. An Error
// with an empty Field is a problem of several fields, all named in Problem.
type Error struct {
	Field   string
	Problem string
	Err     error // the cause, when there is one
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

func (e *Error) Unwrap() error { return e.Err }

// New is a problem with field, described by format and args.
func New(field, format string, args ...any) *Error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Wrap is field's problem err (a nested configuration's or a parser's),
// or nil when err is nil.
func Wrap(field string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Field: field, Problem: err.Error(), Err: err}
}

// fieldRef is a field named as Go spells it: Config.A or Config.A.B.
var fieldRef = regexp.MustCompile(`\bConfig(?:\.[A-Z][A-Za-z0-9]*)+`)

// Rename returns err with the fields of its Errors, in Field and in Problem,
// replaced by names (a field to its flag, "Config.Group" to "--group").
// A field that names maps to "" is dropped from Field, so the problem reads
// on its own (a nested configuration whose errors name flags already). The
// errors of a join stay joined, one per line; other errors are kept as they
// are.
func Rename(err error, names map[string]string) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, Rename(e, names))
		}
		return errors.Join(errs...)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe != err {
		return err
	}
	out := &Error{Field: fe.Field, Err: fe.Err, Problem: fieldRef.ReplaceAllStringFunc(fe.Problem, func(f string) string {
		if n, ok := names[f]; ok && n != "" {
			return n
		}
		return f
	})}
	if n, ok := names[fe.Field]; ok {
		out.Field = n
	}
	return out
}
