package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// oauthArgs are the flags of an OAUTHBEARER client of the SASL_SSL
// listener (mutual TLS as well), with the token source's flag and value.
func (e *secureEnv) oauthArgs(tokenFlag, value string) []string {
	return []string{
		"--kafka-brokers", strings.Join(e.kafka.SecureBrokers, ","),
		"--kafka-tls-ca-file", e.certs.CAFile,
		"--kafka-tls-cert-file", e.certs.ClientCert, "--kafka-tls-key-file", e.certs.ClientKey,
		"--kafka-sasl-mechanism", "OAUTHBEARER", tokenFlag, value,
	}
}

// oauthToken writes a fresh unsecured JWT for the test broker to a file
// and returns its path; the token joins the secrets never to be printed.
func (e *secureEnv) oauthToken(t *testing.T, iat, exp time.Time) string {
	t.Helper()
	tok := testenv.UnsecuredJWT("eventforge-relay", iat, exp)
	e.mu.Lock()
	e.secrets = append(e.secrets, tok)
	e.mu.Unlock()
	path := filepath.Join(t.TempDir(), "token")
	secWriteFile(t, path, tok+"\n")
	return path
}

// testOAuthPipeline: the relay authenticates with OAUTHBEARER from a token
// file and publishes an order's event; the worker authenticates with a
// token command and consumes it: a produce and consume round trip.
func testOAuthPipeline(t *testing.T, e *secureEnv) {
	conn := e.conn(t)
	now := time.Now()
	tokenFile := e.oauthToken(t, now, now.Add(time.Hour))
	prefix := testenv.UniqueName("oauth") + "."
	topic := prefix + "orders"
	addr := testenv.FreeAddr(t)
	relay := e.start(t, "relay", nil, append([]string{"cdc", "run", "--log-level", "debug",
		"--pg-url", e.pgURL(e.certs.CAFile, true), "--slot", testenv.UniqueName("slot"),
		"--topic-prefix", prefix, "--topic-partitions", "1", "--metrics-addr", addr},
		e.oauthArgs("--kafka-oauth-token-file", tokenFile)...)...)
	e.waitReady(t, relay, addr)
	orderID, eventID := e.writeOrder(t, conn, "orders")
	e.waitEvent(t, relay, topic, eventID)
	waddr := testenv.FreeAddr(t)
	worker := e.start(t, "worker", nil, append([]string{"worker", "run", "--log-level", "debug",
		"--pg-url", e.pgURL(e.certs.CAFile, true), "--group", testenv.UniqueName("g"),
		"--topics", topic, "--handlers", filepath.Join(e.root, "deploy", "handlers", "orders.yaml"), "--metrics-addr", waddr},
		e.oauthArgs("--kafka-oauth-token-command", "cat "+tokenFile)...)...)
	e.waitReady(t, worker, waddr)
	e.waitProcessed(t, worker, conn, orderID)
}

// testOAuthErrors: a token the broker refuses (no exp claim) and an
// expired one each stop the relay and the worker with a clear last line.
func testOAuthErrors(t *testing.T, e *secureEnv) {
	now := time.Now()
	refused := e.oauthToken(t, now, time.Time{})
	expired := e.oauthToken(t, now.Add(-2*time.Hour), now.Add(-time.Hour))
	for _, tc := range []struct {
		name    string
		args    []string
		reasons []string
	}{
		{"token refused by the broker", e.oauthArgs("--kafka-oauth-token-file", refused), []string{"kafka SASL authentication failed"}},
		{"expired token", e.oauthArgs("--kafka-oauth-token-command", "cat "+expired),
			[]string{"kafka OAUTHBEARER token out of date", fmt.Sprintf("expired at %s", now.Add(-time.Hour).UTC().Format(time.RFC3339))}},
	} {
		for _, cmd := range [][]string{
			{"cdc", "run", "--metrics-addr", "", "--slot", testenv.UniqueName("slot"), "--topic-prefix", testenv.UniqueName("err") + ".", "--kafka-metadata-timeout", failFastMetadata},
			{"worker", "run", "--group", "g", "--topics", "orders", "--kafka-metadata-timeout", failFastMetadata},
		} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				t.Parallel()
				args := slices.Concat(cmd, []string{"--log-level", "debug", "--pg-url", e.pgURL(e.certs.CAFile, true)}, tc.args)
				out, err := e.run(t, cmd[0], nil, args...)
				secWantFailure(t, out, err, tc.reasons...)
			})
		}
	}
}
