#!/usr/bin/env python3
"""fdatasync and pwrite64 per database file of the gateway and the daemon during a daemon round:
how many per 1,000 pushes and how many bytes per push (docs/benchmarks.md, session 17).

Capture while a daemon round of Benchmarks/remote-processes.sh runs (GW, DAEMON: their PIDs;
`pgrep -f ' gateway --data-dir'`, `pgrep -f ' daemon --data-dir'`), 0.5 s after its reference line:

  for p in G:$GW D:$DAEMON; do ls -l /proc/${p#*:}/fd | awk -v t=${p%%:*} '/sqlite/{print t, $9, $11}'; done > fds.txt
  perf record -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64 -p $GW,$DAEMON -o io.data -- sleep 4

then, with the round's pushes/s (its printed rate):

  Benchmarks/io-by-file.py io.data fds.txt $GW $DAEMON PUSHES_PER_SECOND

The tracing slows the round (13,600 pushes/s where 20,000 were offered): compare per push.
"""
import collections
import re
import sys

from perf_capture import perf_script, read_fds

if len(sys.argv) < 6:
    sys.exit(__doc__)
data, fds_path, gw, daemon, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
seconds = 4
names = read_fds(fds_path)[0]
tags = {gw: 'G', daemon: 'D'}
calls, written = collections.Counter(), collections.Counter()
for line in perf_script(data, 'pid,event,trace').splitlines():
    if not line.strip():
        continue
    pid = int(line.split()[0])
    fd = int(re.search(r'fd: (0x[0-9a-f]+)', line).group(1), 16)
    key = (tags.get(pid, '?'), fd, 'fdatasync' if 'fdatasync' in line else 'pwrite64')
    calls[key] += 1
    count = re.search(r'count: (0x[0-9a-f]+)', line)
    if count:
        written[key[:2]] += int(count.group(1), 16)
pushes = rate * seconds
for (tag, fd, call), n in sorted(calls.items()):
    per_push = f"  {written[(tag, fd)] / pushes:.0f} B/push" if call == 'pwrite64' else ''
    print(f"{tag} {names.get((tag, fd), fd):24} {call:9} {n / seconds:7.0f}/s {1000 * n / pushes:6.1f} per 1,000 pushes{per_push}")
