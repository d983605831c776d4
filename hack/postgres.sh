#!/usr/bin/env bash
# hack/postgres.sh: a throwaway, real PostgreSQL cluster for tests and the demo.
#
#   hack/postgres.sh run -- <command...>   start a cluster, run the command with
#                                          PROJECTION_TEST_DSN exported, tear down
#   hack/postgres.sh start                 start a cluster; prints DSN=... and DIR=...
#   hack/postgres.sh stop <dir>            stop the cluster in <dir> and remove it
#
# Installs Debian's postgresql server when no initdb is found. initdb and postgres
# refuse to run as root, so as root they run as the `postgres` user (runuser) on a
# directory it owns; as non-root they run directly. The server listens on
# 127.0.0.1 at a random free port, its socket in the data directory; durability is
# switched off (fsync, synchronous_commit, full_page_writes) because the cluster is
# disposable. PROJECTION_PG_OPTS adds server options (e.g. "-c shared_buffers=1GB").
set -euo pipefail

find_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

ensure_server() {
	if ! BINDIR=$(find_bindir); then
		echo "postgres.sh: no PostgreSQL server found; installing Debian's postgresql" >&2
		if [[ $(id -u) -ne 0 ]]; then
			echo "postgres.sh: need root to apt-get install postgresql" >&2
			exit 1
		fi
		DEBIAN_FRONTEND=noninteractive apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
		BINDIR=$(find_bindir) || {
			echo "postgres.sh: postgresql installed but no initdb found" >&2
			exit 1
		}
	fi
}

as_owner() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

start_cluster() {
	ensure_server
	DIR=$(mktemp -d /tmp/projection-pg.XXXXXX)
	chmod 0755 "$DIR"
	mkdir -p "$DIR/data"
	if [[ $(id -u) -eq 0 ]]; then
		chown -R postgres: "$DIR"
	fi
	as_owner "$BINDIR/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --no-locale >"$DIR/initdb.log" 2>&1 || {
		cat "$DIR/initdb.log" >&2
		exit 1
	}
	local tries=0
	while :; do
		PORT=$(free_port)
		if as_owner "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 30 \
			-o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 ${PROJECTION_PG_OPTS:-}" \
			start >/dev/null; then
			break
		fi
		tries=$((tries + 1))
		if [[ $tries -ge 3 ]]; then
			cat "$DIR/server.log" >&2
			exit 1
		fi
	done
	echo "$PORT" >"$DIR/port"
	DSN="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
}

stop_cluster() {
	local dir=$1
	[[ -d "$dir/data" ]] || return 0
	local bindir
	bindir=$(find_bindir) || true
	if [[ -n "$bindir" ]]; then
		as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
}

cmd=${1:-}
shift || true
case "$cmd" in
run)
	[[ "${1:-}" == "--" ]] && shift
	[[ $# -gt 0 ]] || {
		echo "usage: $0 run -- <command...>" >&2
		exit 2
	}
	start_cluster
	trap 'stop_cluster "$DIR"' EXIT
	trap 'exit 130' INT TERM
	echo "postgres.sh: cluster at $DSN" >&2
	set +e
	PROJECTION_TEST_DSN="$DSN" "$@"
	rc=$?
	set -e
	exit $rc
	;;
start)
	start_cluster
	echo "DSN=$DSN"
	echo "DIR=$DIR"
	;;
stop)
	[[ $# -eq 1 ]] || {
		echo "usage: $0 stop <dir>" >&2
		exit 2
	}
	stop_cluster "$1"
	;;
*)
	echo "usage: $0 run -- <command...> | start | stop <dir>" >&2
	exit 2
	;;
esac
