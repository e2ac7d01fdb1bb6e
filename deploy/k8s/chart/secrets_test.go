package chart

import (
	"strings"
	"testing"
)

// secretEnv are the variables whose value is a credential: they may only
// come from a Secret (a URL) or name a file mounted from one.
var secretEnv = []string{"EVENTFORGE_PG_URL", "EVENTFORGE_KAFKA_SASL_PASSWORD", "EVENTFORGE_API_TOKEN"}

// TestNoCredentialInPlainEnv: in every workload, the PostgreSQL URL comes
// from a secretKeyRef, the Kafka password and the API token are files
// mounted from Secrets, never plain values; with existing Secrets named the
// chart renders no Secret of its own.
func TestNoCredentialInPlainEnv(t *testing.T) {
	r := render(t, []string{hardenedValues})
	if s := r.ofKind("Secret"); len(s) != 0 {
		t.Errorf("hardened values render %d Secrets, want none (all existing)", len(s))
	}
	workloads := append(r.ofKind("Deployment"), r.ofKind("Job")...)
	if len(workloads) != 5 {
		t.Fatalf("%d workloads, want relay, 2 workers, api, migration: %s", len(workloads), r.summary())
	}
	for _, w := range workloads {
		env := envOf(container(w))
		if !strings.HasPrefix(env["EVENTFORGE_PG_URL"], "secret:") {
			t.Errorf("%s: EVENTFORGE_PG_URL = %q, want a secretKeyRef", w.name(), env["EVENTFORGE_PG_URL"])
		}
		for _, name := range secretEnv[1:] {
			if _, ok := env[name]; ok {
				t.Errorf("%s: %s set in the manifest", w.name(), name)
			}
		}
		if w.kind() == "Job" {
			continue
		}
		if w.name() != "eventforge-api" {
			if env["EVENTFORGE_KAFKA_SASL_PASSWORD_FILE"] != "/etc/eventforge/kafka-sasl/password" ||
				env["EVENTFORGE_KAFKA_TLS_CA_FILE"] != "/etc/eventforge/kafka-tls/ca.crt" {
				t.Errorf("%s: Kafka credentials not from files: %v", w.name(), env)
			}
			mustMountSecret(t, w, "/etc/eventforge/kafka-sasl", "eventforge-kafka")
			mustMountSecret(t, w, "/etc/eventforge/kafka-tls", "kafka-ca")
		}
	}
	api := r.find(t, "Deployment", "eventforge-api")
	if env := envOf(container(api)); env["EVENTFORGE_API_TOKEN_FILE"] != "/etc/eventforge/api-token/token" {
		t.Errorf("api token not from a file: %v", env)
	}
	mustMountSecret(t, api, "/etc/eventforge/api-token", "eventforge-api-token")
}

// mustMountSecret fails unless w mounts Secret name read-only at path.
func mustMountSecret(t *testing.T, w object, path, name string) {
	t.Helper()
	c := container(w)
	mounts, _ := c["volumeMounts"].([]any)
	for _, m := range mounts {
		if get(m, "mountPath") != path {
			continue
		}
		if get(m, "readOnly") != true {
			t.Errorf("%s: %s not read-only", w.name(), path)
		}
		vols, _ := podSpec(w)["volumes"].([]any)
		for _, v := range vols {
			if get(v, "name") == get(m, "name") {
				if got := get(v, "secret", "secretName"); got != name {
					t.Errorf("%s: %s from %v, want Secret %s", w.name(), path, got, name)
				}
				if mode := get(v, "secret", "defaultMode"); mode != float64(0o440) {
					t.Errorf("%s: %s mode %v, want 0440", w.name(), path, mode)
				}
				return
			}
		}
	}
	t.Errorf("%s: nothing mounted at %s", w.name(), path)
}

// TestMigrationJobHook: the migration runs before install and upgrade under
// its own Secret (the schema owner), with args from values, and its Secret
// exists before it (a hook of lower weight).
func TestMigrationJobHook(t *testing.T) {
	r := render(t, nil, `migration.args=["migrate","--demo"]`)
	job := r.find(t, "Job", "eventforge-migrate")
	ann := get(map[string]any(job), "metadata", "annotations")
	if get(ann, "helm.sh/hook") != "pre-install,pre-upgrade" {
		t.Errorf("job hook %v", ann)
	}
	c := container(job)
	if got := strings.TrimSpace(strings.Join(toStrings(c["args"]), " ")); got != "migrate --demo" {
		t.Errorf("args %q, want the values' args", got)
	}
	if env := envOf(c); env["EVENTFORGE_PG_URL"] != "secret:eventforge-migration-pg/pg-url" {
		t.Errorf("migration URL %q, want its own Secret", env["EVENTFORGE_PG_URL"])
	}
	sec := r.find(t, "Secret", "eventforge-migration-pg")
	sAnn := get(map[string]any(sec), "metadata", "annotations")
	if get(sAnn, "helm.sh/hook") != "pre-install,pre-upgrade" || get(sAnn, "helm.sh/hook-weight") != "-10" {
		t.Errorf("migration Secret is not a hook created before the Job: %v", sAnn)
	}
	// The owner's URL is removed once the migration succeeded.
	if get(sAnn, "helm.sh/hook-delete-policy") != "before-hook-creation,hook-succeeded" {
		t.Errorf("migration Secret delete policy %v", get(sAnn, "helm.sh/hook-delete-policy"))
	}
	if get(podSpec(job), "restartPolicy") != "Never" {
		t.Error("restartPolicy")
	}
}

