#!/usr/bin/env bash
# Soak: `tidings serve` (gateway and daemon in one process) under steady load for MINUTES,
# reporting every minute what must stay flat: the process's RSS, its open descriptors and the
# size of every database file. Not a CI test; a load run for a quiet machine.
#
#   Benchmarks/soak.sh [MINUTES] [RATE] [IDLE] [APP_RATE]
#
#   MINUTES   how long (default 30)
#   RATE      pushes per second to a connected device that acknowledges each (default 30000:
#             half the durable acceptance rate measured in docs/benchmarks.md, Gateway, row 20:
#             62,458–67,595 req/s); h2load -c 4 -m 64 --rps RATE/4, one 60-second run per minute
#             with a fresh provider token (a token is refused after an hour)
#   IDLE      idle device connections held open throughout (default 3000), from 127.0.0.2–6
#   APP_RATE  local notifications per second that an app adds, each tapped a second later by
#             the "person" (the daemon's admin socket) and answered in the app's delegate
#             (default 20)
#
# RETENTION (seconds, default 300): the gateway's --push-retention, so that maintenance (every
# minute) deletes delivered pushes and the push log reaches a plateau; with the default 7 days
# gateway.sqlite grows by ≈ 430 bytes per push for the whole run.
#
# Each minute prints one line: the minute, h2load's req/s and status codes, RSS, open
# descriptors (/proc/PID/fd), and the size of each *.sqlite* file in the data directory.
# Binaries: TIDINGS / DEVICE (gateway-bench), else built in release into .build-bench (as
# Benchmarks/gateway/bench.sh). Ports (127.0.0.1 only): SOAK_PORT (provider), SOAK_PORT-1
# (device), SOAK_PORT+1 (admin). Every process started here is stopped by its PID.
set -euo pipefail
MINUTES="${1:-30}"
RATE="${2:-30000}"
IDLE="${3:-3000}"
APP_RATE="${4:-20}"
SOURCES="127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6"
PORT="${SOAK_PORT:-14197}"
DEV_PORT=$((PORT - 1)); ADMIN_PORT=$((PORT + 1))
for p in "$PORT" "$DEV_PORT" "$ADMIN_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is in use: set SOAK_PORT" >&2; exit 1; fi
done
command -v h2load >/dev/null || { echo "h2load is missing: apt-get install nghttp2-client" >&2; exit 1; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${BENCH_WORK:-$ROOT/.build-bench-work}/soak"
rm -rf "$WORK"; mkdir -p "$WORK"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; exec 3>&- 2>/dev/null || true; }
trap cleanup EXIT

# TIDINGS / DEVICE: other binaries (e.g. an older build, to compare within one run); unset: built here.
. "$ROOT/Benchmarks/binaries.sh"
echo "soak: $MINUTES min, $RATE pushes/s, $IDLE idle devices, $APP_RATE local notifications/s, push retention ${RETENTION:-300} s; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

D="$WORK/data"
SOCKET="$D/daemon.sock"
"$TIDINGS" keys create --data-dir "$D" --team TEAM123456 --key-id SOAKKEY001 -o "$WORK/key.p8" --app com.example.soak --storage-policy all >/dev/null
"$TIDINGS" serve --data-dir "$D" --socket "$SOCKET" --consent grant --development --quiet --log-level error \
  --push-retention "${RETENTION:-300}" --device-rate-limit 0 --new-device-rate-limit 0 --listen 127.0.0.1:$PORT --device-listen 127.0.0.1:$DEV_PORT --admin-listen 127.0.0.1:$ADMIN_PORT > "$WORK/serve.log" 2>&1 &
SERVE=$!; PIDS+=("$SERVE")
for _ in $(seq 300); do curl -s -o /dev/null http://127.0.0.1:$ADMIN_PORT/healthz && [ -S "$SOCKET" ] && break; sleep 0.1; done
kill -0 "$SERVE" 2>/dev/null || { echo "tidings serve exited:"; cat "$WORK/serve.log"; exit 1; }
CERT="$D/tls/gateway-cert.pem"

# The connected device: receives and acknowledges every push of the run.
TOTAL=$((RATE * 60 * MINUTES))
"$DEVICE" device 127.0.0.1 "$DEV_PORT" "$CERT" com.example.soak "$TOTAL" > "$WORK/device.log" 2>&1 &
DEV=$!; PIDS+=("$DEV")
for _ in $(seq 300); do grep -q TOKEN "$WORK/device.log" && break; sleep 0.1; done
TOKEN="$(awk '/TOKEN/{print $2}' "$WORK/device.log")"
[ -n "$TOKEN" ] || { echo "the device got no token:"; cat "$WORK/device.log"; exit 1; }

