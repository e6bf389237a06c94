#!/usr/bin/env bash
# A throwaway MariaDB server on loopback, for tests, benchmarks and the demo.
#
#   scripts/db.sh start [DIR]    start one in DIR (default: a new temp dir); prints its URL
#   scripts/db.sh start-tls [DIR]  the same with TLS: a CA and a server certificate
#                                (for 127.0.0.1 and localhost) are made with openssl
#                                in DIR/tls (ca.pem is the CA to verify against);
#                                DLOCK_DB_TLS=1 with start does the same
#   scripts/db.sh stop DIR       stop it (by the pid we started, never by name) and keep DIR
#   scripts/db.sh restart DIR    stop and start again on the same port and data
#   scripts/db.sh url DIR        print the URL
#   scripts/db.sh sql DIR ARGS   run the mariadb client as root (e.g. -e 'SELECT 1')
#   scripts/db.sh destroy DIR    stop it and remove DIR
#
# The URL is mysql://root@127.0.0.1:PORT/test; root has no password and the
# server listens on 127.0.0.1 only.
set -euo pipefail

die() { echo "db.sh: $*" >&2; exit 1; }

mariadbd_bin() {
  for b in mariadbd /usr/sbin/mariadbd mysqld /usr/sbin/mysqld; do
    command -v "$b" >/dev/null 2>&1 && { command -v "$b"; return; }
  done
  die "mariadbd not found: run scripts/setup.sh first"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# A CA and a server certificate signed by it, for 127.0.0.1 and localhost,
# in DIR/tls. Throwaway test material: unencrypted keys, 10 days.
make_tls() {
  local t=$1/tls
  command -v openssl >/dev/null 2>&1 || die "openssl not found: run scripts/setup.sh first"
  mkdir -p "$t"
  openssl req -x509 -newkey rsa:2048 -nodes -days 10 -subj "/CN=dlock test CA" \
    -keyout "$t/ca-key.pem" -out "$t/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$t/server-key.pem" -out "$t/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$t/server.ext"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" \
    -CAcreateserial -days 10 -extfile "$t/server.ext" -out "$t/server.pem" 2>/dev/null
  [ -s "$t/server.pem" ] || die "could not make the TLS certificates in $t"
}

sock_of() { sed -n 's/^socket=//p' "$1/my.cnf"; }

# The mariadb client as root over the server's socket.
admin() {
  local dir=$1; shift
  mariadb --no-defaults -S "$(sock_of "$dir")" -uroot "$@"
}

is_running() {
  local dir=$1
  [ -f "$dir/mariadbd.pid" ] && kill -0 "$(cat "$dir/mariadbd.pid")" 2>/dev/null
}

start_server() {
  local dir=$1
  local bin; bin=$(mariadbd_bin)
  "$bin" --defaults-file="$dir/my.cnf" >"$dir/stdout.log" 2>&1 &
  echo $! >"$dir/mariadbd.pid"
  local i
  for i in $(seq 1 300); do
    if admin "$dir" -e 'SELECT 1' >/dev/null 2>&1; then
      admin "$dir" -e 'CREATE DATABASE IF NOT EXISTS test'
      return 0
    fi
    kill -0 "$(cat "$dir/mariadbd.pid")" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$dir/error.log" >&2 || true
  die "server in $dir did not start"
}

stop_server() {
  local dir=$1
  is_running "$dir" || return 0
  local pid; pid=$(cat "$dir/mariadbd.pid")
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$dir/mariadbd.pid"; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$dir/mariadbd.pid"
}

cmd=${1:-}
case "$cmd" in
  start|start-tls)
    tls=${DLOCK_DB_TLS:-0}
    [ "$cmd" = start-tls ] && tls=1
    dir=${2:-$(mktemp -d "${TMPDIR:-/tmp}/dlock-db.XXXXXX")}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if is_running "$dir"; then cat "$dir/url"; exit 0; fi
    if [ ! -f "$dir/my.cnf" ]; then
      # A tmpdir of its own: servers installed at the same time in a shared
      # /tmp (ctest starts several) failed on each other's temporary tables.
      mkdir -p "$dir/tmp"
      port=$(free_port)
      # Unix socket paths are limited to ~107 bytes: keep it short, in /tmp.
      sock=$(mktemp -u /tmp/dlock-db-XXXXXXXX.sock)
      cat >"$dir/my.cnf" <<CNF
[mariadbd]
user=root
datadir=$dir/data
socket=$sock
port=$port
bind-address=127.0.0.1
pid-file=$dir/mariadbd.pidfile
tmpdir=$dir/tmp
log-error=$dir/error.log
skip-name-resolve
max_connections=2000
performance_schema=OFF
innodb_buffer_pool_size=128M
innodb_log_file_size=64M
CNF
      mariadb-install-db --defaults-file="$dir/my.cnf" --auth-root-authentication-method=normal \
        --skip-test-db >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; die "install-db failed"; }
      echo "mysql://root@127.0.0.1:$port/test" >"$dir/url"
    fi
    if [ "$tls" = 1 ] && ! grep -q '^ssl-cert=' "$dir/my.cnf"; then
      make_tls "$dir"
      printf 'ssl-ca=%s\nssl-cert=%s\nssl-key=%s\n' \
        "$dir/tls/ca.pem" "$dir/tls/server.pem" "$dir/tls/server-key.pem" >>"$dir/my.cnf"
    fi
    start_server "$dir"
    cat "$dir/url"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: db.sh stop DIR"
    stop_server "$2"
    ;;
  restart)
    [ -n "${2:-}" ] || die "usage: db.sh restart DIR"
    stop_server "$2"
    start_server "$2"
    cat "$2/url"
    ;;
  url)
    [ -n "${2:-}" ] || die "usage: db.sh url DIR"
    cat "$2/url"
    ;;
  sql)
    [ -n "${2:-}" ] || die "usage: db.sh sql DIR [mariadb args...]"
    d=$2; shift 2
    admin "$d" "$@"
    ;;
  destroy)
    [ -n "${2:-}" ] || die "usage: db.sh destroy DIR"
    stop_server "$2"
    [ -f "$2/my.cnf" ] && rm -rf "$2"
    ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
