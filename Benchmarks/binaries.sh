# Sourced by the benchmark scripts (ROOT set to the repository): sets TIDINGS (the tidings
# executable) and DEVICE (gateway-bench), building both in release into .build-bench unless
# both are given (e.g. an older build, to compare within one run). Both are built through
# the benchmark package: building the root package and that one alternately in one scratch
# directory rebuilds every dependency each time (their build settings differ).
if [ -z "${TIDINGS:-}" ] || [ -z "${DEVICE:-}" ]; then
  echo "== build (release)"
  (cd "$ROOT/Benchmarks/gateway" && swift build -c release --scratch-path "$ROOT/.build-bench" --product tidings 2>&1 | tail -1)
  (cd "$ROOT/Benchmarks/gateway" && swift build -c release --scratch-path "$ROOT/.build-bench" --product gateway-bench 2>&1 | tail -1)
fi
TIDINGS="${TIDINGS:-$ROOT/.build-bench/release/tidings}"
DEVICE="${DEVICE:-$ROOT/.build-bench/release/gateway-bench}"
