#!/bin/sh
# First start: a cluster owned by $POSTGRES_USER with $POSTGRES_PASSWORD and a database
# $POSTGRES_DB; every start: PostgreSQL in the foreground on all interfaces.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "POSTGRES_PASSWORD is required" >&2; exit 1; }
    pwfile=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != "postgres" ]; then
        pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait --silent start
        createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
        pg_ctl --pgdata="$PGDATA" --wait --silent stop
    fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
