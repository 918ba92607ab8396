#!/usr/bin/env bash
# Issue 16's path with each part in its own process, as users run it: `tidings gateway`,
# `tidings daemon --gateway …` (its inbox, engine, delivered list and web center; no terminal
# or desktop presenter), and h2load as the provider (one TLS connection, 64 streams in flight).
# RemoteBenchmark runs the provider client, the gateway and the daemon in one process; here the
# daemon's CPU is its own (/proc/PID/stat) and the provider costs what a C client costs.
#
#   Benchmarks/remote-processes.sh [PUSHES] [BACKLOG] [ROUNDS]
#
#   PUSHES   pushes per load phase (default 20000)
#   BACKLOG  pushes stored while the daemon is stopped, then presented after it starts
#            (default 100000; 0 skips the phase)
#   ROUNDS   load phases, each a reference round then a daemon round (default 3)
#
# Phases, each printed as one line with the load average:
#   one at a time  300 pushes, h2load -c 1 -m 1, to the daemon's token
#   reference      PUSHES to a second device that only acknowledges (gateway-bench device):
#                  the gateway and h2load without a daemon, the same minute
#   daemon         PUSHES to the daemon's token, h2load -c 1 -m 64
#   backlog        the daemon stopped (SIGTERM), BACKLOG pushes stored, the daemon started
# "Presented" is the time the daemon handed the push to its presenters, as its `presented` event
# carries it (`occurredAt`, the daemon's clock — this machine's, as the gateway's) and the gateway
# records it in gateway.sqlite once the event is back: provider → presented is, per push,
# `presented_at - accepted_at` (milliseconds), and the rate is pushes / (last presented_at -
# first accepted_at). (Before the events carried their time, presented_at was when the event
# reached the gateway's commit: the way back was in it — docs/benchmarks.md, session 17.) The
# script waits on tidings_gateway_delivery_events_total{event="presented"} at the admin endpoint.
# CPU per push: /proc/PID/stat utime + stime (10 ms ticks) over the phase, for the daemon and
# for the gateway. Binaries: TIDINGS / DEVICE (gateway-bench), else built in release into
# .build-bench (as Benchmarks/soak.sh). Ports (127.0.0.1 only): REMOTE_PORT (provider),
# REMOTE_PORT-1 (device channel), REMOTE_PORT+1 (admin). Every process started here is
# stopped by its PID. KEEP=SECONDS: on a failure, the processes stay up that long first (to
# look at the gateway's /metrics, the databases, the daemon) — how the lost events were found.
# DELIVERED_LIMIT: the daemon's --delivered-limit (default: every push of the run is kept).
# TIMELINE=MS: each daemon round's pushes in MS-wide slices of their acceptance (see timeline()).
# SETTLE=SECONDS: a pause before each daemon round, after the reference round (default 0), so
# that the gateway's background work after the reference round does not overlap the daemon
# round's first second (in one quiet round that second held most of its p99; a pause of 3 s
# has not been shown to lower the p99: docs/benchmarks.md, session 16).
# RATE: the daemon phase's offered load in pushes/s (h2load --rps, still at most 64 in flight):
# provider → presented "under that load", not at whatever rate saturates the two cores (unset:
# as fast as the gateway answers, which measures the most the path takes).
# PROVIDER_NICE=N: h2load at nice N (its CPU still counted in the machine's two cores, but the
# gateway and the daemon first when they both want one: a provider on its own machine, as
# providers are, without a second machine; docs/benchmarks.md, session 18).
set -euo pipefail
PUSHES="${1:-20000}"
BACKLOG="${2:-100000}"
ROUNDS="${3:-3}"
# Every push stays in the delivered list (for provider → shown) unless DELIVERED_LIMIT is set
# (e.g. 1000, the daemon's default: then "shown" is of the pushes still listed).
DELIVERED_LIMIT="${DELIVERED_LIMIT:-$((300 + (PUSHES + 1) * ROUNDS + BACKLOG + 1000))}"
PORT="${REMOTE_PORT:-14297}"
DEV_PORT=$((PORT - 1)); ADMIN_PORT=$((PORT + 1))
for p in "$PORT" "$DEV_PORT" "$ADMIN_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is in use: set REMOTE_PORT" >&2; exit 1; fi
done
for tool in h2load sqlite3 curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install nghttp2-client sqlite3 curl)" >&2; exit 1; }
done
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${BENCH_WORK:-$ROOT/.build-bench-work}/remote-processes"
rm -rf "$WORK"; mkdir -p "$WORK"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# TIDINGS / DEVICE: other binaries (e.g. an older build, to compare within one run); unset: built here.
. "$ROOT/Benchmarks/binaries.sh"
BUNDLE=com.example.remote
G="$WORK/gateway"; D="$WORK/device"
mkdir -p "$D"
load() { cut -d' ' -f1 /proc/loadavg; }
now_ms() { date +%s%3N; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }     # CPU so far, in 1/100 s
per_push() { awk -v t="$1" -v n="$2" 'BEGIN{printf "%.0f", t * 10000 / n}'; }  # ticks → µs per push
presented() { curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^tidings_gateway_delivery_events_total\{event="presented"\}/{printf "%d\n", $2; f=1} END{if(!f) print 0}'; }
# The gateway's histogram of how long an event took from the device (its occurredAt) to durable
# at the gateway: "le count" per bucket, cumulative (tidings_gateway_delivery_event_lag_seconds).
lag_buckets() { curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | sed -nE 's/^tidings_gateway_delivery_event_lag_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$/\1 \2/p'; }
# The way back of a round's events from two lag_buckets snapshots: p50 and p99 as the bucket bound
# they fall under (the histogram's resolution: 1, 2, 5, 10, 20, 50 ms …).
way_back() {
  awk 'NR == FNR { before[$1] = $2; next } { n[++k] = $1; c[k] = $2 - before[$1] }
       END { total = c[k]; if (total <= 0) { print "no timed events"; exit }
             for (q = 1; q <= 2; q++) { want = (q == 1 ? 0.5 : 0.99) * total
               for (i = 1; i <= k && c[i] < want; i++) {}
               v[q] = (n[i] == "+Inf") ? "> 3600 s" : "≤ " n[i] * 1000 " ms" }
             printf "p50 %s / p99 %s (%d events)\n", v[1], v[2], total }' <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}
devices() { curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^tidings_gateway_connected_devices /{printf "%d\n", $2; f=1} END{if(!f) print 0}'; }
last_seq() { sqlite3 "$G/gateway.sqlite" "SELECT COALESCE(MAX(seq), 0) FROM gw_pushes"; }
# A failure: its lines on stderr, the processes kept up for KEEP seconds, then the exit.
fail() {
  printf '%s\n' "$@" >&2
  [ -n "${KEEP:-}" ] && sleep "$KEEP"
  exit 1
}
wait_presented() {  # until the count reaches $1 (60 s without progress: fail)
  local last=-1 still=0 n
  while :; do
    n=$(presented)
    [ "$n" -ge "$1" ] && return 0
    if [ "$n" = "$last" ]; then still=$((still + 1)); else still=0; last=$n; fi
    [ "$still" -ge 300 ] && fail "stuck at $n presented of $1; daemon log:" "$(tail -20 "$WORK/daemon.log")"
    kill -0 "$DAEMON" 2>/dev/null || fail "the daemon exited at $n presented of $1:" "$(tail -20 "$WORK/daemon.log")"
    sleep 0.2
  done
}
# The daemon's pushes after seq $1: provider → shown (the delivered list's date: the engine's
# clock when it delivered the push, read from device.sqlite; of the pushes still in the list,
# every one unless DELIVERED_LIMIT was set) and provider → presented (the
# gateway's record of the `presented` event), p50 / p99 / max in ms, and the rate.
# Then, over every push (the inbox keeps each one's `received_at`, the daemon's clock, in ms):
# accepted → received (the gateway's commit and send, the daemon's read and inbox commit) and
# received → presented (the daemon's hand-off, delivered-list commit and show, the event's way
# back and the gateway's commit of it).
latency() {
  # (The inbox's push table has no apns-id index: its times are copied to an indexed temporary table.)
  sqlite3 -separator ' ' "$G/gateway.sqlite" "ATTACH '$D/device.sqlite' AS device; ATTACH '$D/remote.sqlite' AS inbox;
      CREATE TEMP TABLE received AS SELECT apns_id, received_at FROM inbox.push; CREATE INDEX temp.received_id ON received(apns_id);
      SELECT p.presented_at - p.accepted_at, COALESCE(CAST((d.date + 978307200) * 1000 AS INTEGER) - p.accepted_at, ''), p.accepted_at, p.presented_at,
             COALESCE(i.received_at - p.accepted_at, ''), COALESCE(p.presented_at - i.received_at, '')
      FROM gw_pushes p LEFT JOIN device.delivered d ON d.identifier = p.apns_id LEFT JOIN temp.received i ON i.apns_id = p.apns_id
      WHERE p.seq > $1 AND p.presented_at IS NOT NULL" > "$WORK/latency"
  pcts() { cut -d' ' -f"$1" "$WORK/latency" | grep -v '^$' | sort -n | awk '{v[NR] = $1} END{printf "p50 %d / p99 %d / max %d", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1], v[NR]}'; }
  awk -v shown="$(pcts 2)" -v presented="$(pcts 1)" -v received="$(pcts 5)" -v after="$(pcts 6)" '{if (NR == 1 || $3 < first) first = $3; if ($4 > last) last = $4}
    END{printf "%d presented; provider → shown %s ms, → presented %s ms; %.0f pushes/s (first accepted → last presented %d ms); accepted → received %s ms, received → presented %s ms",
        NR, shown, presented, NR * 1000 / (last - first), last - first, received, after}' "$WORK/latency"
}

# TIMELINE=MS: after each daemon round, its pushes by when they were accepted, MS at a time:
# how many, and the mean of each leg in ms (provider → shown is empty for pushes trimmed off
# the delivered list). Where the p99 comes from: a steady queue, or build-ups and when.
timeline() {
  echo "  accepted at   pushes  → presented (mean / max)   → shown   → received   received → presented"
  awk -F'[ ]' '{print $3, $1, $2, $5, $6}' "$WORK/latency" | sort -n | awk -F'[ ]' -v ms="$1" '
    NR == 1 {t0 = $1}
    {b = int(($1 - t0) / ms); n[b]++; p[b] += $2; if ($2 > m[b]) m[b] = $2; if ($3 != "") {s[b] += $3; ns[b]++}; r[b] += $4; a[b] += $5; if (b > last) last = b}
    END {for (i = 0; i <= last; i++) if (n[i]) printf "  %7d ms %8d %9.1f / %4d %9s %10.1f %12.1f\n", i * ms, n[i], p[i] / n[i], m[i],
         ns[i] ? sprintf("%.1f", s[i] / ns[i]) : "-", r[i] / n[i], a[i] / n[i]}'
}

"$TIDINGS" keys create --data-dir "$G" --team TEAM123456 --key-id REMOTEKEY1 -o "$WORK/key.p8" --app "$BUNDLE" --storage-policy all >/dev/null
# --unauthenticated-stream-limit 64: as in Benchmarks/gateway/bench.sh (h2load sends its first
# 64 streams before it reads the gateway's SETTINGS, and does not retry REFUSED_STREAM).
"$TIDINGS" gateway --data-dir "$G" --listen 127.0.0.1:$PORT --device-listen 127.0.0.1:$DEV_PORT --admin-listen 127.0.0.1:$ADMIN_PORT \
  --device-rate-limit 0 --new-device-rate-limit 0 --unauthenticated-stream-limit 64 --log-level error > "$WORK/gateway.log" 2>&1 &
GW=$!; PIDS+=("$GW")
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/healthz" && break; sleep 0.1; done
kill -0 "$GW" 2>/dev/null || { echo "tidings gateway exited:"; cat "$WORK/gateway.log"; exit 1; }
CERT="$G/tls/gateway-cert.pem"
# The daemon's device key, made here so that its app's token is known before it starts.
TOKEN="$("$DEVICE" token 127.0.0.1 "$DEV_PORT" "$CERT" "$BUNDLE" "$D/device-key.pem" | awk '/TOKEN/{print $2}')"
[ -n "$TOKEN" ] || { echo "no token for the daemon's device"; exit 1; }

# (A daemon from before --delivered-limit keeps every push listed anyway.)
LIMIT_OPTION=; "$TIDINGS" daemon --help 2>&1 | grep -q -- --delivered-limit && LIMIT_OPTION="--delivered-limit $DELIVERED_LIMIT"
DAEMON=
start_daemon() {
  "$TIDINGS" daemon --data-dir "$D" --socket "$D/daemon.sock" --consent grant --development --quiet --web-port 0 $LIMIT_OPTION \
    --gateway 127.0.0.1:$DEV_PORT --gateway-cert "$CERT" --log-level error >> "$WORK/daemon.log" 2>&1 &
  DAEMON=$!; PIDS+=("$DAEMON")
}
stop_daemon() { kill -TERM "$DAEMON" 2>/dev/null || true; wait "$DAEMON" 2>/dev/null || true; }
start_daemon
for _ in $(seq 300); do [ -S "$D/daemon.sock" ] && [ "$(devices)" -ge 1 ] && break; sleep 0.1; done
[ "$(devices)" -ge 1 ] || { echo "the daemon did not connect:"; cat "$WORK/daemon.log"; exit 1; }
# The app: development mode (named by TIDINGS_BUNDLE_ID), authorized (consent granted), gone again.
TIDINGS_SOCKET="$D/daemon.sock" TIDINGS_BUNDLE_ID=$BUNDLE "$DEVICE" app "$D/daemon.sock" $BUNDLE 0 0 > "$WORK/app.log" 2>&1 \
  || { echo "the app was not authorized:"; cat "$WORK/app.log"; exit 1; }

JWT="$("$TIDINGS" keys token --key "$WORK/key.p8" --key-id REMOTEKEY1 --team TEAM123456)"
h2() {  # h2() TOKEN N STREAMS [CONNECTIONS [RATE]]
  ${PROVIDER_NICE:+nice -n "$PROVIDER_NICE"} h2load -n "$2" -c "${4:-1}" -m "$3" ${5:+--rps "$5"} -d "$ROOT/Benchmarks/gateway/body.json" -H content-type:application/json \
    -H apns-topic:$BUNDLE -H apns-push-type:alert -H "authorization: bearer $JWT" "https://127.0.0.1:$PORT/3/device/$1" > "$WORK/h2load.log" 2>&1
  grep -q "status codes: $2 2xx" "$WORK/h2load.log" || fail "h2load: not all 2xx:" "$(grep -E "status codes|requests:" "$WORK/h2load.log")" \
    "$(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | grep -E "^tidings_gateway_(pushes_rejected|connections_(refused|closed_early))")" "$(tail -5 "$WORK/gateway.log")"
  awk '/^finished in/{printf "%s req/s accepted", $4}' "$WORK/h2load.log"
}
echo "remote-processes: $PUSHES pushes per round, $ROUNDS rounds, backlog $BACKLOG; $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# One at a time.
seq0=$(last_seq); p0=$(presented)
h2 "$TOKEN" 300 1 >/dev/null
wait_presented $((p0 + 300))
echo "one at a time (300): $(latency "$seq0") | load $(load)"

for round in $(seq "$ROUNDS"); do
  # Reference: a device that only acknowledges (its own key and token, same app).
  rm -f "$WORK/ref-key.pem"; : > "$WORK/ref.log"
  "$DEVICE" device 127.0.0.1 "$DEV_PORT" "$CERT" "$BUNDLE" "$PUSHES" "$WORK/ref-key.pem" > "$WORK/ref.log" 2>&1 &
  REF=$!; PIDS+=("$REF")
  for _ in $(seq 300); do grep -q TOKEN "$WORK/ref.log" && break; sleep 0.1; done
  REF_TOKEN="$(awk '/TOKEN/{print $2}' "$WORK/ref.log")"
  g0=$(ticks "$GW")
  accepted=$(h2 "$REF_TOKEN" "$PUSHES" 64)
  wait "$REF"
  g1=$(ticks "$GW")
  echo "round $round, reference (ack-only device): $accepted; $(grep RECEIVED "$WORK/ref.log" | sed 's/^RECEIVED //'); gateway CPU $(per_push $((g1 - g0)) "$PUSHES") µs per push | load $(load)"

  # The daemon.
  sleep "${SETTLE:-0}"
  seq0=$(last_seq); p0=$(presented); g0=$(ticks "$GW"); d0=$(ticks "$DAEMON"); lag0=$(lag_buckets)
  accepted=$(h2 "$TOKEN" "$PUSHES" 64 1 "${RATE:-}")
  wait_presented $((p0 + PUSHES))
  g1=$(ticks "$GW"); d1=$(ticks "$DAEMON")
  echo "round $round, daemon: $accepted; $(latency "$seq0"); CPU per push: daemon $(per_push $((d1 - d0)) "$PUSHES") µs, gateway $(per_push $((g1 - g0)) "$PUSHES") µs | load $(load)"
  echo "  presented → recorded at the gateway (the event's way back, not in → presented): $(way_back "$lag0" "$(lag_buckets)")"
  [ -n "${TIMELINE:-}" ] && timeline "$TIMELINE"
done

if [ "$BACKLOG" -gt 0 ]; then
  stop_daemon
  for _ in $(seq 100); do [ "$(devices)" -eq 0 ] && break; sleep 0.1; done
  seq0=$(last_seq); p0=$(presented)
  t=$(now_ms); accepted=$(h2 "$TOKEN" "$BACKLOG" 64 4)
  echo "backlog: $BACKLOG stored for the stopped daemon in $(( $(now_ms) - t )) ms ($accepted) | load $(load)"
  g0=$(ticks "$GW"); t0=$(now_ms)
  start_daemon
  wait_presented $((p0 + BACKLOG))
  g1=$(ticks "$GW"); d1=$(ticks "$DAEMON")
  last=$(sqlite3 "$G/gateway.sqlite" "SELECT MAX(presented_at) FROM gw_pushes WHERE seq > $seq0")
  echo "backlog: $BACKLOG presented $(( last - t0 )) ms after the daemon started ($(awk -v n="$BACKLOG" -v ms=$((last - t0)) 'BEGIN{printf "%.0f", n * 1000 / ms}')/s); CPU per push: daemon $(per_push "$d1" "$BACKLOG") µs (with its start), gateway $(per_push $((g1 - g0)) "$BACKLOG") µs | load $(load)"
fi
stop_daemon
grep -v '^$' "$WORK/daemon.log" | tail -5 | sed 's/^/daemon log: /' || true
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
