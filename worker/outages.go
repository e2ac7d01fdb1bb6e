package worker

import (
	"errors"
	"time"
)

// outages are the Runner's causes of waiting, each logged quietly.
type outages struct {
	database   *outage // unreachable, read-only, or refusing the inbox insert
	schema     *outage // a table, column, function, type … missing
	dependency *outage // a handler says a service it needs is down
	repeated   *outage // consecutive events fail the same way
	kafka      *outage // consumer group errors
	deadLetter *outage // dead letters not acked
	registry   *outage // the schema registry does not answer (ValueDecoder)
}

// Causes of the outages: the cause label of the outage metrics.
const (
	causeDatabase   = "database"
	causeSchema     = "schema"
	causeDependency = "dependency"
	causeRepeated   = "repeated-failure"
	causeKafka      = "kafka"
	causeDeadLetter = "dead-letter"
	causeRegistry   = "schema-registry"
)

func newOutages(cfg *Config, m *metrics) *outages {
	o := &outages{}
	for _, x := range []struct {
		p     **outage
		cause string
	}{
		{&o.database, causeDatabase}, {&o.schema, causeSchema}, {&o.dependency, causeDependency},
		{&o.repeated, causeRepeated}, {&o.kafka, causeKafka}, {&o.deadLetter, causeDeadLetter},
		{&o.registry, causeRegistry},
	} {
		*x.p = newOutage(x.cause, cfg.Logger, time.Now)
		(*x.p).waiting = m.waiting.WithLabelValues(x.cause)
		(*x.p).errors = m.outageErrors.WithLabelValues(x.cause)
	}
	return o
}

// of is the outage of a kind that waits.
func (o *outages) of(k kind) *outage {
	switch k {
	case kindSchema:
		return o.schema
	case kindDependency:
		return o.dependency
	case kindRepeated:
		return o.repeated
	}
	return o.database
}

// healthy records that key applied an event: none of the causes of waiting
// holds for it any more.
func (o *outages) healthy(key string) {
	o.database.ok(key)
	o.schema.ok(key)
	o.dependency.ok(key)
	o.repeated.ok(key)
}

// release forgets key, a partition this worker no longer holds: whoever
// holds it now reports its own failures.
func (o *outages) release(key string) {
	o.healthy(key)
	o.deadLetter.ok(key)
	o.registry.ok(key)
}

// err is why the Runner cannot apply events now, or nil.
func (o *outages) err() error {
	var errs []error
	for _, x := range []*outage{o.database, o.schema, o.dependency, o.repeated, o.deadLetter, o.registry} {
		err := x.err()
		if err != nil && x == o.schema {
			err = errors.Join(err, errRunMigrate)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errRunMigrate is the remedy of a missing schema object.
var errRunMigrate = errors.New("is this the right database, and migrated? run eventforge migrate")
