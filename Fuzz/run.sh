#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 30).
# Usage: Fuzz/run.sh [SECONDS]   Crashes are written to Fuzz/artifacts/ and fail the script.
set -euo pipefail
SECONDS_PER_TARGET="${1:-30}"
cd "$(dirname "$0")"
# Its own scratch directory: objects built without the coverage flags must never be reused
# (the driver's incremental build does not recompile when only these flags change).
SCRATCH="${FUZZ_SCRATCH:-.build-fuzz-cov}"
# Swift 6.3's driver turns --sanitize=fuzzer into only the libFuzzer link (no coverage
# instrumentation reaches the frontend: the corpus never grew, `corp: 1/1b`). Ask for the
# coverage libFuzzer needs explicitly: edge counters, the PC table, and comparison tracing.
COVERAGE=(-Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp)
TARGETS=(FuzzPayload FuzzProviderToken FuzzRequestHeaders FuzzDeviceMessage)
TARGETS+=(FuzzTrigger)
TARGETS+=(FuzzAppFrame)
TARGETS+=(FuzzDBusMessage)
mkdir -p artifacts corpus
for t in "${TARGETS[@]}"; do
  swift build --scratch-path "$SCRATCH" --product "$t" --sanitize=fuzzer --sanitize=address -c debug "${COVERAGE[@]}" 2>&1 | grep -v "ld.gold: warning" | tail -3
done
BIN="$(swift build --scratch-path "$SCRATCH" --sanitize=fuzzer --sanitize=address "${COVERAGE[@]}" --show-bin-path)"
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t"
  echo "== $t for ${SECONDS_PER_TARGET}s"
  # SWIFT_BACKTRACE=enable=no: let libFuzzer, not Swift's backtracer, handle a crash (testing-tools.md §8).
  if ! SWIFT_BACKTRACE=enable=no "$BIN/$t" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
        -artifact_prefix="artifacts/$t-" "corpus/$t" "seeds/$t" 2>&1 | grep -E "^(#|Done|stat::number_of_executed_units|stat::peak_rss|==|SUMMARY)" | tail -6; then
    status=1
  fi
  if [ "${PIPESTATUS[0]}" != "0" ]; then status=1; fi
done
if ls artifacts/*-crash-* artifacts/*-leak-* artifacts/*-timeout-* >/dev/null 2>&1; then
  echo "fuzzing found failures:"; ls artifacts/; status=1
fi
exit $status
