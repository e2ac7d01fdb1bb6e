package main

import (
	"errors"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/pgconn"
)

// pgFlags is the PostgreSQL connection flag shared by every command.
type pgFlags struct{ url string }

func (p *pgFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.url, "pg-url", "", "PostgreSQL connection URL, e.g. postgres://user@host:5432/db?sslmode=verify-full&sslrootcert=/ca.pem; the password may come from passfile=, PGPASSFILE or PGPASSWORD")
}

func (p *pgFlags) validate() error {
	if p.url == "" {
		return errors.New("no PostgreSQL URL: set --pg-url or EVENTFORGE_PG_URL")
	}
	_, err := pgconn.ParseConfig(p.url)
	return err
}

// redacted is the URL without its password, for logs and errors.
func (p *pgFlags) redacted() string { return pgconn.Redact(p.url) }

// kafkaFlags are the Kafka connection flags shared by every command that
// talks to the brokers: the bootstrap list, TLS and SASL.
type kafkaFlags struct {
	brokers string

	tls                                bool
	caFile, certFile, keyFile, tlsName string

	mechanism, user, password, passwordFile string

	oauthTokenFile, oauthTokenCommand, awsRegion string

	files    secretFileFlags
	cmd      *cobra.Command // where the secret-file warnings go (its stderr)
	timeouts kafka.Timeouts
}

