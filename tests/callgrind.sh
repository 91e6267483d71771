# callgrind.sh - the opening of the tests that count with callgrind;
# sourced, not run:   . "${top_srcdir:-.}/tests/callgrind.sh"
# callgrind_or_skip BIN: ends the test as a TAP skip unless valgrind is
# installed and BIN is not a sanitizer build (valgrind cannot run those).
callgrind_or_skip() {
	if ! command -v valgrind >/dev/null 2>&1; then
		echo "1..0 # SKIP valgrind not installed"
		exit 0
	fi
	if nm "$1" 2>/dev/null | grep -q ' __asan_'; then
		echo "1..0 # SKIP a sanitizer build: valgrind cannot run it"
		exit 0
	fi
}
