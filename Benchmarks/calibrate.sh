#!/usr/bin/env bash
# How loud the host is right now: two CPU-bound Python loops (5,000,000 additions each) run at
# once, one per core; prints each one's seconds. On this two-core machine ≈ 0.35 when the host is
# quiet and 0.55–0.66 when other tenants share its cores (docs/benchmarks.md, session 17): run it
# before a benchmark round and keep its output beside the round's numbers.
set -euo pipefail
loop='import time
t = time.perf_counter(); s = 0
for i in range(5_000_000): s += i
print("%.3f" % (time.perf_counter() - t))'
python3 -c "$loop" &
python3 -c "$loop"
wait
