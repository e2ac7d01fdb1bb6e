package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// secureEnv is one private PostgreSQL that speaks only TLS with a password
// and one private broker with a SASL_SSL listener (mutual TLS; PLAIN and
// both SCRAM mechanisms), shared by the transport and the secrets tests:
// a broker start costs 10-30 s here.
type secureEnv struct {
	bin      string
	root     string
	certs    *testenv.Certs
	pg       *testenv.TLSPostgres
	kafka    *testenv.SASLSSLKafka
	pwFile   string // the SASL password, as --kafka-sasl-password-file
	passfile string // a PostgreSQL passfile with the password
	secrets  []string

	mu       sync.Mutex
	captured []secCapture // every byte any process printed, for the secrets check
}

type secCapture struct {
	name string
	out  *testenv.Buffer
}

func newSecureEnv(t *testing.T) *secureEnv {
	t.Helper()
	testenv.Shared(t) // skips under -short before the binary is built
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	began := time.Now()
	e := &secureEnv{bin: testenv.Binary(t), root: root, certs: testenv.NewCerts(t, dir)}
	t.Logf("binary built in %v", time.Since(began).Round(time.Millisecond))
	pgPassword, saslPassword := randomSecret(t, "pg"), randomSecret(t, "sasl")
	e.secrets = []string{pgPassword, saslPassword}
	began = time.Now()
	e.pg = testenv.StartPostgresTLS(t, e.certs, pgPassword)
	t.Logf("TLS PostgreSQL started in %v", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	e.kafka = testenv.StartKafkaSASLSSL(t, e.certs, "eventforge", saslPassword)
	t.Logf("SASL_SSL broker started in %v", time.Since(began).Round(time.Millisecond))
	e.pwFile = filepath.Join(dir, "sasl-password")
	secWriteFile(t, e.pwFile, saslPassword+"\n")
	host, port, _ := strings.Cut(e.pg.HostPort, ":")
	e.passfile = filepath.Join(dir, "pgpass")
	secWriteFile(t, e.passfile, fmt.Sprintf("%s:%s:*:%s:%s\n", host, port, e.pg.User, pgPassword))
	return e
}

// secret is a new random secret that the secrets test looks for too.
func (e *secureEnv) secret(t *testing.T, kind string) string {
	s := randomSecret(t, kind)
	e.mu.Lock()
	e.secrets = append(e.secrets, s)
	e.mu.Unlock()
	return s
}

// randomSecret is a unique secret that no program could print by accident.
func randomSecret(t *testing.T, kind string) string {
	t.Helper()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return kind + "Secret" + hex.EncodeToString(b[:])
}

func secWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pgURL is the TLS URL of database eventforge verified against caFile, with
// the password in it or, without, taken from the passfile.
func (e *secureEnv) pgURL(caFile string, withPassword bool) string {
	q := "sslmode=verify-full&sslrootcert=" + caFile
	if !withPassword {
		q += "&passfile=" + e.passfile
	}
	return e.pg.URLWith("eventforge", q, withPassword)
}

// kafkaArgs are the flags of a client of the SASL_SSL listener.
func (e *secureEnv) kafkaArgs(mechanism, caFile string) []string {
	return []string{
		"--kafka-brokers", strings.Join(e.kafka.SecureBrokers, ","),
		"--kafka-tls-ca-file", caFile,
		"--kafka-tls-cert-file", e.certs.ClientCert, "--kafka-tls-key-file", e.certs.ClientKey,
		"--kafka-sasl-mechanism", mechanism, "--kafka-sasl-user", e.kafka.User,
		"--kafka-sasl-password-file", e.pwFile,
	}
}

// secSetFlag returns a copy of args with the value of flag replaced.
func secSetFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out[:len(out)-1] {
		if out[i] == flag {
			out[i+1] = value
		}
	}
	return out
}

