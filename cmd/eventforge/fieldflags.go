package main

import (
	"maps"

	"github.com/eventforge/eventforge/internal/shared/fielderr"
)

// The libraries' configuration errors name Go fields ("Config.Group:
// required"); a command maps each field to the flag that sets it, so a
// user reads "--group: required". A field mapped to "" is a nested
// configuration whose errors name flags already (the Kafka client's). A
// field a command has no flag for keeps its Go name.

// kafkaFlagNames maps the Kafka client configuration's fields (the Kafka
// field of cdc.Config and worker.Config) to the flags every Kafka command
// shares.
func kafkaFlagNames() map[string]string {
	const tls, sasl = "Config.Kafka.Security.TLS", "Config.Kafka.Security.SASL"
	return map[string]string{
		"Config.Kafka.Brokers":           "--kafka-brokers",
		tls:                              "--kafka-tls",
		tls + ".CAFile":                  "--kafka-tls-ca-file",
		tls + ".CertFile":                "--kafka-tls-cert-file",
		tls + ".KeyFile":                 "--kafka-tls-key-file",
		tls + ".ServerName":              "--kafka-tls-server-name",
		sasl:                             "--kafka-sasl-mechanism",
		sasl + ".Mechanism":              "--kafka-sasl-mechanism",
		sasl + ".User":                   "--kafka-sasl-user",
		sasl + ".Password":               "--kafka-sasl-password",
		sasl + ".OAuthTokenFile":         "--kafka-oauth-token-file",
		sasl + ".OAuthTokenCommand":      "--kafka-oauth-token-command",
		sasl + ".AWSRegion":              "--kafka-aws-region",
		"Config.Kafka.Timeouts.Dial":     "--kafka-dial-timeout",
		"Config.Kafka.Timeouts.Request":  "--kafka-request-timeout",
		"Config.Kafka.Timeouts.Produce":  "--kafka-produce-timeout",
		"Config.Kafka.Timeouts.Metadata": "--kafka-metadata-timeout",
	}
}

// withKafka is names and the Kafka client's names.
func withKafka(names map[string]string) map[string]string {
	maps.Copy(names, kafkaFlagNames())
	return names
}

// relayFlagNames maps cdc.Config's fields to the flags of cdc run and
// outbox republish.
func relayFlagNames() map[string]string {
	return withKafka(map[string]string{
		"Config.PGURL":                  "--pg-url",
		"Config.Mapping":                "",
		"Config.Slot":                   "--slot",
		"Config.Publication":            "--publication",
		"Config.OutboxTable":            "--outbox-table",
		"Config.TopicPrefix":            "--topic-prefix",
		"Config.AllowedTopics":          "--allowed-topics",
		"Config.TopicPartitions":        "--topic-partitions",
		"Config.TopicReplicationFactor": "--topic-replication-factor",
		"Config.TopicMinInsyncReplicas": "--topic-min-insync-replicas",
		"Config.BackfillSince":          "--backfill-since",
		"Config.BackfillAll":            "--backfill-all",
		"Config.MaxInFlightEvents":      "--max-in-flight-events",
		"Config.MaxInFlightBytes":       "--max-in-flight-bytes",
		"Config.HeartbeatInterval":      "--heartbeat-interval",
		"Config.StatusInterval":         "--status-interval",
		"Config.ReceiveTimeout":         "--receive-timeout",
		"Config.ShutdownTimeout":        "--shutdown-timeout",
		"Config.Compression":            "--compression",
		"Config.MaxMessageBytes":        "--max-message-bytes",
		"Config.ExactlyOnce":            "--exactly-once",
		"Config.PositionTopic":          "--position-topic",
		"Config.TxnInterval":            "--txn-interval",
		"Config.SlotFailover":           "--slot-failover",
		"Config.StandbyURL":             "--standby-url",
	})
}

// workerFlagNames maps worker.Config's fields to the flags of worker run.
func workerFlagNames() map[string]string {
	return withKafka(map[string]string{
		"Config.Group":          "--group",
		"Config.Consumer":       "--consumer",
		"Config.Topics":         "--topics",
		"Config.MaxAttempts":    "--max-attempts",
		"Config.RetryBackoff":   "--retry-backoff",
		"Config.MaxBackoff":     "--max-backoff",
		"Config.MaxRetryTime":   "--max-retry-time",
		"Config.BatchSize":      "--batch-size",
		"Config.BatchBytes":     "--batch-bytes",
		"Config.ApplyTimeout":   "--apply-timeout",
		"Config.SessionTimeout": "--session-timeout",
		"Config.CommitInterval": "--commit-interval",
		"Config.OutageEvents":   "--outage-events",
		"Config.ProbeTimeout":   "--probe-timeout",
	})
}

// apiFlagNames maps api.Config's fields to the flags of api run.
func apiFlagNames() map[string]string {
	return map[string]string{
		"Config.PGURL":             "--pg-url",
		"Config.MaxConns":          "--pg-max-conns",
		"Config.HTTPAddr":          "--http-addr",
		"Config.MetricsAddr":       "--metrics-addr",
		"Config.RequestTimeout":    "--request-timeout",
		"Config.ReadHeaderTimeout": "--read-header-timeout",
		"Config.ReadTimeout":       "--read-timeout",
		"Config.WriteTimeout":      "--write-timeout",
		"Config.IdleTimeout":       "--idle-timeout",
		"Config.ShutdownTimeout":   "--shutdown-timeout",
		"Config.MaxBodyBytes":      "--max-body-bytes",
		"Config.MaxHeaderBytes":    "--max-header-bytes",
		"Config.Token":             "--api-token",
		"Config.IdempotencyTTL":    "--idempotency-ttl",
	}
}

// asFlags is err with the fields of names turned into flags.
func asFlags(err error, names map[string]string) error { return fielderr.Rename(err, names) }
