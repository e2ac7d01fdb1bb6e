package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc"
)

// kafkaStage measures the relay's producer alone, without PostgreSQL or the
// relay: for each rate, records handed over on the open-loop clock, in
// groups of RowsPerTxn (a group stands for a PostgreSQL transaction), with
// the relay's producer configuration. At-least-once: the latency is from
// hand-over to the broker's ack. Exactly-once: records go in Kafka
// transactions cut as the relay cuts them (at a group's end when nothing
// more is queued), each closed by a position record on a second topic, and
// the latency runs to the commit. It is the floor under the steady stage's
// commit-to-ack in each mode (docs/bench.md#kafka).
func (r *runner) kafkaStage(ctx context.Context) []Row {
	var rows []Row
	for _, rate := range r.cfg.Rates {
		row := Row{Stage: StageKafka, Shape: fmt.Sprintf("%d/s records", rate.EventsPerSec)}
		if rate.RowsPerTxn > 1 {
			row.Shape = fmt.Sprintf("%d/s records in groups of %d", rate.EventsPerSec, rate.RowsPerTxn)
		}
		rows = append(rows, measure(row, func(row *Row) error { return r.kafkaRate(ctx, rate, row) }))
		if ctx.Err() != nil {
			break
		}
	}
	return rows
}

// kafkaRate measures one rate into row.
func (r *runner) kafkaRate(ctx context.Context, rate Rate, row *Row) error {
	tag := uniqueName("k")
	records, position := tag+".records", tag+".position"
	for _, t := range []string{records, position} {
		if err := r.broker.createTopic(ctx, t); err != nil {
			return err
		}
	}
	sc, err := cdc.Config{Kafka: r.broker.cfg, Slot: tag, ExactlyOnce: r.exactlyOnce}.ProducerConfig()
	if err != nil {
		return err
	}
	prod, err := sarama.NewAsyncProducer(r.broker.cfg.Brokers, sc)
	if err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	groups := make(chan time.Time, 1<<16)
	res := make(chan []time.Duration, 1)
	src := kafkaSource{prod: prod, records: records, position: position, slot: tag, groupSize: rate.RowsPerTxn}
	go func() {
		if r.exactlyOnce {
			res <- src.transactions(groups)
		} else {
			res <- src.plain(groups)
		}
	}()
	sched := newSchedule(rate.TxnPerSec(), r.cfg.SteadyDuration)
	lr := runOpenLoop(ctx, sched, 1, func(context.Context, int64) error {
		groups <- time.Now()
		return nil
	})
	close(groups)
	lat := <-res
	if src.err != nil {
		return src.err
	}
	row.Events = int64(len(lat))
	row.Seconds = r.cfg.SteadyDuration.Seconds()
	row.EventsPerSec = float64(row.Events) / row.Seconds
	row.TargetPerSec = f64(float64(rate.EventsPerSec))
	row.WriterShort = short(row.EventsPerSec, float64(rate.EventsPerSec))
	slices.Sort(lat)
	row.P50Ms, row.P99Ms, row.P999Ms = f64(ms(nearestRank(lat, 0.5))), f64(ms(nearestRank(lat, 0.99))), f64(ms(nearestRank(lat, 0.999)))
	row.LatencyCount = i64(int64(len(lat)))
	row.Note = fmt.Sprintf("the relay's producer alone; %d of %d groups handed over, max start delay %s",
		lr.Done, lr.Scheduled, lr.MaxBehind.Round(time.Millisecond))
	return nil
}

// kafkaSource produces the groups handed over on groups and returns each
// record's latency; the first producer error fails the measurement (err).
type kafkaSource struct {
	prod              sarama.AsyncProducer
	records, position string
	slot              string
	groupSize         int
	err               error
}

// record is the i-th record, handed over at at.
func (s *kafkaSource) record(i int, at time.Time) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Topic: s.records, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%64)),
		Value: sarama.StringEncoder(`{"bench":true}`), Metadata: at}
}

// plain produces every record as it comes; the latency runs to its ack.
func (s *kafkaSource) plain(groups <-chan time.Time) []time.Duration {
	done := make(chan []time.Duration, 1)
	go func() {
		var lat []time.Duration
		for m := range s.prod.Successes() {
			lat = append(lat, time.Since(m.Metadata.(time.Time)))
		}
		done <- lat
	}()
	first := make(chan error, 1)
	go func() {
		var err error
		for pe := range s.prod.Errors() {
			err = cmp.Or(err, error(pe))
		}
		first <- err
	}()
	i := 0
	for at := range groups {
		for range s.groupSize {
			s.prod.Input() <- s.record(i, at)
			i++
		}
	}
	s.prod.AsyncClose()
	lat := <-done
	s.err = <-first
	return lat
}

// transactions produces inside Kafka transactions as the relay does: one
// begins with the first record after a commit and commits, with a position
// record, at a group's end when no further group is queued.
func (s *kafkaSource) transactions(groups <-chan time.Time) []time.Duration {
	go func() {
		for range s.prod.Successes() {
		}
	}()
	go func() {
		for range s.prod.Errors() {
		}
	}()
	defer s.prod.Close() //nolint:errcheck // a failed record already ended the measurement
	var lat []time.Duration
	var held []time.Time
	i := 0
	for at := range groups {
		if s.err != nil {
			continue // the clock still hands over; the measurement failed
		}
		if len(held) == 0 {
			if s.err = s.prod.BeginTxn(); s.err != nil {
				continue
			}
		}
		for range s.groupSize {
			s.prod.Input() <- s.record(i, at)
			held = append(held, at)
			i++
		}
		if len(groups) > 0 {
			continue
		}
		s.prod.Input() <- &sarama.ProducerMessage{Topic: s.position, Key: sarama.StringEncoder(s.slot),
			Value: sarama.StringEncoder(fmt.Sprintf(`{"records":%d}`, i))}
		if s.err = s.prod.CommitTxn(); s.err != nil {
			continue
		}
		now := time.Now()
		for _, h := range held {
			lat = append(lat, now.Sub(h))
		}
		held = held[:0]
	}
	return lat
}
