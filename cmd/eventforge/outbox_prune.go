package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/prune"
)

// newOutboxPruneCmd is `outbox prune`; it belongs under newOutboxCmd.
func newOutboxPruneCmd() *cobra.Command {
	var (
		pg  pgFlags
		lf  logFlags
		mf  mappingFlags
		cfg prune.Config
	)
	cmd := &cobra.Command{
		Use:   "prune --older-than DURATION [--batch-size N] [--dry-run]",
		Short: "Delete published outbox rows older than a duration, in small batches",
		Long: `Delete outbox rows created more than --older-than ago, at most --batch-size rows per DELETE, each
DELETE its own short transaction that skips rows other transactions hold locked: inserts never wait.
Deleting emits no events (the publication publishes inserts only).

Before deleting anything it proves that every such row was published, and refuses otherwise:
  - no client transaction of the database opened before the cutoff is still open, and no prepared
    transaction exists (either could still commit an old row nobody has relayed yet);
  - relay_state names at least one slot, and every slot it names exists, is not lost, and confirms
    the WAL position taken at the start within --relay-wait (the relay's heartbeat moves it within
    seconds while the relay runs). A missing or lost slot refuses: its recovery republishes these rows.
Rows recorded in outbox_rejected are kept for inspection. created_at is taken to be its default
(the inserting transaction's start); rows inserted with an explicit older created_at are pruned by it.

Alternative without any pruning: delete the row in the same transaction that inserts it. The INSERT
still reaches the WAL and the relay publishes it; the table stays empty. Republishing after a lost
slot is then impossible.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			m, _, err := mf.mapping(cmd)
			if err != nil {
				return err
			}
			cfg.Mapping, cfg.OutboxTable = m, m.Table
			if err := cfg.Validate(); err != nil {
				return err
			}
			conn, err := connectPG(cmd.Context(), &pg)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(cmd.Context()))
			res, err := prune.Run(cmd.Context(), conn, cfg, log)
			if res.Deleted > 0 || err == nil {
				writePruned(cmd.OutOrStdout(), cfg.DryRun, res)
			}
			return err
		},
	}
	pg.register(cmd)
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	fs.DurationVar(&cfg.OlderThan, "older-than", 0, "prune rows created longer ago than this, e.g. 168h (required)")
	fs.IntVar(&cfg.BatchSize, "batch-size", prune.DefaultBatchSize, "most rows one DELETE transaction removes")
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "check and count, delete nothing")
	fs.DurationVar(&cfg.RelayWait, "relay-wait", prune.DefaultRelayWait, "how long to wait for every relay slot to confirm the current WAL position")
	mf.register(cmd, false)
	annotateEnv(cmd)
	return cmd
}

func writePruned(w io.Writer, dry bool, res prune.Result) {
	verb := "pruned"
	if dry {
		verb = "dry run: would prune"
	}
	fmt.Fprintf(w, "%s %d outbox rows created before %s", verb, res.Deleted, res.Cutoff.UTC().Format(time.RFC3339))
	if !dry {
		fmt.Fprintf(w, " in %d batches", res.Batches)
	}
	fmt.Fprintf(w, " (relay slots checked: %s)\n", strings.Join(res.Slots, ", "))
	if res.Kept > 0 {
		fmt.Fprintf(w, "kept %d older rows: recorded in outbox_rejected or locked by another transaction\n", res.Kept)
	}
}
