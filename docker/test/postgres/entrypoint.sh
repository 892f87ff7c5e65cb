#!/bin/sh
# First start: a cluster in PGDATA owned by POSTGRES_USER with POSTGRES_PASSWORD, the
# database POSTGRES_DB, password (SCRAM) logins over the network. Every start: the server in
# the foreground as the postgres user, listening on every address.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD is required for the first start" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  as_postgres initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    as_postgres pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait --silent start
    as_postgres createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
    as_postgres pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
  fi
  echo "postgres-entrypoint: cluster created in $PGDATA"
fi

exec setpriv --reuid=postgres --regid=postgres --init-groups \
  postgres -D "$PGDATA" -c listen_addresses='*'