func (e *secureEnv) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), e.pgURL(e.certs.CAFile, true))
	if err != nil {
		t.Fatalf("connect with TLS: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// secProc is an eventforge process whose output is kept.
type secProc struct {
	cmd  *exec.Cmd
	out  *testenv.Buffer
	done chan struct{}
	err  error
}

// start runs the binary with args; env adds variables. Its output joins the
// captured bytes; it is stopped at cleanup.
func (e *secureEnv) start(t *testing.T, name string, env []string, args ...string) *secProc {
	t.Helper()
	p := &secProc{cmd: exec.Command(e.bin, args...), out: &testenv.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(secCleanEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.captured = append(e.captured, secCapture{name: t.Name() + "/" + name, out: p.out})
	e.mu.Unlock()
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// run runs the binary to its end (at most two minutes) and returns its output.
func (e *secureEnv) run(t *testing.T, name string, env []string, args ...string) (string, error) {
	t.Helper()
	p := e.start(t, name, env, args...)
	err := p.wait(t, 2*time.Minute)
	return p.out.String(), err
}

// secCleanEnv is the test's environment without EVENTFORGE_ variables, so the
// local services' settings cannot leak into a process.
func secCleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) && !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// wait waits for the process to exit on its own and returns its error.
func (p *secProc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v; output:\n%s", p.cmd.Args[1:3], timeout, p.out)
		return nil
	}
}

// stop ends the process with SIGTERM (SIGKILL after a minute).
func (p *secProc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%v ignored SIGTERM", p.cmd.Args[1:3])
	}
}

func (p *secProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// secGet returns the status and body of an HTTP GET, or 0 when nothing answers.
func secGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady polls /readyz until it answers 200 and returns the answers of
// /readyz and /metrics, which join the captured bytes.
func (e *secureEnv) waitReady(t *testing.T, p *secProc, addr string) {
	t.Helper()
	testenv.WaitFor(t, 2*time.Minute, "readiness of "+strings.Join(p.cmd.Args[1:3], " "), func() bool {
		if p.exited() {
			t.Fatalf("exited early: %v\n%s", p.err, p.out)
		}
		code, _ := secGet("http://" + addr + "/readyz")
		return code == http.StatusOK
	})
	var scraped testenv.Buffer
	for _, path := range []string{"/readyz", "/metrics", "/healthz"} {
		code, body := secGet("http://" + addr + path)
		fmt.Fprintf(&scraped, "%s %d\n%s\n", path, code, body)
	}
	e.mu.Lock()
	e.captured = append(e.captured, secCapture{name: t.Name() + "/http", out: &scraped})
	e.mu.Unlock()
}

// eventIDs returns the event_id headers of every record of topic, read
// through the broker's plaintext listener.
func (e *secureEnv) eventIDs(t *testing.T, topic string) map[string]bool {
	t.Helper()
	sc := kafka.Config{Brokers: e.kafka.Brokers()}.Base()
	sc.Metadata.AllowAutoTopicCreation = false
	client, err := sarama.NewClient(e.kafka.Brokers(), sc)
	if err != nil {
		t.Fatalf("connect to the plaintext listener: %v", err)
	}
	defer client.Close()
	ids := map[string]bool{}
	parts, err := client.Partitions(topic)
	if err != nil {
		return ids // not created yet
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for _, part := range parts {
		high, err := client.GetOffset(topic, part, sarama.OffsetNewest)
		if err != nil || high == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, part, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for m := range pc.Messages() {
			for _, h := range m.Headers {
				if string(h.Key) == "event_id" {
					ids[string(h.Value)] = true
				}
			}
			if m.Offset+1 >= high {
				break
			}
		}
		pc.Close()
	}
	return ids
}

// waitEvent waits until eventID is in topic while relay runs.
func (e *secureEnv) waitEvent(t *testing.T, relay *secProc, topic, eventID string) {
	t.Helper()
	testenv.WaitFor(t, 2*time.Minute, "event "+eventID+" in "+topic, func() bool {
		if relay.exited() {
			t.Fatalf("relay exited: %v\n%s", relay.err, relay.out)
		}
		return e.eventIDs(t, topic)[eventID]
	})
}

// waitProcessed waits until worker set order orderID to processed.
func (e *secureEnv) waitProcessed(t *testing.T, worker *secProc, conn *pgx.Conn, orderID string) {
	t.Helper()
	testenv.WaitFor(t, 2*time.Minute, "order "+orderID+" processed", func() bool {
		if worker.exited() {
			t.Fatalf("worker exited: %v\n%s", worker.err, worker.out)
		}
		var status string
		err := conn.QueryRow(t.Context(), "SELECT status FROM orders WHERE id = $1", orderID).Scan(&status)
		return err == nil && status == "processed"
	})
}

// writeOrder writes an order and its order.created event in one transaction.
func (e *secureEnv) writeOrder(t *testing.T, conn *pgx.Conn, aggregateType string) (orderID, eventID string) {
	t.Helper()
	orderID, eventID = testenv.UniqueName("o"), uuid.NewString()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "INSERT INTO orders (id, status, amount, currency) VALUES ($1, 'created', 100, 'EUR')", orderID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES ($1, $2, $3, 'order.created', '{}')`, eventID, aggregateType, orderID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return orderID, eventID
}

// TestSecureTransport runs the relay and the worker against a PostgreSQL
// that accepts only TLS and a broker's SASL_SSL listener, once per SASL
// mechanism, then the failures users must understand: an untrusted
// certificate on either side, a plaintext connection, a wrong password.
// Last, every byte printed or served is checked for the secrets. Cost: one
// private PostgreSQL and one private broker (about 30 s on this machine)
// plus a few short runs.
func TestSecureTransport(t *testing.T) {
	t.Parallel()
	e := newSecureEnv(t)
	t.Run("pipeline", func(t *testing.T) { testSecurePipeline(t, e) })
	t.Run("postgres-errors", func(t *testing.T) { testPostgresTLSErrors(t, e) })
	t.Run("kafka-errors", func(t *testing.T) { testKafkaSecurityErrors(t, e) })
	t.Run("oauth-pipeline", func(t *testing.T) { testOAuthPipeline(t, e) })
	t.Run("oauth-errors", func(t *testing.T) { testOAuthErrors(t, e) })
	t.Run("secrets", func(t *testing.T) { testSecretsNeverLeak(t, e) })
}

func testSecurePipeline(t *testing.T, e *secureEnv) {
	handlers := filepath.Join(e.root, "deploy", "handlers", "orders.yaml")
	for _, mech := range []string{kafka.MechanismPlain, kafka.MechanismSCRAMSHA256, kafka.MechanismSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			// Side by side: each mechanism has its own slot, topics and
			// connection, and waits mostly on its processes starting.
			t.Parallel()
			conn := e.conn(t)
			prefix := testenv.UniqueName("sec") + "."
			topic := prefix + "orders"
			addr := testenv.FreeAddr(t)
			// PLAIN's relay reads its password from the passfile: both the SQL
			// and the replication connection use it.
			relay := e.start(t, "relay", nil, append([]string{"cdc", "run", "--log-level", "debug",
				"--pg-url", e.pgURL(e.certs.CAFile, mech != kafka.MechanismPlain), "--slot", testenv.UniqueName("slot"),
				"--topic-prefix", prefix, "--topic-partitions", "1", "--metrics-addr", addr},
				e.kafkaArgs(mech, e.certs.CAFile)...)...)
			e.waitReady(t, relay, addr)
			orderID, eventID := e.writeOrder(t, conn, "orders")
			e.waitEvent(t, relay, topic, eventID)
			if mech != kafka.MechanismSCRAMSHA512 {
				return
			}
			// The worker takes its PostgreSQL password from a passfile and its
			// SASL settings from the environment twins of the flags.
			waddr := testenv.FreeAddr(t)
			env := []string{
				"EVENTFORGE_KAFKA_BROKERS=" + strings.Join(e.kafka.SecureBrokers, ","),
				"EVENTFORGE_KAFKA_TLS_CA_FILE=" + e.certs.CAFile,
				"EVENTFORGE_KAFKA_TLS_CERT_FILE=" + e.certs.ClientCert, "EVENTFORGE_KAFKA_TLS_KEY_FILE=" + e.certs.ClientKey,
				"EVENTFORGE_KAFKA_SASL_MECHANISM=" + mech, "EVENTFORGE_KAFKA_SASL_USER=" + e.kafka.User,
				"EVENTFORGE_KAFKA_SASL_PASSWORD=" + e.kafka.Password,
			}
			worker := e.start(t, "worker", env, "worker", "run", "--log-level", "debug",
				"--pg-url", e.pgURL(e.certs.CAFile, false), "--group", testenv.UniqueName("g"),
				"--topics", topic, "--handlers", handlers, "--metrics-addr", waddr)
			e.waitReady(t, worker, waddr)
			e.waitProcessed(t, worker, conn, orderID)
		})
	}
}

// secWantFailure checks a run that must fail: non-zero exit, the reason on
// its last line.
func secWantFailure(t *testing.T, out string, err error, reasons ...string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("want a non-zero exit, got %v; output:\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	for _, r := range reasons {
		if !strings.Contains(last, r) {
			t.Errorf("last line lacks %q:\n%s", r, last)
		}
	}
	t.Logf("users see: %s", last)
}

func testPostgresTLSErrors(t *testing.T, e *secureEnv) {
	kafkaArgs := e.kafkaArgs(kafka.MechanismSCRAMSHA256, e.certs.CAFile)
	untrusted := e.pgURL(e.certs.OtherCAFile, true)
	plain := e.pg.URLWith("eventforge", "sslmode=disable", true)
	wrongPassword := strings.Replace(untrusted, e.pg.Password, e.secret(t, "pgWrong"), 1)
	wrongPassword = strings.Replace(wrongPassword, e.certs.OtherCAFile, e.certs.CAFile, 1)
	for _, tc := range []struct {
		name    string
		url     string
		reasons []string
	}{
		{"untrusted CA", untrusted, []string{"tls", "certificate signed by unknown authority"}},
		{"plaintext refused", plain, []string{"no pg_hba.conf entry", "no encryption"}},
		{"wrong password", wrongPassword, []string{"password authentication failed"}},
	} {
		for _, cmd := range [][]string{
			append([]string{"cdc", "run", "--metrics-addr", "", "--slot", testenv.UniqueName("slot")}, kafkaArgs...),
			append([]string{"worker", "run", "--group", "g", "--topics", "orders", "--kafka-metadata-timeout", failFastMetadata}, kafkaArgs...),
		} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				out, err := e.run(t, cmd[0], nil, slices.Concat(cmd, []string{"--log-level", "debug", "--pg-url", tc.url})...)
				secWantFailure(t, out, err, tc.reasons...)
			})
		}
	}
}

// failFastMetadata bounds the metadata refresh of a command that must fail
// on a broker refusing it: the reason is known at the first attempt, and the
// default bound (15 s of retries) would only make the test wait. 6 s, not
// 3: on a loaded machine the SASL_SSL handshake's answer once came after a
// 3 s bound had already ended the refresh ("run out of available brokers").
const failFastMetadata = "6s"

func testKafkaSecurityErrors(t *testing.T, e *secureEnv) {
	wrongPW := filepath.Join(t.TempDir(), "wrong")
	secWriteFile(t, wrongPW, e.secret(t, "saslWrong")+"\n")
	for _, tc := range []struct {
		name    string
		args    []string
		reasons []string
	}{
		{"wrong password PLAIN", secSetFlag(e.kafkaArgs(kafka.MechanismPlain, e.certs.CAFile), "--kafka-sasl-password-file", wrongPW), []string{"kafka SASL authentication failed"}},
		{"wrong password SCRAM", secSetFlag(e.kafkaArgs(kafka.MechanismSCRAMSHA512, e.certs.CAFile), "--kafka-sasl-password-file", wrongPW), []string{"kafka SASL authentication failed"}},
		{"untrusted broker", e.kafkaArgs(kafka.MechanismSCRAMSHA256, e.certs.OtherCAFile), []string{"kafka TLS: broker certificate signed by an unknown authority"}},
	} {
		for _, cmd := range [][]string{
			{"cdc", "run", "--metrics-addr", "", "--slot", testenv.UniqueName("slot"), "--topic-prefix", testenv.UniqueName("err") + ".", "--kafka-metadata-timeout", failFastMetadata},
			{"worker", "run", "--group", "g", "--topics", "orders", "--kafka-metadata-timeout", failFastMetadata},
		} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				t.Parallel() // sarama retries metadata for about 20 s before it gives up
				args := slices.Concat(cmd, []string{"--log-level", "debug", "--pg-url", e.pgURL(e.certs.CAFile, true)}, tc.args)
				out, err := e.run(t, cmd[0], nil, args...)
				secWantFailure(t, out, err, tc.reasons...)
			})
		}
	}
}

func TestKafkaFlags(t *testing.T) {
	dir := t.TempDir()
	certs := testenv.NewCerts(t, dir)
	pwFile := filepath.Join(dir, "pw")
	secWriteFile(t, pwFile, "from-file\n")
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string // KEY=VALUE
		wantErr  string
		wantTLS  bool
		wantSASL *kafka.SASLConfig
	}{
		{name: "plaintext", args: nil},
		{name: "tls flag", args: []string{"--kafka-tls"}, wantTLS: true},
		{name: "tls implied by CA file", args: []string{"--kafka-tls-ca-file", certs.CAFile}, wantTLS: true},
		{name: "tls implied by server name", args: []string{"--kafka-tls-server-name", "kafka.internal"}, wantTLS: true},
		{name: "cert without key", args: []string{"--kafka-tls-cert-file", certs.ClientCert}, wantErr: "go together"},
		{name: "missing CA file", args: []string{"--kafka-tls-ca-file", filepath.Join(dir, "none.pem")}, wantErr: "read kafka TLS CA file"},
		{name: "scram with password", args: []string{"--kafka-sasl-mechanism", "scram-sha-256", "--kafka-sasl-user", "u", "--kafka-sasl-password", "pw"},
			wantSASL: &kafka.SASLConfig{Mechanism: "SCRAM-SHA-256", User: "u", Password: "pw"}},
		{name: "password file trimmed", args: []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "u", "--kafka-sasl-password-file", pwFile},
			wantSASL: &kafka.SASLConfig{Mechanism: "PLAIN", User: "u", Password: "from-file"}},
		{name: "environment twins", env: []string{"EVENTFORGE_KAFKA_SASL_MECHANISM=SCRAM-SHA-512", "EVENTFORGE_KAFKA_SASL_USER=u",
			"EVENTFORGE_KAFKA_SASL_PASSWORD_FILE=" + pwFile, "EVENTFORGE_KAFKA_TLS=true"},
			wantTLS: true, wantSASL: &kafka.SASLConfig{Mechanism: "SCRAM-SHA-512", User: "u", Password: "from-file"}},
		{name: "both passwords", args: []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "u", "--kafka-sasl-password", "pw", "--kafka-sasl-password-file", pwFile}, wantErr: "exclude each other"},
		{name: "no password", args: []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "u"}, wantErr: "needs a password"},
		{name: "password without mechanism", args: []string{"--kafka-sasl-password", "pw"}, wantErr: "without --kafka-sasl-mechanism"},
		{name: "unknown mechanism", args: []string{"--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-user", "u", "--kafka-sasl-password", "pw"}, wantErr: "--kafka-sasl-mechanism: invalid mechanism"},
		{name: "oauth token file", args: []string{"--kafka-sasl-mechanism", "oauthbearer", "--kafka-oauth-token-file", pwFile},
			wantSASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenFile: pwFile}},
		{name: "oauth token command twin", env: []string{"EVENTFORGE_KAFKA_SASL_MECHANISM=OAUTHBEARER", "EVENTFORGE_KAFKA_OAUTH_TOKEN_COMMAND=get-token"},
			wantSASL: &kafka.SASLConfig{Mechanism: "OAUTHBEARER", OAuthTokenCommand: "get-token"}},
		{name: "oauth without token", args: []string{"--kafka-sasl-mechanism", "OAUTHBEARER"}, wantErr: "exactly one of"},
		{name: "token without mechanism", args: []string{"--kafka-oauth-token-file", pwFile}, wantErr: "without --kafka-sasl-mechanism"},
		{name: "msk iam region twin", env: []string{"EVENTFORGE_KAFKA_SASL_MECHANISM=AWS_MSK_IAM", "EVENTFORGE_KAFKA_AWS_REGION=eu-west-1", "EVENTFORGE_KAFKA_TLS=true", "AWS_REGION=us-east-1"},
			wantTLS: true, wantSASL: &kafka.SASLConfig{Mechanism: "AWS_MSK_IAM", AWSRegion: "eu-west-1"}},
		{name: "msk iam region from AWS_REGION", args: []string{"--kafka-tls", "--kafka-sasl-mechanism", "AWS_MSK_IAM"}, env: []string{"AWS_REGION=us-east-1"},
			wantTLS: true, wantSASL: &kafka.SASLConfig{Mechanism: "AWS_MSK_IAM", AWSRegion: "us-east-1"}},
		{name: "msk iam without TLS", args: []string{"--kafka-sasl-mechanism", "AWS_MSK_IAM", "--kafka-aws-region", "eu-west-1"}, wantErr: "needs TLS"},
		{name: "missing password file", args: []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "u", "--kafka-sasl-password-file", filepath.Join(dir, "missing")}, wantErr: "read password file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, ok := parseKafkaFlags(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if got := kc.Security.TLS != nil; got != tc.wantTLS {
				t.Fatalf("TLS %v, want %v", got, tc.wantTLS)
			}
			if (kc.Security.SASL == nil) != (tc.wantSASL == nil) || (tc.wantSASL != nil && *kc.Security.SASL != *tc.wantSASL) {
				t.Fatalf("SASL %+v, want %+v", kc.Security.SASL, tc.wantSASL)
			}
		})
	}
}
