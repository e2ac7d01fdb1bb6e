package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// TLSPostgres is a private cluster that accepts only TLS connections
// (pg_hba hostssl) authenticated by password (scram-sha-256).
type TLSPostgres struct {
	*Postgres
	HostPort string // 127.0.0.1:port
	User     string
	Password string
}

// StartPostgresTLS starts a private cluster with a migrated database
// "eventforge", then turns TLS on with certs' server certificate and refuses
// every connection that is not TLS with the user's password. It cannot be
// restarted through Postgres.Start (pg.sh would lack the password).
func StartPostgresTLS(t testing.TB, certs *Certs, password string) *TLSPostgres {
	t.Helper()
	p := StartPostgres(t)
	u, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		t.Fatalf("connect to private cluster: %v", err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER ROLE postgres PASSWORD '%s'", strings.ReplaceAll(password, "'", "''")))
	_ = conn.Close(context.Background())
	if err != nil {
		t.Fatalf("set password: %v", err)
	}
	p.Stop(t)
	data, err := filepath.EvalSymlinks(filepath.Join(p.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	// The server reads its key only when owned by its OS user with 0600.
	copyOwned(t, certs.ServerCert, filepath.Join(data, "server.crt"), data)
	copyOwned(t, certs.ServerKey, filepath.Join(data, "server.key"), data)
	appendFile(t, filepath.Join(data, "postgresql.conf"),
		"ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nssl_min_protocol_version = 'TLSv1.2'\npassword_encryption = 'scram-sha-256'\n")
	hba := "hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl replication all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	chownLike(t, filepath.Join(data, "pg_hba.conf"), data)
	cmd := exec.Command(filepath.Join(p.root, "deploy", "local", "pg.sh"), "start", p.dir)
	cmd.Dir = p.root
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGSSLMODE=require")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg.sh start with TLS: %v\n%s", err, out)
	}
	return &TLSPostgres{Postgres: p, HostPort: u.Host, User: "postgres", Password: password}
}

// URL is a connection URL of database db with the given query, e.g.
// "sslmode=verify-full&sslrootcert=/ca.pem"; with password false the URL
// carries none (for passfile or PGPASSWORD).
func (p *TLSPostgres) URLWith(db, query string, password bool) string {
	u := url.URL{Scheme: "postgres", Host: p.HostPort, Path: "/" + db, RawQuery: query, User: url.User(p.User)}
	if password {
		u.User = url.UserPassword(p.User, p.Password)
	}
	return u.String()
}

func copyOwned(t testing.TB, src, dst, like string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	chownLike(t, dst, like)
}

func chownLike(t testing.TB, path, like string) {
	t.Helper()
	fi, err := os.Stat(like)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if err := os.Lchown(path, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
		t.Fatalf("chown %s: %v", path, err)
	}
}

func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// SASLSSLKafka is a private broker with, besides its PLAINTEXT listener, a
// SASL_SSL listener that requires a client certificate signed by the test CA
// and accepts PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for one user, and
// OAUTHBEARER with Kafka's unsecured validator for tests: any unsecured JWS
// ("alg":"none", see UnsecuredJWT) with sub, iat and a future exp.
type SASLSSLKafka struct {
	*Kafka
	SecureBrokers []string // host:port of the SASL_SSL listener
	User          string
	Password      string
}

// StartKafkaSASLSSL starts a private broker whose SASL_SSL listener uses
// certs' server certificate and knows user with password under all three
// mechanisms. The PLAINTEXT listener (Brokers) stays, for test set-up.
func StartKafkaSASLSSL(t testing.TB, certs *Certs, user, password string) *SASLSSLKafka {
	t.Helper()
	Shared(t)
	root, dir := privateDir(t, "kafka")
	conf := filepath.Join(dir, "sasl-ssl.properties")
	jaas := func(module, extra string) string { return module + " required" + extra + ";" }
	props := strings.Join([]string{
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		// No server callback handler: the default validates unsecured JWS.
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=" + jaas("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", ` unsecuredLoginStringClaim_sub="admin"`),
		"listener.name.sasl_ssl.plain.sasl.jaas.config=" + jaas("org.apache.kafka.common.security.plain.PlainLoginModule", fmt.Sprintf(" user_%s=%q", user, password)),
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=" + jaas("org.apache.kafka.common.security.scram.ScramLoginModule", ""),
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=" + jaas("org.apache.kafka.common.security.scram.ScramLoginModule", ""),
		"listener.name.sasl_ssl.ssl.keystore.type=PEM",
		"listener.name.sasl_ssl.ssl.keystore.certificate.chain=" + pemProperty(t, certs.ServerCert),
		"listener.name.sasl_ssl.ssl.keystore.key=" + pemProperty(t, certs.ServerKey),
		"listener.name.sasl_ssl.ssl.truststore.type=PEM",
		"listener.name.sasl_ssl.ssl.truststore.certificates=" + pemProperty(t, certs.CAFile),
		"listener.name.sasl_ssl.ssl.client.auth=required",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &Kafka{root: root, dir: dir}
	t.Cleanup(func() {
		_, _ = runScript(root, "kafka.sh", "kill", dir)
		removeAll(dir)
	})
	scram := fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s] SCRAM-SHA-512=[name=%s,password=%s]", user, password, user, password)
	cmd := exec.Command(filepath.Join(root, "deploy", "local", "kafka.sh"), "start", dir)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), privateKafkaEnv...), "EVENTFORGE_KAFKA_SASL_SSL_CONF="+conf, "EVENTFORGE_KAFKA_ADD_SCRAM="+scram)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kafka.sh start with SASL_SSL: %v\n%s", err, out)
	}
	out, err := runScript(root, "kafka.sh", "brokers", dir)
	if err != nil {
		t.Fatalf("kafka.sh brokers: %v\n%s", err, out)
	}
	k.brokers = kafka.ParseBrokers(strings.TrimSpace(string(out)))
	port, err := os.ReadFile(filepath.Join(dir, "sasl-ssl-port"))
	if err != nil {
		t.Fatalf("SASL_SSL listener port: %v", err)
	}
	return &SASLSSLKafka{Kafka: k, SecureBrokers: []string{"127.0.0.1:" + strings.TrimSpace(string(port))}, User: user, Password: password}
}

// pemProperty is a PEM file as one Java properties value (newlines escaped).
func pemProperty(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`)
}
