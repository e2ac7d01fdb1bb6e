// Package schemareg writes outbox payloads in a Confluent-compatible schema
// registry's wire format (magic byte 0, the 4-byte schema id, the body in
// Avro, Protobuf or JSON Schema) under schemas taken from the registry, and
// reads such values back as JSON. A payload that does not fit its schema is
// the event's fault (a *MismatchError: the relay sets it aside); a registry
// that does not answer is an outage (an error wrapping
// outbox.ErrUnavailable: the relay waits). Schemas are never inferred
// from payloads; they are only registered when given as files.
//
// Imports (floor: shared library): internal/shared/outbox only.
package schemareg

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Value formats.
const (
	FormatAvro       = "avro"
	FormatProtobuf   = "protobuf"
	FormatJSONSchema = "json-schema"
)

// Subject name strategies, as Confluent's serializers name them.
const (
	StrategyTopic       = "topic"        // <topic>-value
	StrategyRecord      = "record"       // <record name>
	StrategyTopicRecord = "topic-record" // <topic>-<record name>
)

// Header names an outbox row's headers column may hold to pin the schema
// of its payload, instead of the subject's latest version.
const (
	HeaderSchemaID      = outbox.HeaderSchemaID
	HeaderSchemaVersion = outbox.HeaderSchemaVersion
)

// Defaults.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultLatestTTL = 5 * time.Minute
)

// Config is how to reach the registry and which schemas to use.
type Config struct {
	// URL of the registry; several separated by commas.
	URL string
	// Format of the values written: avro, protobuf or json-schema. Empty
	// for a reader (it takes the format the registry gives each id).
	Format string
	// SubjectStrategy names the subject of a record: topic (default),
	// record or topic-record; the record name is the event type.
	SubjectStrategy string
	// TopicPrefix is the relay's topic prefix (the topic strategy's subject
	// is the prefixed topic).
	TopicPrefix string

	// Username and PasswordFile: HTTP basic authentication.
	Username     string
	PasswordFile string
	// TokenFile holds a bearer token (trailing newline ignored).
	TokenFile string
	// CAFile, CertFile and KeyFile: TLS roots and a client certificate.
	CAFile, CertFile, KeyFile string

	// Timeout bounds each request; longer is an outage.
	Timeout time.Duration
	// LatestTTL is how long a subject's latest version is used before it
	// is asked for again (an unanswered refresh keeps the one known).
	LatestTTL time.Duration
	// Register are schema files registered at start-up, "subject=path";
	// the format's file type. A schema the registry finds incompatible is
	// refused with its answer.
	Register []string
}

// WithDefaults fills the unset durations and the strategy.
func (c Config) WithDefaults() Config {
	if c.SubjectStrategy == "" {
		c.SubjectStrategy = StrategyTopic
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.LatestTTL == 0 {
		c.LatestTTL = DefaultLatestTTL
	}
	return c
}

// Validate reports every problem of c for a writer (writer true: Format
// set) or a reader.
func (c Config) Validate(writer bool) error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("--schema-registry-url is required"))
	}
	errs = append(errs, c.choiceProblems(writer)...)
	errs = append(errs, c.connectionProblems()...)
	for _, r := range c.Register {
		if s, p, ok := strings.Cut(r, "="); !ok || s == "" || p == "" {
			errs = append(errs, fmt.Errorf("invalid --register-schema %q: want subject=path", r))
		}
	}
	return errors.Join(errs...)
}

// choiceProblems checks the value format (of a writer) and the subject
// name strategy against the known ones.
func (c Config) choiceProblems(writer bool) []error {
	var errs []error
	if writer {
		switch c.Format {
		case FormatAvro, FormatProtobuf, FormatJSONSchema:
		default:
			errs = append(errs, fmt.Errorf("invalid --value-schema %q: want avro, protobuf or json-schema", c.Format))
		}
	}
	switch c.SubjectStrategy {
	case StrategyTopic, StrategyRecord, StrategyTopicRecord:
	default:
		errs = append(errs, fmt.Errorf("invalid --subject-name-strategy %q: want topic, record or topic-record", c.SubjectStrategy))
	}
	return errs
}

// connectionProblems checks that the credentials, the TLS files and the
// durations fit together.
func (c Config) connectionProblems() []error {
	var errs []error
	if c.PasswordFile != "" && c.Username == "" {
		errs = append(errs, errors.New("--schema-registry-password-file needs --schema-registry-user"))
	}
	if c.TokenFile != "" && c.Username != "" {
		errs = append(errs, errors.New("--schema-registry-token-file and --schema-registry-user exclude each other"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("--schema-registry-cert-file and --schema-registry-key-file go together"))
	}
	if c.Timeout < 0 || c.LatestTTL < 0 {
		errs = append(errs, errors.New("--schema-registry-timeout and --schema-registry-latest-ttl must not be negative"))
	}
	return errs
}

// readSecret reads a secret file, without its trailing newline.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
