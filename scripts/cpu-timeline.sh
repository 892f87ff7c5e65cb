#!/usr/bin/env bash
# Runs a command and prints how many cores it kept busy (it and its live children, from
# /proc/PID/stat every 0.5 s) in each 2 s window, then its wall and CPU seconds: where a
# measure's phases keep the machine full and where a core idles (BENCHMARKS.md, "where the
# CRF search's time goes"). The command's own stdout goes to cpu-timeline.out in the
# working directory.
# Usage: scripts/cpu-timeline.sh COMMAND [ARGS...]
set -euo pipefail
hz=$(getconf CLK_TCK)
start=$(date +%s%N)
"$@" >cpu-timeline.out &
pid=$!
samples=()
while kill -0 "$pid" 2>/dev/null; do
    ticks=0
    for p in $pid $(pgrep -P "$pid" || true); do
        # Fields 14 to 17: utime, stime, cutime, cstime (the command's name, field 2, may
        # hold spaces: read after its closing parenthesis).
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        read -r -a f <<<"${stat##*) }"
        ticks=$((ticks + f[11] + f[12] + f[13] + f[14]))
    done
    samples+=("$(( ($(date +%s%N) - start) / 1000000 )) $ticks")
    sleep 0.5
done
wait "$pid"
end=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s\n' "${samples[@]}" | awk -v hz="$hz" -v end="$end" '
    { t[NR] = $1; c[NR] = $2 }
    END {
        for (i = 5; i <= NR; i += 4) printf "%6.1f s  %.2f cores\n", t[i] / 1000, (c[i] - c[i-4]) / hz / ((t[i] - t[i-4]) / 1000)
        printf "wall %.1f s, CPU %.1f s (to the last sample)\n", end / 1000, c[NR] / hz
    }'
