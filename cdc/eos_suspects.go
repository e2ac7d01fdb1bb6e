package cdc

import (
	"sync"

	"github.com/eventforge/eventforge/cdc/setaside"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
)

// suspectSet remembers, across exactly-once sessions, the events of a
// partition's batch that the broker refused for good. sarama's
// transactional producer hands the batch's error to every record of it, so
// the guilty record is not known: each suspect is then sent in a Kafka
// transaction of its own, where a refusal names it alone
// (docs/design.md#generations). Safe for concurrent use.
type suspectSet struct {
	mu  sync.Mutex
	set map[setaside.Key]struct{}
}

func newSuspectSet() *suspectSet { return &suspectSet{set: map[setaside.Key]struct{}{}} }

// add, has and clear treat a nil set as empty and read-only.
func (s *suspectSet) add(id uuid.UUID, lsn pglogrepl.LSN) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[setaside.Key{ID: id, LSN: lsn}] = struct{}{}
}

func (s *suspectSet) has(id uuid.UUID, lsn pglogrepl.LSN) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[setaside.Key{ID: id, LSN: lsn}]
	return ok
}

// clear forgets an event: it was published, or set aside.
func (s *suspectSet) clear(id uuid.UUID, lsn pglogrepl.LSN) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, setaside.Key{ID: id, LSN: lsn})
}
