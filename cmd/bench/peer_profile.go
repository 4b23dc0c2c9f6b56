package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A peer profile is one PostgreSQL server the peer suite measures: the
// distribution's defaults (-pg) or the same server tuned as its best users
// tune it (-pg-tuned, issue 41: cmd/bench/pg-throwaway.sh start tuned).
// Both run the same cases; the tuned rows are named pg-tuned-*, so every
// (suite, case, concurrency) stays one row and the default rows keep their
// names.
type peerProfile struct {
	label string // "default" or "tuned": in each row's pg_profile and in the targets
	dsn   string
	tuned bool
}

const (
	pgCasePrefix      = "pg-"
	pgTunedCasePrefix = "pg-tuned-"
	// peerPoolMin is the pool's least size, whatever -concurrency says.
	peerPoolMin = 16
	// pgPoolMaxConnsParam is pgxpool's DSN parameter for the pool size: a
	// DSN that sets it keeps it (a team's pool sized to its cores).
	pgPoolMaxConnsParam = "pool_max_conns"
)

// peerProfiles lists the profiles the flags name, in the order they run:
// Idem's ratios are judged against the fastest row over all of them
// (judgePeer).
func peerProfiles(o Options) []peerProfile {
	var out []peerProfile
	if o.PG != "" {
		out = append(out, peerProfile{label: "default", dsn: o.PG})
	}
	if o.PGTuned != "" {
		out = append(out, peerProfile{label: "tuned", dsn: o.PGTuned, tuned: true})
	}
	return out
}

// caseName is the row name of a peer case (named as on the default
// profile, pg-...) in this profile.
func (p peerProfile) caseName(base string) string {
	if !p.tuned {
		return base
	}
	return pgTunedCasePrefix + strings.TrimPrefix(base, pgCasePrefix)
}

// peerPoolSize is the pool the suite opens for concurrencies up to maxC:
// the DSN's pool_max_conns when it names one, else one connection per
// worker (at least peerPoolMin), so no worker waits for a connection.
func peerPoolSize(dsn string, cfg *pgxpool.Config, maxC int) int32 {
	if strings.Contains(dsn, pgPoolMaxConnsParam) {
		return cfg.MaxConns
	}
	return int32(max(maxC, peerPoolMin))
}

// pgSettings are the server settings a peer row is read with: the ones
// issue 41 tunes, as SHOW prints them, and the client's pool.
type pgSettings struct {
	Version, SyncCommit, Fsync                string
	CommitDelay, CommitSiblings               string
	WALBuffers, SharedBuffers                 string
	MaxConnections, ReservedConnections, Pool int
}

// line is the settings as one "name=value" line, the pg_settings field of
// every peer row.
func (s pgSettings) line() string {
	return fmt.Sprintf("commit_delay=%s commit_siblings=%s synchronous_commit=%s fsync=%s wal_buffers=%s shared_buffers=%s max_connections=%d pool_max_conns=%d",
		s.CommitDelay, s.CommitSiblings, s.SyncCommit, s.Fsync, s.WALBuffers, s.SharedBuffers, s.MaxConnections, s.Pool)
}

// check refuses a pool the server cannot serve: past max_connections
// minus the superuser's reserved slots, a case fails part way with "too
// many clients" instead of up front.
func (s pgSettings) check() error {
	if avail := s.MaxConnections - s.ReservedConnections; s.Pool > avail {
		return fmt.Errorf("the pool's %d connections exceed the server's max_connections %d - superuser_reserved_connections %d: raise max_connections or set %s in the DSN",
			s.Pool, s.MaxConnections, s.ReservedConnections, pgPoolMaxConnsParam)
	}
	return nil
}

// readPGSettings reads the settings with current_setting, which prints
// them as SHOW does (16MB, not a count of 8 kB pages).
func readPGSettings(ctx context.Context, pool *pgxpool.Pool) (pgSettings, error) {
	s := pgSettings{Pool: int(pool.Config().MaxConns)}
	err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
current_setting('fsync'), current_setting('commit_delay'), current_setting('commit_siblings'),
current_setting('wal_buffers'), current_setting('shared_buffers'),
current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int`).
		Scan(&s.Version, &s.SyncCommit, &s.Fsync, &s.CommitDelay, &s.CommitSiblings,
			&s.WALBuffers, &s.SharedBuffers, &s.MaxConnections, &s.ReservedConnections)
	if err != nil {
		return s, fmt.Errorf("reading the server's settings: %w", err)
	}
	return s, nil
}

// set writes the profile and its settings into a peer row.
func (s pgSettings) set(r *Result, p peerProfile) {
	r.Set("pg_profile", p.label)
	r.Set("pg_settings", s.line())
	r.Set("pg_version", s.Version)
	r.Set("pg_synchronous_commit", s.SyncCommit)
	r.Set("pg_fsync", s.Fsync)
}

// peerSettingsLines is one line per profile the peer suite ran ("default:
// commit_delay=0 …"), in run order, for the report beside the charts.
func peerSettingsLines(suites []suiteRun) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range suites {
		if s.Name != "peer" {
			continue
		}
		for _, r := range s.Results {
			prof, _ := r.Extra["pg_profile"].(string)
			line, _ := r.Extra["pg_settings"].(string)
			if prof == "" || seen[prof] {
				continue
			}
			seen[prof] = true
			out = append(out, prof+": "+line)
		}
	}
	return out
}
