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
import re
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
data, fds_path = sys.argv[1:3]
names, tags = {}, {}
for line in open(fds_path):
    parts = line.split()
    if len(parts) == 4 and parts[0] == 'G' and parts[2] == 'D':
        tags[int(parts[1])], tags[int(parts[3])] = 'G', 'D'
    elif len(parts) == 3:
        names[(parts[0], int(parts[1]))] = parts[2].rsplit('/', 1)[-1]
out = subprocess.run(['perf', 'script', '-i', data, '-F', 'pid,tid,time,event,trace'],
                     capture_output=True, text=True, check=True).stdout
started, durations = {}, collections.defaultdict(list)
first = last = None
for line in out.splitlines():
    m = re.match(r'\s*(\d+)/(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_fdatasync:\s+(?:fd: )?(0x[0-9a-f]+)', line)
    if not m:
        continue
    pid, tid, at, kind, value = int(m[1]), int(m[2]), float(m[3]), m[4], int(m[5], 16)
    first = at if first is None else first
    last = at
    if kind == 'enter':
        started[tid] = (at, value)
    elif tid in started:
        began, fd = started.pop(tid)
        tag = tags.get(pid, '?')
        durations[(tag, names.get((tag, fd), f'fd {fd}'))].append((at - began) * 1000)
if first is None:
    sys.exit('no fdatasync in the capture')
print(f'capture: {(last - first):.2f} s')
for (tag, name), values in sorted(durations.items(), key=lambda item: -len(item[1])):
    values.sort()
    n = len(values)
    pick = lambda q: values[min(n - 1, int(n * q))]
    print(f'{tag} {name:20} {n:6}  p50 {pick(0.5):5.2f}  p90 {pick(0.9):5.2f}  p99 {pick(0.99):5.2f}  max {values[-1]:6.2f}  sum {sum(values):6.0f} ms')
