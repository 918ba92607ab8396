#!/usr/bin/env bash
# Gateway benchmarks, side by side with nginx answering a static 200 (testing-tools.md §1).
#
#   Benchmarks/gateway/bench.sh [RUNS] [REQUESTS] [THREADS]
#
# 1. Durable acceptance: h2load -c 4 -m 64, POST of body.json (~330 bytes) with a valid JWT to
#    /3/device/<token> of an offline device (every 200 is a committed SQLite row), RUNS runs
#    alternating with nginx; prints req/s and server CPU µs per request (user + system, all
#    threads: less sensitive than req/s to what else runs on the machine) per run, and the
#    medians. PERF=<file> profiles the gateway during its first run (perf record -F 499 -g,
#    PERF_SECONDS, default 12). E2E=0 skips benchmark 2. BENCH_ENVIRONMENT=production: the gateway and
#    the device's tokens in production (no apns-unique-id on the 200s, as at Apple).
# 2. End to end: the same load while a device is connected and acknowledges; the device side
#    prints pushes/s and accept → receipt latency p50/p99.
# 3. Backlog: the device of benchmark 1 (offline so far) connects and receives everything
#    benchmark 1 stored for it (RUNS × REQUESTS pushes), acknowledging each: the device path
#    alone (store → device → acks), without the provider API; pushes/s while receiving.
# BENCH_STORE=postgres: the gateway on PostgreSQL (docs/scaling.md), a private cluster started here
# (initdb/pg_ctl, as the postgres user when run as root, port PG_PORT); NODES=2: a second gateway
# node on the same database (provider GW_PORT+10, device GW_PORT+9, admin GW_PORT+11): benchmark 1
# loads both nodes at once (half the requests each; req/s summed), benchmark 2 sends through
# node 2 to the device connected to node 1 (cross-node end to end).
# Everything listens on 127.0.0.1 only; every process started here is stopped by its PID.
set -euo pipefail
RUNS="${1:-5}"
N="${2:-200000}"
THREADS="${3:-0}"
# Ports (127.0.0.1): NGINX_PORT, and the gateway's provider GW_PORT, device GW_PORT-1, admin GW_PORT+1.
# Change them when someone else on the machine runs this script at the same time.
NGINX_PORT="${NGINX_PORT:-18443}"
GW_PORT="${GW_PORT:-12197}"
DEV_PORT=$((GW_PORT - 1)); ADMIN_PORT=$((GW_PORT + 1))
for p in "$NGINX_PORT" "$GW_PORT" "$DEV_PORT" "$ADMIN_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is in use (another benchmark?): set NGINX_PORT / GW_PORT" >&2; exit 1; fi
done
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/Benchmarks/gateway"
WORK="${BENCH_WORK:-$ROOT/.build-bench-work}"
rm -rf "$WORK"; mkdir -p "$WORK/nginx/logs" "$WORK/nginx/tmp"
PIDS=()
PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; [ -f "$WORK/nginx/nginx.pid" ] && kill -QUIT "$(cat "$WORK/nginx/nginx.pid")" 2>/dev/null || true
  if [ -f "$WORK/pg/data/postmaster.pid" ]; then as_postgres "$PGBIN/pg_ctl -D $WORK/pg/data -m fast -w stop" >/dev/null 2>&1 || true; fi; }
trap cleanup EXIT

# TIDINGS / DEVICE: other binaries (e.g. an older build, to compare within one run); unset: built here.
. "$ROOT/Benchmarks/binaries.sh"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== nginx on 127.0.0.1:$NGINX_PORT"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/nginx/key.pem" -out "$WORK/nginx/cert.pem" \
  -days 30 -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
cat > "$WORK/nginx/nginx.conf" <<NGINX
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/tmp/body; proxy_temp_path $WORK/nginx/tmp/proxy; fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi; scgi_temp_path $WORK/nginx/tmp/scgi;
    http2_max_concurrent_streams 1000;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:$NGINX_PORT ssl http2;
        ssl_certificate     $WORK/nginx/cert.pem;
        ssl_certificate_key $WORK/nginx/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { default_type application/json; add_header apns-id \$http_apns_id always; return 200 ""; }
    }
}
NGINX
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx/"

