package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The two failover faults: a PostgreSQL primary lost and its standby
// promoted, and a Kafka broker frozen (SIGSTOP) as a paused VM or a
// network that drops packets would leave it.
//
// The standby is synchronous (synchronous_standby_names names it), so a
// commit the load generator saw acknowledged survives the promotion: the
// ledger stays the truth, and so does every worker's effect. What the
// promotion tests is the relay's side: its failover slot synchronised to
// the standby, the multi-host URL that finds the new primary, and nothing
// published that the promoted server lacks (synchronized_standby_slots).

// multiHostURL is the URL of database db on whichever of the two servers
// is the primary (target_session_attrs=read-write); db alone without a
// standby.
func (s *services) multiHostURL(ctx context.Context, db string) (string, error) {
	u, err := s.serverURL(ctx, s.primary, db)
	if err != nil || s.standby == "" {
		return u, err
	}
	su, err := s.serverURL(ctx, s.standby, db)
	if err != nil {
		return "", err
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	st, err := url.Parse(su)
	if err != nil {
		return "", err
	}
	pu.Host += "," + st.Host
	q := pu.Query()
	q.Set("target_session_attrs", "read-write")
	pu.RawQuery = q.Encode()
	return pu.String(), nil
}

func (s *services) serverURL(ctx context.Context, dir, db string) (string, error) {
	return s.scriptOut(ctx, "pg.sh", "url", dir, db)
}

// onServer runs statements, each alone, on the postgres database of the
// cluster in dir.
func (s *services) onServer(ctx context.Context, dir string, stmts ...string) error {
	c, err := s.connect(ctx, dir)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// standbyName is the application and physical slot name pg.sh gives the
// standby in dir.
func standbyName(dir string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, filepath.Base(dir))
}

// makeSynchronous makes the primary wait for the standby's flush before a
// commit returns.
func (s *services) makeSynchronous(ctx context.Context) error {
	return s.onServer(ctx, s.primary,
		fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%q'", standbyName(s.standby)),
		"SELECT pg_reload_conf()")
}

// promotionReady tells whether a promotion would keep the relay's slot:
// the standby streams synchronously and holds a synced, persistent copy of
// slot (what eventforge_slot_failover_ready reports).
func (s *services) promotionReady(ctx context.Context, slot string) bool {
	if s.standby == "" {
		return false
	}
	var streaming, synced int
	if err := s.query(ctx, s.primary, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'", &streaming); err != nil {
		return false
	}
	err := s.query(ctx, s.standby, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary", &synced, slot)
	return err == nil && streaming == 1 && synced == 1
}

// query scans the one value of q into dst, on the postgres database of
// the cluster in dir.
func (s *services) query(ctx context.Context, dir, q string, dst any, args ...any) error {
	c, err := s.connect(ctx, dir)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.QueryRow(ctx, q, args...).Scan(dst)
}

// connect opens a connection to the postgres database of the cluster in
// dir.
func (s *services) connect(ctx context.Context, dir string) (*pgx.Conn, error) {
	u, err := s.serverURL(ctx, dir, "postgres")
	if err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, u)
}

// promote stops the primary hard and promotes the standby, which becomes
// the primary; then the old primary's folder is made a new synchronous
// standby of it (a fresh base backup on the same port), so the next
// promotion goes the other way. It returns how long the database accepted
// no write (from the kill until the promoted server took writes).
func (s *services) promote(ctx context.Context) (time.Duration, error) {
	if s.standby == "" {
		return 0, errors.New("no standby")
	}
	began := time.Now()
	if err := s.script(ctx, "pg.sh", "kill", s.primary); err != nil {
		return 0, err
	}
	if err := s.script(ctx, "pg.sh", "promote", s.standby); err != nil {
		return 0, err
	}
	down := time.Since(began)
	old := s.primary
	s.primary, s.standby = s.standby, old
	// Until the new standby streams, commits must not wait for it.
	if err := s.onServer(ctx, s.primary, "ALTER SYSTEM RESET synchronous_standby_names", "ALTER SYSTEM RESET synchronized_standby_slots", "SELECT pg_reload_conf()"); err != nil {
		return down, err
	}
	if err := s.rebuildStandby(ctx); err != nil {
		return down, err
	}
	return down, s.makeSynchronous(ctx)
}

// rebuildStandby replaces the cluster in s.standby (the old primary) by a
// standby of s.primary on the same port.
func (s *services) rebuildStandby(ctx context.Context) error {
	port, err := os.ReadFile(filepath.Join(s.standby, "port"))
	if err != nil {
		return err
	}
	if err := removeCluster(s.standby); err != nil {
		return err
	}
	if err := os.MkdirAll(s.standby, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.standby, "port"), port, 0o644); err != nil {
		return err
	}
	return s.script(ctx, "pg.sh", "standby", s.standby, s.primary)
}

// freezeBroker stops broker id with SIGSTOP for d, then lets it run again.
func (s *services) freezeBroker(ctx context.Context, id int, d time.Duration) error {
	pid, err := s.kafkaPID(id)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	pause(ctx, d)
	return syscall.Kill(pid, syscall.SIGCONT)
}
