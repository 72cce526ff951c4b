#!/bin/bash
# Instructions (callgrind Ir) the startup reader spends per line of a log, at the margin: the Ir of
# reading the whole log less the Ir of reading its first half, per line of the second half (so the
# fixed costs, imports and the regexes compiled when the engine is settled, cancel out). The figure
# that does not move with the load of a shared machine.
# Usage: bench/reader_ir.sh CODE_DIR LOG [PYTHON]
# CODE_DIR: a checkout (`git archive COMMIT | tar -x -C /tmp/x` for another commit); LOG: e.g. the
# first 10,000 lines of a `replay_bench.py --keep` log.
set -euo pipefail
dir=$1; log=$2; py=${3:-python3}
n=$(wc -l < "$log"); half=$((n / 2))
first=$(mktemp); head -n "$half" "$log" > "$first"
# read_path, as `upwatch replay` reads a file (since the block path, StartupReader.feed_lines over
# iter_blocks; before it, feed_bytes over iter_lines).
feed='import sys; sys.path.insert(0, sys.argv[1])
from probes.sources.logfile import read_path
read_path(sys.argv[2])'
ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$py" -c "$feed" "$dir" "$1" 2>&1 | awk '/Collected/ {print $4}'; }
a=$(ir "$first"); b=$(ir "$log")
rm -f "$first"
echo "$dir $(basename "$log"): $(( (b - a) / (n - half) )) Ir/line (lines $((half + 1))-$n)"
