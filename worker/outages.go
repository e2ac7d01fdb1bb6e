package worker

import (
	"context"
	"errors"
	"time"
)

// outages are the Runner's causes of waiting, each logged quietly.
type outages struct {
	database   *outage // unreachable, shut down, out of resources
	schema     *outage // a table, column or schema missing
	kafka      *outage // consumer group errors
	deadLetter *outage // dead letters not acked
}

func newOutages(cfg *Config, m *metrics) *outages {
	o := &outages{}
	for _, x := range []struct {
		p     **outage
		cause string
	}{{&o.database, "database"}, {&o.schema, "schema"}, {&o.kafka, "kafka"}, {&o.deadLetter, "dead-letter"}} {
		*x.p = newOutage(x.cause, cfg.Logger, time.Now)
		(*x.p).waiting = m.waiting.WithLabelValues(x.cause)
		(*x.p).errors = m.outageErrors.WithLabelValues(x.cause)
	}
	return o
}

// of is the outage of a kind that waits.
func (o *outages) of(k kind) *outage {
	if k == kindSchema {
		return o.schema
	}
	return o.database
}

// healthy records that key reached a working database.
func (o *outages) healthy(key string) {
	o.database.ok(key)
	o.schema.ok(key)
}

// release forgets key, a partition this worker no longer holds: whoever
// holds it now reports its own failures.
func (o *outages) release(key string) {
	o.healthy(key)
	o.deadLetter.ok(key)
}

// err is why the Runner cannot apply events now, or nil.
func (o *outages) err() error {
	var errs []error
	if err := o.database.err(); err != nil {
		errs = append(errs, err)
	}
	if err := o.schema.err(); err != nil {
		errs = append(errs, errors.Join(err, errRunMigrate))
	}
	if err := o.deadLetter.err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// errRunMigrate is the remedy of a missing schema object.
var errRunMigrate = errors.New("is this the right database, and migrated? run eventforge migrate")

// kindOf classifies err, probing the database after a timeout inside a
// transaction.
func (r *Runner) kindOf(ctx context.Context, err error) kind {
	k := classify(err)
	if k == kindTimeout {
		k = r.probe(ctx)
	}
	return k
}

// probeTimeout bounds the probe of the database after a timeout.
const probeTimeout = 5 * time.Second

// probe tells, after a statement ran out of time inside a transaction, a
// slow event (kindTransient: it spends an attempt) from a database that
// stopped answering (kindUnavailable): it begins and rolls back a
// transaction, which needs a connection and a round trip.
func (r *Runner) probe(ctx context.Context) kind {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(r.cfg.ApplyTimeout, probeTimeout))
	defer cancel()
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return kindUnavailable
	}
	if err := tx.Rollback(ctx); err != nil {
		return kindUnavailable
	}
	return kindTransient
}
