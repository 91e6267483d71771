#!/bin/bash
# bench/mpi_instr.sh - instructions per message of the whole MPI path
# (MPI_Irecv + MPI_Send + MPI_Wait), per layer, from callgrind.
# Deterministic: for fast paths, never for timings.
#
#   bench/mpi_instr.sh [-b BUILD_DIR] [-s SIZES] [-x TRANSPORTS] [-n ITERS]
#                      [-t TOP] [-m] [-o NAME=VALUE ...]
#
# SIZES: one size or a list, e.g. -s 8,64,1K (issue 18's three).
# TRANSPORTS: of "tm ob1 ucx" (default tm): pml cm + mtl tm (the
# mca_mtl_tm.so of BUILD_DIR), pml ob1 + btl self, pml ucx (its self
# transport).  -m: under MPI_THREAD_MULTIPLE (one thread: what that
# mode's locks cost).  -o NAME=VALUE: --mca mtl_tm_NAME VALUE for tm
# (e.g. -o offload_thresh=0: every receive the card can take on it).
# Runs bench/bench_mpi_self (one rank sending to itself, for tm through
# its loopback QP pair, the receive posted first) under callgrind,
# collecting inside its loop only, for ITERS and 2*ITERS messages, and
# divides the difference by ITERS, so set-up and tear-down cancel.  Both
# sides of each message are counted.  Layers: ompi_btl_tm's directories
# (mtl, engine, dev, softhca, by the source file of each function in
# mca_mtl_tm.so), the pml, btl and UCX libraries, libmpi, libopen-pal and
# libc.  With several sizes or transports, tables side by side follow.
# bench/instr.sh counts the engine and soft HCA alone.
#
# TM_DEV_RCACHE=0: libucm's hooks turn themselves off under valgrind.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build/normal"
size=8
transports=tm
iters=2000
top=25
mode=
tm_mca=
usage() { sed -n '2,26p' "$0"; }
while getopts "b:s:x:n:t:mo:h" o; do
	case $o in
	b) build=$OPTARG ;;
	s) size=$OPTARG ;;
	x) transports=$OPTARG ;;
	n) iters=$OPTARG ;;
	t) top=$OPTARG ;;
	m) mode=mt ;;
	o) [[ $OPTARG =~ ^([a-z_0-9]+)=([^[:space:]]+)$ ]] ||
		{ echo "mpi_instr.sh: -o: NAME=VALUE, not '$OPTARG'" >&2; exit 2; }
	   tm_mca="$tm_mca --mca mtl_tm_${BASH_REMATCH[1]} ${BASH_REMATCH[2]}" ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

# shellcheck source=bench/sizes.sh
. "$(dirname "$0")/sizes.sh"
sizes=$(sizes_of "$size") ||
	{ echo "mpi_instr.sh: -s: sizes like 8,64,1K, not '$size'" >&2; exit 2; }
[[ $iters =~ ^[0-9]+$ ]] && [ "$iters" -ge 1 ] ||
	{ echo "mpi_instr.sh: -n: a positive count" >&2; exit 2; }
