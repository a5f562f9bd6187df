# Sourced by scripts/test and scripts/bench: without CLANKIE_TEST_POSTGRES,
# starts a throwaway PostgreSQL cluster (a temp dir, Unix socket only,
# stopped and removed on exit) when PostgreSQL is installed, and exports
# CLANKIE_TEST_POSTGRES naming it.
if [ -z "${CLANKIE_TEST_POSTGRES:-}" ]; then
  pgbin=""
  if command -v initdb >/dev/null 2>&1; then
    pgbin=$(dirname "$(command -v initdb)")
  elif ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    pgbin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
  fi
  if [ -n "$pgbin" ]; then
    pgdir=$(mktemp -d "${TMPDIR:-/tmp}/clankie-test-pg.XXXXXX")
    chmod 755 "$pgdir"
    pgrun=()
    if [ "$(id -u)" = 0 ]; then # initdb refuses root
      id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
      chown postgres "$pgdir"
      pgrun=(runuser -u postgres --)
    fi
    echo "== starting a throwaway PostgreSQL in $pgdir"
    "${pgrun[@]}" "$pgbin/initdb" -D "$pgdir/data" -A trust -U postgres >/dev/null
    "${pgrun[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -o "-k $pgdir -c listen_addresses=''" -l "$pgdir/log" -w start >/dev/null
    trap '"${pgrun[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
    export CLANKIE_TEST_POSTGRES="postgres://postgres@/postgres?host=$pgdir"
  fi
fi
