// Package slotstest holds test helpers that act on real replication slots the
// way a relay does: holding a slot active on a replication connection and
// confirming it as a running relay with heartbeats would.
//
// Imports (test support, for _test files and tools only): no other
// EventForge package.
package slotstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Create creates a logical pgoutput slot and, when record is true, the
// relay_state row a relay writes when it creates its slot.
func Create(t testing.TB, url, slot string, record bool) {
	t.Helper()
	conn := connect(t, url)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatalf("create slot %s: %v", slot, err)
	}
	if !record {
		return
	}
	_, err := conn.Exec(t.Context(), `INSERT INTO relay_state (slot_name, confirmed_lsn)
		SELECT slot_name::text, confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name::text = $1::text`, slot)
	if err != nil {
		t.Fatalf("write relay_state row %s: %v", slot, err)
	}
}

// Hold streams from the slot on a replication connection until release (or
// the end of the test) closes it; both return once the server reports the
// slot active, respectively inactive. pid is the walsender's.
func Hold(t testing.TB, url, slot string) (pid int32, release func()) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("replication connection: %v", err)
	}
	err = pglogrepl.StartReplication(t.Context(), repl, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'eventforge_outbox'"},
	})
	if err != nil {
		repl.Close(context.Background())
		t.Fatalf("start replication on %s: %v", slot, err)
	}
	probe := connect(t, url)
	waitActive(t, probe, slot, true)
	var once sync.Once
	release = func() {
		once.Do(func() {
			repl.Close(context.Background())
			waitActive(t, probe, slot, false)
			probe.Close(context.Background())
		})
	}
	t.Cleanup(release)
	return int32(repl.PID()), release
}

// KeepConfirming stands in for a running relay with heartbeats: it commits a
// logical message and confirms the slot up to the flushed WAL every 50ms
// until stop (or the end of the test).
func KeepConfirming(t testing.TB, url, slot string) (stop func()) {
	t.Helper()
	conn := connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, 'eventforge.test', 'tick')")
			if err == nil {
				_, err = conn.Exec(ctx, `SELECT pg_replication_slot_advance($1, greatest(pg_current_wal_flush_lsn(),
					(SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1)))`, slot)
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("confirm slot %s: %v", slot, err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return conn
}

func waitActive(t testing.TB, conn *pgx.Conn, slot string, want bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var active bool
		err := conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err != nil {
			t.Fatalf("read slot %s: %v", slot, err)
		}
		if active == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s active=%v after 30s, want %v", slot, active, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
