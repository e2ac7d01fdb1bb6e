package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/eventforge/eventforge/internal/shared/fielderr"
)

// SASL mechanisms EventForge speaks.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	// MechanismOAuthBearer is SASL OAUTHBEARER with a token from a file or
	// a command (an identity provider's client, a sidecar's output).
	MechanismOAuthBearer = "OAUTHBEARER"
	// MechanismAWSMSKIAM is Amazon MSK's IAM access control: OAUTHBEARER
	// with a token signed by AWS credentials, over TLS.
	MechanismAWSMSKIAM = "AWS_MSK_IAM"
)

// Security is the transport security every client of a Config uses. The
// zero value is plaintext without authentication.
type Security struct {
	TLS  *TLSConfig  // nil: plaintext
	SASL *SASLConfig // nil: no authentication
}

// TLSConfig is a TLS connection to the brokers, from PEM files. Without a CA
// file the system roots verify the brokers; verification is never skipped.
type TLSConfig struct {
	CAFile     string // PEM CA bundle trusted for broker certificates
	CertFile   string // PEM client certificate (mutual TLS), with KeyFile
	KeyFile    string // PEM private key of CertFile
	ServerName string // name checked in the broker certificate; default: the broker host

	loaded *tls.Config // set by Load
}

// SASLConfig authenticates to the brokers.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or
	// AWS_MSK_IAM.
	Mechanism string
	User      string // PLAIN and SCRAM
	Password  string // PLAIN and SCRAM
	// OAuthTokenFile (OAUTHBEARER) holds the token; it is read again for
	// every new connection and re-authentication, so a token an agent
	// rewrites is picked up.
	OAuthTokenFile string
	// OAuthTokenCommand (OAUTHBEARER) is run with /bin/sh -c; its stdout is
	// the token. A JWT is reused until shortly before its exp claim; an
	// opaque token is fetched again for every connection.
	OAuthTokenCommand string
	// AWSRegion (AWS_MSK_IAM) is the cluster's region, e.g. eu-west-1.
	AWSRegion string
}

// Validate reports a security configuration that cannot work. It reads the
// TLS files, so a missing or malformed file is reported before any dial.
func (s *Security) Validate() error {
	if s.TLS != nil {
		if err := s.TLS.Load(); err != nil {
			return err
		}
	}
	if s.SASL == nil {
		return nil
	}
	if err := s.SASL.Validate(); err != nil {
		return err
	}
	if s.SASL.Mechanism == MechanismAWSMSKIAM && s.TLS == nil {
		return fielderr.New("Config.Kafka.Security.TLS", "kafka SASL AWS_MSK_IAM needs TLS (Amazon MSK's IAM listener, port 9098)")
	}
	return nil
}

// Load reads and checks the PEM files; Validate calls it.
func (t *TLSConfig) Load() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fielderr.New("", "kafka TLS: Config.Kafka.Security.TLS.CertFile and Config.Kafka.Security.TLS.KeyFile go together")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return fielderr.Wrap("Config.Kafka.Security.TLS.CAFile", fmt.Errorf("read kafka TLS CA file: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fielderr.New("Config.Kafka.Security.TLS.CAFile", "kafka TLS CA file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// The error names neither file's content, only what is wrong.
			return fielderr.Wrap("Config.Kafka.Security.TLS.CertFile", fmt.Errorf("load kafka TLS client certificate %s: %w", t.CertFile, err))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	t.loaded = tc
	return nil
}

// Validate reports a SASL configuration that cannot work. The password
// never appears in its errors.
func (s *SASLConfig) Validate() error {
	switch s.Mechanism {
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		return s.validatePassword()
	case MechanismOAuthBearer, MechanismAWSMSKIAM:
		return s.validateToken()
	}
	return fielderr.New("Config.Kafka.Security.SASL.Mechanism", "invalid mechanism %q: want %s", s.Mechanism, strings.Join([]string{
		MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512, MechanismOAuthBearer, MechanismAWSMSKIAM}, ", "))
}

func (s *SASLConfig) validatePassword() error {
	if s.OAuthTokenFile != "" || s.OAuthTokenCommand != "" || s.AWSRegion != "" {
		return fielderr.New("Config.Kafka.Security.SASL", "kafka SASL %s takes a user and a password, not an OAuth token or an AWS region", s.Mechanism)
	}
	if s.User == "" {
		return fielderr.New("Config.Kafka.Security.SASL.User", "kafka SASL %s needs a user", s.Mechanism)
	}
	if s.Password == "" {
		return fielderr.New("Config.Kafka.Security.SASL.Password", "kafka SASL %s needs a password", s.Mechanism)
	}
	return nil
}

func (s *SASLConfig) validateToken() error {
	if s.User != "" || s.Password != "" {
		return fielderr.New("Config.Kafka.Security.SASL.User", "kafka SASL %s takes no user or password", s.Mechanism)
	}
	if s.Mechanism == MechanismAWSMSKIAM {
		if s.OAuthTokenFile != "" || s.OAuthTokenCommand != "" {
			return fielderr.New("", "kafka SASL AWS_MSK_IAM signs its own tokens: drop Config.Kafka.Security.SASL.OAuthTokenFile and Config.Kafka.Security.SASL.OAuthTokenCommand")
		}
		if s.AWSRegion == "" {
			return fielderr.New("Config.Kafka.Security.SASL.AWSRegion", "kafka SASL AWS_MSK_IAM needs the cluster's region")
		}
		return nil
	}
	if s.AWSRegion != "" {
		return fielderr.New("Config.Kafka.Security.SASL.AWSRegion", "is for Config.Kafka.Security.SASL.Mechanism AWS_MSK_IAM")
	}
	if (s.OAuthTokenFile == "") == (s.OAuthTokenCommand == "") {
		return fielderr.New("", "kafka SASL OAUTHBEARER needs exactly one of Config.Kafka.Security.SASL.OAuthTokenFile and Config.Kafka.Security.SASL.OAuthTokenCommand")
	}
	return nil
}

// tokenProvider is the sarama.AccessTokenProvider of an OAUTHBEARER or
// AWS_MSK_IAM configuration.
func (s *SASLConfig) tokenProvider() sarama.AccessTokenProvider {
	switch {
	case s.Mechanism == MechanismAWSMSKIAM:
		return newTokenProvider("the AWS MSK IAM signer (region "+s.AWSRegion+")", mskToken(s.AWSRegion), true)
	case s.OAuthTokenFile != "":
		return newTokenProvider("token file "+s.OAuthTokenFile, fileToken(s.OAuthTokenFile), false)
	}
	return newTokenProvider("--kafka-oauth-token-command", commandToken(s.OAuthTokenCommand), true)
}

// ReadPasswordFile returns the content of a secret file without its
// trailing newlines (as written by echo or a secrets mount).
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return pw, nil
}

