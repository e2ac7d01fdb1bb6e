package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/kafkaconf"
)

// A handler that ships orders. It runs inside the inbox transaction: the
// shipment row commits together with the event's processed_events row, so a
// redelivered event ships nothing twice.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("EVENTFORGE_PG_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	ship := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		if ev.EventType != "order.created" {
			return worker.ErrSkip // recorded in the inbox, counted as skipped
		}
		var order struct {
			Amount int64 `json:"amount"`
		}
		if err := json.Unmarshal(ev.Payload, &order); err != nil {
			return worker.Permanent(err) // a retry cannot fix it: dead-letter now
		}
		if order.Amount <= 0 {
			return worker.Permanent(errors.New("order without amount"))
		}
		// Any other error rolls back and is retried, then dead-lettered.
		_, err := tx.Exec(ctx, `INSERT INTO shipments (order_id, amount) VALUES ($1, $2)`, ev.AggregateID, order.Amount)
		return err
	})

	runner, err := worker.New(worker.Config{
		Kafka:  kafkaconf.Config{Brokers: kafkaconf.ParseBrokers(os.Getenv("EVENTFORGE_KAFKA_BROKERS"))},
		Group:  "shipping",
		Topics: []string{"orders"},
		Logger: slog.Default(),
	}, pool, ship)
	if err != nil {
		panic(err)
	}
	// Run until ctx ends (SIGTERM in a real service); it returns nil then.
	if err := runner.Run(ctx); err != nil {
		panic(err)
	}
}
