#!/bin/bash
# Per-thread CPU of a running gateway, for bench.sh runs (docs/benchmarks.md, Gateway steps 12–14).
# usage: thread-cpu.sh BINARY OUT — every 0.5 s, appends "time pid tid comm utime stime" (clock
# ticks, from /proc/<pid>/task/<tid>/stat) for each thread of the `tidings` process whose
# executable is BINARY. Stop it with kill. Analyse with thread-cpu.py.
BIN="$1"; OUT="$2"; : > "$OUT"
while true; do
  for p in $(pgrep -x tidings); do
    [ "$(readlink /proc/$p/exe 2>/dev/null)" = "$BIN" ] || continue
    now=$(date +%s.%N)
    for t in /proc/$p/task/*; do
      name=$(cat $t/comm 2>/dev/null)
      set -- $(sed 's/.*) //' $t/stat 2>/dev/null)
      echo "$now $p ${t##*/} $name ${12} ${13}" >> "$OUT"
    done
  done
  sleep 0.5
done
