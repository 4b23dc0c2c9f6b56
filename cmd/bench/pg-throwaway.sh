#!/usr/bin/env bash
# A throwaway local PostgreSQL for the bench's peer suite.
#
#   cmd/bench/pg-throwaway.sh start   # prints the DSN to pass as -pg
#   go run ./cmd/bench -suite receipts,http,peer -pg "$(cmd/bench/pg-throwaway.sh dsn)"
#   cmd/bench/pg-throwaway.sh stop    # stops it and deletes its data
#
# It runs the distribution's PostgreSQL (installing Debian's `postgresql`
# package if no server is found) with its stock durability settings
# (fsync=on, synchronous_commit=on, full_page_writes=on): the peer must pay
# for durability exactly as Idem does. It listens on a unix socket in its
# directory and on 127.0.0.1, port 54329 by default. As root it runs as the
# `postgres` user, because PostgreSQL refuses to run as root.
#
# Environment: PGBENCH_DIR (default /tmp/idem-bench-pg), PGBENCH_PORT
# (default 54329), PGBENCH_DB (default idembench).
set -euo pipefail

DIR=${PGBENCH_DIR:-/tmp/idem-bench-pg}
PORT=${PGBENCH_PORT:-54329}
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
		-o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c max_connections=200" >&2
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
	echo "usage: $0 start|stop|dsn" >&2
	exit 2
	;;
esac
