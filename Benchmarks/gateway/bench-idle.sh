#!/usr/bin/env bash
# Idle device connections: memory per connection on one gateway.
#
#   Benchmarks/gateway/bench-idle.sh [CONNECTIONS] [SOURCES]
#
# Opens CONNECTIONS device-channel connections (TLS, key proof, welcome) from the load
# generator spread over SOURCES 127.x addresses, then reads the gateway's VmRSS before and
# after. Run bench.sh first (it builds the release binaries) or set TIDINGS/DEVICE.
set -euo pipefail
N="${1:-100000}"
SOURCES="${2:-127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${BENCH_WORK:-$ROOT/.build-bench-work}/idle"
TIDINGS="${TIDINGS:-$ROOT/.build-bench/release/tidings}"
DEVICE="${DEVICE:-$ROOT/.build-bench/release/gateway-bench}"
rm -rf "$WORK"; mkdir -p "$WORK"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true  # as many descriptors as allowed
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
"$TIDINGS" gateway --data-dir "$WORK/gw" --listen 127.0.0.1:13197 --device-listen 127.0.0.1:13196 --admin-listen 127.0.0.1:13198 \
  --new-device-rate-limit 0 --log-level error > "$WORK/gateway.log" 2>&1 &   # 8,000 new identities at once: no new-device limit
GW=$!; PIDS+=("$GW")
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:13198/healthz && break; sleep 0.1; done
rss() { awk '/VmRSS/{print $2}' /proc/$GW/status; }
BEFORE=$(rss)
mkfifo "$WORK/hold"
"$DEVICE" idle 127.0.0.1 13196 "$WORK/gw/tls/gateway-cert.pem" "$N" "$SOURCES" < "$WORK/hold" > "$WORK/idle.log" 2>&1 &
IDLE=$!; PIDS+=("$IDLE")
exec 3> "$WORK/hold"   # keeps the load generator's stdin open
START=$(date +%s)
until grep -q CONNECTED "$WORK/idle.log"; do sleep 1; done
END=$(date +%s)
sleep 2
AFTER=$(rss)
CONNECTED=$(awk '/CONNECTED/{print $2}' "$WORK/idle.log")
GAUGE=$(curl -s http://127.0.0.1:13198/metrics | awk '/^tidings_gateway_connected_devices/{print $2}')
echo "connections: $CONNECTED of $N (gateway gauge: $GAUGE) in $((END-START)) s"
echo "gateway VmRSS: before $BEFORE kB, after $AFTER kB"
awk -v a="$AFTER" -v b="$BEFORE" -v n="$CONNECTED" 'BEGIN{printf "memory per connection: %.1f kB\n", (a-b)/n}'
# Where the resident memory is: LazyPageAllocator's slot region (the one anonymous mapping of
# several GiB), the main malloc heap, other anonymous mappings (malloc's per-thread arenas,
# thread stacks; an older build's NIOSSL buffers), file-backed (code, SQLite).
awk '/^[0-9a-f]+-[0-9a-f]+ /{name=$6}
     /^Size:/{kind = (name=="[heap]") ? "heap" : (name ~ /^\// ? "file" : ($2>=1048576 ? "slots" : "anon"))}
     /^Rss:/{rss[kind]+=$2}
     END{printf "gateway RSS by mapping (kB): slot region %d, main heap %d, other anonymous %d, file-backed %d\n",
         rss["slots"], rss["heap"], rss["anon"], rss["file"]}' /proc/$GW/smaps
exec 3>&-
