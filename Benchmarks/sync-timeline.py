#!/usr/bin/env python3
"""The database-file fdatasyncs (checkpoints) of the gateway and the daemon beside a daemon
round's latency, slice by slice: what lines up with a build-up (docs/benchmarks.md, session 16).

Capture while a daemon round of Benchmarks/remote-processes.sh runs (GW, DAEMON: their PIDs;
`perf record -k realtime` is refused on this kernel, so the perf clock is tied to the wall
clock through CLOCK_MONOTONIC):

  for p in G:$GW D:$DAEMON; do ls -l /proc/${p#*:}/fd | awk -v t=${p%%:*} '/sqlite/{print t, $9, $11}'; done > fds.txt
  echo "G $GW D $DAEMON" >> fds.txt
  python3 -c "import time; print(time.clock_gettime(time.CLOCK_MONOTONIC), time.time())" > clock.txt
  perf record -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync -p $GW,$DAEMON -o sync.data -- sleep 8

then, once the round has printed its line (the script leaves .build-bench-work/remote-processes/latency):

  Benchmarks/sync-timeline.py sync.data fds.txt clock.txt .build-bench-work/remote-processes/latency [SLICE_MS]

Each line: a slice of the round by acceptance time, its pushes, provider → presented mean and
max (ms), then each fdatasync of a database file (not a WAL) that began in it: process
(G gateway, D daemon), file, and how long it took in ms.
"""
import sys

from perf_capture import fdatasyncs, read_fds

if len(sys.argv) < 5:
    sys.exit(__doc__)
data, fds_path, clock_path, latency_path = sys.argv[1:5]
slice_ms = int(sys.argv[5]) if len(sys.argv) > 5 else 100

mono, real = map(float, open(clock_path).read().split())
offset = real - mono
syncs = [((began + offset) * 1000, took, process, name.replace('.sqlite', ''))
         for began, took, process, name in fdatasyncs(data, *read_fds(fds_path)) if not name.endswith('-wal')]

# The latency file: presented - accepted, shown - accepted, accepted_at, ... (one space each, empty fields kept).
pushes = sorted((int(f[2]), int(f[0])) for f in (line.rstrip('\n').split(' ') for line in open(latency_path)))
first = pushes[0][0]
slices, synced = {}, {}
for accepted, presented in pushes:
    slices.setdefault((accepted - first) // slice_ms, []).append(presented)
for began, took, process, name in syncs:
    synced.setdefault(int((began - first) // slice_ms), []).append(f'{process}:{name}({took:.1f})')
for index in sorted(slices):
    values = slices[index]
    print(f'{index * slice_ms:6d} ms {len(values):6d} pushes  mean {sum(values) / len(values):6.1f} max {max(values):4d}  '
          + ' '.join(synced.get(index, [])))
