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

# callgrind_calls FILE NAME...: how many times each function NAME was
# called in callgrind output FILE, on one line (cfn=(id) [name] lines name
# a callee, the calls=N lines after it count its calls)
callgrind_calls() {
	local f=$1
	shift
	awk -v names="$*" '
		/^c?fn=\(/ {
			id = $1; sub(/^c?fn=/, "", id)
			if (NF > 1) { nm = $2; sub(/\x27.*/, "", nm); name[id] = nm }
			if ($0 ~ /^cfn=/) cur = id
			next
		}
		/^calls=/ { split($1, a, "="); c[cur] += a[2] }
		END {
			for (i in name) tot[name[i]] += c[i]
			k = split(names, want, " ")
			for (j = 1; j <= k; j++)
				printf "%d ", tot[want[j]]
			print ""
		}' "$f"
}
