# The life of the test server, run by src/lib.rs as `sh -c <this> sh <bin> <port> <password>`
# (as the `postgres` user when the tests run as root: initdb refuses root). Everything lives in
# one temporary folder: the cluster, the Unix socket, the log. It prints `ready` once the server
# accepts connections, then waits for its standard input to close (the test process ended, or
# dropped its handle) to stop the server and remove the folder.
set -eu
bin=$1 port=$2 password=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/kya-postgres.XXXXXX")
trap 'rm -rf "$dir"' EXIT
printf '%s\n' "$password" >"$dir/pwfile"
# TLS when the caller passes a certificate and its key (PEM) in KYA_PG_TLS_CERT and
# KYA_PG_TLS_KEY: written here, by the server's own user, as the server wants its key (0600).
tls=""
if [ -n "${KYA_PG_TLS_CERT:-}" ]; then
  (umask 077 && printf '%s\n' "$KYA_PG_TLS_CERT" >"$dir/server.crt" && printf '%s\n' "$KYA_PG_TLS_KEY" >"$dir/server.key")
  tls="-c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
fi
# Local (socket) connections trusted, TCP ones by password: the tests connect over loopback
# with a URL that carries one, as a deployment would.
if ! "$bin/initdb" --pgdata="$dir/data" --username=kya --pwfile="$dir/pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
  cat "$dir/initdb.log" >&2
  exit 1
fi
# fsync off: a throwaway cluster need not survive a power cut (commits still wait for the
# server, synchronous_commit stays on). Enough connections for every test running at once.
# KYA_POSTGRES_OPTIONS adds server settings for a diagnosis (say, the cluster bench's
# statement counts: `-c shared_preload_libraries=pg_stat_statements`).
if ! "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --timeout=60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c full_page_writes=off -c max_connections=300 $tls ${KYA_POSTGRES_OPTIONS:-}" \
    start >/dev/null 2>&1; then
  cat "$dir/server.log" >&2
  exit 1
fi
echo ready
read -r _ || true
"$bin/pg_ctl" --pgdata="$dir/data" --mode=immediate stop >/dev/null 2>&1 || true
