#!/usr/bin/env bash
# ssl_mode against real servers: starts a throwaway MariaDB with TLS
# (scripts/db.sh start-tls: CA and a certificate for 127.0.0.1) and one
# without, makes an unrelated CA and a certificate for "otherhost" signed by
# the server's CA, runs tls_test against them, and removes both servers.
#   tls_test.sh TLS_TEST_BINARY SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
db=$src/scripts/db.sh
command -v openssl >/dev/null 2>&1 || { echo "tls_test: openssl not found (scripts/setup.sh installs it)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-tls.XXXXXX")
cleanup() {
  "$db" destroy "$work/tls-db" >/dev/null 2>&1 || true
  "$db" destroy "$work/plain-db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

DLOCK_TLS_URL=$("$db" start-tls "$work/tls-db")
DLOCK_PLAIN_URL=$("$db" start "$work/plain-db")
t=$work/tls-db/tls
DLOCK_TLS_CA=$t/ca.pem
for d in tls-db plain-db; do
  "$db" sql "$work/$d" -D test -e 'CREATE TABLE IF NOT EXISTS tls_check (c VARCHAR(200))'
done
# The plain server really offers no TLS (else the checks below prove nothing).
have=$("$db" sql "$work/plain-db" -N -e "SELECT @@have_ssl")
[ "$have" != YES ] || { echo "tls_test: the plain server has TLS ($have)" >&2; exit 1; }

# An unrelated CA (right format, wrong issuer).
openssl req -x509 -newkey rsa:2048 -nodes -days 10 -subj "/CN=unrelated CA" \
  -keyout "$work/wrong-ca-key.pem" -out "$work/wrong-ca.pem" 2>/dev/null
DLOCK_TLS_WRONG_CA=$work/wrong-ca.pem
export DLOCK_TLS_URL DLOCK_PLAIN_URL DLOCK_TLS_CA DLOCK_TLS_WRONG_CA

rc=0
"$bin" main || rc=1

# Same CA, but the certificate names another host: swap it in and reload.
openssl req -newkey rsa:2048 -nodes -subj "/CN=otherhost" \
  -keyout "$work/other-key.pem" -out "$work/other.csr" 2>/dev/null
printf 'subjectAltName=DNS:otherhost\nbasicConstraints=CA:FALSE\n' >"$work/other.ext"
openssl x509 -req -in "$work/other.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" \
  -CAcreateserial -days 10 -extfile "$work/other.ext" -out "$work/other.pem" 2>/dev/null
cp "$work/other.pem" "$t/server.pem"
cp "$work/other-key.pem" "$t/server-key.pem"
"$db" sql "$work/tls-db" -e 'FLUSH SSL'

"$bin" otherhost || rc=1
exit $rc
