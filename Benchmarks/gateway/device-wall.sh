#!/bin/bash
# DEVICE= wrapper for bench.sh: runs gateway-bench ($REAL_DEVICE) and appends, to its RECEIVED
# line, the wall time since launch (gateway-bench itself starts its clock at the first push).
START=$(( $(date +%s%N) / 1000000 ))
"$REAL_DEVICE" "$@" > >(while IFS= read -r l; do case "$l" in RECEIVED*) echo "$l; wall since launch $(( $(date +%s%N) / 1000000 - START )) ms";; *) echo "$l";; esac; done) &
child=$!
trap 'kill $child 2>/dev/null; wait $child; exit 143' TERM INT
wait $child
