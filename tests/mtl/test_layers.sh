#!/bin/bash
# test_layers.sh - the layering rule, checked on the #include lines (TAP).
#
#   mtl -> engine -> dev -> {verbs, softhca}
#
# Each layer may include its own headers and those of the layers below it,
# never those above it; the files at the top of the tree (tm_status.h,
# shared by every layer) include none of any layer; only mtl/ may include
# Open MPI headers; mtl/ reaches
# the device only through dev/ (no softhca/ or verbs/ header).  Checked twice:
# on each source file's own #include lines, and, when the build tree has
# automake's dependency files (.deps/*.Plo), on every header a compiled
# object really pulled in, so that a header reached through another header
# counts too.
set -u

srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
tree=$srcdir/ompi_btl_tm
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }

# Open MPI's headers, as named in an #include or as a path in a .Plo file.
ompi_re='(^|/)(ompi|opal|orte)/|(^|/)(ompi_config|opal_config|orte_config|mpi)\.h$'

# above LAYER: the project directories LAYER must not include from
above() {
	case $1 in
	mtl) echo 'softhca|verbs';;
	engine) echo 'softhca|verbs|mtl';;
	dev) echo 'engine|mtl';;
	softhca|verbs) echo 'dev|engine|mtl';;
	esac
}

# Whether LAYER must stay clear of Open MPI's headers (all but mtl/).
no_ompi() { [ "$1" != mtl ]; }

# forbidden LAYER: what an #include line of LAYER must not name
forbidden() {
	if no_ompi "$1"; then
		echo "^($(above "$1"))/|$ompi_re"
	else
		echo "^($(above "$1"))/"
	fi
}

# bad_paths LAYER: filters a list of header paths (from a .Plo file, where
# the tree's own location may contain anything) down to the forbidden ones:
# a project header of a layer above, or, for all but mtl/, Open MPI's.
bad_paths() {
	local path proj_re="(^|/)ompi_btl_tm/[a-z]+/[^/]+$"
	local above_re="(^|/)ompi_btl_tm/($(above "$1"))/[^/]+$"
	while read -r path; do
		if echo "$path" | grep -Eq "$proj_re"; then
			echo "$path" | grep -E "$above_re"
		elif no_ompi "$1"; then
			echo "$path" | grep -E "$ompi_re"
		fi
	done
	return 0
}

# The project headers a file names in its #include lines.
includes() {
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^">]*\)[">].*/\1/p' "$1"
}

layers="mtl engine dev softhca verbs"
# Library layers return status codes; only mtl/ prints (through Open MPI).
# (softhca/ still prints its own complaints on stderr: not checked here.)
# A debug build's invariant check (#ifdef TM_DEBUG) may print as it stops
# the process, as assert(3) does.
quiet="engine dev verbs"
echo "1..$(( $(echo $layers | wc -w) * 2 + $(echo $quiet | wc -w) + 1 ))"

# The shared files at the top belong to no layer: they include none.
bad=
for f in "$tree"/*.[ch]; do
	[ -e "$f" ] || continue
	for h in $(includes "$f"); do
		if echo "$h" | grep -Eq "^(${layers// /|})/|$ompi_re"; then
			bad="$bad ${f#$tree/}:$h"
		fi
	done
done
if [ -z "$bad" ]; then
	ok "the shared files at the top include no layer's header"
else
	notok "the shared files at the top include a layer's header:$bad"
fi

for layer in $layers; do
	bad=
	re=$(forbidden "$layer")
	for f in "$tree/$layer"/*.[ch]; do
		[ -e "$f" ] || continue
		for h in $(includes "$f"); do
			if echo "$h" | grep -Eq "$re"; then
				bad="$bad ${f#$tree/}:$h"
			fi
		done
	done
	if [ -z "$bad" ]; then
		ok "$layer/ includes nothing above or beside its layer"
	else
		notok "$layer/ includes what it must not:$bad"
	fi
done

for layer in $quiet; do
	# C comments stripped first, so prose may say "printf"
	bad=$(for f in "$tree/$layer"/*.[ch]; do
		[ -e "$f" ] || continue
		sed 's|/\*.*\*/||g; /\/\*/,/\*\//d
		     /^#ifdef TM_DEBUG/,/^#\(else\|endif\)/d' "$f" |
			grep -nE '(^|[^a-z_])(printf|fprintf|vfprintf|perror|puts|fputs|putchar)[[:space:]]*\(' |
			sed "s|^|${f#$tree/}:|"
	      done | head -n 5 | tr '\n' ' ')
	if [ -z "$bad" ]; then
		ok "$layer/ prints nothing (returns status codes)"
	else
		notok "$layer/ prints: $bad"
	fi
done

# The .Plo files of a layer's objects list every header they were built
# with, one path per line (ending in " \" or ":").
for layer in $layers; do
	deps=$builddir/ompi_btl_tm/$layer/.deps
	plos=$(ls "$deps"/*.Plo 2>/dev/null)
	if [ -z "$plos" ]; then
		ok "$layer/: headers pulled in through others # SKIP no dependency files in $deps"
		continue
	fi
	bad=$(for plo in $plos; do
		tr ' ' '\n' < "$plo" | sed 's/[:\\]*$//' |
			grep -E '\.h$' | sort -u | bad_paths "$layer" |
			sed "s|^|$(basename "$plo" .Plo):|"
	      done | head -n 5 | tr '\n' ' ')
	if [ -z "$bad" ]; then
		ok "$layer/: no forbidden header pulled in through others"
	else
		notok "$layer/: objects were built with forbidden headers: $bad"
	fi
done
exit 0