func (k *kafkaFlags) register(cmd *cobra.Command) {
	k.cmd = cmd
	fs := cmd.Flags()
	k.files.register(fs)
	fs.StringVar(&k.brokers, "kafka-brokers", "", "Kafka bootstrap brokers, comma-separated host:port")
	fs.BoolVar(&k.tls, "kafka-tls", false, "connect to the brokers with TLS (1.2 or later; implied by any other --kafka-tls-* flag)")
	fs.StringVar(&k.caFile, "kafka-tls-ca-file", "", "PEM CA bundle that signs the broker certificates (default: the system roots)")
	fs.StringVar(&k.certFile, "kafka-tls-cert-file", "", "PEM client certificate for mutual TLS (with --kafka-tls-key-file)")
	fs.StringVar(&k.keyFile, "kafka-tls-key-file", "", "PEM private key of --kafka-tls-cert-file")
	fs.StringVar(&k.tlsName, "kafka-tls-server-name", "", "name verified in the broker certificates (default: the broker host)")
	fs.StringVar(&k.mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM (empty: no SASL); use PLAIN and OAUTHBEARER only with TLS")
	fs.StringVar(&k.user, "kafka-sasl-user", "", "SASL user name")
	fs.StringVar(&k.password, "kafka-sasl-password", "", "SASL password (prefer --kafka-sasl-password-file: arguments are visible to other local users)")
	fs.StringVar(&k.passwordFile, "kafka-sasl-password-file", "", "file holding the SASL password (trailing newline ignored)")
	fs.StringVar(&k.oauthTokenFile, "kafka-oauth-token-file", "", "OAUTHBEARER: file holding the token, read again for every new connection and re-authentication")
	fs.StringVar(&k.oauthTokenCommand, "kafka-oauth-token-command", "", "OAUTHBEARER: command (run by /bin/sh -c) whose stdout is the token; a JWT is reused until shortly before its exp")
	fs.StringVar(&k.awsRegion, "kafka-aws-region", "", "AWS_MSK_IAM: the cluster's AWS region (default: $AWS_REGION); credentials come from the AWS SDK's default chain")
	fs.DurationVar(&k.timeouts.Dial, "kafka-dial-timeout", kafka.DefaultDialTimeout, "bound on opening a connection to a broker")
	fs.DurationVar(&k.timeouts.Request, "kafka-request-timeout", kafka.DefaultRequestTimeout, "bound on a request's write and its response's read: how long a frozen broker can hold a request (Kafka fences it after about 9 s)")
	fs.DurationVar(&k.timeouts.Produce, "kafka-produce-timeout", kafka.DefaultProduceTimeout, "how long a partition leader waits for its in-sync replicas before answering a produce request; below --kafka-request-timeout")
	fs.DurationVar(&k.timeouts.Metadata, "kafka-metadata-timeout", kafka.DefaultMetadataTimeout, "bound on one metadata refresh, its retries included")
}

// config is the Kafka configuration of a client named clientID, its TLS
// files and password file read; the brokers are checked by kafka.Config.Validate.
func (k *kafkaFlags) config(clientID string) (kafka.Config, error) {
	if err := k.checkFiles(); err != nil {
		return kafka.Config{}, err
	}
	sec, err := k.security()
	if err != nil {
		return kafka.Config{}, err
	}
	if err := sec.Validate(); err != nil { // before any connection, PostgreSQL's included
		return kafka.Config{}, asFlags(err, kafkaFlagNames())
	}
	c := kafka.Config{Brokers: kafka.ParseBrokers(k.brokers), ClientID: clientID, Security: sec, Timeouts: k.timeouts}
	if err := c.Timeouts.Validate(); err != nil {
		return kafka.Config{}, asFlags(err, kafkaFlagNames())
	}
	return c, nil
}

// checkFiles warns about (or refuses) secret files others may read.
func (k *kafkaFlags) checkFiles() error {
	log := slog.Default()
	if k.cmd != nil {
		log = slog.New(slog.NewTextHandler(k.cmd.ErrOrStderr(), nil))
	}
	return k.files.check(log, map[string]string{"kafka-sasl-password-file": k.passwordFile,
		"kafka-oauth-token-file": k.oauthTokenFile, "kafka-tls-key-file": k.keyFile})
}

// security builds the Kafka transport security from the flags: TLS when any
// TLS flag is set, SASL when a mechanism is named.
func (k *kafkaFlags) security() (kafka.Security, error) {
	var sec kafka.Security
	if k.wantsTLS() {
		sec.TLS = &kafka.TLSConfig{CAFile: k.caFile, CertFile: k.certFile, KeyFile: k.keyFile, ServerName: k.tlsName}
	}
	if k.mechanism == "" {
		if k.hasSASLCredentials() {
			return sec, errors.New("kafka SASL credentials given without --kafka-sasl-mechanism")
		}
		return sec, nil
	}
	sasl, err := k.sasl()
	if err != nil {
		return sec, err
	}
	sec.SASL = sasl
	return sec, nil
}

// wantsTLS reports whether any TLS flag is set (each implies --kafka-tls).
func (k *kafkaFlags) wantsTLS() bool {
	return k.tls || k.caFile != "" || k.certFile != "" || k.keyFile != "" || k.tlsName != ""
}

// hasSASLCredentials reports whether any SASL credential flag is set.
func (k *kafkaFlags) hasSASLCredentials() bool {
	return k.user != "" || k.password != "" || k.passwordFile != "" || k.oauthTokenFile != "" ||
		k.oauthTokenCommand != "" || k.awsRegion != ""
}

// sasl builds the SASL settings of the named mechanism: the password from
// its flag or its file, the AWS region from AWS_REGION when no flag names it.
func (k *kafkaFlags) sasl() (*kafka.SASLConfig, error) {
	if k.password != "" && k.passwordFile != "" {
		return nil, errors.New("--kafka-sasl-password and --kafka-sasl-password-file exclude each other")
	}
	pw := k.password
	if k.passwordFile != "" {
		var err error
		if pw, err = kafka.ReadPasswordFile(k.passwordFile); err != nil {
			return nil, err
		}
	}
	sasl := &kafka.SASLConfig{Mechanism: strings.ToUpper(k.mechanism), User: k.user, Password: pw,
		OAuthTokenFile: k.oauthTokenFile, OAuthTokenCommand: k.oauthTokenCommand, AWSRegion: k.awsRegion}
	if sasl.Mechanism == kafka.MechanismAWSMSKIAM && sasl.AWSRegion == "" {
		sasl.AWSRegion = os.Getenv("AWS_REGION") // the AWS SDK's own variable
	}
	return sasl, nil
}
