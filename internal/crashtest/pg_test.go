package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
)

// TestKill9LosesNoAcknowledgedWritePostgres is the crash test with the
// service on PostgreSQL (CLANKIE_TEST_POSTGRES names the server; .ci/run
// starts one): kill -9 mid-load, and every acknowledged write is in the
// database after the restart, read from its rows directly.
func TestKill9LosesNoAcknowledgedWritePostgres(t *testing.T) {
	dsn := os.Getenv("CLANKIE_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CLANKIE_TEST_POSTGRES is unset under CI=true: the crash test must also run against PostgreSQL")
		}
		t.Skip("missing dependency: CLANKIE_TEST_POSTGRES (a PostgreSQL server; scripts/test starts one): the PostgreSQL crash test")
	}
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to CLANKIE_TEST_POSTGRES: %v", err)
	}
	schema := fmt.Sprintf("crash_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(ctx)
	})
	// The service's connections carry the schema's name, so the test can
	// tell when a killed service's last backend has gone.
	sep := "&"
	if !containsQuery(dsn) {
		sep = "?"
	}
	store := dsn + sep + "search_path=" + schema + "&application_name=" + schema
	runCrash(t, []string{"CLANKIE_MEMORY_STORE=" + store}, func() (*diskState, error) {
		return readDB(ctx, conn, schema)
	}, func() {
		// A kill -9 cuts the service's connections, but a backend that had
		// received a COMMIT still finishes it: the write was sent and never
		// acknowledged, an outcome the retry settles. Read only once every
		// backend of the dead service is gone.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d backends of the killed service are still open after 10s", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func containsQuery(dsn string) bool {
	for _, c := range dsn {
		if c == '?' {
			return true
		}
	}
	return false
}

// readDB reads the service's rows into the shape readDisk gives for files:
// people by their file-store name (those with facts), episodes by lane.
func readDB(ctx context.Context, conn *pgx.Conn, schema string) (*diskState, error) {
	d := &diskState{people: map[string]personFile{}, lanes: map[api.Lane][]api.Episode{}}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".person_fact").Scan(&exists); err != nil || !exists {
		return d, err // the service has not migrated yet
	}
	// A person's facts are rows in their stored order (ord), built back
	// into the facts' JSON here so the test reads no code of the store.
	rows, err := conn.Query(ctx, `SELECT p.name, p.guild_id, p.user_id, jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
			'factId', f.fact_id, 'kind', f.kind, 'body', f.body,
			'visibility', jsonb_build_object('scope', f.scope, 'channelId', f.channel_id),
			'confidence', f.confidence, 'createdAt', f.created_at, 'updatedAt', f.updated_at, 'expiresAt', f.expires_at,
			'supersedesFactId', f.supersedes_fact_id,
			'provenance', jsonb_build_object('sourceSurface', f.source_surface, 'sourceEventId', f.source_event_id,
				'correlationId', f.correlation_id, 'proposerUserId', f.proposer_user_id,
				'channelId', f.source_channel_id, 'sourceMessageId', f.source_message_id))) ORDER BY f.ord)
		FROM `+schema+`.person p JOIN `+schema+`.person_fact f ON f.name = p.name
		WHERE p.facts > 0 GROUP BY p.name, p.guild_id, p.user_id`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var pf personFile
		var facts []byte
		if err := rows.Scan(&name, &pf.Subject.GuildID, &pf.Subject.UserID, &facts); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(facts, &pf.Facts); err != nil {
			d.broken = append(d.broken, "person/"+name+": "+err.Error())
			continue
		}
		for i := range pf.Facts {
			pf.Facts[i].Subject = pf.Subject
		}
		pf.SchemaVersion = api.SchemaVersion
		d.people[name] = pf
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = conn.Query(ctx, "SELECT record FROM "+schema+".episodes ORDER BY record->>'occurredAt', episode_id")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var rec []byte
		if err := rows.Scan(&rec); err != nil {
			return nil, err
		}
		var ep api.Episode
		if err := json.Unmarshal(rec, &ep); err != nil {
			d.broken = append(d.broken, "episodes: "+err.Error())
			continue
		}
		d.lanes[ep.Lane] = append(d.lanes[ep.Lane], ep)
	}
	return d, rows.Err()
}
