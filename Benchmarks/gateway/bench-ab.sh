#!/usr/bin/env bash
# A/B of gateway builds by CPU time per accepted push, which holds on a shared machine where
# req/s does not: every gateway runs at once (its own ports and data), and the h2load runs
# (benchmark 1 of bench.sh: -c 4 -m 64, body.json, an offline device's token) go to each in
# turn, ROUNDS times; per run the gateway's user + system time (all threads, /proc/PID/stat)
# divided by the pushes. Compare medians per gateway.
#
#   Benchmarks/gateway/bench-ab.sh ROUNDS REQUESTS NAME=DIR[@production] ...
#
# DIR holds `tidings` and `gateway-bench` (the same build's); `@production` runs that gateway
# and its device token in production (no apns-unique-id). Options a binary does not know
# (an older build's) are left out. PORT0 moves the ports (default 30000, 10 per gateway);
# PERFDIR=<dir> records `perf record -F 999 [PERFG]` of each gateway's first run there.
set -euo pipefail
ROUNDS=$1; N=$2; shift 2
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/Benchmarks/gateway"
WORK="${BENCH_WORK:-$ROOT/.build-bench-work}/ab"
PORT=${PORT0:-30000}
rm -rf "$WORK"; mkdir -p "$WORK"
PIDS=(); NAMES=(); GWS=(); URLS=(); JWTS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for spec in "$@"; do
  name=${spec%%=*}; dir=${spec#*=}; ENVIRONMENT=development
  case "$dir" in *@production) dir=${dir%@production}; ENVIRONMENT=production;; esac
  D="$WORK/$name"; mkdir -p "$D"
  gp=$PORT; dp=$((PORT-1)); ap=$((PORT+1)); PORT=$((PORT+10))
  "$dir/tidings" keys create --data-dir "$D/gw" --team TEAM123456 --key-id BENCHKEY01 -o "$D/key.p8" --app com.example.bench --storage-policy all >/dev/null
  extra=""; help="$("$dir/tidings" gateway --help 2>&1)"
  for f in new-device-rate-limit:0 unauthenticated-stream-limit:64; do echo "$help" | grep -q -- "--${f%%:*}" && extra="$extra --${f%%:*} ${f#*:}"; done
  echo "$help" | grep -q -- "--environment" && extra="$extra --environment $ENVIRONMENT"
  "$dir/tidings" gateway --data-dir "$D/gw" --listen 127.0.0.1:$gp --device-listen 127.0.0.1:$dp --admin-listen 127.0.0.1:$ap \
     --device-rate-limit 0 $extra --log-level error > "$D/gateway.log" 2>&1 &
  GW=$!; PIDS+=("$GW")
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$ap/healthz && break; sleep 0.1; done
  JWT="$("$dir/tidings" keys token --key "$D/key.p8" --key-id BENCHKEY01 --team TEAM123456)"
  BENCH_ENVIRONMENT=$ENVIRONMENT "$dir/gateway-bench" device 127.0.0.1 "$dp" "$D/gw/tls/gateway-cert.pem" com.example.bench 1 "$D/device0.key" > "$D/device0.log" 2>&1 &
  DEV=$!
  for _ in $(seq 100); do grep -q TOKEN "$D/device0.log" && break; sleep 0.1; done
  TOKEN="$(awk '/TOKEN/{print $2}' "$D/device0.log")"
  kill "$DEV"; wait "$DEV" 2>/dev/null || true
  NAMES+=("$name"); GWS+=("$GW"); URLS+=("https://127.0.0.1:$gp/3/device/$TOKEN"); JWTS+=("$JWT")
done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
echo "load $(cut -d' ' -f1-3 /proc/loadavg), $N requests per run"
for r in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    PP=""
    if [ "$r" = 1 ] && [ -n "${PERFDIR:-}" ]; then
      mkdir -p "$PERFDIR"; perf record -F 999 ${PERFG:-} -p "${GWS[$i]}" -o "$PERFDIR/${NAMES[$i]}.data" >/dev/null 2>&1 & PP=$!; sleep 0.5
    fi
    c0=$(cpu "${GWS[$i]}")
    out=$(h2load -n "$N" -c 4 -m 64 -d "$HERE/body.json" -H content-type:application/json -H apns-topic:com.example.bench -H apns-push-type:alert \
       -H "authorization: bearer ${JWTS[$i]}" "${URLS[$i]}" 2>&1)
    c1=$(cpu "${GWS[$i]}")
    if [ -n "$PP" ]; then kill -INT "$PP"; wait "$PP" 2>/dev/null || true; fi
    rps=$(echo "$out" | awk '/^finished in/{print $4}')
    ok=$(echo "$out" | awk '/^status codes:/{print $3}')
    us=$(awk -v a="$c0" -v b="$c1" -v n="$N" -v hz="$HZ" 'BEGIN{printf "%.2f", (b-a)/hz*1e6/n}')
    echo "round $r ${NAMES[$i]} $us us/req $rps req/s 2xx=$ok load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$WORK/results"
  done
done
for name in "${NAMES[@]}"; do
  awk -v n="$name" '$3 == n {print $4}' "$WORK/results" | sort -n |
    awk -v n="$name" '{a[NR]=$1} END{printf "%s: median %.2f µs CPU per push (%d runs, %.2f–%.2f)\n", n, (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), NR, a[1], a[NR]}'
done
