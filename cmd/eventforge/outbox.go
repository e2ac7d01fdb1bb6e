package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/cdc"
)

func newOutboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Administer the outbox table",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newOutboxRepublishCmd(), newOutboxPruneCmd())
	return cmd
}

func newOutboxRepublishCmd() *cobra.Command {
	var (
		rf           relayFlags
		lf           logFlags
		since, until string
	)
	cmd := &cobra.Command{
		Use:   "republish --since TIME [--until TIME]",
		Short: "Produce outbox rows created in a time range again, with their original event IDs",
		Long: `Produce the outbox rows created at or after --since (and before --until) to Kafka again, in
created_at order, with their original event IDs and the relay's message format. Consumers dedupe by
event ID. The records land after everything already in the topics, so a key's republished events
come after its newer ones: for a lost or missing replication slot use eventforge cdc run
--backfill-since instead (see slot drop --help), which publishes the gap before the new slot's stream.
TIME is RFC 3339 (2025-01-02T15:04:05Z), "2006-01-02 15:04:05" (UTC) or a date.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			from, err := parseTime("--since", since)
			if err != nil {
				return err
			}
			var to time.Time
			if until != "" {
				if to, err = parseTime("--until", until); err != nil {
					return err
				}
				if !to.After(from) {
					return fmt.Errorf("--until %s is not after --since %s", until, since)
				}
			}
			cfg, err := rf.config(cmd)
			if err != nil {
				return err
			}
			if err := rf.schema.apply(cmd.Context(), &cfg, nil); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return asFlags(err, relayFlagNames())
			}
			res, err := cdc.Republish(cmd.Context(), cfg, from, to, log)
			fmt.Fprintf(cmd.OutOrStdout(), "republished %d events, rejected %d\n", res.Published, res.Rejected)
			return err
		},
	}
	rf.register(cmd)
	lf.register(cmd.Flags())
	cmd.Flags().StringVar(&since, "since", "", "republish rows created at or after this time (required)")
	cmd.Flags().StringVar(&until, "until", "", "republish rows created before this time (default: no bound)")
	annotateEnv(cmd)
	return cmd
}

func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("%s is required", flag)
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid %s %q: want RFC 3339, \"2006-01-02 15:04:05\" or a date", flag, v)
}
