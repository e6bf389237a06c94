#!/usr/bin/env bash
# The main job of dlock, shown end to end: three "hosts" run the same cron job
# every second through `dlock run`; the others skip the round (exit 75); one
# host dies (SIGKILL) while it holds the lock, and its job dies with it;
# another takes over once the dead host's lease expires; a write the dead
# host sent before it died arrives late and is refused by its fencing token;
# it ends with `dlock list`.
#
#   scripts/demo.sh          set up this machine, build `dlock`, run the demo
#                            on a throwaway local MariaDB (or on $DLOCK_URL)
#
# The hosts are processes on this machine; on real hosts each would run
#   dlock run -n demo:nightly-report --ttl 3s job
# from its crontab, with DLOCK_URL pointing at the shared database.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ -z "${DLOCK_DEMO_INNER:-}" ]; then
  scripts/setup.sh
  echo "demo: building dlock (cmake, first time takes a minute)"
  cmake -S . -B build -G Ninja -DBUILD_TESTING=ON >/dev/null
  cmake --build build --target dlock_cli >/dev/null
  DLOCK_DEMO_INNER=1 exec scripts/with-db.sh "$0" "$@"
fi

# ---- inside: DLOCK_URL names the server -------------------------------------
export LC_ALL=C
export DLOCK="$root/build/cli/dlock"
export KEY="demo:nightly-report"
export TTL=3s
export STATE
STATE=$(mktemp -d "${TMPDIR:-/tmp}/dlock-demo.XXXXXX")
export T0=${EPOCHREALTIME/./}
hosts=(host-a host-b host-c)
declare -A worker_pid

cleanup() {
  touch "$STATE/stop"
  for h in "${hosts[@]}"; do
    [ -n "${worker_pid[$h]:-}" ] && kill -TERM "${worker_pid[$h]}" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$STATE"
}
trap cleanup EXIT

# One timeline line: elapsed time, host, event. One printf = one write.
cat >"$STATE/lib.sh" <<'LIB'
say() {
  local now=${EPOCHREALTIME/./} t
  t=$(( (now - T0) / 100000 ))
  printf '%4d.%ds  %-7s %s\n' $((t / 10)) $((t % 10)) "$1" "$2"
}
# The fenced resource: "the report" takes a write only with a token newer
# than the one it has (flock: one writer at a time on this machine).
write_report() {  # write_report HOST TOKEN
  local last
  exec 9>>"$STATE/report.lock"
  flock 9
  last=$(cat "$STATE/report" 2>/dev/null || echo 0)
  if [ "$2" -gt "$last" ]; then
    echo "$2" >"$STATE/report"
    say "$1" "done: report written with token $2"
  else
    echo "$2" >>"$STATE/refused"
    say "$1" "report REFUSED token $2 (it has token $last)"
  fi
  flock -u 9
}
LIB

# The job each host runs under the lock. It writes "the report" only if its
# fencing token is newer than the report's: what a fenced resource does.
cat >"$STATE/job.sh" <<'JOB'
#!/usr/bin/env bash
. "$STATE/lib.sh"
host=$1
dlock_pid=${DLOCK_OWNER#*:}   # host:pid:uuid: the pid of the dlock that holds the lock
echo "$host ${dlock_pid%%:*} $DLOCK_TOKEN" >"$STATE/holder.tmp" && mv "$STATE/holder.tmp" "$STATE/holder"
if [ -f "$STATE/crash" ]; then
  read -r dead_host dead_at <"$STATE/crash"
  gap=$(( (${EPOCHREALTIME/./} - dead_at) / 100000 ))
  rm -f "$STATE/crash"
  say "$host" "takes over $((gap / 10)).$((gap % 10))s after $dead_host died (its lease ran out): token $DLOCK_TOKEN, running the job"
else
  say "$host" "got the lock: token $DLOCK_TOKEN, running the job"
fi
echo "$DLOCK_TOKEN" >>"$STATE/runs-$host"
echo "${EPOCHREALTIME/./}" >"$STATE/start-$DLOCK_TOKEN"
sleep 1.2
write_report "$host" "$DLOCK_TOKEN"
echo "${EPOCHREALTIME/./}" >"$STATE/end-$DLOCK_TOKEN"
rm -f "$STATE/holder"
JOB
chmod +x "$STATE/job.sh"

# A host: its "cron" tries the job every second; a busy lock means another
# host runs it, so this round is skipped (exit 75; the first one is shown).
cat >"$STATE/host.sh" <<'HOST'
#!/usr/bin/env bash
. "$STATE/lib.sh"
host=$1
while [ ! -f "$STATE/stop" ]; do
  rc=0
  "$DLOCK" run -n -v "$KEY" --ttl "$TTL" "$STATE/job.sh" "$host" 2>"$STATE/err-$host" || rc=$?
  case $rc in
    0) ;;
    75) echo x >>"$STATE/busy-$host"
        if [ -f "$STATE/crash" ]; then
          say "$host" "exit 75, busy: the dead host's lease has not expired; skips this round"
        elif [ "$(wc -l <"$STATE/busy-$host")" = 1 ]; then
          say "$host" "exit 75, busy: $(tail -n 1 "$STATE/err-$host" | sed 's/^dlock: //; s/; not acquired.*//'); skips this round"
        fi ;;
    *) say "$host" "dlock exited $rc: $(grep -v -e trying -e acquired -e released "$STATE/err-$host")" ;;
  esac
  sleep 1
