// Package compose checks docker-compose.yml with compose-go, the loader of
// Docker Compose v2 itself (no engine needed): schema, interpolation,
// anchors and depends_on, then the least-privilege and monitoring wiring.
package compose

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

const root = "../../.."

// load parses docker-compose.yml as `docker compose config` would, with
// an empty environment (the file's defaults apply).
func load(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(nil), cli.WithResolvedPaths(true), cli.WithConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pgUser is the user of a service's EVENTFORGE_PG_URL.
func pgUser(t *testing.T, s types.ServiceConfig) string {
	t.Helper()
	v := s.Environment["EVENTFORGE_PG_URL"]
	if v == nil {
		t.Fatalf("%s: no EVENTFORGE_PG_URL", s.Name)
	}
	u, err := url.Parse(*v)
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	return u.User.Username()
}

// TestComposeServicesRunAsTheirRoles: every long-running EventForge service
// connects as its login role of sql/roles.sql, migrate as the schema owner,
// and only the cluster's init and the roles one-shot use the superuser;
// the roles exist (roles ran) before the services start.
func TestComposeServicesRunAsTheirRoles(t *testing.T) {
	p := load(t)
	want := map[string]string{"cdc": "eventforge_relay", "worker": "eventforge_worker", "api": "eventforge_api", "migrate": "eventforge"}
	for name, role := range want {
		s := service(t, p, name)
		if got := pgUser(t, s); got != role {
			t.Errorf("%s connects as %q, want %q", name, got, role)
		}
		if name != "migrate" {
			if d, ok := s.DependsOn["roles"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s does not wait for the roles one-shot: %v", name, s.DependsOn)
			}
		}
	}
	if pg := service(t, p, "postgres"); *pg.Environment["POSTGRES_USER"] == "eventforge" {
		t.Error("the schema owner is the superuser")
	}
	roles := service(t, p, "roles")
	cmd := strings.Join(roles.Command, " ")
	if !strings.Contains(cmd, "--file=/sql/roles.sql") || !strings.Contains(cmd, "ON_ERROR_STOP=1") {
		t.Errorf("roles command %q", cmd)
	}
	if d := roles.DependsOn["migrate"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
		t.Error("roles runs before the tables exist")
	}
	mustMount(t, roles, "sql/roles.sql", "/sql/roles.sql")
	mustMount(t, service(t, p, "postgres"), "deploy/compose/initdb", "/docker-entrypoint-initdb.d")
}

// TestComposeEventForgeHardened: the EventForge containers run like the
// chart's pods: user 65532, read-only root, no capabilities, no privilege
// escalation.
func TestComposeEventForgeHardened(t *testing.T) {
	p := load(t)
	for _, name := range []string{"migrate", "api", "cdc", "worker"} {
		s := service(t, p, name)
		if s.User != "65532:65532" || !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") ||
			!slices.Contains(s.SecurityOpt, "no-new-privileges:true") || s.Build == nil {
			t.Errorf("%s: user %q read_only %v cap_drop %v security_opt %v", name, s.User, s.ReadOnly, s.CapDrop, s.SecurityOpt)
		}
	}
}

// TestComposeGrafanaLoadsTheDashboard: Grafana's provisioning mounts a
// data source and a dashboard provider whose path holds
// deploy/grafana/eventforge.json.
func TestComposeGrafanaLoadsTheDashboard(t *testing.T) {
	p := load(t)
	g := service(t, p, "grafana")
	mustMount(t, g, "deploy/grafana/eventforge.json", "/var/lib/grafana/dashboards/eventforge/eventforge.json")
	mustMount(t, g, "deploy/compose/grafana/dashboards", "/etc/grafana/provisioning/dashboards")
	mustMount(t, g, "deploy/compose/grafana/datasources", "/etc/grafana/provisioning/datasources")
	prov, err := os.ReadFile(filepath.Join(root, "deploy/compose/grafana/dashboards/eventforge.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prov), "path: /var/lib/grafana/dashboards/eventforge\n") {
		t.Error("the dashboard provider does not read the mounted dashboard directory")
	}
	ds, err := os.ReadFile(filepath.Join(root, "deploy/compose/grafana/datasources/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ds), "url: http://prometheus:9090") {
		t.Error("the data source is not the compose Prometheus")
	}
}

// TestComposeBindMountsExist: every bind mount's source is in the repository.
func TestComposeBindMountsExist(t *testing.T) {
	p := load(t)
	n := 0
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			n++
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind source %s: %v", s.Name, v.Source, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s: %s mounted writable", s.Name, v.Target)
			}
		}
	}
	if n == 0 {
		t.Error("no bind mounts found")
	}
}

// mustMount fails unless s bind-mounts the repository path src at target.
func mustMount(t *testing.T, s types.ServiceConfig, src, target string) {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(root, src))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Volumes {
		if v.Target == target {
			if v.Source != abs {
				t.Errorf("%s: %s from %s, want %s", s.Name, target, v.Source, abs)
			}
			return
		}
	}
	t.Errorf("%s: nothing mounted at %s", s.Name, target)
}
