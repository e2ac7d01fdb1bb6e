package chaos

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestChaos30s is the short chaos run of make test: the real
// runner on its own private PostgreSQL and Kafka, 30 seconds of labelled
// load under SIGKILLs of relays and workers and PostgreSQL immediate
// restarts, then the full check. Any violation
// fails the test; the seed is logged so a failure can be replayed with
// `make chaos` (go run ./cmd/eventforge-chaos --seed N --duration 30s).
func TestChaos30s(t *testing.T) {
	testenv.Shared(t) // skips under -short (never with CI=true)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Inside the repository, so the cluster's OS user can reach it.
	dir := filepath.Join(root, ".eventforge", "private", testenv.UniqueName("chaos"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		datas, _ := filepath.Glob(filepath.Join(dir, "pg*", "data"))
		for _, d := range datas {
			if target, err := filepath.EvalSymlinks(d); err == nil {
				_ = os.RemoveAll(target)
			}
		}
		_ = os.RemoveAll(dir)
	})

	cfg := DefaultConfig()
	cfg.Bin = testenv.Binary(t)
	cfg.Root = root
	cfg.StateDir = dir
	cfg.Duration = 30 * time.Second
	cfg.Quiesce = 90 * time.Second
	cfg.Writers = 1
	// Broker restarts are left to make chaos and to
	// cdc/order_test.go: on two busy cores one restart outlasts the run.
	cfg.NoBrokerRestarts = true
	// One broker and one PostgreSQL server: promotions and frozen brokers
	// are make chaos's (and cdc's and worker's broker-loss and promotion
	// tests').
	cfg.KafkaNodes, cfg.Promotions, cfg.PGVersion = 1, false, testenv.Version()
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("test", t.Name())

	began := time.Now()
	rep, err := Run(t.Context(), cfg)
	if rep != nil {
		t.Logf("seed=%d in %s: %s", rep.Seed, time.Since(began).Round(time.Second), rep.Line())
		for _, e := range rep.Result.Examples {
			t.Log("  " + e)
		}
	}
	switch {
	case errors.Is(err, ErrViolations):
		t.Fatalf("guarantees violated; report in %s", filepath.Join(dir, "report.json"))
	case err != nil:
		t.Fatalf("chaos run: %v", err)
	}
	// A run that wrote nothing or injected nothing proves nothing.
	if rep.Events == 0 {
		t.Fatal("no committed events")
	}
	if rep.Kills+rep.BrokerRestarts+rep.PGRestarts == 0 {
		t.Fatal("no fault was injected")
	}
}
