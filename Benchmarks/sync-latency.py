#!/usr/bin/env python3
"""How long each database file's fdatasync took during a daemon round of
Benchmarks/remote-processes.sh, per process and file: count, p50 / p90 / p99 / max in ms, and
their sum — beside the capture's length, the sum says how much of the time a sync was in
flight (docs/benchmarks.md, session 18).

Capture as for Benchmarks/sync-timeline.py (GW, DAEMON: their PIDs, `pgrep -f ' gateway
--data-dir'` and `pgrep -f ' daemon --data-dir'`), as soon as the round's reference line is out:

  for p in G:$GW D:$DAEMON; do ls -l /proc/${p#*:}/fd | awk -v t=${p%%:*} '/sqlite/{print t, $9, $11}'; done > fds.txt
  echo "G $GW D $DAEMON" >> fds.txt
  perf record -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync -p $GW,$DAEMON -o sync.data -- sleep 7

then:

  Benchmarks/sync-latency.py sync.data fds.txt

The tracing slows the round (12,750 pushes/s where 20,000 were offered): compare files and
processes within one capture.
"""
import collections
import sys

from perf_capture import fdatasyncs, read_fds

if len(sys.argv) < 3:
    sys.exit(__doc__)
data, fds_path = sys.argv[1:3]
syncs = fdatasyncs(data, *read_fds(fds_path))
if not syncs:
    sys.exit('no fdatasync in the capture')
print(f'capture: {max(b + t / 1000 for b, t, _, _ in syncs) - min(b for b, _, _, _ in syncs):.2f} s')
durations = collections.defaultdict(list)
for _, took, tag, name in syncs:
    durations[(tag, name)].append(took)
for (tag, name), values in sorted(durations.items(), key=lambda item: -len(item[1])):
    values.sort()
    n = len(values)
    pick = lambda q: values[min(n - 1, int(n * q))]
    print(f'{tag} {name:20} {n:6}  p50 {pick(0.5):5.2f}  p90 {pick(0.9):5.2f}  p99 {pick(0.99):5.2f}  max {values[-1]:6.2f}  sum {sum(values):6.0f} ms')