DBARGS=()
NODES="${NODES:-1}"
if [ "${BENCH_STORE:-sqlite}" = postgres ]; then
  PG_PORT="${PG_PORT:-$((GW_PORT + 20))}"
  echo "== PostgreSQL on 127.0.0.1:$PG_PORT ($PGBIN)"
  mkdir -p "$WORK/pg"; [ "$(id -u)" = 0 ] && chown postgres: "$WORK/pg"
  as_postgres "$PGBIN/initdb -D $WORK/pg/data -U postgres -A trust -E UTF8 --no-sync" >/dev/null
  as_postgres "$PGBIN/pg_ctl -D $WORK/pg/data -l $WORK/pg/server.log -o '-p $PG_PORT -k $WORK/pg -c listen_addresses=127.0.0.1' -w start" >/dev/null
  "$PGBIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qAtc "CREATE DATABASE bench"
  export TIDINGS_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/bench"
  DBARGS=(--database "$TIDINGS_DATABASE_URL")
fi
echo "== gateway on 127.0.0.1:$GW_PORT (store: ${BENCH_STORE:-sqlite}, nodes: $NODES)"
D="$WORK/gateway"
"$TIDINGS" keys create --data-dir "$D" --team TEAM123456 --key-id BENCHKEY01 -o "$WORK/key.p8" --app com.example.bench --storage-policy all >/dev/null
# --unauthenticated-stream-limit 64: h2load sends its first 64 streams (-m 64) before it reads the
# gateway's SETTINGS (MAX_CONCURRENT_STREAMS 1 until the first valid token, as at APNs) and does not
# retry REFUSED_STREAM, so with APNs' limit of 1 a connection sometimes lost all its requests. The
# limit only matters for each connection's first milliseconds; the steady state measured is the same.
"$TIDINGS" gateway --data-dir "$D" --listen 127.0.0.1:$GW_PORT --device-listen 127.0.0.1:$DEV_PORT --admin-listen 127.0.0.1:$ADMIN_PORT \
  --device-rate-limit 0 --new-device-rate-limit 0 --unauthenticated-stream-limit 64 --environment "${BENCH_ENVIRONMENT:-development}" --threads "$THREADS" --log-level error "${DBARGS[@]}" > "$WORK/gateway.log" 2>&1 &
GW=$!; PIDS+=("$GW")
GWS="$GW"
if [ "$NODES" = 2 ]; then
  GW2_PORT=$((GW_PORT + 10))
  "$TIDINGS" gateway --data-dir "$WORK/gateway2" --listen 127.0.0.1:$GW2_PORT --device-listen 127.0.0.1:$((GW2_PORT - 1)) --admin-listen 127.0.0.1:$((GW2_PORT + 1)) \
    --device-rate-limit 0 --new-device-rate-limit 0 --unauthenticated-stream-limit 64 --environment "${BENCH_ENVIRONMENT:-development}" --threads "$THREADS" --log-level error "${DBARGS[@]}" > "$WORK/gateway2.log" 2>&1 &
  GW2=$!; PIDS+=("$GW2"); GWS="$GW $GW2"
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$((GW2_PORT + 1))/healthz && break; sleep 0.1; done
fi
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$ADMIN_PORT/healthz && break; sleep 0.1; done
kill -0 "$GW" 2>/dev/null || { echo "the gateway exited:"; cat "$WORK/gateway.log"; exit 1; }
CERT="$D/tls/gateway-cert.pem"
JWT="$("$TIDINGS" keys token --key "$WORK/key.p8" --key-id BENCHKEY01 --team TEAM123456)"

