# shellcheck shell=bash
# Sourced by scripts/bootstrap.sh: Debian's PostgreSQL server programs (initdb, pg_ctl, psql),
# from which the tests start a throwaway server of their own (tests/postgres/: a temporary
# folder, a free loopback port) to run the relayer's store on PostgreSQL as well as SQLite.
# Instant when a /usr/lib/postgresql/<version>/bin/initdb is already there. The package may also
# create and start Debian's default cluster; the tests do not use it.
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  log "installing Debian's postgresql (the relayer's store tests run a server of their own)"
  apt_install postgresql
fi
