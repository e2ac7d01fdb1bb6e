package schemareg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// magic is the first byte of Confluent's wire format.
const magic = 0

// headerLen is the wire format's prefix: the magic byte and the schema id.
const headerLen = 5

// codec writes a JSON payload in one schema's format and reads it back.
type codec interface {
	// encode appends the body of a JSON payload; one that does not fit
	// the schema is a mismatch (see finish).
	encode(dst, payload []byte) ([]byte, error)
	// decode appends the JSON of a body (after the schema id).
	decode(dst, body []byte) ([]byte, error)
}

// MismatchError is a payload that does not fit its schema: the event is
// set aside with it as the reason.
type MismatchError struct {
	Path   string // where in the payload, as a JSON path ($ is the payload)
	Reason string
	// Where names the schema: subject, version and id.
	Where string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("payload does not match %s at %s: %s", e.Where, e.Path, e.Reason)
}

// mismatch is a MismatchError on its way up: its path grows as the
// encoder returns from the value where it arose.
type mismatch struct {
	path   []string // innermost last
	reason string
}

func (m *mismatch) Error() string { return m.reason }

func mismatchf(format string, a ...any) error { return &mismatch{reason: fmt.Sprintf(format, a...)} }

// within puts a mismatch under a path element (".field", "[3]").
func within(err error, elem string) error {
	var m *mismatch
	if errors.As(err, &m) {
		m.path = append(m.path, elem)
	}
	return err
}

// finish turns a mismatch into a MismatchError naming the schema.
func finish(err error, where string) error {
	var m *mismatch
	if !errors.As(err, &m) {
		return err
	}
	p := "$"
	for i := len(m.path) - 1; i >= 0; i-- {
		p += m.path[i]
	}
	return &MismatchError{Path: p, Reason: m.reason, Where: where}
}

// parseJSON reads one JSON value, numbers kept as json.Number.
func parseJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("payload is not JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("payload is not JSON: more after the value")
	}
	return v, nil
}

// appendHeader appends the wire format's prefix for a schema id.
func appendHeader(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, magic), uint32(id))
}

// ErrNotFramed is a value that does not start with the wire format's
// prefix.
var ErrNotFramed = errors.New("not in the schema registry's wire format (magic byte 0 and a 4-byte schema id)")

// SplitFrame returns the schema id and body of a framed value.
func SplitFrame(v []byte) (id int, body []byte, err error) {
	if len(v) < headerLen || v[0] != magic {
		return 0, nil, ErrNotFramed
	}
	return int(binary.BigEndian.Uint32(v[1:headerLen])), v[headerLen:], nil
}
