package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

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

// A Go handler that calls an HTTP service states what its failures mean, so
// the worker neither dead-letters the topic while the service is down nor
// waits for ever on an event the service refuses. (Without a marker the
// worker still tells them apart by evidence: it dead-letters an event only
// when the events behind it do not fail the same way.) The service must
// accept a call twice: a rolled-back attempt, a retry or a redelivery calls
// it again, so send the event id as an idempotency key.
func Example_httpService() {
	client := &http.Client{Timeout: 5 * time.Second}
	notify := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://billing.internal/invoices", bytes.NewReader(ev.Payload))
		if err != nil {
			return worker.Permanent(err)
		}
		req.Header.Set("Idempotency-Key", ev.ID.String())
		resp, err := client.Do(req)
		if err != nil {
			// Refused, reset, timed out: the service, not the event.
			return worker.DependencyUnavailable(fmt.Errorf("billing: %w", err))
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusBadGateway:
			return worker.DependencyUnavailable(fmt.Errorf("billing: %s", resp.Status)) // wait, spend no attempt
		case resp.StatusCode == http.StatusConflict, resp.StatusCode == http.StatusTooManyRequests:
			return worker.Transient(fmt.Errorf("billing: %s", resp.Status)) // retry within --max-attempts
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			return worker.Permanent(fmt.Errorf("billing refused invoice of %s: %s", ev.AggregateID, resp.Status)) // dead-letter now
		case resp.StatusCode >= 500:
			return fmt.Errorf("billing: %s", resp.Status) // retried; dead-lettered only if it fails alone
		}
		_, err = tx.Exec(ctx, `UPDATE orders SET status = 'invoiced' WHERE id = $1`, ev.AggregateID)
		return err
	})
	_ = notify // worker.New(cfg, pool, notify), as in the example above
}
