#!/bin/bash
# bench/mpi_instr.sh - instructions per message of the whole MPI path
# (MPI_Irecv + MPI_Send + MPI_Wait over pml cm and mtl tm), per layer,
# from callgrind.  Deterministic: for fast paths, never for timings.
#
#   bench/mpi_instr.sh [-b BUILD_DIR] [-s SIZE] [-n ITERS] [-t TOP] [-m]
#
# -m: under MPI_THREAD_MULTIPLE (one thread: what that mode's locks cost).
# Runs bench/bench_mpi_self (one rank sending to itself through its
# loopback QP pair, the receive posted first) under callgrind, collecting
# inside its loop only, for ITERS and 2*ITERS messages, and divides the
# difference by ITERS, so set-up and tear-down cancel.  Both sides of each
# message are counted.  Layers: ompi_btl_tm's directories (mtl, engine,
# dev, softhca, by the source file of each function in mca_mtl_tm.so),
# pml cm, libmpi, libopen-pal and libc.  bench/instr.sh counts the engine
# and soft HCA alone.  The mca_mtl_tm.so of BUILD_DIR is used.
#
# TM_DEV_RCACHE=0: libucm's hooks turn themselves off under valgrind.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build/normal"
size=8
iters=2000
top=25
mode=
while getopts "b:s:n:t:mh" o; do
	case $o in
	b) build=$OPTARG ;;
	s) size=$OPTARG ;;
	n) iters=$OPTARG ;;
	t) top=$OPTARG ;;
	m) mode=mt ;;
	*) sed -n '2,19p' "$0"; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd)
prog="$build/bench/bench_mpi_self"
so="$build/.libs/mca_mtl_tm.so"
[ -x "$prog" ] && [ -f "$so" ] ||
	{ echo "mpi_instr.sh: no $prog or $so (build first)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "mpi_instr.sh: needs valgrind" >&2; exit 2; }
pkglib=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for n in "$iters" $((2 * iters)); do
	TM_DEV_RCACHE=0 mpirun "${root[@]}" -np 1 --mca pml cm --mca mtl tm \
		--mca mca_base_component_path "$build/.libs:$pkglib" \
		valgrind --tool=callgrind --toggle-collect=mpi_loop \
		--callgrind-out-file="$tmp/cg.$n" "$prog" "$n" "$size" $mode \
		>"$tmp/log.$n" 2>&1 ||
		{ tail -n 20 "$tmp/log.$n" >&2; exit 1; }
	# (its Perl warns about files without line data: harmless)
	callgrind_annotate --threshold=100 "$tmp/cg.$n" >"$tmp/ann.$n" 2>/dev/null
done
# where each function of the component is defined
nm --defined-only -l "$so" 2>/dev/null |
	awk 'NF >= 4 { print $3, $4 }' >"$tmp/defs"

python3 - "$tmp/ann.$iters" "$tmp/ann.$((2 * iters))" "$iters" "$size" \
	"$top" "$tmp/defs" "${mode:-single}" <<'PY'
import re, sys
a_file, b_file, msgs, size, top, defs, mode = sys.argv[1:]
msgs = int(msgs)
line_re = re.compile(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?):(\S+)(?: \[(.*)\])?\s*$')

where = {}
for l in open(defs):
    fn, loc = l.split()
    where[fn] = loc

def load(path):
    d = {}
    for l in open(path):
        m = line_re.match(l)
        if m and 'PROGRAM TOTALS' not in l:
            k = (m.group(2), m.group(3), m.group(4) or '')
            d[k] = d.get(k, 0) + int(m.group(1).replace(',', ''))
    return d

a, b = load(a_file), load(b_file)
diff = {}
for k in set(a) | set(b):
    diff[k] = (b.get(k, 0) - a.get(k, 0)) / msgs

def layer(path, fn, obj):
    src = path if 'ompi_btl_tm/' in path else where.get(fn, '')
    for lay in ('mtl', 'engine', 'dev', 'softhca', 'verbs'):
        if '/ompi_btl_tm/%s/' % lay in src:
            return lay
    if 'mpi_self' in path or fn == 'mpi_loop':
        return 'bench loop'
    if 'mca_pml_cm' in obj:
        return 'pml cm'
    if 'libmpi' in obj:
        return 'libmpi'
    if 'libopen-pal' in obj:
        return 'libopen-pal'
    if 'mutex' in fn or 'spin' in fn:
        return 'libc: locks'
    if 'memcpy' in fn or 'memset' in fn or 'memmove' in fn:
        return 'libc: memcpy/memset'
    if 'malloc' in fn or 'free' in fn:
        return 'libc: malloc'
    if 'libc' in obj:
        return 'libc: other'
    if 'mca_mtl_tm' in obj:
        return 'mca_mtl_tm.so (unplaced)'
    return 'other'

per = {}
for (path, fn, obj), v in diff.items():
    lay = layer(path, fn, obj)
    per[lay] = per.get(lay, 0) + v
total = sum(per.values())
print('bench_mpi_self, %s B, %s: %.0f instructions per message (both sides)'
      % (size, 'MPI_THREAD_MULTIPLE' if mode == 'mt' else 'MPI_Init', total))
print()
print('| layer | Ir / message |')
print('| --- | ---: |')
for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
    if abs(v) >= 0.5:
        print('| %s | %.0f |' % (k, v))
print()
# one function may be listed under several files (inlined headers)
byfn = {}
for (path, fn, obj), v in diff.items():
    k = (fn, layer(path, fn, obj))
    byfn[k] = byfn.get(k, 0) + v
print('top functions (exclusive Ir / message):')
for (fn, lay), v in sorted(byfn.items(), key=lambda kv: -kv[1])[:int(top)]:
    print('%7.0f  %s  (%s)' % (v, fn, lay))
PY
