package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// testSecretsNeverLeak adds the runs the transport tests lack (help with
// secrets in the environment, the API, a broker that does not answer, a
// readiness that fails) and then looks for every secret of the whole test,
// the wrong passwords included, in every byte the processes printed and
// every /readyz, /healthz and /metrics answer. Runs are at debug level.
func testSecretsNeverLeak(t *testing.T, e *secureEnv) {
	secretEnv := []string{
		"EVENTFORGE_PG_URL=" + e.pgURL(e.certs.CAFile, true),
		"EVENTFORGE_KAFKA_SASL_PASSWORD=" + e.kafka.Password,
		"EVENTFORGE_KAFKA_SASL_MECHANISM=" + kafka.MechanismSCRAMSHA256,
		"EVENTFORGE_KAFKA_SASL_USER=" + e.kafka.User,
	}
	for _, cmd := range [][]string{{}, {"cdc", "run"}, {"worker", "run"}, {"api", "run"}, {"dlq", "list"}, {"dlq", "replay"}, {"outbox", "republish"}} {
		if out, err := e.run(t, "help "+strings.Join(cmd, " "), secretEnv, append(cmd, "--help")...); err != nil {
			t.Fatalf("%v --help: %v\n%s", cmd, err, out)
		}
	}

	// In parallel: the broker cases wait about 20 s for sarama to give up.
	t.Run("runs", func(t *testing.T) {
		t.Run("api", func(t *testing.T) {
			t.Parallel()
			addr := testenv.FreeAddr(t)
			api := e.start(t, "api", nil, "api", "run", "--log-level", "debug", "--http-addr", addr, "--pg-url", e.pgURL(e.certs.CAFile, true))
			e.waitReady(t, api, addr)
		})
		t.Run("api wrong password", func(t *testing.T) {
			t.Parallel()
			bad := e.pg.URLWith("eventforge", "sslmode=verify-full&sslrootcert="+e.certs.CAFile, false)
			bad = strings.Replace(bad, "postgres@", "postgres:"+url.PathEscape(e.secret(t, "apiWrong"))+"@", 1)
			out, err := e.run(t, "api", nil, "api", "run", "--log-level", "debug", "--http-addr", testenv.FreeAddr(t), "--pg-url", bad)
			secWantFailure(t, out, err, "password authentication failed")
		})
		t.Run("relay unreachable broker", func(t *testing.T) {
			t.Parallel()
			addr := testenv.FreeAddr(t)
			args := append([]string{"cdc", "run", "--log-level", "debug", "--metrics-addr", addr,
				"--slot", testenv.UniqueName("slot"), "--pg-url", e.pgURL(e.certs.CAFile, true), "--kafka-metadata-timeout", failFastMetadata},
				secSetFlag(e.kafkaArgs(kafka.MechanismPlain, e.certs.CAFile), "--kafka-brokers", testenv.FreeAddr(t))...) // nothing listens
			relay := e.start(t, "relay", nil, args...)
			testenv.WaitFor(t, 2*time.Minute, "a reconnect after a failed session", func() bool {
				if relay.exited() {
					t.Fatalf("relay exited: %v\n%s", relay.err, relay.out)
				}
				return strings.Contains(relay.out.String(), "reconnecting")
			})
			secScrapeUntil(t, e, relay, addr, http.StatusServiceUnavailable)
			relay.stop(t)
		})
		t.Run("worker unreachable broker", func(t *testing.T) {
			t.Parallel()
			args := append([]string{"worker", "run", "--log-level", "debug", "--group", "g", "--topics", "orders",
				"--pg-url", e.pgURL(e.certs.CAFile, false), "--kafka-metadata-timeout", failFastMetadata},
				secSetFlag(e.kafkaArgs(kafka.MechanismSCRAMSHA512, e.certs.CAFile), "--kafka-brokers", testenv.FreeAddr(t))...)
			out, err := e.run(t, "worker", nil, args...)
			secWantFailure(t, out, err, "kafka")
		})
		t.Run("dlq list", func(t *testing.T) {
			t.Parallel()
			args := append([]string{"dlq", "list", "--topic", testenv.UniqueName("none") + ".dlq"},
				e.kafkaArgs(kafka.MechanismSCRAMSHA256, e.certs.CAFile)...)
			out, err := e.run(t, "dlq", nil, args...)
			t.Logf("dlq list of a missing topic: %v: %s", err, strings.TrimSpace(out))
		})
	})

	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.captured) < 20 {
		t.Fatalf("only %d captures: the transport tests did not run", len(e.captured))
	}
	// The check itself must be able to fail: a planted secret is found.
	planted := &testenv.Buffer{}
	planted.Write([]byte("level=DEBUG msg=x url=postgres://u:" + e.secrets[0] + "@h/db"))
	if got := secLeaks([]secCapture{{name: "planted", out: planted}}, e.secrets); len(got) != 1 {
		t.Fatalf("the leak check misses a planted secret: %v", got)
	}
	for _, leak := range secLeaks(e.captured, e.secrets) {
		t.Error(leak)
	}
	total := 0
	for _, c := range e.captured {
		total += len(c.out.String())
	}
	t.Logf("checked %d secrets in %d captures, %d bytes", len(e.secrets), len(e.captured), total)
}

// secLeaks describes every place a secret appears in the captures.
func secLeaks(captures []secCapture, secrets []string) []string {
	var leaks []string
	for _, c := range captures {
		out := c.out.String()
		for _, s := range secrets {
			if i := strings.Index(out, s); i >= 0 {
				leaks = append(leaks, fmt.Sprintf("%s shows secret %s…: %q", c.name, s[:6], secExcerpt(out, i)))
			}
		}
	}
	return leaks
}

// secScrapeUntil polls /readyz until it answers status, then captures it.
func secScrapeUntil(t *testing.T, e *secureEnv, p *secProc, addr string, status int) {
	t.Helper()
	testenv.WaitFor(t, 2*time.Minute, "/readyz answering "+http.StatusText(status), func() bool {
		if p.exited() {
			t.Fatalf("exited: %v\n%s", p.err, p.out)
		}
		code, _ := secGet("http://" + addr + "/readyz")
		return code == status
	})
	var scraped testenv.Buffer
	for _, path := range []string{"/readyz", "/metrics"} {
		code, body := secGet("http://" + addr + path)
		scraped.Write([]byte(path + " " + http.StatusText(code) + "\n" + body + "\n"))
	}
	e.mu.Lock()
	e.captured = append(e.captured, secCapture{name: t.Name() + "/http", out: &scraped})
	e.mu.Unlock()
}

func secExcerpt(s string, i int) string {
	return s[max(0, i-80):min(len(s), i+80)]
}
