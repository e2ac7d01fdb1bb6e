// Package kafkaconf is the public face of the Kafka client configuration
// that the worker and the relay (cdc) take: brokers, client id, TLS and SASL.
// The types are aliases of the implementation in the module's internal kafka
// package, so a value built here is the value those packages use; a program
// outside this module names them through this package; the relay takes
// internal/shared/kafka's types directly (the same types), so it does not depend on
// the worker.
//
// Imports (floor: product, the worker's wing): internal/shared/kafka only.
package kafkaconf

import "github.com/eventforge/eventforge/internal/shared/kafka"

// Config is what every EventForge Kafka client needs: Brokers (host:port,
// at least one; no default), ClientID (default "eventforge") and Security
// (default: plaintext without authentication).
type Config = kafka.Config

// Security is the transport security of a Config; the zero value is
// plaintext without authentication.
type Security = kafka.Security

// TLSConfig is a TLS connection to the brokers from PEM files; verification
// is never skipped.
type TLSConfig = kafka.TLSConfig

// SASLConfig authenticates to the brokers.
type SASLConfig = kafka.SASLConfig

// SASL mechanisms a SASLConfig may name.
const (
	MechanismPlain       = kafka.MechanismPlain
	MechanismSCRAMSHA256 = kafka.MechanismSCRAMSHA256
	MechanismSCRAMSHA512 = kafka.MechanismSCRAMSHA512
	MechanismOAuthBearer = kafka.MechanismOAuthBearer
	MechanismAWSMSKIAM   = kafka.MechanismAWSMSKIAM
)

// ParseBrokers splits a comma-separated host:port list, dropping blanks.
func ParseBrokers(list string) []string { return kafka.ParseBrokers(list) }

// ReadPasswordFile reads a SASL password from a file, without its trailing
// newline.
func ReadPasswordFile(path string) (string, error) { return kafka.ReadPasswordFile(path) }
