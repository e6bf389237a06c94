#!/usr/bin/env bash
# A throwaway 3-node MariaDB Galera cluster on loopback, for tests.
#
#   scripts/galera.sh start [DIR]   start one in DIR (default: a new temp dir):
#                                   node 1 is bootstrapped, nodes 2 and 3 join
#                                   it by rsync SST; waits (with a deadline)
#                                   until every node is Synced and
#                                   wsrep_cluster_size=3; prints the 3 URLs
#   scripts/galera.sh stop DIR      stop the nodes (by the pids we started,
#                                   never by name) and keep DIR
#   scripts/galera.sh urls DIR      print the 3 URLs, one a line (node 1 first)
#   scripts/galera.sh url DIR       one URL naming the 3 nodes (h1:p1,h2:p2,h3:p3)
#   scripts/galera.sh kill DIR N    SIGKILL node N (its pid is printed)
#   scripts/galera.sh node-start DIR N   start node N again (it rejoins by SST
#                                   or IST) and wait until it is Synced
#   scripts/galera.sh sql DIR N ARGS     the mariadb client as root on node N
#   scripts/galera.sh destroy DIR   stop it and remove DIR
#
# Needs the Debian packages galera-4 and rsync (scripts/setup.sh). Run as
# root, the servers run as the `mysql` user: rsync SST cannot write a
# root-owned data directory (the joiner's rsync daemon drops to nobody).
# Every port (client, gcomm, IST, SST; 12 in all) is a free one picked at
# start. Root has no password (socket and root@127.0.0.1), database `test`.
set -euo pipefail

die() { echo "galera.sh: $*" >&2; exit 1; }

PROVIDER=${DLOCK_GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
# Seconds a node may take to become Synced (bootstrap, SST).
DEADLINE=${DLOCK_GALERA_DEADLINE:-120}

mariadbd_bin() {
  for b in mariadbd /usr/sbin/mariadbd mysqld /usr/sbin/mysqld; do
    command -v "$b" >/dev/null 2>&1 && { command -v "$b"; return; }
  done
  die "mariadbd not found: run scripts/setup.sh first"
}

# n free TCP ports on 127.0.0.1, distinct (held open together while picked),
# below the kernel's ephemeral range: a node restarted after a kill binds
# its ports again, and a port from the ephemeral range may meanwhile be the
# local end of some outgoing connection (the other nodes reconnecting to it
# can even connect to themselves through it), so the restart failed with
# "Address already in use".
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
ss = []
candidates = list(range(10000, low)) if low > 10000 + 10 * n else []
random.shuffle(candidates)
for port in candidates:
    if len(ss) == n:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    ss.append(s)
while len(ss) < n:  # no room below the ephemeral range: any free port
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
PY
}

node_dir() { echo "$1/node$2"; }
sock_of() { sed -n 's/^socket=//p' "$(node_dir "$1" "$2")/my.cnf"; }
port_of() { sed -n 's/^port=//p' "$(node_dir "$1" "$2")/my.cnf"; }
pid_of() { cat "$(node_dir "$1" "$2")/mariadbd.pid" 2>/dev/null || true; }

admin() {
  local dir=$1 n=$2; shift 2
  mariadb --no-defaults -S "$(sock_of "$dir" "$n")" -uroot "$@"
}

