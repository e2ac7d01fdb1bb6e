package kafka_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestSecurityValidate(t *testing.T) {
	certs := testenv.NewCerts(t, t.TempDir())
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-never-shown"
	tests := []struct {
		name    string
		sec     kafka.Security
		wantErr string // empty: valid
	}{
		{"plaintext", kafka.Security{}, ""},
		{"tls system roots", kafka.Security{TLS: &kafka.TLSConfig{}}, ""},
		{"tls full", kafka.Security{TLS: &kafka.TLSConfig{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "localhost"}}, ""},
		{"tls missing CA file", kafka.Security{TLS: &kafka.TLSConfig{CAFile: filepath.Join(t.TempDir(), "nope.pem")}}, "read kafka TLS CA file"},
		{"tls CA file without PEM", kafka.Security{TLS: &kafka.TLSConfig{CAFile: garbage}}, "holds no PEM certificate"},
		{"tls cert without key", kafka.Security{TLS: &kafka.TLSConfig{CertFile: certs.ClientCert}}, "go together"},
		{"tls key of another cert", kafka.Security{TLS: &kafka.TLSConfig{CertFile: certs.ClientCert, KeyFile: certs.ServerKey}}, "load kafka TLS client certificate"},
		{"plain", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "PLAIN", User: "u", Password: secret}}, ""},
		{"scram-256", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "SCRAM-SHA-256", User: "u", Password: secret}}, ""},
		{"scram-512", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "SCRAM-SHA-512", User: "u", Password: secret}}, ""},
		{"unknown mechanism", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "GSSAPI", User: "u", Password: secret}}, "Config.Kafka.Security.SASL.Mechanism: invalid mechanism"},
		{"no user", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "PLAIN", Password: secret}}, "needs a user"},
		{"no password", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "PLAIN", User: "u"}}, "needs a password"},
		{"plain with a token file", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "PLAIN", User: "u", Password: secret, OAuthTokenFile: "/t"}}, "takes a user and a password"},
		{"oauth token file", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenFile: "/run/token"}}, ""},
		{"oauth token command", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenCommand: "get-token"}}, ""},
		{"oauth without a token", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER"}}, "exactly one of Config.Kafka.Security.SASL.OAuthTokenFile and Config.Kafka.Security.SASL.OAuthTokenCommand"},
		{"oauth with both", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenFile: "/t", OAuthTokenCommand: "c"}}, "exactly one of"},
		{"oauth with a password", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenFile: "/t", Password: secret}}, "Config.Kafka.Security.SASL.User: kafka SASL OAUTHBEARER takes no user or password"},
		{"oauth with a region", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenFile: "/t", AWSRegion: "eu-west-1"}}, "Config.Kafka.Security.SASL.AWSRegion: is for Config.Kafka.Security.SASL.Mechanism AWS_MSK_IAM"},
		{"msk iam", kafka.Security{TLS: &kafka.TLSConfig{}, SASL: &kafka.SASLConfig{Mechanism: "AWS_MSK_IAM", AWSRegion: "eu-west-1"}}, ""},
		{"msk iam without region", kafka.Security{TLS: &kafka.TLSConfig{}, SASL: &kafka.SASLConfig{Mechanism: "AWS_MSK_IAM"}}, "needs the cluster's region"},
		{"msk iam without TLS", kafka.Security{SASL: &kafka.SASLConfig{Mechanism: "AWS_MSK_IAM", AWSRegion: "eu-west-1"}}, "needs TLS"},
		{"msk iam with a token file", kafka.Security{TLS: &kafka.TLSConfig{}, SASL: &kafka.SASLConfig{Mechanism: "AWS_MSK_IAM", AWSRegion: "eu-west-1", OAuthTokenFile: "/t"}}, "signs its own tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := kafka.Config{Brokers: []string{"127.0.0.1:9092"}, Security: tc.sec}
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), secret):
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

