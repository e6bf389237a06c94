#!/usr/bin/env bash
# Installs the built artifacts the way a user would, in a root where the
# build machine's help is gone, and takes real locks there on a MariaDB:
#   --wheel FILE   the repaired wheel (scripts/wheel.sh), in a root WITHOUT
#                  libmariadb3 (dpkg --purge) and WITHOUT a compiler (gcc,
#                  g++, cpp, clang, binutils, libc6-dev purged): a fresh venv,
#                  `pip install --no-index --only-binary :all: FILE`, then a
#                  lock from Python, the `dlock` command against it (busy: 75,
#                  then free: 0), and a connection as a user authenticated by
#                  ed25519, whose client plugin exists only in the wheel.
#   --debs DIR     the three .deb files (scripts/deb.sh), in another root:
#                  `apt-get install ./libdlock1_… ./libdlock-dev_… ./dlock_…`,
#                  libmariadb-dev purged, then the C example of README.md built
#                  as its comment says (cc job.c $(pkg-config --cflags --libs
#                  dlock)) and run without LD_LIBRARY_PATH, a find_package(dlock)
#                  consumer, and the packaged `dlock` command.
#   --url URL      the server (default $DLOCK_URL). On a throwaway server
#                  (mysql://root@HOST:PORT/DB, as scripts/db.sh prints) its
#                  root user makes the ed25519 user; on another, that check
#                  is skipped.
#   --python PY    the interpreter the wheel was built for (default python3)
#   --base DIR     a root of its own instead of this machine's / (e.g. a
#                  debootstrapped Debian 12, scripts/fresh-root-debootstrap.sh):
#                  the wheel runs on its /usr/bin/python3; for the C part apt
#                  also installs gcc, pkg-config and cmake there (from Debian's
#                  mirror, cached in --apt-cache DIR)
# The root is this machine's own / seen through a copy-on-write overlay
# (overlayfs, upper layer on a tmpfs) in a private mount namespace
# (`unshare -m`), entered with chroot: packages are really removed and
# installed there by dpkg and apt, in about 10 s, and nothing reaches the host;
# the namespace and its mounts end with the script. It shares the host's
# network (the server on loopback). Needs root, unshare(1) and overlayfs;
# scripts/fresh-root-debootstrap.sh does the same in a debootstrapped
# Debian 12 (slower: minutes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

wheel="" debs="" url=${DLOCK_URL:-} python=python3 base=/ apt_cache=""
while [ $# -gt 0 ]; do
  case $1 in
    --wheel) wheel=$(realpath "$2"); shift 2 ;;
    --debs) debs=$(realpath "$2"); shift 2 ;;
    --url) url=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --base) base=$(realpath "$2"); shift 2 ;;
    --apt-cache) apt_cache=$(realpath "$2"); shift 2 ;;
    *) echo "usage: $0 [--url URL] [--wheel FILE] [--debs DIR] [--python PY] [--base DIR [--apt-cache DIR]]" >&2
       exit 2 ;;
  esac
