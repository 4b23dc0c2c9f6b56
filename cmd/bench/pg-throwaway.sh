#!/usr/bin/env bash
# Throwaway local PostgreSQL servers for the bench's peer suite: the
# distribution's defaults, and the same server tuned for this workload.
#
#   cmd/bench/pg-throwaway.sh start         # defaults; prints the DSN to pass as -pg
#   cmd/bench/pg-throwaway.sh start tuned   # tuned; prints the DSN to pass as -pg-tuned
#   go run ./cmd/bench -suite receipts,http,peer -pg "$(cmd/bench/pg-throwaway.sh dsn)" \
#       -pg-tuned "$(cmd/bench/pg-throwaway.sh dsn tuned)"
#   cmd/bench/pg-throwaway.sh stop [tuned]  # stops it and deletes its data
#
# It runs the distribution's PostgreSQL (installing Debian's `postgresql`
# package if no server is found). Both profiles keep the stock durability
# settings (fsync=on, synchronous_commit=on, full_page_writes=on): the peer
# must pay for durability exactly as Idem does. Each listens on a unix
# socket in its directory and on 127.0.0.1. As root it runs as the
# `postgres` user, because PostgreSQL refuses to run as root.
#
# The default profile (port 54329) changes nothing but max_connections=200,
# so that any -concurrency fits.
#
# The tuned profile (port 54330) is what a team running this workload (many
# small durable transactions, each a few kB of WAL) would set:
#   commit_delay=PGBENCH_COMMIT_DELAY (default 50 µs) and
#   commit_siblings=PGBENCH_COMMIT_SIBLINGS (default 5): group commit. A
#     committing backend waits commit_delay µs before its WAL flush when at
#     least commit_siblings other transactions are open, so one fsync covers
#     more commits; with fewer open (low concurrency) no commit waits.
#     Chosen by a sweep of pg-keyed-pipe@64 beside the default server in
#     the same invocation (docs/benchmarks.md, "The peer:
#     PostgreSQL on default and tuned settings"): 50 µs had the best median, 1000 µs the worst p50. The
#     variables exist to repeat the sweep on another disk.
#   wal_buffers=16MB: the most PostgreSQL's auto-sizing ever picks (1/32 of
#     shared_buffers, capped at 16MB); 64 concurrent commits of a few kB
#     never wait for a WAL buffer to be written out.
#   shared_buffers=512MB: the peer suite's tables (keys, documents and their
#     indexes) grow with -duration: 130 MB after a -duration 1s run at
#     -concurrency 1,32,64 (pg_table_bytes in each row), so a run of a few
#     seconds per case keeps every page it touches cached; the machine has
#     the RAM.
#   max_connections=100: the suite's pool opens max(concurrency, 16)
#     connections (64 at the usual -concurrency 1,8,64), plus
#     superuser_reserved_connections (3) and psql; fewer slots than the
#     default profile's 200 keep the shared proc array small.
#   max_wal_size=4GB, checkpoint_timeout=30min: no checkpoint starts
#     inside a case (the suite runs CHECKPOINT between cases), so no case
#     pays for another's dirty pages.
#
# Environment: PGBENCH_DIR (default /tmp/idem-bench-pg, or
# /tmp/idem-bench-pg-tuned), PGBENCH_PORT (default 54329, or 54330),
# PGBENCH_DB (default idembench), PGBENCH_COMMIT_DELAY and
# PGBENCH_COMMIT_SIBLINGS (tuned only).
set -euo pipefail

PROFILE=${2:-default}
case "$PROFILE" in
default)
	DIR=${PGBENCH_DIR:-/tmp/idem-bench-pg}
	PORT=${PGBENCH_PORT:-54329}
	SETTINGS="-c max_connections=200"
	;;
tuned)
	DIR=${PGBENCH_DIR:-/tmp/idem-bench-pg-tuned}
	PORT=${PGBENCH_PORT:-54330}
	SETTINGS="-c commit_delay=${PGBENCH_COMMIT_DELAY:-50} -c commit_siblings=${PGBENCH_COMMIT_SIBLINGS:-5}"
	SETTINGS="$SETTINGS -c wal_buffers=16MB -c shared_buffers=512MB -c max_connections=100"
	SETTINGS="$SETTINGS -c max_wal_size=4GB -c checkpoint_timeout=30min"
	;;
*)
	echo "unknown profile $PROFILE: default or tuned" >&2
	exit 2
	;;
esac
DB=${PGBENCH_DB:-idembench}

pgbin() {
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -z "$bin" ] && command -v pg_ctl >/dev/null 2>&1; then
		bin=$(dirname "$(command -v pg_ctl)")
	fi
	echo "$bin"
}

as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

dsn() {
	echo "postgres://postgres@/$DB?host=$DIR&port=$PORT&sslmode=disable"
}

start() {
	BIN=$(pgbin)
	if [ -z "$BIN" ]; then
		echo "no PostgreSQL found; installing Debian's postgresql package" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
		BIN=$(pgbin)
	fi
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		useradd --system --home-dir "$DIR" --shell /bin/sh postgres
	fi
	if [ -f "$DIR/data/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
		echo "already running" >&2
		dsn
		return
	fi
	mkdir -p "$DIR"
	[ "$(id -u)" = 0 ] && chown postgres "$DIR"
	if [ ! -f "$DIR/data/PG_VERSION" ]; then
		as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C >"$DIR/initdb.log"
	fi
	as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start \
		-o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 $SETTINGS" >&2
	as_pg "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -d postgres -qtAc \
		"SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 ||
		as_pg "$BIN/createdb" -h "$DIR" -p "$PORT" -U postgres "$DB"
	dsn
}

stop() {
	BIN=$(pgbin)
	if [ -n "$BIN" ] && [ -f "$DIR/data/postmaster.pid" ]; then
		as_pg "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >&2 || true
	fi
	rm -rf "$DIR"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
dsn) dsn ;;
*)
	echo "usage: $0 start|stop|dsn [default|tuned]" >&2
	exit 2
	;;
esac
