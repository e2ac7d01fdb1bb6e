package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/eventforge/eventforge/cdc"
)

// eosFlags choose the exactly-once publication mode of `cdc run`.
type eosFlags struct {
	on            bool
	positionTopic string
	txnInterval   time.Duration
}

func (f *eosFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.on, "exactly-once", false, "produce inside Kafka transactions with the relay's position, so read_committed consumers see no duplicates across relay crashes (default: at-least-once)")
	fs.StringVar(&f.positionTopic, "position-topic", "", "compacted topic of the exactly-once position (default: topic prefix + eventforge.positions)")
	fs.DurationVar(&f.txnInterval, "txn-interval", cdc.DefaultTxnInterval, "with --exactly-once: the longest a Kafka transaction batches PostgreSQL transactions while more are queued (it commits at once when none is)")
}

func (f *eosFlags) apply(cfg *cdc.Config) {
	cfg.ExactlyOnce, cfg.PositionTopic, cfg.TxnInterval = f.on, f.positionTopic, f.txnInterval
}
