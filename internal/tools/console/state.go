package console

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// target is the pipeline the console looks at.
type target struct {
	pgURL, slot, topic, group, consumer string
	relayMetrics                        string // host:port of each relay's metrics, comma-separated
	workerMetrics                       func() []string
	effects                             bool // console_effects counts the business changes (demo)
}

// observer reads the real state of one order and the pipeline's signals.
type observer struct {
	t     target
	pool  *pgxpool.Pool
	kafka *kafkaReader

	rates  *rater      // the topology's rates
	assign assignWatch // the group's assignment changes
	topoMu sync.Mutex  // one topology read at a time
	topo   *Topology   // the last read

	mu      sync.Mutex
	commits map[string][2]string // event id -> commit record start and end LSN
	walOK   *bool                // pg_walinspect installed
}

func newObserver(ctx context.Context, t target, kc kafka.Config) (*observer, error) {
	pool, err := pgxpool.New(ctx, t.pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	kr, err := newKafkaReader(kc)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &observer{t: t, pool: pool, kafka: kr, rates: newRater(), commits: map[string][2]string{}}, nil
}

func (o *observer) close() {
	o.kafka.close()
	o.pool.Close()
}

// Facts are the durable rows and offsets of one order, read at one moment.
type Facts struct {
	OrderID      string    `json:"order_id"`
	Status       string    `json:"status"` // "" when the order row does not exist
	EventID      string    `json:"event_id,omitempty"`
	CommitLSN    string    `json:"commit_lsn,omitempty"`
	CommitEndLSN string    `json:"commit_end_lsn,omitempty"`
	InboxRows    int       `json:"inbox_rows"`
	Effects      int       `json:"effects"` // -1: not measurable (read-only mode)
	Partitions   int32     `json:"partitions"`
	Partition    int32     `json:"partition"`
	Records      []record  `json:"records"`
	Committed    int64     `json:"committed_offset"` // -1: none
	DeadLetters  []record  `json:"dead_letters"`
	ReadAt       time.Time `json:"read_at"`
}

// facts reads the order's state; walFrom (may be empty) is a WAL position
// before its transaction, where the commit record is looked for.
func (o *observer) facts(ctx context.Context, orderID, walFrom string) (Facts, error) {
	f := Facts{OrderID: orderID, Effects: -1, Committed: -1, ReadAt: time.Now().UTC()}
	// One statement, so the four values come from one snapshot.
	effects := "-1"
	if o.t.effects {
		effects = "(SELECT count(*) FROM console_effects WHERE order_id = $1)"
	}
	var status, eventID, xmin *string
	err := o.pool.QueryRow(ctx, `SELECT (SELECT status FROM orders WHERE id = $1), e.event_id::text, e.xmin::text,
		  coalesce((SELECT count(*) FROM processed_events p WHERE p.consumer = $2 AND p.event_id = e.event_id), 0), `+effects+`
		FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT event_id, xmin FROM outbox WHERE aggregate_id = $1 ORDER BY created_at DESC LIMIT 1) e ON true`,
		orderID, o.t.consumer).Scan(&status, &eventID, &xmin, &f.InboxRows, &f.Effects)
	if err != nil {
		return f, fmt.Errorf("read order, outbox and inbox: %w", err)
	}
	if status != nil {
		f.Status = *status
	}
	if eventID != nil {
		f.EventID = *eventID
		if walFrom == "" { // the oldest WAL the slot keeps
			_ = o.pool.QueryRow(ctx, "SELECT coalesce(restart_lsn::text, '') FROM pg_replication_slots WHERE slot_name = $1", o.t.slot).Scan(&walFrom)
		}
		f.CommitLSN, f.CommitEndLSN = o.commitLSN(ctx, f.EventID, *xmin, walFrom)
	}
	if err := o.kafkaFacts(&f); err != nil {
		return f, err
	}
	return f, nil
}

func (o *observer) kafkaFacts(f *Facts) error {
	n, err := o.kafka.partitions(o.t.topic)
	if err != nil {
		return fmt.Errorf("read topic %s: %w", o.t.topic, err)
	}
	f.Partitions = n
	f.Partition = kafka.PartitionForKey([]byte(f.OrderID), n)
	if f.Committed, err = o.kafka.committed(o.t.group, o.t.topic, f.Partition); err != nil {
		return err
	}
	if f.EventID == "" {
		return nil
	}
	deadline := time.Now().Add(lookupTimeout) // for the topic and its dead letters together
	if f.Records, err = o.kafka.find(deadline, o.t.topic, f.Partition, f.EventID); err != nil {
		return err
	}
	f.DeadLetters, _ = o.kafka.findAll(deadline, o.t.topic+outbox.DLQSuffix, f.EventID) // no dead-letter topic: none
	return nil
}

// commitLSN finds the commit record of the transaction xid in the WAL with
// pg_walinspect, when installed (the demo database has it).
func (o *observer) commitLSN(ctx context.Context, eventID, xid, walFrom string) (string, string) {
	o.mu.Lock()
	c, ok := o.commits[eventID]
	walOK := o.walOK
	o.mu.Unlock()
	if ok {
		return c[0], c[1]
	}
	if walOK == nil {
		var yes bool
		_ = o.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect')").Scan(&yes)
		o.mu.Lock()
		o.walOK = &yes
		o.mu.Unlock()
		walOK = &yes
	}
	if !*walOK || walFrom == "" {
		return "", ""
	}
	err := o.pool.QueryRow(ctx, `SELECT start_lsn::text, end_lsn::text FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_lsn())
		WHERE xid = $2::text::xid AND resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%' LIMIT 1`, walFrom, xid).Scan(&c[0], &c[1])
	if err != nil {
		return "", ""
	}
	o.mu.Lock()
	o.commits[eventID] = c
	o.mu.Unlock()
	return c[0], c[1]
}

// walPosition is pg_current_wal_lsn().
func (o *observer) walPosition(ctx context.Context) (string, error) {
	var lsn string
	err := o.pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	return lsn, err
}

// confirmedPast reports whether the slot's confirmed position is at or past lsn.
func (o *observer) confirmedPast(ctx context.Context, lsn string) (bool, string, error) {
	var ok bool
	var confirmed string
	err := o.pool.QueryRow(ctx, "SELECT confirmed_flush_lsn >= $2::pg_lsn, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", o.t.slot, lsn).Scan(&ok, &confirmed)
	return ok, confirmed, err
}

// Signals are the pipeline's live health figures; nil means unknown.
type Signals struct {
	SlotLagBytes         *int64    `json:"slot_lag_bytes"`
	ConfirmedLSN         string    `json:"confirmed_lsn"`
	SlotActive           bool      `json:"slot_active"`
	OldestUnconfirmedAge *float64  `json:"oldest_unconfirmed_age_seconds"`
	PublishErrors        *float64  `json:"publish_errors"`
	Published            *float64  `json:"published"`
	ConsumerLag          *int64    `json:"consumer_lag"`
	Duplicates           *float64  `json:"duplicates_dropped"`
	Applied              *float64  `json:"applied"`
	Retries              *float64  `json:"retries"`
	DeadLettered         *float64  `json:"dead_lettered"`
	DLQOldestAge         *float64  `json:"dlq_oldest_age_seconds"`
	ReadAt               time.Time `json:"read_at"`
}

func (o *observer) signals(ctx context.Context) Signals {
	s := Signals{ReadAt: time.Now().UTC()}
	var lag int64
	err := o.pool.QueryRow(ctx, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint, coalesce(confirmed_flush_lsn::text, ''), active
		FROM pg_replication_slots WHERE slot_name = $1`, o.t.slot).Scan(&lag, &s.ConfirmedLSN, &s.SlotActive)
	if err == nil {
		s.SlotLagBytes = &lag
		switch {
		case lag == 0:
			s.OldestUnconfirmedAge = ptr(0.0)
		case lag <= maxInspectBytes:
			s.OldestUnconfirmedAge = o.oldestUnconfirmed(ctx, s.ConfirmedLSN)
		}
	}
	if l, err := o.kafka.lag(o.t.group, o.t.topic); err == nil {
		s.ConsumerLag = &l
	}
	for _, a := range o.t.relays() {
		if ms, err := scrape(ctx, a); err == nil {
			s.PublishErrors = ptr(sum(ms, "eventforge_cdc_publish_errors_total") + deref(s.PublishErrors))
			s.Published = ptr(sum(ms, "eventforge_cdc_events_published_total") + deref(s.Published))
		}
	}
	var ws [][]sample
	for _, a := range o.t.workerMetrics() {
		if ms, err := scrape(ctx, a); err == nil {
			ws = append(ws, ms)
		}
	}
	if len(ws) > 0 {
		var dup, app, ret, dlq, age float64
		for _, ms := range ws {
			dup += sum(ms, "eventforge_worker_events_total", `result="duplicate"`)
			app += sum(ms, "eventforge_worker_events_total", `result="applied"`)
			dlq += sum(ms, "eventforge_worker_events_total", `result="dlq"`)
			ret += sum(ms, "eventforge_worker_retries_total")
			age = max(age, maxOf(ms, "eventforge_worker_dlq_oldest_age_seconds"))
		}
		s.Duplicates, s.Applied, s.Retries, s.DeadLettered, s.DLQOldestAge = &dup, &app, &ret, &dlq, &age
	}
	return s
}

// maxInspectBytes bounds the WAL read to find unconfirmed events: past it
// the age is reported unknown rather than read on every refresh.
const maxInspectBytes = 16 << 20

// oldestUnconfirmed is the age of the oldest outbox event committed after
// the slot's confirmed position (pg_walinspect finds commit positions; nil
// without it). 0 when every event is confirmed.
func (o *observer) oldestUnconfirmed(ctx context.Context, confirmed string) *float64 {
	o.mu.Lock()
	ok := o.walOK != nil && *o.walOK
	o.mu.Unlock()
	if !ok || confirmed == "" {
		return nil
	}
	var age float64
	err := o.pool.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM now() - min(o.created_at)), 0)::float8
		FROM outbox o JOIN pg_get_wal_records_info($1::pg_lsn, pg_current_wal_lsn()) w
		  ON w.xid = o.xmin AND w.resource_manager = 'Transaction' AND w.record_type LIKE 'COMMIT%'
		WHERE w.end_lsn > $1::pg_lsn`, confirmed).Scan(&age)
	if err != nil {
		return nil
	}
	return &age
}

func ptr[T any](v T) *T { return &v }

// relays are the relays' metrics addresses: the active one and its standbys.
func (t target) relays() []string {
	var out []string
	for _, a := range strings.Split(t.relayMetrics, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
