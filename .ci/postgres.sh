#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: `start` installs Debian's postgresql when it is
# missing, creates a cluster in a temp dir (initdb as an unprivileged user: PostgreSQL refuses
# root), starts it on loopback and prints its URL; `stop` stops it and removes the directory.
set -euo pipefail
dir="${A2A_EDGE_PG_DIR:-/tmp/a2a-edge-pg}"
port="${A2A_EDGE_PG_PORT:-55432}"
as_root=""; [ "$(id -u)" = 0 ] || as_root="sudo"
bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
# Runs a command as the cluster's owner (ourselves unless we are root).
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}
case "${1:-start}" in
  start)
    if [ -z "$(bin)" ]; then
      $as_root apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq postgresql >/dev/null
    fi
    pg="$(bin)"
    "$0" stop >/dev/null 2>&1 || true
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && { id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres; chown postgres "$dir"; }
    as_owner "$pg/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync >"$dir/initdb.log"
    as_owner "$pg/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400" start >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    pg="$(bin)"
    [ -d "$dir/data" ] && as_owner "$pg/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
