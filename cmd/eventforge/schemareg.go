package main

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/cdc"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/schemareg"
	"github.com/eventforge/eventforge/worker"
)

// registryFlags reach a schema registry: `cdc run`, `outbox republish`
// (writers) and `worker run` (a reader) share them.
type registryFlags struct {
	cfg schemareg.Config
}

func (f *registryFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.cfg.URL, "schema-registry-url", "", "Confluent-compatible schema registry, e.g. https://registry:8081 (several separated by commas); see docs/schema-registry.md")
	fs.StringVar(&f.cfg.Username, "schema-registry-user", "", "schema registry basic authentication user (with --schema-registry-password-file)")
	fs.StringVar(&f.cfg.PasswordFile, "schema-registry-password-file", "", "file holding the schema registry basic authentication password (trailing newline ignored)")
	fs.StringVar(&f.cfg.TokenFile, "schema-registry-token-file", "", "file holding a bearer token for the schema registry (trailing newline ignored)")
	fs.StringVar(&f.cfg.CAFile, "schema-registry-ca-file", "", "PEM CA bundle that signs the schema registry's certificate (default: the system roots)")
	fs.StringVar(&f.cfg.CertFile, "schema-registry-cert-file", "", "PEM client certificate for the schema registry (with --schema-registry-key-file)")
	fs.StringVar(&f.cfg.KeyFile, "schema-registry-key-file", "", "PEM private key of --schema-registry-cert-file")
	fs.DurationVar(&f.cfg.Timeout, "schema-registry-timeout", schemareg.DefaultTimeout, "longest wait for one schema registry request; longer is an outage (the relay waits, nothing is rejected)")
}

// decoder is the worker's value decoder of --schema-registry-url, nil
// without it.
func (f *registryFlags) decoder(reg prometheus.Registerer) (worker.ValueDecoder, error) {
	if f.cfg.URL == "" {
		return nil, nil
	}
	return schemareg.NewDecoder(f.cfg, reg)
}

// writerFlags are a relay's: the value format and how subjects are named.
type writerFlags struct {
	registryFlags
}

func (f *writerFlags) register(cmd *cobra.Command) {
	f.registryFlags.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&f.cfg.Format, "value-schema", "", "write record values in a schema registry's wire format under the subject's schema: avro, protobuf or json-schema (default: none, the --value-converter's bytes)")
	fs.StringVar(&f.cfg.SubjectStrategy, "subject-name-strategy", schemareg.StrategyTopic, "subject of a record's value schema: topic (<topic>-value), record (<event type>) or topic-record (<topic>-<event type>)")
	fs.DurationVar(&f.cfg.LatestTTL, "schema-registry-latest-ttl", schemareg.DefaultLatestTTL, "how long a subject's latest schema is used before it is asked for again")
	fs.StringArrayVar(&f.cfg.Register, "register-schema", nil, "register a schema file at start-up, subject=path (repeatable), refused when the registry finds it incompatible; schemas are never inferred from payloads")
}

// errValueSchemaConverter: the two decide the same bytes.
var errValueSchemaConverter = errors.New("--value-schema and --value-converter exclude each other: the schema's format decides the value's bytes")

// apply sets the encoder of --value-schema on cfg's mapping, after
// registering the --register-schema files; nothing without --value-schema.
func (f *writerFlags) apply(ctx context.Context, cfg *cdc.Config, reg prometheus.Registerer) error {
	if f.cfg.Format == "" {
		if f.cfg.URL != "" || len(f.cfg.Register) > 0 {
			return errors.New("--schema-registry-url and --register-schema need --value-schema")
		}
		return nil
	}
	if cfg.Mapping.ValueConverter != "" {
		return errValueSchemaConverter
	}
	if cfg.Mapping.Format == outbox.FormatCloudEvents {
		return errors.New("--value-schema does not go with --record-format cloudevents (its content-type header would say JSON)")
	}
	c := f.cfg
	c.TopicPrefix = cfg.TopicPrefix
	enc, err := schemareg.NewEncoder(c, reg)
	if err != nil {
		return err
	}
	if err := enc.RegisterFiles(ctx); err != nil {
		return err
	}
	cfg.Mapping.ValueEncoder = enc
	return nil
}