# Idle devices, held until the end (stdin open).
mkfifo "$WORK/hold"
"$DEVICE" idle 127.0.0.1 "$DEV_PORT" "$CERT" "$IDLE" "$SOURCES" < "$WORK/hold" > "$WORK/idle.log" 2>&1 &
IDLEPID=$!; PIDS+=("$IDLEPID")
exec 3> "$WORK/hold"
until grep -q CONNECTED "$WORK/idle.log"; do sleep 1; kill -0 "$IDLEPID" 2>/dev/null || { cat "$WORK/idle.log"; exit 1; }; done
echo "idle devices: $(awk '/CONNECTED/{print $2}' "$WORK/idle.log") of $IDLE connected"

# The app, adding and answering local notifications for the whole run.
TIDINGS_SOCKET="$SOCKET" TIDINGS_BUNDLE_ID=com.example.soak.app \
  "$DEVICE" app "$SOCKET" com.example.soak.app "$APP_RATE" "$((MINUTES * 60))" > "$WORK/app.log" 2>&1 &
APP=$!; PIDS+=("$APP")

sizes() { find "$D" -name '*.sqlite*' -printf '%P %s\n' | sort | awk '{printf "%s%s %.1f MB", (NR>1?", ":""), $1, $2/1048576}'; }
sample() {
  echo "minute $1: $2 | RSS $(awk '/VmRSS/{printf "%.1f MB", $2/1024}' /proc/$SERVE/status), fds $(ls /proc/$SERVE/fd | wc -l), threads $(awk '/Threads/{print $2}' /proc/$SERVE/status) | $(sizes)"
}
sample 0 "warm-up (idle devices connected)"
H2="-n $((RATE * 60)) -c 4 -m 64 --rps $(( (RATE + 3) / 4 )) -d $ROOT/Benchmarks/gateway/body.json -H content-type:application/json -H apns-topic:com.example.soak -H apns-push-type:alert"
OK=0; NOSTATUS=0  # over all runs: requests answered 2xx; requests h2load got no status for
for m in $(seq "$MINUTES"); do
  kill -0 "$SERVE" 2>/dev/null || { echo "tidings serve exited:"; tail -20 "$WORK/serve.log"; exit 1; }
  JWT="$("$TIDINGS" keys token --key "$WORK/key.p8" --key-id SOAKKEY001 --team TEAM123456)"
  # The whole output is kept: a request that got no status (its connection failed: h2load
  # counts it "failed"/"errored", in no status class) shows only there and in the counts below.
  h2load $H2 -H "authorization: bearer $JWT" "https://127.0.0.1:$PORT/3/device/$TOKEN" > "$WORK/h2load.$m.log" 2>&1 || true
  r=$(awk '/^finished in/{rps=$4 " req/s"} /^requests:/{failed=$10; errored=$12} /^status codes:/{sub(/^status codes: /, ""); codes=$0}
           END{print rps ", " codes ", " failed " failed (" errored " without a status)"}' "$WORK/h2load.$m.log")
  OK=$((OK + $(awk '/^status codes:/{n=$3} END{print n+0}' "$WORK/h2load.$m.log")))
  NOSTATUS=$((NOSTATUS + $(awk '/^requests:/{n=$12} END{print n+0}' "$WORK/h2load.$m.log")))
  sample "$m" "$r"
done
wait "$APP" 2>/dev/null || true
echo "app: $(tail -1 "$WORK/app.log")"
for _ in $(seq 600); do grep -q RECEIVED "$WORK/device.log" && break; sleep 0.1; done
echo "device: $(grep RECEIVED "$WORK/device.log" || echo "did not receive all $TOTAL pushes; $(tail -2 "$WORK/device.log")")"
METRICS="$(curl -s http://127.0.0.1:$ADMIN_PORT/metrics)"
echo "gateway metrics: $(grep -E '^tidings_gateway_(pushes_(accepted|rejected|acknowledged)_total|connected_devices|connections_(refused|closed_early)_total)' <<<"$METRICS" | tr '\n' ' ')"
# Every 200 is counted in accepted_total after its commit, so accepted ≥ 2xx; a push committed
# whose 200 never reached h2load (its connection failed first) makes accepted larger, by at
# most the requests without a status. Outside that range a 200 was not stored, or the count is wrong.
ACCEPTED="$(awk '/^tidings_gateway_pushes_accepted_total /{print $2}' <<<"$METRICS")"
echo "h2load: $OK answered 2xx, $NOSTATUS without a status (see $WORK/h2load.*.log); gateway: ${ACCEPTED:-?} accepted$(
  [ -n "$ACCEPTED" ] && { [ "$ACCEPTED" -lt "$OK" ] || [ "$ACCEPTED" -gt $((OK + NOSTATUS)) ]; } && echo " — MISMATCH")"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
