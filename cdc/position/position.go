// Package position is the exactly-once relay's record of how far into the
// slot's stream its Kafka transactions got: written in the same Kafka
// transaction as the events it covers, read back with read_committed when a
// session starts, and used to skip what a committed Kafka transaction
// already holds (docs/design.md#exactly-once).
//
// PostgreSQL transactions are identified by their final LSN (the LSN of
// their commit record, which pgoutput's BEGIN carries): it grows strictly in
// commit order, the order the slot streams them in.
//
// Imports (floor: shared library): internal/shared/kafka (Read's
// read_committed scan) and sarama; no other EventForge package.
package position

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// Position is the last PostgreSQL transaction a committed Kafka transaction
// covers. When EndLSN is set the transaction is wholly included; otherwise
// it is included up to and including the INSERT at RowLSN. The zero
// Position covers nothing.
type Position struct {
	FinalLSN pglogrepl.LSN // the transaction's commit record LSN (BEGIN's final LSN)
	EndLSN   pglogrepl.LSN // its commit end LSN when complete, else zero
	RowLSN   pglogrepl.LSN // when partial: WAL LSN of the last INSERT included
}

// Complete reports whether the whole transaction is included.
func (p Position) Complete() bool { return p.EndLSN != 0 }

// IsZero reports whether p covers nothing.
func (p Position) IsZero() bool { return p == Position{} }

// Covers reports whether the INSERT at row of the transaction whose final
// LSN is final is already in a committed Kafka transaction: transactions
// before p's are, p's own transaction is when complete, else up to its
// RowLSN.
func (p Position) Covers(final, row pglogrepl.LSN) bool {
	switch {
	case p.IsZero():
		return false
	case final < p.FinalLSN:
		return true
	case final > p.FinalLSN:
		return false
	case p.Complete():
		return true
	}
	return row <= p.RowLSN
}

// Less reports whether p is behind q in the stream.
func (p Position) Less(q Position) bool {
	if p.FinalLSN != q.FinalLSN {
		return p.FinalLSN < q.FinalLSN
	}
	if p.Complete() != q.Complete() {
		return q.Complete()
	}
	return p.RowLSN < q.RowLSN
}

// Max is the furthest of p and q: a position never goes backwards.
func Max(p, q Position) Position {
	if p.Less(q) {
		return q
	}
	return p
}

// wire is the JSON value of a position record.
type wire struct {
	Version  int    `json:"version"`
	Slot     string `json:"slot"`
	FinalLSN string `json:"final_lsn"`
	EndLSN   string `json:"end_lsn,omitempty"`
	RowLSN   string `json:"row_lsn,omitempty"`
}

const version = 1

// ErrInvalid marks a position record that cannot be read.
var ErrInvalid = errors.New("invalid position record")

// Encode is the record value of p for slot.
func Encode(slot string, p Position) []byte {
	w := wire{Version: version, Slot: slot, FinalLSN: p.FinalLSN.String()}
	if p.Complete() {
		w.EndLSN = p.EndLSN.String()
	} else {
		w.RowLSN = p.RowLSN.String()
	}
	b, _ := json.Marshal(w) // strings and an int: cannot fail
	return b
}

// Decode reads a record value written by Encode and returns the slot it
// belongs to with the position.
func Decode(b []byte) (string, Position, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return "", Position{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if w.Version != version {
		return "", Position{}, fmt.Errorf("%w: version %d, want %d", ErrInvalid, w.Version, version)
	}
	var p Position
	var err error
	if p.FinalLSN, err = parse("final_lsn", w.FinalLSN, true); err != nil {
		return "", Position{}, err
	}
	if p.EndLSN, err = parse("end_lsn", w.EndLSN, false); err != nil {
		return "", Position{}, err
	}
	if p.RowLSN, err = parse("row_lsn", w.RowLSN, false); err != nil {
		return "", Position{}, err
	}
	switch {
	case p.Complete() && p.RowLSN != 0:
		return "", Position{}, fmt.Errorf("%w: both end_lsn and row_lsn", ErrInvalid)
	case p.Complete() && p.EndLSN <= p.FinalLSN:
		return "", Position{}, fmt.Errorf("%w: end_lsn %s not after final_lsn %s", ErrInvalid, p.EndLSN, p.FinalLSN)
	case !p.Complete() && (p.RowLSN == 0 || p.RowLSN >= p.FinalLSN):
		return "", Position{}, fmt.Errorf("%w: a partial position needs a row_lsn below final_lsn", ErrInvalid)
	}
	return w.Slot, p, nil
}

func parse(field, s string, required bool) (pglogrepl.LSN, error) {
	if s == "" {
		if required {
			return 0, fmt.Errorf("%w: no %s", ErrInvalid, field)
		}
		return 0, nil
	}
	l, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrInvalid, field, err)
	}
	if l == 0 {
		return 0, fmt.Errorf("%w: %s is zero", ErrInvalid, field)
	}
	return l, nil
}
