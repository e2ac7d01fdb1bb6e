package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// testName matches the names UniqueName makes: a lowercase prefix, an
// underscore and ten hex digits. A topic may carry a suffix after them
// (a relay's "t_0123456789.orders", a dead-letter topic's ".dlq").
var (
	testDatabaseName = regexp.MustCompile(`^[a-z0-9]+_[0-9a-f]{10}$`)
	testTopicName    = regexp.MustCompile(`^[a-z0-9]+_[0-9a-f]{10}([._].*)?$`)
)

// Leftovers are the test databases and topics a run left on the shared
// services: named as UniqueName names them and untouched for a while.
type Leftovers struct {
	Databases []string
	Topics    []string
	Binaries  []string // paths of eventforge binaries Binary built for test processes
}

// FindLeftovers lists what tests left on the shared services that nothing
// has used for minAge: databases with a test name, no session and no
// relation created or dropped in that time, and topics with a test name
// whose partitions took no write in that time (their files in the broker's
// log folder, kafkaLogDir, say when). The age keeps the data of tests that
// run now, other worktrees' included, out of the list.
func FindLeftovers(ctx context.Context, env *Env, kafkaLogDir string, minAge time.Duration) (Leftovers, error) {
	var l Leftovers
	dbs, err := leftoverDatabases(ctx, env.PGURL, minAge)
	if err != nil {
		return l, err
	}
	l.Databases = dbs
	topics, err := leftoverTopics(env.Brokers, kafkaLogDir, time.Now().Add(-minAge))
	if err != nil {
		return l, err
	}
	l.Topics = topics
	root, err := RepoRoot()
	if err != nil {
		return l, err
	}
	l.Binaries, err = leftoverBinaries(filepath.Join(stateDir(root), "bin"), time.Now().Add(-minAge))
	return l, err
}

// leftoverBinaries are the binaries Binary built (eventforge-test-<pid>)
// in dir before cutoff: each test process builds its own and none removes
// it.
func leftoverBinaries(dir string, cutoff time.Time) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "eventforge-test-*"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.ModTime().Before(cutoff) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Drop removes the binaries, drops the databases (their replication slots
// first) and deletes the topics, and returns every error met on the way.
func (l Leftovers) Drop(ctx context.Context, env *Env) error {
	var errs []error
	for _, p := range l.Binaries {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(l.Databases) > 0 {
		admin, err := pgx.Connect(ctx, env.PGURL)
		if err != nil {
			return err
		}
		defer admin.Close(ctx)
		for _, name := range l.Databases {
			if err := dropDatabaseWithSlots(ctx, admin, name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(l.Topics) > 0 {
		admin, err := sarama.NewClusterAdmin(env.Brokers, kafka.Config{Brokers: env.Brokers}.Base())
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		defer admin.Close()
		for _, tp := range l.Topics {
			if err := admin.DeleteTopic(tp); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("delete topic %s: %w", tp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// leftoverDatabases are the databases with a test name, no session, no
// active replication slot and a folder unchanged for minAge.
func leftoverDatabases(ctx context.Context, adminURL string, minAge time.Duration) ([]string, error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close(ctx)
	rows, err := admin.Query(ctx, `SELECT d.datname FROM pg_database d
		WHERE NOT d.datistemplate
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid)
		  AND NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.database = d.datname AND s.active)
		  AND (pg_stat_file('base/' || d.oid)).modification < now() - make_interval(secs => $1)`, minAge.Seconds())
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if testDatabaseName.MatchString(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// dropDatabaseWithSlots ends the walsenders of the database's slots, drops
// the slots (a slot keeps its database alive) and then the database.
func dropDatabaseWithSlots(ctx context.Context, admin *pgx.Conn, name string) error {
	_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		WHERE database = $1 AND active_pid IS NOT NULL`, name)
	var err error
	for range 50 {
		_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE database = $1 AND NOT active`, name)
		var left int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left)
		if err == nil && left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// leftoverTopics are the broker's topics with a test name none of whose
// partition folders in logDir changed after cutoff. A topic without a
// folder there is left alone: its age is unknown.
func leftoverTopics(brokers []string, logDir string, cutoff time.Time) ([]string, error) {
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		return nil, err
	}
	lastWrite, err := partitionWrites(logDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for name := range topics {
		if w, ok := lastWrite[name]; ok && testTopicName.MatchString(name) && w.Before(cutoff) {
			out = append(out, name)
		}
	}
	return out, nil
}

// partitionWrites maps each topic with a partition folder in logDir
// ("<topic>-<partition>") to the newest modification time of its segment
// files (written at each append) and partition.metadata (written when the
// topic was created).
func partitionWrites(logDir string) (map[string]time.Time, error) {
	entries, err := os.ReadDir(logDir)
	if err != nil {
		return nil, err
	}
	last := map[string]time.Time{}
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '-')
		if !e.IsDir() || i <= 0 {
			continue
		}
		topic := e.Name()[:i]
		newest := last[topic]
		_ = filepath.WalkDir(filepath.Join(logDir, e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // a segment deleted while we look
			}
			if !strings.HasSuffix(d.Name(), ".log") && d.Name() != "partition.metadata" {
				return nil // a broker's start rewrites indexes and checkpoints
			}
			if info, err := d.Info(); err == nil && info.ModTime().After(newest) {
				newest = info.ModTime()
			}
			return nil
		})
		last[topic] = newest
	}
	return last, nil
}

// KafkaLogDir is the log folder (log.dirs) of the shared broker that `make
// up` runs, from its server.properties in the state folder.
func KafkaLogDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(stateDir(root), "kafka", "server.properties"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "log.dirs="); ok {
			return strings.Split(v, ",")[0], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no log.dirs in the broker's server.properties")
}

// SharedEnv is the shared local services without a test: for tools that
// run outside go test. It starts them when they are not running.
func SharedEnv() (*Env, error) {
	shared.once.Do(func() { shared.env, shared.err = startShared() })
	return shared.env, shared.err
}
