#!/bin/bash
# Entrypoint of localhost/svc/postgres:15 (baked into the image as
# /usr/local/bin/docker-entrypoint.sh by daemon/sandbox/images.py).
#
# Behaves like the official postgres image for the parts svc uses:
#   POSTGRES_USER      superuser name           (default: postgres)
#   POSTGRES_PASSWORD  its password             (required unless
#                      POSTGRES_HOST_AUTH_METHOD=trust)
#   POSTGRES_DB        database created on init (default: $POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  auth for TCP     (default: scram-sha-256)
#   POSTGRES_INITDB_ARGS       extra initdb arguments
#   PGDATA             data directory           (default: /var/lib/postgresql/data)
#   /docker-entrypoint-initdb.d/*.sql|*.sql.gz|*.sh  run once after initdb
#
# Readiness: initialisation runs against a temporary server that listens on
# no TCP port and logs to a file, so "database system is ready to accept
# connections" is printed exactly once, by the final server, and
# `pg_isready -h <host>` only succeeds once the final server is up.
set -Eeuo pipefail

export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export POSTGRES_USER="${POSTGRES_USER:-postgres}"
export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
POSTGRES_HOST_AUTH_METHOD="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"

say() { echo "svc-postgres: $*" >&2; }

# `docker run IMAGE -c foo=bar` -> postgres -c foo=bar
if [ "$#" -eq 0 ] || [ "${1:0:1}" = '-' ]; then
    set -- postgres "$@"
fi
# Anything else (bash, psql, ...) runs as given.
if [ "$1" != postgres ]; then
    exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    chmod 2775 /var/run/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
        say "error: POSTGRES_PASSWORD is not set."
        say "Set it (docker run -e POSTGRES_PASSWORD=...) or allow unauthenticated"
        say "TCP connections with POSTGRES_HOST_AUTH_METHOD=trust."
        exit 1
    fi
    say "initialising $PGDATA for user '$POSTGRES_USER', database '$POSTGRES_DB'"
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
    # shellcheck disable=SC2086
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host="$POSTGRES_HOST_AUTH_METHOD" \
        ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA" >/tmp/initdb.log 2>&1 \
        || { cat /tmp/initdb.log >&2; rm -f "$pwfile"; exit 1; }
    rm -f "$pwfile"
    {
        echo
        echo "# svc: reachable from the sandbox network"
        echo "host all all all $POSTGRES_HOST_AUTH_METHOD"
    } >>"$PGDATA/pg_hba.conf"
    {
        echo
        echo "# svc"
        echo "listen_addresses = '*'"
        echo "port = 5432"
        echo "jit = off  # the image ships without the LLVM JIT provider"
    } >>"$PGDATA/postgresql.conf"

    # Temporary server: unix socket in a private directory, no TCP, log to a
    # file (keeps the "ready" line out of the container log).
    sockdir=$(mktemp -d)
    pg_ctl -D "$PGDATA" -w -t 60 -l /tmp/postgres-init.log \
        -o "-c listen_addresses='' -c unix_socket_directories=$sockdir" start >/dev/null \
        || { cat /tmp/postgres-init.log >&2; exit 1; }
    psql_init=(psql -v ON_ERROR_STOP=1 -X -q -h "$sockdir" --username "$POSTGRES_USER" --no-password)
    if [ "$POSTGRES_DB" != postgres ]; then
        "${psql_init[@]}" --dbname postgres -v db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
    if [ -d /docker-entrypoint-initdb.d ]; then
        for f in /docker-entrypoint-initdb.d/*; do
            case "$f" in
                *.sh)     say "running $f"; PGHOST="$sockdir" . "$f" ;;
                *.sql)    say "running $f"; "${psql_init[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
                *.sql.gz) say "running $f"; gunzip -c "$f" | "${psql_init[@]}" --dbname "$POSTGRES_DB" ;;
                *)        [ -e "$f" ] && say "ignoring $f" ;;
            esac
        done
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    rm -rf "$sockdir"
    say "init complete; starting server"
fi

exec "$@"
