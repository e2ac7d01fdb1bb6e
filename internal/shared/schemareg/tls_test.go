package schemareg

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestTLS: a registry behind TLS that requires a client certificate is
// reached with the CA and the client certificate; without the client
// certificate, or trusting another CA, it does not answer: an outage,
// not the event's fault.
func TestTLS(t *testing.T) {
	certs := testenv.NewCerts(t, t.TempDir())
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("orders-value", 1, 1, sr.Schema{Schema: orderV1, Type: sr.TypeAvro})
	srv := httptest.NewUnstartedServer(reg.Handler())
	cert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"ca and client certificate", Config{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, true},
		{"no client certificate", Config{CAFile: certs.CAFile}, false},
		{"another ca", Config{CAFile: certs.OtherCAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, false},
	} {
		t.Run(c.name, func(t *testing.T) { assertReaches(t, c.cfg, srv.URL, c.ok) })
	}
}
