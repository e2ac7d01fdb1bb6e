package setaside

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
)

func TestSetKeysOnIDAndPosition(t *testing.T) {
	id := uuid.New()
	s := Set{}
	s.Add(id, 100)
	for _, tc := range []struct {
		id   uuid.UUID
		lsn  uint64
		want bool
	}{
		{id, 100, true},
		{id, 200, false}, // a later row with the same event id is produced
		{uuid.New(), 100, false},
	} {
		if got := s.Has(tc.id, pglsn(tc.lsn)); got != tc.want {
			t.Errorf("Has(%s, %d) = %v, want %v", tc.id, tc.lsn, got, tc.want)
		}
	}
}

func TestReasonFindsAWrappedRejectError(t *testing.T) {
	wrapped := fmt.Errorf("ensure topic: %w", &RejectError{Reason: "not allowed"})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrapped, "not allowed"},
		{errors.New("broker down"), ""},
		{nil, ""},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func pglsn(v uint64) pglogrepl.LSN { return pglogrepl.LSN(v) }
