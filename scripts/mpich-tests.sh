#!/bin/bash
# mpich-tests.sh - MPICH's point-to-point tests (test/mpi/pt2pt and
# test/mpi/errors/pt2pt) built against the system's Open MPI, outside the
# project tree, and run over pml cm + mtl tm, pml ob1 and pml ucx.
#
#   scripts/mpich-tests.sh [options] SRC
#
# SRC is MPICH, in one of these forms:
#   - a git directory of github.com/pmodels/mpich (bare or not; the
#     fetch tool's mirror is one): test/mpi, confdb and maint/version.m4
#     of --ref are taken with git archive
#   - a release tarball (mpich-X.Y.Z.tar.gz) or its http(s) URL
#   - a directory holding MPICH's sources (its top, with test/mpi)
# A git checkout has no generated configure: test/mpi/autogen.sh makes it
# (python3, autoconf, automake, libtoolize); a release tarball has one.
# Options:
#   --ref REF       tag or commit of a git SRC (default v5.0.1)
#   --build DIR     the component's build directory, whose .libs holds
#                   mca_mtl_tm.so (default build/normal of this tree)
#   --prefix DIR    where the suite is unpacked, built and logged (default
#                   $MPICH_TESTS_PREFIX, else /var/cache/ompi-mtl-tm/mpich-tests
#                   as root, else ~/.cache/ompi-mtl-tm/mpich-tests); never
#                   inside this tree.  A build of the same git commit or
#                   tarball is reused.
#   --configs LIST  among tm ob1 ucx tm-card tm-small tm-notm (default
#                   "tm ob1 ucx"); the last three are mtl tm too:
#                   tm-card   every receive offered to the card
#                             (mtl_tm_offload_thresh 0; by default one
#                             under 8 KiB is matched in software)
#                   tm-small  tm-card with the soft HCA squeezed: one tag
#                             entry, one list op, 2-packet rings, 256 B MTU
#                   tm-notm   the soft HCA without tag matching
#                             (mtl_tm_softhca_no_tm 1)
#   --timeout S     seconds per test at least (default 300; a testlist's
#                   timeLimit=, if longer, wins)
#   --mem GB        run tests annotated mem=X only if X <= GB (default:
#                   half of MemAvailable); the others are listed as skipped
#   --tests LIST    only these programs (names, space separated)
# Every testlist line is run as written, except that lines differing only
# in MPICH's own control variables (env=MPIR_CVAR_...: Open MPI reads none)
# are run once; MPICH's xfail= lines are run too.  The verdict is MPICH's
# runtests one: exit status 0, a "No Errors" line, and no other output
# (resultTest=TestAllowWarnings allows WARNING: lines).  A program that
# does not build fails in every configuration.  Prints per configuration
# each test's verdict, then "CONFIG: P passed, F failed, S skipped of N"
# and the failing tests; exit 1 if any test failed.  Logs of failures
# under PREFIX/logs/CONFIG.  CI does not run this.
set -uo pipefail

DEFAULT_REF=v5.0.1
top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "mpich-tests: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

ref=$DEFAULT_REF
build=$top/build/normal
prefix=${MPICH_TESTS_PREFIX:-}
configs="tm ob1 ucx"
timeout_s=300
mem_gb=
only=
src=
while [ $# -gt 0 ]; do
	case $1 in
	--ref) ref=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--prefix) prefix=${2:?}; shift ;;
	--configs) configs=${2:?}; shift ;;
	--timeout) timeout_s=${2:?}; shift ;;
	--mem) mem_gb=${2:?}; shift ;;
	--tests) only=${2:?}; shift ;;
	-h|--help) usage; exit 0 ;;
	-*) die "unknown option $1 (--help)" ;;
	*) [ -z "$src" ] || die "one SRC only"; src=$1 ;;
	esac
	shift
done
[ -n "$src" ] || { usage >&2; exit 2; }
case $timeout_s in ''|*[!0-9]*) die "--timeout wants seconds, not '$timeout_s'" ;; esac
for c in $configs; do
	case $c in tm|ob1|ucx|tm-card|tm-small|tm-notm) ;;
	*) die "unknown configuration $c (tm ob1 ucx tm-card tm-small tm-notm)" ;; esac