// apply sets TLS and SASL on a sarama configuration. A TLS file that cannot
// be loaded leaves TLS on with an empty trust store, so connections fail
// rather than fall back to plaintext; Validate reports the cause first.
func (s *Security) apply(sc *sarama.Config) {
	if s.TLS != nil {
		tc := s.TLS.loaded
		if tc == nil { // not validated: load a copy, never plaintext
			t := *s.TLS
			if err := t.Load(); err != nil {
				t.loaded = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: x509.NewCertPool()}
			}
			tc = t.loaded
		}
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = tc.Clone()
	}
	if s.SASL == nil {
		return
	}
	sc.Net.SASL.Enable = true
	sc.Net.SASL.Handshake = true
	sc.Net.SASL.Version = sarama.SASLHandshakeV1
	sc.Net.SASL.User = s.SASL.User
	sc.Net.SASL.Password = s.SASL.Password
	switch s.SASL.Mechanism {
	case MechanismOAuthBearer, MechanismAWSMSKIAM:
		sc.Net.SASL.Mechanism = sarama.SASLTypeOAuth
		sc.Net.SASL.TokenProvider = s.SASL.tokenProvider()
	case MechanismSCRAMSHA256:
		sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case MechanismSCRAMSHA512:
		sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	default:
		sc.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	}
}

// scramClient adapts xdg-go/scram to sarama's SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return fmt.Errorf("start SCRAM conversation: %w", err)
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// Explain adds a hint to Kafka errors a retry cannot fix: failed SASL
// authentication and an untrusted or mismatched broker certificate. Other
// errors are returned unchanged.
func Explain(err error) error {
	var done *explained
	if errors.As(err, &done) {
		return err
	}
	if h := hint(err); h != "" {
		return &explained{hint: h, err: err}
	}
	return err
}

// explained is an error with its hint, added once.
type explained struct {
	hint string
	err  error
}

func (e *explained) Error() string { return e.hint + ": " + e.err.Error() }
func (e *explained) Unwrap() error { return e.err }

// Unrecoverable reports an error no retry can fix: wrong credentials or an
// untrusted broker certificate.
func Unrecoverable(err error) bool { return hint(err) != "" }

func hint(err error) string {
	if err == nil {
		return ""
	}
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		return "kafka SASL authentication failed (check --kafka-sasl-mechanism and its credentials: --kafka-sasl-user and the password, the OAuth token, or the AWS credentials and --kafka-aws-region)"
	case errors.Is(err, ErrTokenExpired):
		return "kafka OAUTHBEARER token out of date (the token file or the token command must supply a current one)"
	case !errors.Is(err, sarama.ErrOutOfBrokers):
		return "" // a certificate error of another connection (PostgreSQL)
	case errors.As(err, &unknownCA):
		return "kafka TLS: broker certificate signed by an unknown authority (check --kafka-tls-ca-file)"
	case errors.As(err, &hostname):
		return "kafka TLS: broker certificate does not match the host (check --kafka-tls-server-name)"
	case errors.As(err, &invalid):
		return "kafka TLS: broker certificate is invalid"
	}
	return ""
}
