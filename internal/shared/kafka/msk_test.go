package kafka_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// TestMSKIAMTokenFromSigner: AWS_MSK_IAM wires sarama's OAUTHBEARER to a
// provider whose token is the signer's presigned kafka-cluster:Connect
// request for the configured region, signed with the environment's static
// credentials (no network).
func TestMSKIAMTokenFromSigner(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEVENTFORGETEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "eventforge-test-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/eventforge-aws-config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/eventforge-aws-credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	sec := kafka.Security{TLS: &kafka.TLSConfig{}, SASL: &kafka.SASLConfig{Mechanism: kafka.MechanismAWSMSKIAM, AWSRegion: "eu-central-1"}}
	if err := sec.Validate(); err != nil {
		t.Fatal(err)
	}
	sc := kafka.Config{Brokers: []string{"b-1.example:9098"}, ClientID: "test", Security: sec}.Base()
	if !sc.Net.SASL.Enable || sc.Net.SASL.Mechanism != sarama.SASLTypeOAuth || sc.Net.SASL.TokenProvider == nil || !sc.Net.TLS.Enable {
		t.Fatalf("sarama SASL %+v TLS %v: want OAUTHBEARER with a token provider over TLS", sc.Net.SASL, sc.Net.TLS.Enable)
	}
	began := time.Now()
	tok, err := sc.Net.SASL.TokenProvider.Token()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok.Token)
	if err != nil {
		t.Fatalf("token is not base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Host != "kafka.eu-central-1.amazonaws.com" || q.Get("Action") != "kafka-cluster:Connect" {
		t.Errorf("signed request %s, want kafka-cluster:Connect at kafka.eu-central-1.amazonaws.com", u.Redacted())
	}
	if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDEVENTFORGETEST/") || !strings.HasSuffix(cred, "/eu-central-1/kafka-cluster/aws4_request") {
		t.Errorf("X-Amz-Credential %q, want the test key for eu-central-1/kafka-cluster", cred)
	}
	if q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-Expires") == "" {
		t.Errorf("request %s is not presigned", u.Redacted())
	}
	if d, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date")); err != nil || d.Before(began.Add(-time.Minute)) {
		t.Errorf("X-Amz-Date %q (%v), want now", q.Get("X-Amz-Date"), err)
	}
	again, err := sc.Net.SASL.TokenProvider.Token()
	if err != nil || again.Token != tok.Token {
		t.Errorf("second Token() = %v (%v), want the cached token", again, err)
	}
}