# A device registers for a token, then goes offline: benchmark 1 measures durable acceptance only.
"$DEVICE" device 127.0.0.1 "$DEV_PORT" "$CERT" com.example.bench 1 "$WORK/device0.key" > "$WORK/device0.log" 2>&1 &
DEV=$!; PIDS+=("$DEV")
for _ in $(seq 100); do grep -q TOKEN "$WORK/device0.log" && break; sleep 0.1; done
TOKEN="$(awk '/TOKEN/{print $2}' "$WORK/device0.log")"
kill "$DEV"; wait "$DEV" 2>/dev/null || true

H2="-n $N -c 4 -m 64 -d $HERE/body.json -H content-type:application/json -H apns-topic:com.example.bench -H apns-push-type:alert"
run() { h2load $H2 "$@" 2>&1 | awk '/^finished in/{rps=$4} /^status codes:/{codes=$0} /^requests:/{req=$0} END{print rps, "|", req, "|", codes}'; }

# Server CPU time (user + system, all threads) per request: less sensitive than req/s to what
# else runs on the machine. cpu PID... prints clock ticks.
cpu() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{t += $1} END {print t}'; }
per_request() { awk -v a="$1" -v b="$2" -v n="$N" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.1f", (b - a) / hz * 1e6 / n}'; }
# PostgreSQL's CPU (every process of the private cluster), when there is one.
pgcpu() { [ -f "$WORK/pg/data/postmaster.pid" ] || return 0; local pm; pm=$(head -1 "$WORK/pg/data/postmaster.pid"); cpu "$pm" $(pgrep -P "$pm" | tr '\n' ' '); }
NGINX_PIDS="$(cat "$WORK/nginx/nginx.pid") $(pgrep -P "$(cat "$WORK/nginx/nginx.pid")" | tr '\n' ' ')"

echo "== 1. durable acceptance vs nginx: h2load -n $N -c 4 -m 64, $(wc -c < "$HERE/body.json")-byte body, $RUNS runs each, alternating"
: > "$WORK/gw.rps"; : > "$WORK/nginx.rps"
for i in $(seq "$RUNS"); do
  # PERF=<file>: profile the gateway (perf record -F 499 -g) for PERF_SECONDS (12) of its first run.
  if [ "$i" = 1 ] && [ -n "${PERF:-}" ]; then (sleep 1; perf record -F 499 -g -p "$GW" -o "$PERF" -- sleep "${PERF_SECONDS:-12}" >/dev/null 2>&1) & fi
  c0=$(cpu $GWS); p0=$(pgcpu)
  if [ "$NODES" = 2 ]; then
    # Both nodes at once, half the requests each: req/s summed.
    H2="-n $((N / 2)) -c 2 -m 64 -d $HERE/body.json -H content-type:application/json -H apns-topic:com.example.bench -H apns-push-type:alert"
    run -H "authorization: bearer $JWT" "https://127.0.0.1:$GW2_PORT/3/device/$TOKEN" > "$WORK/node2.out" &
    r1=$(run -H "authorization: bearer $JWT" "https://127.0.0.1:$GW_PORT/3/device/$TOKEN"); wait $!
    r2=$(cat "$WORK/node2.out")
    H2="-n $N -c 4 -m 64 -d $HERE/body.json -H content-type:application/json -H apns-topic:com.example.bench -H apns-push-type:alert"
    a=$(echo "$r1" | awk '{print $1}'); b=$(echo "$r2" | awk '{print $1}')
    r="$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", a + b}') | node 1: $r1 | node 2: $r2"
  else
    r=$(run -H "authorization: bearer $JWT" "https://127.0.0.1:$GW_PORT/3/device/$TOKEN")
  fi
  echo "gateway run $i: $r | $(per_request "$c0" "$(cpu $GWS)") µs CPU/req (gateway nodes)$( [ -n "$p0" ] && echo ", $(per_request "$p0" "$(pgcpu)") µs CPU/req (PostgreSQL)")"; echo "$r" | awk '{print $1}' >> "$WORK/gw.rps"
  c0=$(cpu $NGINX_PIDS)
  r=$(run "https://127.0.0.1:$NGINX_PORT/3/device/$TOKEN")
  echo "nginx   run $i: $r | $(per_request "$c0" "$(cpu $NGINX_PIDS)") µs CPU/req"; echo "$r" | awk '{print $1}' >> "$WORK/nginx.rps"
