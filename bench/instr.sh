#!/bin/bash
# bench/instr.sh - instructions per message on the small-message path,
# per layer, from callgrind (deterministic: use it for fast paths, timings
# never).
#
#   bench/instr.sh [-b BUILD_DIR] [-s SIZE] [-n ITERS] [-t TOP] [-S] [-N] [-d D]
#
# Runs bench/engine_pingpong (two engines + soft HCAs in one process, the
# receive posted before the send: the card-matched path) under callgrind
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

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build/normal"
size=8
iters=2000
top=25
extra=
while getopts "b:s:n:t:SNd:h" o; do
	case $o in
	b) build=$OPTARG ;;
	s) size=$OPTARG ;;
	n) iters=$OPTARG ;;
	t) top=$OPTARG ;;
	S) extra="$extra -S" ;;
	N) extra="$extra -N" ;;
	d) extra="$extra -d $OPTARG" ;;
	*) sed -n '2,17p' "$0"; exit 2 ;;
	esac
done
prog="$build/bench/engine_pingpong"
[ -x "$prog" ] || { echo "instr.sh: no $prog (build first)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instr.sh: needs valgrind" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for n in "$iters" $((2 * iters)); do
	TM_DEV_RCACHE=0 valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/cg.$n" "$prog" -n "$n" -s "$size" $extra \
		>/dev/null 2>"$tmp/log.$n" ||
		{ cat "$tmp/log.$n" >&2; exit 1; }
	callgrind_annotate --threshold=100 "$tmp/cg.$n" >"$tmp/ann.$n"
done

python3 - "$tmp/ann.$iters" "$tmp/ann.$((2 * iters))" "$((2 * iters))" \
	"$size" "$top" <<'EOF'
import re, sys
a_file, b_file, msgs, size, top = sys.argv[1:]
msgs = int(msgs)
line_re = re.compile(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+):(\S+)')

def load(path):
    d = {}
    for l in open(path):
        m = line_re.match(l)
        if m:
            k = (m.group(2), m.group(3))
            d[k] = d.get(k, 0) + int(m.group(1).replace(',', ''))
    return d

a, b = load(a_file), load(b_file)
diff = {k: (b.get(k, 0) - a.get(k, 0)) / msgs for k in set(a) | set(b)}

layers = ('softhca', 'engine', 'dev', 'mtl', 'verbs')
# callgrind_annotate prints a source below the current directory relative
# to it (ompi_btl_tm/engine/x.c when run from the top of the tree)
src_re = re.compile(r'(?:^|/)ompi_btl_tm/(%s)/' % '|'.join(layers))

def src_layer(path):
    m = src_re.search(path)
    return m.group(1) if m else None

fn_layer = {}
for (path, fn), v in diff.items():
    lay = src_layer(path)
    if lay:
        fn_layer[fn.split('.')[0]] = lay

def layer(path, fn):
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

per = {}
for (path, fn), v in diff.items():
    per[layer(path, fn)] = per.get(layer(path, fn), 0) + v
total = sum(per.values())
print('engine_pingpong, %s B: %.0f instructions per message (both sides)'
      % (size, total))
print()
print('| layer | Ir / message |')
print('| --- | ---: |')
for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
    if abs(v) >= 0.5:
        print('| %s | %.0f |' % (k, v))
print()
print('top functions (exclusive Ir / message):')
for (path, fn), v in sorted(diff.items(), key=lambda kv: -kv[1])[:int(top)]:
    print('%7.0f  %s:%s' % (v, path.split('/')[-1], fn))
EOF