is_running() {
  local pid; pid=$(pid_of "$1" "$2")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

status_of() {  # status_of DIR N VARIABLE -> value (empty if unreachable)
  admin "$1" "$2" -N -B -e "SHOW GLOBAL STATUS LIKE '$3'" 2>/dev/null | cut -f2 || true
}

# Waits until node N is Synced (and, with size, sees a cluster of that size).
wait_synced() {
  local dir=$1 n=$2 size=${3:-}
  local end=$((SECONDS + DEADLINE))
  while [ $SECONDS -lt $end ]; do
    if ! is_running "$dir" "$n"; then
      tail -n 30 "$(node_dir "$dir" "$n")/error.log" >&2 || true
      die "node $n exited while starting (log above)"
    fi
    local state cs ready
    state=$(status_of "$dir" "$n" wsrep_local_state_comment)
    ready=$(status_of "$dir" "$n" wsrep_ready)
    cs=$(status_of "$dir" "$n" wsrep_cluster_size)
    if [ "$state" = Synced ] && [ "$ready" = ON ] && { [ -z "$size" ] || [ "$cs" = "$size" ]; }; then
      return 0
    fi
    sleep 0.2
  done
  tail -n 30 "$(node_dir "$dir" "$n")/error.log" >&2 || true
  die "node $n not Synced${size:+ in a cluster of $size} after ${DEADLINE}s (log above)"
}

start_node() {  # start_node DIR N [extra mariadbd args]
  local dir=$1 n=$2; shift 2
  local nd; nd=$(node_dir "$dir" "$n")
  is_running "$dir" "$n" && return 0
  mkdir -p "$nd/data" "$nd/tmp"
  [ "$(id -u)" = 0 ] && chown -R mysql:mysql "$nd"
  # setsid: the node and what it starts (the rsync SST daemon) form a
  # process group of their own, whose id is the recorded pid.
  setsid "$(mariadbd_bin)" --defaults-file="$nd/my.cnf" "$@" >"$nd/stdout.log" 2>&1 &
  echo $! >"$nd/mariadbd.pid"
}

stop_node() {
  local dir=$1 n=$2
  local pid; pid=$(pid_of "$dir" "$n")
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Left-overs of our own process group (an SST's rsync daemon).
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$(node_dir "$dir" "$n")/mariadbd.pid"
}

write_configs() {
  local dir=$1
  local ports; read -r -a ports <<<"$(free_ports 12)"
  local gcomm="gcomm://127.0.0.1:${ports[3]},127.0.0.1:${ports[4]},127.0.0.1:${ports[5]}"
  # Galera's group name is at most 32 bytes (longer ones make every
  # joiner's handshake fail: "handling gmcast protocol message failed").
  local name; name="dlock-test-$(printf '%s' "$dir" | md5sum | cut -c1-12)"
  local n
  for n in 1 2 3; do
    local nd; nd=$(node_dir "$dir" "$n")
    local i=$((n - 1))
    mkdir -p "$nd"
    # Unix socket paths are limited to ~107 bytes: keep it short, in /tmp.
    local sock; sock=$(mktemp -u /tmp/dlock-gal-XXXXXXXX.sock)
    local user_line=""
    [ "$(id -u)" = 0 ] && user_line="user=mysql"
    cat >"$nd/my.cnf" <<CNF
[mariadbd]
$user_line
datadir=$nd/data
socket=$sock
port=${ports[$i]}
bind-address=127.0.0.1
pid-file=$nd/mariadbd.pidfile
tmpdir=$nd/tmp
log-error=$nd/error.log
skip-name-resolve
max_connections=500
performance_schema=OFF
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=$name
wsrep_cluster_address=$gcomm
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:${ports[$((3 + i))]};ist.recv_addr=127.0.0.1:${ports[$((6 + i))]};gcache.size=64M"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:${ports[$((9 + i))]}
CNF
    echo "mysql://root@127.0.0.1:${ports[$i]}/test" >"$nd/url"
  done
}

print_urls() {
  local n
  for n in 1 2 3; do cat "$(node_dir "$1" "$n")/url"; done
}

cmd=${1:-}
case "$cmd" in
  start)
    [ -f "$PROVIDER" ] || die "$PROVIDER not found: install galera-4 (scripts/setup.sh)"
    command -v rsync >/dev/null 2>&1 || die "rsync not found: install it (scripts/setup.sh)"
    dir=${2:-$(mktemp -d "${TMPDIR:-/tmp}/dlock-galera.XXXXXX")}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" = 0 ]; then
      id mysql >/dev/null 2>&1 || die "no 'mysql' user (install mariadb-server)"
      chmod 755 "$dir"
      runuser -u mysql -- test -x "$dir" ||
        die "user mysql cannot enter $dir (a parent directory is not world-executable)"
    fi
    if is_running "$dir" 1 && is_running "$dir" 2 && is_running "$dir" 3; then
      print_urls "$dir"; exit 0
    fi
    # A start that fails half-way stops the nodes it started (by their pids)
    # and says where the directory is, so that nothing is left running unseen.
    started=""
    trap '[ -n "$started" ] || { echo "galera.sh: start failed; stopping the nodes started in $dir" >&2;
          "$0" stop "$dir" >/dev/null 2>&1 || true; }' EXIT
    if [ ! -f "$dir/node1/my.cnf" ]; then
      write_configs "$dir"
      nd=$(node_dir "$dir" 1)
      mkdir -p "$nd/data" "$nd/tmp"
      [ "$(id -u)" = 0 ] && chown -R mysql:mysql "$dir"
      mariadb-install-db --defaults-file="$nd/my.cnf" --auth-root-authentication-method=normal \
        --skip-test-db >"$nd/install.log" 2>&1 || { cat "$nd/install.log" >&2; die "install-db failed"; }
      start_node "$dir" 1 --wsrep-new-cluster
      wait_synced "$dir" 1
      admin "$dir" 1 -e 'CREATE DATABASE IF NOT EXISTS test'
    else
      # A stopped cluster is started again from scratch on node 1's data:
      # bootstrap node 1 (safe_to_bootstrap), the others rejoin.
      sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$(node_dir "$dir" 1)/data/grastate.dat" 2>/dev/null || true
      start_node "$dir" 1 --wsrep-new-cluster
      wait_synced "$dir" 1
    fi
    start_node "$dir" 2
    wait_synced "$dir" 2
    start_node "$dir" 3
    wait_synced "$dir" 3 3
    wait_synced "$dir" 1 3
    started=1
    print_urls "$dir"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: galera.sh stop DIR"
    # Joiners first, the bootstrap node last (it is then the one that can
    # bootstrap again).
    for n in 3 2 1; do stop_node "$2" "$n"; done
    ;;
  urls)
    [ -n "${2:-}" ] || die "usage: galera.sh urls DIR"
    print_urls "$2"
    ;;
  url)
    [ -n "${2:-}" ] || die "usage: galera.sh url DIR"
    hosts=$(for n in 1 2 3; do echo -n "127.0.0.1:$(port_of "$2" "$n"),"; done)
    echo "mysql://root@${hosts%,}/test"
    ;;
  kill)
    [ -n "${3:-}" ] || die "usage: galera.sh kill DIR N"
    pid=$(pid_of "$2" "$3")
    [ -n "$pid" ] || die "node $3 was not started"
    kill -KILL "$pid"
    echo "$pid"
    ;;
  node-start)
    [ -n "${3:-}" ] || die "usage: galera.sh node-start DIR N"
    start_node "$2" "$3"
    wait_synced "$2" "$3"
    ;;
  sql)
    [ -n "${3:-}" ] || die "usage: galera.sh sql DIR N [mariadb args...]"
    d=$2; n=$3; shift 3
    admin "$d" "$n" "$@"
    ;;
  destroy)
    [ -n "${2:-}" ] || die "usage: galera.sh destroy DIR"
    for n in 3 2 1; do stop_node "$2" "$n"; done
    [ -f "$2/node1/my.cnf" ] && rm -rf "$2"
    ;;
  *)
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