// TestMissingDatabaseSecretFails: without a Secret or a URL the chart
// refuses to render and says which value is missing.
func TestMissingDatabaseSecretFails(t *testing.T) {
	_, err := renderErr(nil, `relay.database={"existingSecret":"","url":"","secretKey":"pg-url"}`)
	if err == nil || !strings.Contains(err.Error(), "relay.database: set existingSecret") {
		t.Fatalf("render without a relay database: %v", err)
	}
	_, err = renderErr(nil, `kafka.sasl={"mechanism":"PLAIN","user":"u","existingSecret":"","password":"","passwordKey":"password"}`)
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl: set existingSecret") {
		t.Fatalf("render without a SASL password: %v", err)
	}
}

// TestHardenedSecurityContext: every pod runs as the image's non-root user
// with a read-only root, no privilege escalation, no capabilities and the
// default seccomp profile, without a service account token.
func TestHardenedSecurityContext(t *testing.T) {
	for _, files := range [][]string{nil, {hardenedValues}} {
		r := render(t, files)
		for _, w := range append(r.ofKind("Deployment"), r.ofKind("Job")...) {
			ps := podSpec(w)
			if get(ps, "securityContext", "runAsNonRoot") != true || get(ps, "securityContext", "runAsUser") != float64(65532) ||
				get(ps, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
				t.Errorf("%s: pod securityContext %v", w.name(), ps["securityContext"])
			}
			if get(ps, "automountServiceAccountToken") != false {
				t.Errorf("%s: service account token mounted", w.name())
			}
			sc := container(w)["securityContext"]
			if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false ||
				get(sc, "capabilities", "drop", 0) != "ALL" || get(sc, "seccompProfile", "type") != "RuntimeDefault" {
				t.Errorf("%s: container securityContext %v", w.name(), sc)
			}
			if get(container(w), "resources", "requests", "memory") == nil || get(container(w), "resources", "limits", "memory") == nil {
				t.Errorf("%s: no memory request and limit", w.name())
			}
		}
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestValuesSchemaRejectsMistakes: values.schema.json turns a misspelt key
// or a wrong type into an error instead of a silently ignored setting.
func TestValuesSchemaRejectsMistakes(t *testing.T) {
	for _, set := range []string{
		`relay.replica=3`,
		`relay.replicas="two"`,
		`kafka.sasl.mechanism="SCRAM"`,
		`workers=[{"name":"orders","group":"g"}]`,
		`relay.env={"PG_URL":"x"}`,
	} {
		if _, err := renderErr(nil, set); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("--set-json %s: %v, want a schema error", set, err)
		}
	}
}

// TestExtraVolumesMountPostgresCA: extraVolumes and extraVolumeMounts
// reach every workload (the hardened example mounts the PostgreSQL CA the
// URLs' sslrootcert= names).
func TestExtraVolumesMountPostgresCA(t *testing.T) {
	r := render(t, []string{hardenedValues})
	for _, w := range append(r.ofKind("Deployment"), r.ofKind("Job")...) {
		mustMountSecret(t, w, "/etc/eventforge/pg-ca", "postgres-ca")
	}
}

// TestChartMadeSecretsAndMutualTLS: without existing Secrets the chart
// makes its own for the SASL password and the API token and mounts them as
// files; a client certificate and key come from the TLS Secret as files.
func TestChartMadeSecretsAndMutualTLS(t *testing.T) {
	r := render(t, nil, valueSets[2].sets...)
	sasl := r.find(t, "Secret", "eventforge-kafka-sasl")
	if get(map[string]any(sasl), "data", "password") != "ZGV2" { // "dev"
		t.Errorf("SASL Secret data %v", get(map[string]any(sasl), "data"))
	}
	tok := r.find(t, "Secret", "eventforge-api-token")
	if get(map[string]any(tok), "data", "token") == nil {
		t.Error("no token in the API token Secret")
	}
	w := r.find(t, "Deployment", "eventforge-worker-inline")
	mustMountSecret(t, w, "/etc/eventforge/kafka-sasl", "eventforge-kafka-sasl")
	mustMountSecret(t, w, "/etc/eventforge/kafka-tls", "kafka-mtls")
	env := envOf(container(w))
	if env["EVENTFORGE_KAFKA_TLS_CERT_FILE"] != "/etc/eventforge/kafka-tls/tls.crt" || env["EVENTFORGE_KAFKA_TLS_KEY_FILE"] != "/etc/eventforge/kafka-tls/tls.key" ||
		env["EVENTFORGE_TOPICS"] != "a,b" {
		t.Errorf("worker env %v", env)
	}
	mustMountSecret(t, r.find(t, "Deployment", "eventforge-api"), "/etc/eventforge/api-token", "eventforge-api-token")
	// A worker without handlers records events only: no handlers path, no ConfigMap.
	bare := r.find(t, "Deployment", "eventforge-worker-bare")
	if _, ok := envOf(container(bare))["EVENTFORGE_HANDLERS"]; ok {
		t.Error("a worker without handlers gets --handlers")
	}
	if n := len(r.ofKind("ConfigMap")); n != 1 {
		t.Errorf("%d ConfigMaps, want the inline worker's only", n)
	}
	if len(r.ofKind("Job")) != 0 || len(r.ofKind("ServiceMonitor")) != 0 || len(r.ofKind("PrometheusRule")) != 0 {
		t.Errorf("disabled objects rendered: %s", r.summary())
	}
}
