"""What the benchmark scripts read from a `perf record` of the gateway and the daemon during a
daemon round of Benchmarks/remote-processes.sh: the file names behind their descriptors, and
each `fdatasync` paired with its return. Used by Benchmarks/io-by-file.py,
Benchmarks/sync-latency.py and Benchmarks/sync-timeline.py (capture commands in their headers).

The descriptor file has a line per open database file, `TAG FD PATH` (TAG G for the gateway, D
for the daemon), and may end with `G GATEWAY_PID D DAEMON_PID`.
"""
import re
import subprocess


def read_fds(path):
    """({(tag, fd): file name}, {pid: tag}) from a descriptor file (the PIDs' line optional)."""
    names, tags = {}, {}
    for line in open(path):
        fields = line.split()
        if len(fields) == 4 and fields[0] == 'G' and fields[2] == 'D':
            tags[int(fields[1])], tags[int(fields[3])] = 'G', 'D'
        elif len(fields) == 3:
            names[(fields[0], int(fields[1]))] = fields[2].rsplit('/', 1)[-1]
    return names, tags


def perf_script(data, fields):
    """`perf script` of a capture, with these output fields (e.g. 'pid,tid,time,event,trace')."""
    return subprocess.run(['perf', 'script', '-i', data, '-F', fields], capture_output=True, text=True, check=True).stdout


def fdatasyncs(data, names, tags):
    """Every fdatasync of a capture of sys_enter/sys_exit_fdatasync, in order of return:
    (began: perf's clock in s, took: ms, tag, file name — `fd N` for one not in `names`)."""
    entered, syncs = {}, []
    for line in perf_script(data, 'pid,tid,time,event,trace').splitlines():
        m = re.match(r'\s*(\d+)/(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_fdatasync:\s*(.*)', line)
        if not m:
            continue
        pid, tid, at, kind, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
        if kind == 'enter':
            entered[tid] = (at, int(re.search(r'fd: (0x[0-9a-f]+|\d+)', rest).group(1), 0))
        elif tid in entered:
            began, fd = entered.pop(tid)
            tag = tags.get(pid, '?')
            syncs.append((began, (at - began) * 1000, tag, names.get((tag, fd), f'fd {fd}')))
    return syncs