done
[ -n "$url" ] || { echo "fresh_root: --url or DLOCK_URL is required" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "fresh_root: needs root (unshare -m, mount, chroot)" >&2; exit 2; }
host_python=$("$python" -c 'import os, sys; print(os.path.realpath(sys.executable))')
if [ "$base" = / ]; then root_python=$host_python; else root_python=/usr/bin/python3; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-fresh-root.XXXXXX")
ed_sql() {   # HOST PORT SQL: as the server's root (no password: a throwaway server)
  mariadb -uroot -h "$1" -P "$2" -e "$3"
}
ed_host="" ed_port=""
cleanup() {
  [ -z "$ed_host" ] || ed_sql "$ed_host" "$ed_port" "DROP USER IF EXISTS 'dlock_ed'@'%'" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
passed=0 failed=0

# ---- the ed25519 user on the server (its client plugin is not built into
# Connector/C: a connection as this user loads client_ed25519.so) ----
ed_url=""
if [ -n "$wheel" ]; then
  if [[ $url =~ ^mysql://root@([^:/@]+):([0-9]+)/([A-Za-z0-9_]+)$ ]]; then
    ed_host=${BASH_REMATCH[1]} ed_port=${BASH_REMATCH[2]} db=${BASH_REMATCH[3]}
    ed_sql "$ed_host" "$ed_port" "INSTALL SONAME 'auth_ed25519'" >/dev/null 2>&1 || true  # may be there
    if ed_sql "$ed_host" "$ed_port" "DROP USER IF EXISTS 'dlock_ed'@'%';
        CREATE USER 'dlock_ed'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('fresh-root-pw');
        GRANT ALL ON \`$db\`.* TO 'dlock_ed'@'%'"; then
      ed_url="mysql://dlock_ed:fresh-root-pw@$ed_host:$ed_port/$db"
    else
      echo "FAIL: could not make the ed25519 user on $url"; failed=$((failed + 1))
    fi
  else
    echo "fresh_root: $url is not a throwaway root@ server: the ed25519 check is skipped"
  fi
fi

# ---- what runs inside the roots ----
cat >"$work/wheel.sh" <<'SH'
set -uo pipefail
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
failures=0
export DEBIAN_FRONTEND=noninteractive
# Connector/C and every compiler leave, by dpkg (their triggers, man-db's
# index above all, skipped: 1 s instead of minutes). The compilers' drivers,
# cc1 and binutils go; LLVM's libraries and headers may stay: without a
# driver and a linker nothing compiles.
t0=$SECONDS
dpkg --purge --force-depends --no-triggers libmariadb3 libmariadb-dev libmariadb-dev-compat >/dev/null 2>&1
compilers=$(dpkg-query -W -f '${Package}\n' | grep -E '^(gcc|g\+\+|cpp|clang|tcc|binutils|libc6-dev|libstdc\+\+-[0-9]+-dev|libgcc-[0-9]+-dev|build-essential)' | grep -v -- '-base$' | tr '\n' ' ')
# shellcheck disable=SC2086
dpkg --purge --force-depends --no-triggers $compilers >/dev/null 2>&1
ldconfig
echo "dpkg --purge: $((SECONDS - t0)) s"
dpkg-query -W -f '${Status}' libmariadb3 2>/dev/null | grep -q 'ok installed' && fail "libmariadb3 still installed"
ldconfig -p | grep libmariadb && fail "the dynamic linker still finds a libmariadb"
[ -e /usr/lib/x86_64-linux-gnu/libmariadb3/plugin ] && fail "Connector/C's plugin dir is still there"
for c in cc c++ gcc g++ cpp clang clang-14 tcc ld as; do
  command -v "$c" >/dev/null && fail "a compiler tool is still here: $(command -v "$c")"
done
echo "root: no libmariadb3, no compiler (purged: $compilers)"

"$PY" -m venv /tmp/venv || { echo "FAIL: python -m venv"; exit 1; }
/tmp/venv/bin/python -m pip install -q --no-index --no-cache-dir --only-binary :all: "$WHEEL" ||
  { echo "FAIL: pip install $WHEEL"; exit 1; }
echo "python -m venv + pip install $(basename "$WHEEL"): ok ($((SECONDS - t0)) s in this root so far)"
cd /tmp
DLOCK_URL=$URL ED_URL=$ED_URL /tmp/venv/bin/python - <<'PY' || failures=$((failures + 1))
import os, subprocess, sys
import dlock

def maps():
    return [l.split()[-1] for l in open("/proc/self/maps") if "libmariadb" in l or "libssl" in l]

url, ed_url = os.environ["DLOCK_URL"], os.environ["ED_URL"]
key = "fresh-root:wheel"
dlock_cmd = os.path.join(sys.prefix, "bin", "dlock")
env = dict(os.environ, DLOCK_URL=url)
client = dlock.connect(url)
with client.lock(key, ttl=10, wait=3) as held:
    assert held.token > 0, held.token
    loaded = sorted(set(maps()))
    ours = [p for p in loaded if "/dlock.libs/" in p]
    # Python's own ssl module may load the system's libssl beside the wheel's
    # (renamed) copy; Connector/C must come from the wheel, and nothing else.
    assert [p for p in loaded if "libmariadb" in p] == [p for p in ours if "libmariadb" in p], loaded
    assert any("libmariadb" in p for p in ours) and any("libssl" in p for p in ours), loaded
    print(f"python: lock taken, token {held.token}; loaded from the wheel: "
          + ", ".join(os.path.basename(p) for p in ours))
    busy = subprocess.run([dlock_cmd, "run", key, "-w", "0", "true"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert busy.returncode == 75, (busy.returncode, busy.stderr)
    print("dlock run while Python holds it: exit 75 (busy)")
free = subprocess.run([dlock_cmd, "run", key, "-w", "0", "sh", "-c", 'echo "token $DLOCK_TOKEN"'],
                      env=env, capture_output=True, text=True, timeout=60)
assert free.returncode == 0, (free.returncode, free.stderr)
token = int(free.stdout.split()[-1])
assert token > held.token, (token, held.token)
print(f"dlock run after the release: exit 0, token {token}")
if ed_url:
    assert os.environ.get("MARIADB_PLUGIN_DIR", "").endswith("dlock/_plugins"), os.environ.get("MARIADB_PLUGIN_DIR")
    with dlock.connect(ed_url).lock("fresh-root:ed25519", ttl=10, wait=3) as held:
        print(f"ed25519 user (client plugin from the wheel): lock taken, token {held.token}")
    listed = subprocess.run([dlock_cmd, "list"], env=dict(os.environ, DLOCK_URL=ed_url),
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, (listed.returncode, listed.stderr)
    print("dlock list as the ed25519 user: exit 0")
PY
exit $((failures > 0))
SH

cat >"$work/debs.sh" <<'SH'
set -uo pipefail
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
failures=0
export DEBIAN_FRONTEND=noninteractive
unset LD_LIBRARY_PATH PKG_CONFIG_PATH
cd "$DEBS"
# In a root of its own (--base) the example's tools come with them.
tools=""
[ "$BASE" = / ] || tools="gcc libc6-dev pkg-config cmake make"
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends ./libdlock1_*.deb ./libdlock-dev_*.deb ./dlock_*.deb $tools \
  >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; echo "FAIL: apt-get install ./*.deb"; exit 1; }
echo "apt-get install ./libdlock1_… ./libdlock-dev_… ./dlock_…: ok"
# A dlock consumer needs no Connector/C headers: libmariadb-dev leaves.
dpkg --purge --force-depends --no-triggers libmariadb-dev libmariadb-dev-compat >/dev/null 2>&1
[ -e /usr/lib/x86_64-linux-gnu/pkgconfig/libmariadb.pc ] && fail "libmariadb.pc still there"
for f in /usr/include/dlock/dlock.h /usr/lib/x86_64-linux-gnu/libdlock.so /usr/lib/x86_64-linux-gnu/pkgconfig/dlock.pc; do
  owner=$(dpkg -S "$f" 2>/dev/null | cut -d: -f1)
  [ "$owner" = libdlock-dev ] || fail "$f is not libdlock-dev's (dpkg -S: '$owner')"
done
[ "$(dpkg -S /usr/bin/dlock 2>/dev/null | cut -d: -f1)" = dlock ] || fail "/usr/bin/dlock is not the dlock package's"

mkdir -p /tmp/c && cd /tmp/c
# The README's example, as printed, with the test server in place of db1.
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$README" |
  sed "s|mysql://app@db1:3306/app|$URL|" >job.c
grep -q 'pkg-config --cflags --libs dlock' job.c || fail "README's C example changed: no pkg-config line"
# shellcheck disable=SC2046
if cc job.c $(pkg-config --cflags --libs dlock) -o job; then
  echo "cc job.c \$(pkg-config --cflags --libs dlock) = $(pkg-config --cflags --libs dlock): ok"
  out=$(./job 2>&1); rc=$?
  echo "./job: $out"
  [ $rc = 0 ] && [ "${out#running, fencing token }" != "$out" ] || fail "the README example did not take the lock (exit $rc)"
  lib=$(ldd ./job | awk '/libdlock/ { print $3 }')
  [ "$(realpath "$lib")" = /usr/lib/x86_64-linux-gnu/libdlock.so.$VERSION ] || fail "job loaded '$lib' ($(realpath "$lib")), not libdlock1's libdlock.so.$VERSION"
else
  fail "the README example does not compile with pkg-config"
fi

mkdir -p /tmp/cm && cat >/tmp/cm/CMakeLists.txt <<'CML'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(dlock 1.0 REQUIRED)
add_executable(job /tmp/c/job.c)
target_link_libraries(job PRIVATE dlock::dlock)
CML
if cmake -S /tmp/cm -B /tmp/cm/b >/tmp/cm.log 2>&1 && cmake --build /tmp/cm/b >>/tmp/cm.log 2>&1; then
  out=$(/tmp/cm/b/job 2>&1) || fail "the find_package(dlock) consumer failed: $out"
  echo "find_package(dlock) + dlock::dlock: $out"
else
  cat /tmp/cm.log; fail "find_package(dlock) consumer did not build"
fi

DLOCK_URL=$URL dlock run fresh-root:deb -w 0 sh -c 'echo "dlock (the package): token $DLOCK_TOKEN"' ||
  fail "the packaged dlock command failed"
exit $((failures > 0))
SH

# ---- one root per part: an overlay of / in a private mount namespace ----
in_fresh_root() {   # NAME SCRIPT ENV...
  local name=$1 script=$2; shift 2
  local t0=$SECONDS
  echo "== fresh root: $name"
  if BASE_DIR=$base APT_CACHE=$apt_cache unshare -m --propagation private /bin/bash -s "$work" "$script" "BASE=$base" "$@" <<'NS'; then
set -e
work=$1 script=$2; shift 2
mnt=$work/mnt; mkdir -p "$mnt"
mount -t tmpfs -o size=2g tmpfs "$mnt"
mkdir "$mnt/upper" "$mnt/work" "$mnt/root"
mount -t overlay overlay -o "lowerdir=$BASE_DIR,upperdir=$mnt/upper,workdir=$mnt/work" "$mnt/root"
for d in proc sys dev; do mount --rbind "/$d" "$mnt/root/$d"; done
mkdir -p "$mnt/root/fresh"; mount --bind "$work" "$mnt/root/fresh"
if [ "$BASE_DIR" != / ]; then
  mount --bind /etc/resolv.conf "$mnt/root/etc/resolv.conf"
  [ -z "$APT_CACHE" ] || mount --bind "$APT_CACHE" "$mnt/root/var/cache/apt/archives"
fi
exec chroot "$mnt/root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 "$@" /bin/bash "/fresh/$script"
NS
    passed=$((passed + 1)); echo "== $name: ok ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1)); echo "== $name: FAILED ($((SECONDS - t0)) s)"
  fi
}

if [ -n "$wheel" ]; then
  mkdir -p "$work/in"; cp "$wheel" "$work/in/"
  in_fresh_root "wheel without libmariadb3 and without a compiler" wheel.sh \
    "PY=$root_python" "WHEEL=/fresh/in/$(basename "$wheel")" "URL=$url" "ED_URL=$ed_url"
fi
if [ -n "$debs" ]; then
  mkdir -p "$work/debs"; cp "$debs"/*.deb "$work/debs/"; cp "$repo/README.md" "$work/"
  in_fresh_root "C packages by apt-get install ./*.deb" debs.sh \
    "DEBS=/fresh/debs" "README=/fresh/README.md" "URL=$url" \
    "VERSION=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")"
fi
echo "fresh-root: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