func TestBaseAppliesSecurityToEveryClient(t *testing.T) {
	certs := testenv.NewCerts(t, t.TempDir())
	c := kafka.Config{Brokers: []string{"127.0.0.1:9092"}, Security: kafka.Security{
		TLS:  &kafka.TLSConfig{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "broker.example"},
		SASL: &kafka.SASLConfig{Mechanism: "SCRAM-SHA-512", User: "alice", Password: "pw"},
	}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, sc := range map[string]*sarama.Config{
		"base": c.Base(), "producer": c.IdempotentProducer(kafka.ProducerOptions{}),
	} {
		t.Run(name, func(t *testing.T) {
			if !sc.Net.TLS.Enable || sc.Net.TLS.Config == nil {
				t.Fatal("TLS not enabled")
			}
			tc := sc.Net.TLS.Config
			if tc.MinVersion != tls.VersionTLS12 || tc.InsecureSkipVerify || tc.ServerName != "broker.example" ||
				tc.RootCAs == nil || len(tc.Certificates) != 1 {
				t.Fatalf("TLS config: min %x skip %v name %q roots %v certs %d", tc.MinVersion, tc.InsecureSkipVerify, tc.ServerName, tc.RootCAs != nil, len(tc.Certificates))
			}
			if !sc.Net.SASL.Enable || sc.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA512 || sc.Net.SASL.User != "alice" ||
				sc.Net.SASL.Password != "pw" || sc.Net.SASL.SCRAMClientGeneratorFunc == nil {
				t.Fatalf("SASL config: %+v", sc.Net.SASL)
			}
			if err := sc.Validate(); err != nil {
				t.Fatalf("sarama rejects the configuration: %v", err)
			}
		})
	}
	if sc := (kafka.Config{Brokers: c.Brokers}).Base(); sc.Net.TLS.Enable || sc.Net.SASL.Enable {
		t.Fatal("zero Security must stay plaintext")
	}
}

// TestSCRAMClientTalksToSCRAMServer runs the client sarama gets against the
// server side of the same library: a wrong password must fail.
func TestSCRAMClientTalksToSCRAMServer(t *testing.T) {
	for _, tc := range []struct {
		mechanism string
		hash      scram.HashGeneratorFcn
	}{{"SCRAM-SHA-256", scram.SHA256}, {"SCRAM-SHA-512", scram.SHA512}} {
		for _, password := range []string{"right", "wrong"} {
			t.Run(tc.mechanism+"/"+password, func(t *testing.T) {
				c := kafka.Config{Brokers: []string{"h:1"}, Security: kafka.Security{SASL: &kafka.SASLConfig{Mechanism: tc.mechanism, User: "alice", Password: password}}}
				err := converse(t, c.Base().Net.SASL.SCRAMClientGeneratorFunc(), tc.hash, password)
				if (password == "right") != (err == nil) {
					t.Fatalf("conversation with password %q: %v", password, err)
				}
			})
		}
	}
}

func converse(t *testing.T, client sarama.SCRAMClient, hash scram.HashGeneratorFcn, password string) error {
	t.Helper()
	kf := scram.KeyFactors{Salt: "salt-of-the-test", Iters: 4096}
	right, err := hash.NewClient("alice", "right", "")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := right.GetStoredCredentialsWithError(kf)
	if err != nil {
		t.Fatal(err)
	}
	server, err := hash.NewServer(func(string) (scram.StoredCredentials, error) { return stored, nil })
	if err != nil {
		t.Fatal(err)
	}
	conv := server.NewConversation()
	if err := client.Begin("alice", password, ""); err != nil {
		t.Fatal(err)
	}
	msg, err := client.Step("")
	for i := 0; err == nil && !conv.Done() && i < 5; i++ {
		var reply string
		if reply, err = conv.Step(msg); err != nil {
			break
		}
		msg, err = client.Step(reply)
	}
	if err == nil && !client.Done() {
		err = errors.New("client not done")
	}
	if err == nil && !conv.Valid() {
		err = errors.New("server did not authenticate the client")
	}
	return err
}

func TestReadPasswordFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want, wantErr string
	}{
		{"plain", "pw", "pw", ""},
		{"trailing newline", "pw\n", "pw", ""},
		{"crlf", "pw\r\n", "pw", ""},
		{"inner spaces kept", " p w \n", " p w ", ""},
		{"empty", "\n", "", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := kafka.ReadPasswordFile(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ReadPasswordFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := kafka.ReadPasswordFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file must fail")
	}
}

func TestExplain(t *testing.T) {
	sasl := fmt.Errorf("connect: %w", sarama.Wrap(sarama.ErrOutOfBrokers, sarama.ErrSASLAuthenticationFailed))
	ca := fmt.Errorf("connect: %w", sarama.Wrap(sarama.ErrOutOfBrokers, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}))
	host := fmt.Errorf("dial: %w", sarama.Wrap(sarama.ErrOutOfBrokers, x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}))
	postgres := fmt.Errorf("connect to PostgreSQL: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	other := fmt.Errorf("connect: %w", sarama.ErrOutOfBrokers)
	for _, tc := range []struct {
		name string
		err  error
		want string // prefix; empty: unchanged
	}{
		{"sasl", sasl, "kafka SASL authentication failed"},
		{"expired token", fmt.Errorf("connect: %w", sarama.Wrap(sarama.ErrOutOfBrokers, fmt.Errorf("get token: %w", kafka.ErrTokenExpired))), "kafka OAUTHBEARER token out of date"},
		{"unknown CA", ca, "kafka TLS: broker certificate signed by an unknown authority"},
		{"hostname", host, "kafka TLS: broker certificate does not match the host"},
		{"other", other, ""},
		{"certificate of PostgreSQL", postgres, ""},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kafka.Explain(tc.err)
			if tc.want == "" {
				if got != tc.err || kafka.Unrecoverable(tc.err) {
					t.Fatalf("Explain changed %v to %v", tc.err, got)
				}
				return
			}
			if !strings.HasPrefix(got.Error(), tc.want) || !errors.Is(got, tc.err) || !kafka.Unrecoverable(tc.err) {
				t.Fatalf("Explain = %v, want prefix %q wrapping the cause", got, tc.want)
			}
			if again := kafka.Explain(fmt.Errorf("outer: %w", got)); strings.Count(again.Error(), tc.want) != 1 {
				t.Fatalf("hint added twice: %v", again)
			}
		})
	}
}
