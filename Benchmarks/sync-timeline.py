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
import re
import subprocess
import sys

if len(sys.argv) < 5:
    sys.exit(__doc__)
data, fds_path, clock_path, latency_path = sys.argv[1:5]
slice_ms = int(sys.argv[5]) if len(sys.argv) > 5 else 100

mono, real = map(float, open(clock_path).read().split())
offset = real - mono
files, pids = {}, {}
for line in open(fds_path):
    fields = line.split()
    if len(fields) == 4 and fields[0] == 'G':
        pids = {'G': int(fields[1]), 'D': int(fields[3])}
    elif len(fields) == 3:
        files[(fields[0], int(fields[1]))] = fields[2].rsplit('/', 1)[-1]

script = subprocess.run(['perf', 'script', '-i', data, '-F', 'pid,tid,time,event,trace'],
                        capture_output=True, text=True, check=True).stdout
entered, syncs = {}, []
for line in script.splitlines():
    m = re.match(r'\s*(\d+)/(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_fdatasync:\s*(.*)', line)
    if not m:
        continue
    pid, tid, t, kind, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
    process = 'G' if pid == pids.get('G') else 'D'
    if kind == 'enter':
        entered[tid] = (t, int(re.search(r'fd: (0x[0-9a-f]+|\d+)', rest).group(1), 0))
    elif tid in entered:
        began, fd = entered.pop(tid)
        name = files.get((process, fd), f'fd {fd}')
        if not name.endswith('-wal'):
            syncs.append(((began + offset) * 1000, (t - began) * 1000, process, name.replace('.sqlite', '')))

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
