#!/bin/bash
# bench/instr.sh - instructions per message on the small-message path,
# per layer, from callgrind (deterministic: use it for fast paths, timings
# never).
#
#   bench/instr.sh [-b BUILD_DIR] [-s SIZES] [-n ITERS] [-t TOP] [-S] [-N] [-C] [-d D]
#
# SIZES: one size or a list, e.g. -s 8,64,1K (issue 18's three): each size
# is counted on its own, then one table gives every layer by size.
# Runs bench/engine_pingpong (two engines + soft HCAs in one process, the
# receive posted before the send, the engine's default settings: a receive
# below offload_thresh matched in software, -C every receive on the card,
# the card-matched path) under callgrind
# for ITERS and 2*ITERS round trips and divides the difference by the
# 2*ITERS extra messages, so set-up and tear-down cancel.  Both sides of
# each message are counted (send and receive).  Prints the total, a table
# per layer (by the source directory of the function, inlined helpers
# counted with their caller) and the TOP functions.  -S: every receive
# matched in software (engine_pingpong -S), for comparison; -N: a device
# without tag matching (engine_pingpong -N, the plain mode); -d D: D
# never-matching receives posted on each side (queue depth).
#
# TM_DEV_RCACHE=0: libucm's hooks turn themselves off under valgrind.
set -euo pipefail

# shellcheck source=bench/sizes.sh
. "$(dirname "$0")/sizes.sh"

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build/normal"
size=8
iters=2000
top=25
extra=
while getopts "b:s:n:t:SNCd:h" o; do
	case $o in
	b) build=$OPTARG ;;
	s) size=$OPTARG ;;
	n) iters=$OPTARG ;;
	t) top=$OPTARG ;;
	S) extra="$extra -S" ;;
	N) extra="$extra -N" ;;
	C) extra="$extra -C" ;;
	d) extra="$extra -d $OPTARG" ;;
	*) sed -n '2,21p' "$0"; exit 2 ;;
	esac
done
sizes=$(sizes_of "$size") || { echo "instr.sh: -s: sizes like 8,64,1K, not '$size'" >&2; exit 2; }
prog="$build/bench/engine_pingpong"
[ -x "$prog" ] || { echo "instr.sh: no $prog (build first)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instr.sh: needs valgrind" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pairs=()
for sz in $sizes; do
	for n in "$iters" $((2 * iters)); do
		TM_DEV_RCACHE=0 valgrind --tool=callgrind \
			--callgrind-out-file="$tmp/cg.$sz.$n" "$prog" -n "$n" -s "$sz" $extra \
			>/dev/null 2>"$tmp/log.$sz.$n" ||
			{ cat "$tmp/log.$sz.$n" >&2; exit 1; }
		callgrind_annotate --threshold=100 "$tmp/cg.$sz.$n" >"$tmp/ann.$sz.$n"
	done
	pairs+=("$sz" "$tmp/ann.$sz.$iters" "$tmp/ann.$sz.$((2 * iters))")
done

python3 - "$((2 * iters))" "$top" "${pairs[@]}" <<'EOF'
import re, sys
msgs, top = int(sys.argv[1]), int(sys.argv[2])
runs = [sys.argv[i:i + 3] for i in range(3, len(sys.argv), 3)]
line_re = re.compile(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+):(\S+)')

def load(path):
    d = {}
    for l in open(path):
        m = line_re.match(l)
        if m:
            k = (m.group(2), m.group(3))
            d[k] = d.get(k, 0) + int(m.group(1).replace(',', ''))
    return d

layers = ('softhca', 'engine', 'dev', 'mtl', 'verbs')
# callgrind_annotate prints a source below the current directory relative
# to it (ompi_btl_tm/engine/x.c when run from the top of the tree)
src_re = re.compile(r'(?:^|/)ompi_btl_tm/(%s)/' % '|'.join(layers))

def src_layer(path):
    m = src_re.search(path)
    return m.group(1) if m else None

def layer(path, fn, fn_layer):
    lay = src_layer(path)
    if lay:
        return lay
    base = fn.split('.')[0]
    if 'engine_pingpong' in path:
        return 'bench loop'
    if base in fn_layer:          # a header inlined into our function
        return fn_layer[base]
    if 'mutex' in fn or 'spin' in fn:
        return 'libc: locks'
    if 'malloc' in fn or 'free' in fn or 'calloc' in fn:
        return 'libc: malloc'
    if 'memcpy' in fn or 'memset' in fn or 'memmove' in fn:
        return 'libc: memcpy/memset'
    if 'clock_gettime' in fn:
        return 'libc: clock'
    return 'other'

def human(n):
    n = int(n)
    return '%d KiB' % (n // 1024) if n >= 1024 and n % 1024 == 0 else '%d B' % n

# One size: its layers and top functions; returns {layer: Ir / message}.
def report(size, a_file, b_file):
    a, b = load(a_file), load(b_file)
    diff = {k: (b.get(k, 0) - a.get(k, 0)) / msgs for k in set(a) | set(b)}
    fn_layer = {}
    for (path, fn), v in diff.items():
        lay = src_layer(path)
        if lay:
            fn_layer[fn.split('.')[0]] = lay
    per = {}
    for (path, fn), v in diff.items():
        lay = layer(path, fn, fn_layer)
        per[lay] = per.get(lay, 0) + v
    print('engine_pingpong, %s B: %.0f instructions per message (both sides)'
          % (size, sum(per.values())))
    print()
    print('| layer | Ir / message |')
    print('| --- | ---: |')
    for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
        if abs(v) >= 0.5:
            print('| %s | %.0f |' % (k, v))
    print()
    print('top functions (exclusive Ir / message):')
    for (path, fn), v in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
        print('%7.0f  %s:%s' % (v, path.split('/')[-1], fn))
    return per

pers = []
for i, (size, a_file, b_file) in enumerate(runs):
    if i:
        print()
    pers.append(report(size, a_file, b_file))
if len(runs) > 1:
    # every size side by side, layers in the order of the first size
    order = sorted(set().union(*pers), key=lambda k: -pers[0].get(k, 0))
    print()
    print('| layer | ' + ' | '.join(human(r[0]) for r in runs) + ' |')
    print('| --- |' + ' ---: |' * len(runs))
    for k in order:
        if any(abs(p.get(k, 0)) >= 0.5 for p in pers):
            print('| %s | %s |' % (k, ' | '.join('%.0f' % p.get(k, 0) for p in pers)))
    print('| total | %s |' % ' | '.join('%.0f' % sum(p.values()) for p in pers))
EOF
