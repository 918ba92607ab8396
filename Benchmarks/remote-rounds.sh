#!/usr/bin/env bash
# Builds against each other on issue 16's path, in alternation: single rounds of
# Benchmarks/remote-processes.sh (fresh databases each, one reference round then one daemon
# round), one line per round, then each build's p99s sorted with their median.
#
#   Benchmarks/remote-rounds.sh PAIRS NAME=TIDINGS_BINARY [NAME=TIDINGS_BINARY ...]
#
#   PAIRS    rounds of each build, alternating (a, b, a, b, …): a loud minute hits all of them
#   NAME     a label; TIDINGS_BINARY a `tidings` executable, or a wrapper script that execs
#            one (e.g. with LD_PRELOAD of Benchmarks/skip-sync.c for the daemon only)
#
# Each line: the calibration before the round (Benchmarks/calibrate.sh: ≈ 0.35 s on a quiet
# host), the reference round's gateway µs per push (≈ 31–34 when the host is quiet), then the
# daemon round: provider → presented p50 / p99 ms, pushes/s, accepted → received and received →
# presented p50 / p99 ms, CPU µs per push of the daemon and the gateway. PUSHES (100000),
# RATE (20000) and DELIVERED_LIMIT (1000) are passed on; DEVICE defaults to the gateway-bench
# in .build-bench (built there by remote-processes.sh once). On the noise of this shared host
# and how many rounds a difference needs, docs/benchmarks.md, session 18.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,17p' "$0"; exit 2; }
PAIRS=$1; shift
DEVICE="${DEVICE:-$ROOT/.build-bench/release/gateway-bench}"
[ -x "$DEVICE" ] || { echo "remote-rounds: no $DEVICE (run Benchmarks/remote-processes.sh once to build it, or set DEVICE)" >&2; exit 2; }
for build in "$@"; do
  [ -x "${build#*=}" ] || { echo "remote-rounds: $build: not an executable" >&2; exit 2; }
done
LINES="$(mktemp)"; trap 'rm -f "$LINES"' EXIT
for _ in $(seq 1 "$PAIRS"); do
  for build in "$@"; do
    name=${build%%=*}
    calibration="$("$ROOT/Benchmarks/calibrate.sh" | tr '\n' ' ')"
    out="$(TIDINGS="${build#*=}" DEVICE="$DEVICE" DELIVERED_LIMIT="${DELIVERED_LIMIT:-1000}" RATE="${RATE:-20000}" \
           "$ROOT/Benchmarks/remote-processes.sh" "${PUSHES:-100000}" 0 1 2>&1)" || { echo "$out" >&2; exit 1; }
    echo "$out" | awk -v name="$name" -v cal="$calibration" -v at="$(date -u +%H:%M:%S)" '
      /round 1, reference/ { match($0, /gateway CPU [0-9]+/); ref = substr($0, RSTART + 12, RLENGTH - 12) }
      /round 1, daemon/ {
        match($0, /→ presented p50 [0-9]+ \/ p99 [0-9]+/); split(substr($0, RSTART, RLENGTH), p, " ")
        match($0, /[0-9]+ pushes\/s/); rate = substr($0, RSTART, RLENGTH - 9)
        match($0, /accepted → received p50 [0-9]+ \/ p99 [0-9]+/); split(substr($0, RSTART, RLENGTH), r, " ")
        match($0, /received → presented p50 [0-9]+ \/ p99 [0-9]+/); split(substr($0, RSTART, RLENGTH), s, " ")
        match($0, /daemon [0-9]+ µs, gateway [0-9]+/); split(substr($0, RSTART, RLENGTH), c, " ")
        printf "%s %s  cal %s ref %s µs  p50 %s p99 %s  %s/s  acc→rec %s/%s  rec→pres %s/%s  daemon %s gateway %s µs\n",
               at, name, cal, ref, p[4], p[7], rate, r[5], r[8], s[5], s[8], c[2], c[5]
      }' | tee -a "$LINES"
  done
done
echo "provider → presented p99 (ms), sorted:"
for build in "$@"; do
  name=${build%%=*}
  awk -v name="$name" '$2 == name { for (i = 1; i <= NF; i++) if ($i == "p99") print $(i + 1) }' "$LINES" | sort -n |
    awk -v name="$name" '{ v[NR] = $1 } END {
      if (NR == 0) exit
      median = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      under = 0; line = ""; for (i = 1; i <= NR; i++) { line = line " " v[i]; if (v[i] <= 20) under++ }
      printf "  %s:%s  (median %s, %d of %d ≤ 20 ms)\n", name, line, median, under, NR }'
done