done
if [ -z "$prefix" ]; then
	if [ "$(id -u)" = 0 ]; then
		prefix=/var/cache/ompi-mtl-tm/mpich-tests
	else
		prefix=${XDG_CACHE_HOME:-$HOME/.cache}/ompi-mtl-tm/mpich-tests
	fi
fi
prefix=$(realpath -m "$prefix")
build=$(realpath -m "$build")   # (the tests run from the suite's directories)
case $prefix/ in
"$top"/*) die "PREFIX $prefix is inside the project tree; third-party suites are built outside it" ;;
esac
if [ -z "$mem_gb" ]; then
	mem_gb=$(awk '/^MemAvailable:/ { printf "%.1f", $2 / 1048576 / 2 }' /proc/meminfo)
fi
case $mem_gb in ''|*[!0-9.]*) die "--mem wants gigabytes, not '$mem_gb'" ;; esac
for t in mpicc mpirun make ompi_info; do
	command -v $t >/dev/null || die "no $t on PATH (Debian: apt-get install libopenmpi-dev openmpi-bin make)"
done

# ---- the sources --------------------------------------------------------------

suite=$prefix/src/test/mpi
stamp=$prefix/src/.built-from

# src_kind: work (the top of a git work tree), bare (a git directory), dir (other directory), tarball
src_kind() {
	if [ -d "$src" ] &&
	   [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$(realpath "$src")" ]; then
		echo work
	elif [ -f "$src/HEAD" ] && [ -d "$src/objects" ] &&
	     git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1; then
		echo bare
	elif [ -d "$src" ]; then
		echo dir
	elif [ -f "$src" ]; then
		echo tarball
	else
		die "no such file or directory: $src"
	fi
}
git_cmd() {
	if [ "$kind" = bare ]; then
		git --git-dir="$src" "$@"
	else
		git -C "$src" "$@"
	fi
}

# source_id: what SRC is, precisely enough to reuse a build of it
source_id() {
	local commit
	case $kind in
	bare|work)
		commit=$(git_cmd rev-parse --verify -q "$ref^{commit}") ||
			die "$src has no commit or tag '$ref'"
		echo "git $commit ($ref)" ;;
	dir) echo "dir $(realpath "$src") $(date +%s)" ;;   # a directory may change: never reused
	tarball) echo "tarball $(sha256sum <"$src" | cut -d' ' -f1)" ;;
	esac
}

# unpack: the sources into PREFIX/src, through PREFIX/src.new so that a
# SRC that turns out not to be MPICH leaves the last build in place
unpack() {
	local new=$prefix/src.new
	rm -rf "$new"
	mkdir -p "$new" || die "cannot create $new"
	case $kind in
	bare|work)
		git_cmd archive "$ref" test/mpi confdb maint/version.m4 |
			tar -x -C "$new" || die "git archive of $ref failed"
		;;
	dir)
		[ -d "$src/test/mpi/pt2pt" ] ||
			die "$src does not look like MPICH's sources (no test/mpi/pt2pt)"
		mkdir -p "$new/test" "$new/maint"
		cp -a "$src/test/mpi" "$new/test/" || die "cannot copy $src/test/mpi"
		[ -d "$src/confdb" ] && cp -a "$src/confdb" "$new/"
		[ -f "$src/maint/version.m4" ] && cp -a "$src/maint/version.m4" "$new/maint/"
		;;
	tarball)
		tar -xf "$src" -C "$new" --strip-components=1 --wildcards '*/test/mpi/*' ||
			die "$src is not an MPICH tarball tar can unpack (with test/mpi)"
		# (only a tree without configure needs them, for autogen.sh)
		tar -xf "$src" -C "$new" --strip-components=1 --wildcards \
			'*/confdb/*' '*/maint/version.m4' 2>/dev/null
		;;
	esac
	if ! [ -d "$new/test/mpi/pt2pt" ] || ! [ -d "$new/test/mpi/errors/pt2pt" ]; then
		rm -rf "$new"
		die "$src has no test/mpi/pt2pt and test/mpi/errors/pt2pt"
	fi
	rm -rf "$prefix/src"
	mv "$new" "$prefix/src" || die "cannot move $new to $prefix/src"
}

