package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker/dlq"
)

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List and replay dead letters (<topic>.dlq)",
	}
	cmd.AddCommand(newDLQListCmd(), newDLQReplayCmd())
	return cmd
}

// dlqFlags are the flags both dlq commands share.
type dlqFlags struct {
	kafka kafkaFlags
	topic string
}

func (f *dlqFlags) register(cmd *cobra.Command) {
	f.kafka.register(cmd)
	cmd.Flags().StringVar(&f.topic, "topic", "", "dead-letter topic, e.g. orders.dlq (required)")
}

// read returns every dead letter of the topic, oldest first per partition,
// up to the high watermarks at the start.
func (f *dlqFlags) read(ctx context.Context) ([]dlq.Letter, error) {
	if f.topic == "" {
		return nil, errors.New("no topic: set --topic, e.g. --topic orders.dlq")
	}
	if !strings.HasSuffix(f.topic, outbox.DLQSuffix) {
		return nil, fmt.Errorf("topic %q is not a dead-letter topic (name ending in %s)", f.topic, outbox.DLQSuffix)
	}
	kc, err := f.kafka.config("eventforge-dlq")
	if err != nil {
		return nil, err
	}
	if err := kc.Validate(); err != nil {
		return nil, asFlags(err, kafkaFlagNames())
	}
	sc := kc.Base()
	sc.Metadata.AllowAutoTopicCreation = false
	client, err := sarama.NewClient(kc.Brokers, sc)
	if err != nil {
		return nil, kafka.Explain(fmt.Errorf("connect to Kafka: %w", err))
	}
	defer client.Close()
	return dlq.ReadAll(ctx, client, f.topic)
}

func newDLQListCmd() *cobra.Command {
	var f dlqFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the dead letters of a dead-letter topic and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			letters, err := f.read(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeLettersJSON(cmd.OutOrStdout(), letters)
			}
			return writeLettersTable(cmd.OutOrStdout(), letters)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per dead letter")
	annotateEnv(cmd)
	return cmd
}

// letterJSON is the --json form of a dead letter.
type letterJSON struct {
	DLQPartition      int32             `json:"dlq_partition"`
	DLQOffset         int64             `json:"dlq_offset"`
	Timestamp         time.Time         `json:"timestamp"`
	EventID           string            `json:"event_id"`
	Error             string            `json:"error"`
	Attempts          int               `json:"attempts"`
	OriginalTopic     string            `json:"original_topic"`
	OriginalPartition int32             `json:"original_partition"`
	OriginalOffset    int64             `json:"original_offset"`
	Consumer          string            `json:"consumer"`
	Key               string            `json:"key"`
	Value             string            `json:"value"`
	Headers           map[string]string `json:"headers"`
	// Refused is why dlq replay will not replay the letter (empty: it may).
	Refused string `json:"refused,omitempty"`
}

