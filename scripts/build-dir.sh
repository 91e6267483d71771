# build-dir.sh - sourced by the scripts that build in build/normal:
# generates the build system and configures build/normal when missing.
#
#   . "$(dirname "$0")/build-dir.sh"; ensure_build_dir NAME
#
# Sets top (the source tree) and dir (build/normal, or TM_BUILD_DIR if set:
# the tests point the scripts at the build they run in).  On a configure
# failure it shows the end of configure's output and exits, naming NAME.

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${TM_BUILD_DIR:-$top/build/normal}

ensure_build_dir() {
	if [ ! -x "$top/configure" ]; then
		(cd "$top" && ./autogen.sh)
	fi
	mkdir -p "$dir"
	if [ ! -f "$dir/Makefile" ]; then
		(cd "$dir" && "$top/configure" > configure.out 2>&1) || {
			tail -n 30 "$dir/configure.out" >&2
			echo "$1: configure failed (scripts/install-deps.sh installs what it needs)" >&2
			exit 1
		}
	fi
}
