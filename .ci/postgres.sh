#!/usr/bin/env bash
# Make a throwaway PostgreSQL server available for the test suite and print its URL as the
# last line of stdout (export it as EVOLVE_TEST_POSTGRES_URL). Run as root; safe to rerun:
# if the server is already up, it only prints the URL.
#   EVOLVE_PG_DATA  cluster directory (default /tmp/evolve-postgres)
#   EVOLVE_PG_PORT  TCP port on 127.0.0.1 (default 55432)
set -euo pipefail
cd /

data=${EVOLVE_PG_DATA:-/tmp/evolve-postgres}
port=${EVOLVE_PG_PORT:-55432}
role=evolve password=evolve database=evolve

newest_bin() { find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(newest_bin)" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
fi
bin=$(newest_bin)
id -u postgres >/dev/null 2>&1 || useradd --system --user-group --no-create-home postgres
as_postgres() { runuser -u postgres -- "$@"; }

if ! as_postgres "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    fresh=false
    if [ ! -s "$data/PG_VERSION" ]; then
        mkdir -p "$data" && chown postgres: "$data" && chmod 700 "$data"
        as_postgres "$bin/initdb" -D "$data" -U postgres -E UTF8 \
            --auth-local=trust --auth-host=scram-sha-256 >/dev/null
        fresh=true
    fi
    # The socket lives in the data directory: /var/run/postgresql may not exist here.
    as_postgres "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -s start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $data"
    if $fresh; then
        as_postgres "$bin/psql" -h "$data" -p "$port" -U postgres -q -v ON_ERROR_STOP=1 \
            -c "CREATE ROLE $role LOGIN PASSWORD '$password'" \
            -c "CREATE DATABASE $database OWNER $role" >/dev/null
    fi
fi
echo "postgresql+psycopg://$role:$password@127.0.0.1:$port/$database"
