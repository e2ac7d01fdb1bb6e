package produce

import (
	"errors"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// generation is a run of consecutive records of one partition, sent as one
// record batch.
type generation struct {
	part     *partition
	records  []*Record
	firstSeq int32
	bytes    int
	to       int32               // the broker it was last sent to; kafka.NoBroker: none
	batch    *sarama.RecordBatch // built on first send, sent again unchanged
}

// flight is one produce request's outcome.
type flight struct {
	gens []*generation
	resp *sarama.ProduceResponse
	err  error
}

// errNoBlock is a response that lacks a partition of its request.
var errNoBlock = errors.New("the produce response lacks the partition")

// outcome is g's block of the response and its error.
func (f *flight) outcome(g *generation) (*sarama.ProduceResponseBlock, error) {
	if f.err != nil {
		return nil, f.err
	}
	block := f.resp.GetBlock(g.part.topic, g.part.partition)
	if block == nil {
		return nil, errNoBlock
	}
	if !errors.Is(block.Err, sarama.ErrNoError) {
		return block, block.Err
	}
	return block, nil
}

// sender sends the generations of the partitions one broker leads: one
// request at a time, carrying every generation queued while the previous
// one was out.
type sender[T any] struct {
	e      *Engine[T]
	broker *sarama.Broker
	wake   chan struct{}

	mu   sync.Mutex
	gens []*generation
}

func (s *sender[T]) add(g *generation) {
	s.mu.Lock()
	s.gens = append(s.gens, g)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take removes the generations of the next request.
func (s *sender[T]) take() []*generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, bytes := 0, 0
	for n < len(s.gens) && (n == 0 || bytes+s.gens[n].bytes <= s.e.cfg.MaxRequestBytes) {
		bytes += s.gens[n].bytes
		n++
	}
	out := append([]*generation(nil), s.gens[:n]...)
	clear(s.gens[:n])
	s.gens = s.gens[n:]
	return out
}

func (s *sender[T]) run() {
	defer s.e.wg.Done()
	for {
		select {
		case <-s.wake:
		case <-s.e.stopped:
			return
		}
		for gens := s.take(); len(gens) > 0; gens = s.take() {
			f := s.produce(gens)
			select {
			case s.e.results <- f:
			case <-s.e.stopped:
				return
			}
		}
	}
}

// produce sends one request. After a failed request the connection is
// closed: the next Leader call opens it again.
func (s *sender[T]) produce(gens []*generation) *flight {
	cfg := &s.e.cfg
	req := &sarama.ProduceRequest{
		RequiredAcks: sarama.WaitForAll,
		Timeout:      int32(cfg.Timeout / time.Millisecond),
		Version:      s.e.version,
	}
	if s.e.txn != nil {
		req.TransactionalID = &s.e.txn.id
	}
	for _, g := range gens {
		if g.batch == nil {
			g.batch = s.e.batch(g)
		}
		req.AddBatch(g.part.topic, g.part.partition, g.batch)
	}
	resp, err := s.broker.Produce(req)
	if err != nil {
		_ = s.broker.Close()
	} else if s.e.hooks.Produced != nil {
		s.e.hooks.Produced()
	}
	return &flight{gens: gens, resp: resp, err: err}
}

// batch encodes g as a record batch of this engine's producer. Its records
// and their header pointers come from two arrays per generation, not two
// allocations per record.
func (e *Engine[T]) batch(g *generation) *sarama.RecordBatch {
	first := timestamp(g.records[0].Msg)
	rb := &sarama.RecordBatch{
		Version:          2,
		FirstTimestamp:   first,
		MaxTimestamp:     first,
		Codec:            e.cfg.Codec,
		CompressionLevel: e.cfg.CompressionLevel,
		ProducerID:       e.pid,
		ProducerEpoch:    e.epoch,
		IsTransactional:  e.txn != nil,
		FirstSequence:    g.firstSeq,
		LastOffsetDelta:  int32(len(g.records) - 1),
		Records:          make([]*sarama.Record, len(g.records)),
	}
	recs := make([]sarama.Record, len(g.records))
	headers := 0
	for _, r := range g.records {
		headers += len(r.Msg.Headers)
	}
	hs := make([]*sarama.RecordHeader, headers)
	for i, r := range g.records {
		ts := timestamp(r.Msg)
		if ts.After(rb.MaxTimestamp) {
			rb.MaxTimestamp = ts
		}
		rec := &recs[i]
		rec.OffsetDelta, rec.TimestampDelta = int64(i), ts.Sub(first)
		rec.Key, _ = encode(r.Msg.Key)
		rec.Value, _ = encode(r.Msg.Value)
		if n := len(r.Msg.Headers); n > 0 {
			rec.Headers, hs = hs[:n:n], hs[n:]
			for j := range r.Msg.Headers {
				rec.Headers[j] = &r.Msg.Headers[j]
			}
		}
		rb.Records[i] = rec
	}
	return rb
}

// timestamp is msg's timestamp in milliseconds, now when it has none.
func timestamp(msg *sarama.ProducerMessage) time.Time {
	ts := msg.Timestamp
	if ts.IsZero() {
		ts = time.Now()
		msg.Timestamp = ts // sent again unchanged
	}
	return ts.Truncate(time.Millisecond)
}

// encode is an Encoder's bytes; the relay's encoders are byte slices and
// strings, which never fail.
func encode(enc sarama.Encoder) ([]byte, error) {
	if enc == nil {
		return nil, nil
	}
	return enc.Encode()
}