done
median() { sort -n "$1" | awk '{a[NR]=$1} END{print (NR%2==1)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
GWM=$(median "$WORK/gw.rps"); NGM=$(median "$WORK/nginx.rps")
echo "median gateway $GWM req/s, nginx $NGM req/s, ratio $(awk -v a="$GWM" -v b="$NGM" 'BEGIN{printf "%.2f", a/b}')"
echo "gateway RSS after benchmark 1: $(awk '/VmRSS/{print $2, $3}' /proc/$GW/status)"

commits() { echo "gateway commits: $(curl -s http://127.0.0.1:$ADMIN_PORT/metrics | grep -E '^tidings_gateway_commit_(duration_seconds|batch_size)_(sum|count)' | tr '\n' ' ')"; }
if [ "${E2E:-1}" = 0 ]; then commits; echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"; exit 0; fi  # E2E=0: benchmark 1 only
echo "== 2. end to end: a connected device acknowledging every push"
"$DEVICE" device 127.0.0.1 "$DEV_PORT" "$CERT" com.example.bench "$N" > "$WORK/device1.log" 2>&1 &
DEV=$!; PIDS+=("$DEV")
for _ in $(seq 100); do grep -q TOKEN "$WORK/device1.log" && break; sleep 0.1; done
TOKEN2="$(awk '/TOKEN/{print $2}' "$WORK/device1.log")"
idle() { awk '/^cpu /{print $5 + $6}' /proc/stat; }
c0=$(cpu $GWS); i0=$(idle)
E2E_PORT=$GW_PORT; [ "$NODES" = 2 ] && E2E_PORT=$GW2_PORT  # NODES=2: accepted on node 2, the device on node 1
r=$(run -H "authorization: bearer $JWT" "https://127.0.0.1:$E2E_PORT/3/device/$TOKEN2"); echo "gateway accept (port $E2E_PORT): $r"
for _ in $(seq 600); do grep -q RECEIVED "$WORK/device1.log" && break; sleep 0.1; done
# Where the two cores went: the gateway's CPU per push here, the device's in its RECEIVED line
# (its TLS, decoding and acks, connecting included), and the machine's idle time over the run
# (h2load has most of the rest).
echo "CPU per push: gateway $(per_request "$c0" "$(cpu $GWS)") µs; machine idle $(per_request "$i0" "$(idle)") µs per push (both cores)"
grep RECEIVED "$WORK/device1.log" || { echo "device did not receive everything:"; cat "$WORK/device1.log"; }
kill "$DEV" 2>/dev/null || true
echo "== 3. backlog: the offline device of benchmark 1 connects and receives the $((RUNS * N)) pushes stored for it"
"$DEVICE" device 127.0.0.1 "$DEV_PORT" "$CERT" com.example.bench "$((RUNS * N))" "$WORK/device0.key" > "$WORK/device2.log" 2>&1 &
DEV=$!; PIDS+=("$DEV")
for _ in $(seq 1200); do grep -q RECEIVED "$WORK/device2.log" && break; sleep 0.1; done
grep RECEIVED "$WORK/device2.log" | sed 's/; latency.*max [0-9]*;/; (latency: since benchmark 1 accepted them, not meaningful);/' || { echo "device did not receive everything:"; cat "$WORK/device2.log"; }
echo "gateway RSS after the backlog: $(awk '/VmRSS/{print $2, $3}' /proc/$GW/status)"
kill "$DEV" 2>/dev/null || true
commits
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/{print $2/1024/1024 " GiB"}' /proc/meminfo), $(uname -r), $(swift --version 2>&1 | head -1)"