mkdir -p "$prefix" || die "cannot create $prefix"
# Two runs in one PREFIX would rebuild and clear each other's files.
exec 9>"$prefix/.lock"
flock -n 9 || die "another mpich-tests.sh is using $prefix (--prefix DIR for another one)"
case $src in
http://*|https://*)
	dl=$prefix/$(basename "${src%%\?*}")
	if [ ! -s "$dl" ]; then
		echo "mpich-tests: downloading $src"
		if command -v curl >/dev/null; then
			curl -fL --retry 2 -o "$dl.part" "$src"
		else
			wget -O "$dl.part" "$src"
		fi || { rm -f "$dl.part"; die "cannot download $src"; }
		mv "$dl.part" "$dl"
	fi
	src=$dl
	;;
esac
kind=$(src_kind) || exit 2
id=$(source_id) || exit 2
log=$prefix/build.log

build_suite() {
	unpack
	cd "$suite" || die "cannot enter $suite"
	echo "mpich-tests: building MPICH's pt2pt tests ($id) with $(command -v mpicc), log $log"
	: >"$log"
	# A git tree has no configure: autogen.sh generates it with the
	# confdb and version.m4 unpacked beside test/mpi.
	if [ ! -x configure ]; then
		command -v python3 >/dev/null && command -v autoreconf >/dev/null &&
			command -v libtoolize >/dev/null ||
			die "a git tree of MPICH needs python3, autoconf, automake and libtool (apt-get install python3 autoconf automake libtool)"
		./autogen.sh >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "autogen.sh failed (see $log)"; }
	fi
	# Strict MPI: no MPICH extensions (MPIX); only C; nothing beyond
	# point-to-point needs its optional parts.
	./configure CC=mpicc MPICC=mpicc --enable-strictmpi --disable-fortran \
		--disable-cxx --disable-romio --disable-spawn --disable-perftest \
		--disable-ft-tests >>"$log" 2>&1 ||
		{ tail -n 20 "$log" >&2; die "configure failed (see $log)"; }
	make -C util -j2 >>"$log" 2>&1 && make -C dtpools -j2 >>"$log" 2>&1 ||
		{ tail -n 20 "$log" >&2; die "MPICH's test library (util, dtpools) did not build (see $log)"; }
	# -k: a program that needs what this MPI lacks fails alone, and is
	# reported as failed when its turn comes.
	make -k -C pt2pt -j2 >>"$log" 2>&1
	make -k -C errors/pt2pt -j2 >>"$log" 2>&1
	echo "$id" >"$stamp"
}
if [ "$(cat "$stamp" 2>/dev/null)" = "$id" ]; then
	echo "mpich-tests: reusing the build in $suite ($id)"
else
	build_suite
fi
cd "$suite" || die "cannot enter $suite"

# ---- the configurations ---------------------------------------------------------

pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
[ -n "$pkglib" ] || pkglib=$(ompi_info --path pkglibdir 2>/dev/null | sed 's/.*: *//')
declare -A MCA
MCA[tm]="--mca pml cm --mca mtl tm --mca mca_base_component_path $build/.libs:$pkglib"
MCA[tm-card]="${MCA[tm]} --mca mtl_tm_offload_thresh 0"
MCA[tm-small]="${MCA[tm-card]} --mca mtl_tm_softhca_max_num_tags 1 --mca mtl_tm_softhca_max_ops 1 --mca mtl_tm_softhca_ring_depth 2 --mca mtl_tm_softhca_mtu 256"
MCA[tm-notm]="${MCA[tm]} --mca mtl_tm_softhca_no_tm 1"
MCA[ob1]="--mca pml ob1 --mca btl self,vader"
# Debian's openmpi-mca-params.conf says "pml = ^ucx"; --mca pml beats it.
# pml ucx's default transports are InfiniBand ones: "any" takes shared memory.
MCA[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
launch=(mpirun --oversubscribe)
if [ "$(id -u)" = 0 ]; then
	launch+=(--allow-run-as-root)
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# probe CONFIG: a 2-rank job selects the pml (and mtl) asked for on both
# ranks; prints why not
probe() {
	local c=$1 out pml mtl
	if [[ $c == tm* ]] && [ ! -f "$build/.libs/mca_mtl_tm.so" ]; then
		echo "no $build/.libs/mca_mtl_tm.so (build the tree, or --build DIR)"
		return 1
	fi
	# shellcheck disable=SC2086
	out=$(timeout -k 10 120 "${launch[@]}" -np 2 --mca pml_base_verbose 10 \
		--mca mtl_base_verbose 10 ${MCA[$c]} pt2pt/sendrecv2 2>&1)
	pml=$(sed -n 's/.*--mca pml \([^ ]*\).*/\1/p' <<<"${MCA[$c]}")
	mtl=$(sed -n 's/.*--mca mtl \([^ ]*\).*/\1/p' <<<"${MCA[$c]}")
	if [ "$(grep -c "select: component $pml selected" <<<"$out")" -lt 2 ]; then
		echo "pml $pml was not selected on both ranks: $(grep -m1 -iE 'error|cannot|not ' <<<"$out" | cut -c1-160)"
		return 1
	fi
	if [ -n "$mtl" ] && [ "$(grep -c "select: component $mtl selected" <<<"$out")" -lt 2 ]; then
		echo "mtl $mtl was not selected on both ranks"
		return 1
	fi
}

# ---- the tests ----------------------------------------------------------------------

# One line per run: DIR NAME NP, then the testlist's key=value fields.
# Lines that differ only in env=MPIR_CVAR_* collapse into one.
list_tests() {
	local d
	for d in pt2pt errors/pt2pt; do
		[ -f "$d/testlist" ] || die "no $d/testlist in $suite (configure makes it)"
		awk -v d="$d" '
			/^[[:space:]]*(#|$)/ { next }
			{
				key = d " " $1 " " $2; extra = ""
				for (i = 3; i <= NF; i++) {
					if ($i ~ /^env=MPIR_CVAR_/) { cvar[key]++; continue }
					key = key " " $i
				}
				lines++
				if (!(key in seen)) { seen[key] = 1; print key }
			}
			END { printf "%d\n", lines > "/dev/stderr" }' "$d/testlist"
	done
}

# verdict ALLOW_WARNINGS < OUTPUT: MPICH runtests' check of the output;
# prints the reason of a failure, nothing for a pass, "skip" if the
# program said it skipped
verdict() {
	awk -v allow="$1" '
		/^[[:space:]]*No [Ee]rrors[[:space:]]*$/ && !ok { ok = 1; next }
		/^[[:space:]]*Test Skipped[[:space:]]*$/ { skip = 1; next }
		/^(MPICH: |WARNING: |(Abort.*)?application called MPI_Abort)/ { warn++; next }
		{ stray++; if (first == "") first = substr($0, 1, 120) }
		END {
			if (!ok && skip) { print "skip"; exit }
			if (!ok) why = "no \"No Errors\""
			if (stray) why = why (why ? "; " : "") "unexpected output: " first
			else if (warn && allow != 1) why = why (why ? "; " : "") "warning output"
			print why
		}'
}

# run_test CONFIG DIR NAME NP FIELDS...: sets result (pass, skip, fail)
# and why
run_test() {
	local c=$1 d=$2 name=$3 np=$4 f t=$timeout_s allow=0 out rc
	local args=() envs=() mpiargs=()
	shift 4
	result=fail why=
	if [ ! -x "$d/$name" ]; then
		why="did not build (see $log)"
		return
	fi
	for f in "$@"; do
		case $f in
		arg=*) args+=("${f#arg=}") ;;
		env=*) envs+=("${f#env=}") ;;
		mpiexecarg=*) mpiargs+=("${f#mpiexecarg=}") ;;
		timeLimit=*) [ "${f#timeLimit=}" -gt "$t" ] 2>/dev/null && t=${f#timeLimit=} ;;
		xfail=*) ;;   # MPICH's own expected failures: run, judged like any test
		mem=*)
			if awk -v m="${f#mem=}" -v l="$mem_gb" 'BEGIN { exit !(m > l) }'; then
				result=skip why="needs ${f#mem=} GB of memory, --mem is $mem_gb"
				return
			fi ;;
		resultTest=TestAllowWarnings) allow=1 ;;
		*) why="testlist field '$f' not understood by this script"; return ;;
		esac
	done
	out=$(cd "$d" && env ${envs[@]+"${envs[@]}"} MPIEXEC_TIMEOUT="$t" \
		timeout -k 10 $((t + 30)) "${launch[@]}" -np "$np" ${MCA[$c]} \
		${mpiargs[@]+"${mpiargs[@]}"} "./$name" ${args[@]+"${args[@]}"} 2>&1)
	rc=$?
	why=$(verdict $allow <<<"$out")
	if [ "$why" = skip ]; then
		result=skip why="the program printed Test Skipped"
		return
	fi
	if [ $rc = 124 ] || [ $rc = 137 ] || grep -q 'time limit for job execution' <<<"$out"; then
		why="timed out after $t s"
	elif [ $rc != 0 ]; then
		why="exit $rc${why:+; $why}"
	fi
	if [ -z "$why" ]; then
		result=pass
	else
		mkdir -p "$prefix/logs/$c"
		{
			echo "# ${launch[*]} -np $np ${MCA[$c]} ${mpiargs[*]} ./$name ${args[*]} (in $suite/$d${envs[*]:+, env ${envs[*]}})"
			echo "# $why"
			echo "$out"
		} >"$prefix/logs/$c/$(tr ' /=' '__-' <<<"$d $name $np ${args[*]}").log"
	fi
}