done
HOST
chmod +x "$STATE/host.sh"

. "$STATE/lib.sh"
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll with a deadline
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $end ] || { echo "demo: timed out waiting for $what" >&2; exit 1; }
    sleep 0.02
  done
}
runs_at_least() { [ "$(cat "$STATE"/runs-* 2>/dev/null | wc -l)" -ge "$1" ]; }
fresh_holder() { [ -f "$STATE/holder" ] && [ ! -f "$STATE/crash" ]; }

"$DLOCK" init >/dev/null
echo
echo "Three hosts run the same job every second, each through"
echo "    dlock run -n -v $KEY --ttl $TTL job.sh"
echo "The job takes 1.2 s; whoever gets the lock runs it, the others skip the round."
echo
echo "   time  host    event"
i=0
for h in "${hosts[@]}"; do
  sleep "0.$((i * 3))"
  "$STATE/host.sh" "$h" &
  worker_pid[$h]=$!
  i=$((i + 1))
done

# Let a few runs happen, then kill whoever is holding the lock mid-job.
wait_for 30 "a few runs" runs_at_least 4
wait_for 30 "a host holding the lock" fresh_holder
read -r victim victim_dlock victim_token <"$STATE/holder"
victim_pid=${worker_pid[$victim]}
disown "$victim_pid"  # no "Killed" notice from the shell
# The host's cron loop and its dlock die at once; the job's whole process
# tree dies with its dlock (dlock's guard process kills it).
kill -KILL "$victim_pid" "$victim_dlock" 2>/dev/null || true
unset "worker_pid[$victim]"
echo "$victim ${EPOCHREALTIME/./}" >"$STATE/crash"
cp "$STATE/crash" "$STATE/crashed"
rm -f "$STATE/holder"
say "$victim" "CRASHES (SIGKILL) in the middle of its job, holding token $victim_token"
say "" "its lease stays until it expires; dlock list now:"
"$DLOCK" list "$KEY" | sed 's/^/          /'

# Another host takes over once the lease has expired. A write the dead host
# sent just before it died (held up in the network, say) arrives after the
# new holder's: the report refuses its old token.
wait_for 30 "the takeover" test ! -f "$STATE/crash"
newer_report() { [ "$(cat "$STATE/report" 2>/dev/null || echo 0)" -gt "$victim_token" ]; }
wait_for 30 "the new holder's report" newer_report
say "$victim" "a write it sent with token $victim_token before it died arrives now:"
write_report "$victim" "$victim_token"
runs_before=$(cat "$STATE"/runs-* | wc -l)
wait_for 30 "more runs" runs_at_least $((runs_before + 3))
wait_for 30 "a host holding the lock" test -f "$STATE/holder"
list_at=$(say "" "" | awk '{print $1}')
list=$("$DLOCK" list)
touch "$STATE/stop"
for h in "${!worker_pid[@]}"; do wait "${worker_pid[$h]}" 2>/dev/null || true; done
worker_pid=()

echo
echo "Runs per host (fencing tokens) and rounds skipped because another host held the lock:"
for h in "${hosts[@]}"; do
  runs=$(tr '\n' ' ' <"$STATE/runs-$h" 2>/dev/null || true)
  busy=$(cat "$STATE/busy-$h" 2>/dev/null | wc -l)
  note=""; [ "$h" = "$victim" ] && note="  (crashed during token $victim_token)"
  printf '  %-7s tokens: %-24s skipped: %s%s\n' "$h" "${runs:-none}" "$busy" "$note"
done
all=$(cat "$STATE"/runs-* | sort -n | tr '\n' ' ')
echo "  every token, in order: $all— one holder at a time, and the token only grows."
echo "  the report was last written with token $(cat "$STATE/report"); it refused token(s): $(paste -sd' ' "$STATE/refused" 2>/dev/null)"
busy_total=$(cat "$STATE"/busy-* 2>/dev/null | wc -l)
echo "  $busy_total rounds were skipped with exit 75 (the lock was busy): the job never ran twice at once."
# Check what the timeline claims: no two runs overlapped in time (the
# crashed run ends when its host died).
read -r _ crashed_at <"$STATE/crashed"
overlaps=$(for t in $(cat "$STATE"/runs-* | sort -n); do
             end=$(cat "$STATE/end-$t" 2>/dev/null || echo "$crashed_at")
             echo "$(cat "$STATE/start-$t") $end $t"
           done | sort -n | awk 'NR > 1 && $1 < prev_end { n++ } { prev_end = $2 } END { print n + 0 }')
if [ "$overlaps" = 0 ]; then
  echo "  checked: no two runs overlapped in time."
else
  echo "  ERROR: $overlaps runs overlapped" >&2
  exit 1
fi
echo
echo "dlock list (at $list_at, while the last job ran):"
echo "$list" | sed 's/^/  /'