build=$(cd "$build" && pwd)
prog="$build/bench/bench_mpi_self"
so="$build/.libs/mca_mtl_tm.so"
pkglib=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')
declare -A ARGS
ARGS[tm]="--mca pml cm --mca mtl tm --mca mca_base_component_path $build/.libs:$pkglib$tm_mca"
ARGS[ob1]="--mca pml ob1 --mca btl self,vader"
ARGS[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
for t in $transports; do
	[ -n "${ARGS[$t]+x}" ] ||
		{ echo "mpi_instr.sh: -x: unknown transport $t (tm, ob1, ucx)" >&2; exit 2; }
done
[ -x "$prog" ] || { echo "mpi_instr.sh: no $prog (build first)" >&2; exit 2; }
[[ " $transports " != *" tm "* ]] || [ -f "$so" ] ||
	{ echo "mpi_instr.sh: no $so (build first)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "mpi_instr.sh: needs valgrind" >&2; exit 2; }
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

runs=()
for t in $transports; do
	for sz in $sizes; do
		for n in "$iters" $((2 * iters)); do
			f=$tmp/$t.$sz.$n
			# shellcheck disable=SC2086
			TM_DEV_RCACHE=0 mpirun "${root[@]}" -np 1 ${ARGS[$t]} \
				valgrind --tool=callgrind --toggle-collect=mpi_loop \
				--callgrind-out-file="$f.cg" "$prog" "$n" "$sz" $mode \
				>"$f.log" 2>&1 ||
				{ echo "mpi_instr.sh: $sz B over $t failed:" >&2; tail -n 20 "$f.log" >&2; exit 1; }
			# (its Perl warns about files without line data: harmless)
			callgrind_annotate --threshold=100 "$f.cg" >"$f.ann" 2>/dev/null
		done
		runs+=("$t" "$sz" "$tmp/$t.$sz.$iters.ann" "$tmp/$t.$sz.$((2 * iters)).ann")
	done
done
# where each function of the component is defined
: >"$tmp/defs"
[ -f "$so" ] && nm --defined-only -l "$so" 2>/dev/null |
	awk 'NF >= 4 { print $3, $4 }' >"$tmp/defs"

python3 - "$iters" "$top" "$tmp/defs" "${mode:-single}" "${runs[@]}" <<'PY'
import re, sys
msgs, top, defs, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
runs = [sys.argv[i:i + 4] for i in range(5, len(sys.argv), 4)]
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

# by shared object: (part of its file name, layer)
objects = (('mca_pml_cm', 'pml cm'), ('mca_pml_ob1', 'pml ob1'),
           ('mca_pml_ucx', 'pml ucx'), ('mca_btl_', 'btl'),
           ('libucp', 'ucp'), ('libuct', 'uct'), ('libucs', 'ucs'),
           ('libmpi', 'libmpi'), ('libopen-pal', 'libopen-pal'))

def layer(path, fn, obj):
    src = path if 'ompi_btl_tm/' in path else where.get(fn, '')
    for lay in ('mtl', 'engine', 'dev', 'softhca', 'verbs'):
        if '/ompi_btl_tm/%s/' % lay in src:
            return lay
    if 'mpi_self' in path or fn == 'mpi_loop':
        return 'bench loop'
    for part, lay in objects:
        if part in obj:
            return lay
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

def human(n):
    n = int(n)
    return '%d KiB' % (n // 1024) if n >= 1024 and n % 1024 == 0 else '%d B' % n

# One transport and size: its layers and top functions.
def report(t, size, a_file, b_file):
    a, b = load(a_file), load(b_file)
    diff = {k: (b.get(k, 0) - a.get(k, 0)) / msgs for k in set(a) | set(b)}
    per = {}
    for (path, fn, obj), v in diff.items():
        lay = layer(path, fn, obj)
        per[lay] = per.get(lay, 0) + v
    print('bench_mpi_self over %s, %s B, %s: %.0f instructions per message '
          '(both sides)' % (t, size, 'MPI_THREAD_MULTIPLE' if mode == 'mt'
                            else 'MPI_Init', sum(per.values())))
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
    for (fn, lay), v in sorted(byfn.items(), key=lambda kv: -kv[1])[:top]:
        print('%7.0f  %s  (%s)' % (v, fn, lay))
    return per

res = {}
for i, (t, size, a_file, b_file) in enumerate(runs):
    if i:
        print()
    res[t, size] = report(t, size, a_file, b_file)
ts = list(dict.fromkeys(r[0] for r in runs))
sizes = list(dict.fromkeys(r[1] for r in runs))
if len(sizes) > 1:
    for t in ts:
        pers = [res[t, s] for s in sizes]
        order = sorted(set().union(*pers), key=lambda k: -pers[0].get(k, 0))
        print()
        print('| %s: layer | %s |' % (t, ' | '.join(human(s) for s in sizes)))
        print('| --- |' + ' ---: |' * len(sizes))
        for k in order:
            if any(abs(p.get(k, 0)) >= 0.5 for p in pers):
                print('| %s | %s |' % (k, ' | '.join('%.0f' % p.get(k, 0) for p in pers)))
        print('| total | %s |' % ' | '.join('%.0f' % sum(p.values()) for p in pers))
if len(ts) > 1:
    print()
    print('| transport | %s |' % ' | '.join(human(s) for s in sizes))
    print('| --- |' + ' ---: |' * len(sizes))
    for t in ts:
        print('| %s | %s |' % (t, ' | '.join('%.0f' % sum(res[t, s].values()) for s in sizes)))
PY