func writeLettersJSON(w io.Writer, letters []dlq.Letter) error {
	enc := json.NewEncoder(w)
	for _, l := range letters {
		hs := make(map[string]string, len(l.Headers))
		for _, h := range l.Headers {
			hs[string(h.Key)] = string(h.Value)
		}
		err := enc.Encode(letterJSON{
			DLQPartition: l.Partition, DLQOffset: l.Offset, Timestamp: l.Timestamp,
			EventID: l.EventID, Error: l.Error, Attempts: l.Attempts,
			OriginalTopic: l.OriginalTopic, OriginalPartition: l.OriginalPartition, OriginalOffset: l.OriginalOffset,
			Consumer: l.Consumer, Key: string(l.Key), Value: string(l.Value), Headers: hs, Refused: dlq.Refusal(l),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func writeLettersTable(w io.Writer, letters []dlq.Letter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT ID\tATTEMPTS\tORIGINAL\tCONSUMER\tREPLAY\tERROR")
	refused := 0
	for _, l := range letters {
		id := l.EventID
		if id == "" {
			id = "(none)"
		}
		replay := "ok"
		if dlq.Refusal(l) != "" {
			replay, refused = "refused", refused+1
		}
		fmt.Fprintf(tw, "%s\t%d\t%s/%d@%d\t%s\t%s\t%s\n", id, l.Attempts, l.OriginalTopic, l.OriginalPartition, l.OriginalOffset, l.Consumer, replay, oneLine(errors.New(l.Error)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%d dead letters\n", len(letters)); err != nil || refused == 0 {
		return err
	}
	_, err := fmt.Fprintf(w, "%d refused for replay: their %s header disagrees with the dead-letter topic (not written by a worker)\n", refused, outbox.HeaderDLQOriginalTopic)
	return err
}

func newDLQReplayCmd() *cobra.Command {
	var f dlqFlags
	var eventID, prefix string
	var all bool
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Republish dead letters to their original topic (same key, value and event id) and exit",
		Long: `Republish dead letters to their original topic with their original key, value, timestamp and headers
(the event id unchanged, the x-eventforge-* headers removed), partitioned by key as the relay does.
Workers apply them again; where an event was already applied, the inbox drops it.
An event dead-lettered several times is replayed once. Dead letters stay in the dead-letter topic.
The original topic is the dead-letter topic's name less .dlq (orders.dlq → orders); a dead letter whose
x-eventforge-original-topic header names another topic is refused (not written by a worker), and with
--topic-prefix no destination outside the prefix is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sel dlq.Selection
			switch {
			case all == (eventID != ""):
				return errors.New("choose what to replay: --event-id ID or --all")
			case all:
				sel.All = true
			default:
				id, err := uuid.Parse(eventID)
				if err != nil {
					return fmt.Errorf("invalid --event-id %q: not a UUID", eventID)
				}
				sel.EventID = id
			}
			return replayDLQ(cmd.Context(), cmd.OutOrStdout(), &f, sel, prefix)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&eventID, "event-id", "", "replay the dead letters of this event id")
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead letter of the topic")
	cmd.Flags().StringVar(&prefix, "topic-prefix", "", "the relay's --topic-prefix: refuse to replay to a topic outside it")
	annotateEnv(cmd)
	return cmd
}

func replayDLQ(ctx context.Context, w io.Writer, f *dlqFlags, sel dlq.Selection, prefix string) error {
	if err := dlq.CheckDestination(strings.TrimSuffix(f.topic, outbox.DLQSuffix), prefix); err != nil {
		return fmt.Errorf("dlq replay --topic %s: %w", f.topic, err)
	}
	letters, err := f.read(ctx)
	if err != nil {
		return err
	}
	plan := dlq.Select(letters, sel)
	if !sel.All && len(plan.Replay) == 0 && len(plan.Skipped) == 0 {
		return fmt.Errorf("no dead letter of event %s in %s", sel.EventID, f.topic)
	}
	for _, s := range plan.Skipped {
		verb := "skipped"
		if s.Refused {
			verb = "refused"
		}
		fmt.Fprintf(w, "%s %s offset %d/%d: %s\n", verb, orNone(s.Letter.EventID), s.Letter.Partition, s.Letter.Offset, s.Reason)
	}
	stopTracing, err := startTracing(ctx, "eventforge-dlq", slog.Default())
	if err != nil {
		return err
	}
	defer stopTracing()
	kc, err := f.kafka.config("eventforge-dlq")
	if err != nil {
		return err
	}
	sc := kc.IdempotentProducer(kafka.ProducerOptions{})
	sc.Metadata.AllowAutoTopicCreation = false
	// The original topic's broker limit decides; the producer's own check
	// must not refuse a dead letter that topic accepted before.
	sc.Producer.MaxMessageBytes = max(sc.Producer.MaxMessageBytes, plan.MaxRecordBytes()+64<<10)
	producer, err := sarama.NewSyncProducer(kc.Brokers, sc)
	if err != nil {
		return kafka.Explain(fmt.Errorf("connect producer: %w", err))
	}
	done, err := dlq.Replay(producer, plan)
	if cerr := producer.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close producer: %w", cerr)
	}
	for _, r := range done {
		fmt.Fprintf(w, "replayed event %s to %s partition %d offset %d\n", r.Letter.EventID, r.Letter.Destination(), r.Partition, r.Offset)
	}
	refused := plan.Refused()
	fmt.Fprintf(w, "%d replayed, %d skipped, %d refused, %d dead letters read from %s\n", len(done), len(plan.Skipped)-refused, refused, len(letters), f.topic)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(no event id)"
	}
	return s
}