nlines=$(list_tests 2>&1 >/dev/null | awk '{ s += $1 } END { print s }')
mapfile -t tests < <(list_tests 2>/dev/null)
if [ -n "$only" ]; then
	kept=()
	for t in "${tests[@]}"; do
		set -- $t
		[[ " $only " == *" $2 "* ]] && kept+=("$t")
	done
	tests=(${kept[@]+"${kept[@]}"})
	[ ${#tests[@]} -gt 0 ] || die "no test named $only in the testlists"
fi
echo "mpich-tests: $nlines testlist lines of pt2pt and errors/pt2pt, ${#tests[@]} runs" \
	"(lines differing only in MPICH's env=MPIR_CVAR_ settings run once); timeout ${timeout_s} s, --mem $mem_gb GB"
echo "mpich-tests: Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p' | head -n1), tm from $build/.libs"

rm -rf "$prefix/logs"
summary=()
any_failed=0
for c in $configs; do
	if ! why=$(probe "$c"); then
		echo "$c: not runnable: $why"
		summary+=("$c: not runnable ($why); ${#tests[@]} tests not run")
		any_failed=1
		continue
	fi
	echo "== $c: ${MCA[$c]}"
	pass=0 fail=0 skip=0 failed=() skipped=()
	for t in "${tests[@]}"; do
		t0=$SECONDS
		# shellcheck disable=SC2086
		run_test "$c" $t
		set -- $t
		label="$1/${*:2}"
		case $result in
		pass) pass=$((pass + 1)); echo "  ok    $label ($((SECONDS - t0)) s)" ;;
		skip) skip=$((skip + 1)); skipped+=("$label"); echo "  skip  $label: $why" ;;
		*) fail=$((fail + 1)); failed+=("$label"); echo "  FAIL  $label: $why" ;;
		esac
	done
	line="$c: $pass passed, $fail failed, $skip skipped of ${#tests[@]}"
	[ $fail -gt 0 ] && line="$line; failed: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')" && any_failed=1
	[ $skip -gt 0 ] && line="$line; skipped: $(IFS=,; echo "${skipped[*]}" | sed 's/,/, /g')"
	summary+=("$line")
done
echo
printf '%s\n' "${summary[@]}"
[ $any_failed = 0 ] || echo "mpich-tests: logs of the failures in $prefix/logs"
exit $any_failed
