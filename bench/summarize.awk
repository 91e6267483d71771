# summarize.awk - turns bench/run.sh's raw lines into tables and plot data.
#
# Input lines: "round=R transport=T bench=B [kind=K depth=D] size=S <metric>=V ..."
# where <metric> is usec (lower is better), MBps or Mmsgs (higher is better).
#
# Variables (awk -v):
#   transports  transports in run order, e.g. "tm ob1 ucx"
#   base        the transport compared with the others ("tm", or "ucx"
#               when tm is not available); empty: no ratios
#   rows        "key" for the headline rows, "all" for every point
#   datadir     if set, writes <bench>_<transport>.dat files for gnuplot
#   part        "table", "targets", "depth", "issue" or "imb" (what to print)
#   stat        "best" (default): each launch's fastest batch (min usec,
#               max MBps / Mmsgs); "median": its median batch
#
# Every comparison is made per round (values measured seconds apart, in
# the same vCPU placement regime most of the time) and then summarised by
# the median over rounds; the noise figure is the interquartile range.
# POSIX awk only (Debian's default awk is mawk: no asort, no gensub).

function metric_of(arr) {
	if ("usec" in arr) return "usec"
	if ("MBps" in arr) return "MBps"
	if ("Mmsgs" in arr) return "Mmsgs"
	return ""
}

function human(n) {
	if (n >= 1048576 && n % 1048576 == 0) return (n / 1048576) " MiB"
	if (n >= 1024 && n % 1024 == 0) return (n / 1024) " KiB"
	return n " B"
}

# Sorts a[1..n] numerically (insertion sort: n is the number of rounds).
function sort_n(a, n,    i, j, v) {
	for (i = 2; i <= n; i++) {
		v = a[i]
		for (j = i - 1; j >= 1 && a[j] > v; j--)
			a[j + 1] = a[j]
		a[j + 1] = v
	}
}

# Quantile p of sorted a[1..n], linear interpolation.
function quant(a, n, p,    x, i) {
	if (n == 0) return ""
	x = 1 + (n - 1) * p
	i = int(x)
	if (i >= n) return a[n]
	return a[i] + (x - i) * (a[i + 1] - a[i])
}

function fmt(v, unit) {
	if (v == "") return "-"
	if (unit == "usec") return sprintf("%.3f", v)
	if (unit == "MBps") return sprintf("%.0f", v)
	if (unit == "Mmsgs") return sprintf("%.2f", v)
	return sprintf("%.3f", v)
}

# Per-round values of key k for transport t into vals[1..]; returns count.
function collect(k, t, vals,    r, n) {
	n = 0
	for (r = 1; r <= nrounds; r++)
		if ((k, t, r) in val)
			vals[++n] = val[k, t, r]
	sort_n(vals, n)
	return n
}

# "median ±x%" of transport t at key k (x: half the IQR, in % of median).
function cell(k, t,    vals, n, m) {
	n = collect(k, t, vals)
	if (n == 0) return "-"
	m = quant(vals, n, 0.5)
	if (n < 2 || m == 0) return fmt(m, unit[k])
	return sprintf("%s ±%.0f%%", fmt(m, unit[k]),
		       50 * (quant(vals, n, 0.75) - quant(vals, n, 0.25)) / m)
}

# Per-round ratio num/den at keys kn/kd; "median [q1-q3]".
function ratio_cell(kn, tn, kd, td,    r, a, n) {
	n = 0
	for (r = 1; r <= nrounds; r++)
		if (round_ok(r) &&
		    (kn, tn, r) in val && (kd, td, r) in val && val[kd, td, r] > 0)
			a[++n] = val[kn, tn, r] / val[kd, td, r]
	if (n == 0) return "-"
	sort_n(a, n)
	last_ratio = quant(a, n, 0.5)
	return sprintf(rfmt, last_ratio, quant(a, n, 0.25), quant(a, n, 0.75))
}

function label(k,    p) {
	split(k, p, " ")
	if (p[1] == "depth")
		return sprintf("depth %s D=%s (%s)", p[2], p[3], human(p[4]))
	return p[1] " " human(p[2])
}

function is_key_row(k,    p, s) {
	if (rows == "all") return 1
	split(k, p, " ")
	if (p[1] == "depth")
		return p[3] == 0 || p[3] == 64 || p[3] == 1024 || p[3] == 4096
	s = p[2]
	if (p[1] == "latency" || p[1] == "osu_latency")
		return s == 0 || s == 8 || s == 1024 || s == 65536 || \
		       s == 1048576 || s == 4194304
	if (p[1] == "latency_mt")
		return s == 8 || s == 64 || s == 1024
	if (p[1] == "bw" || p[1] == "osu_bw")
		return s == 8 || s == 65536 || s == 1048576 || s == 4194304
	if (p[1] == "bibw" || p[1] == "osu_bibw")
		return s == 1048576 || s == 4194304
	if (p[1] == "osu_mbw_mr")
		return s == 8 || s == 1024 || s == 4096
	if (p[1] == "rate")
		return s == 8 || s == 64 || s == 1024 || s == 4096 || s == 32768
	return 1
}

{
	for (i = 1; i <= NF; i++) {
		eq = index($i, "=")
		if (eq > 0)
			f[substr($i, 1, eq - 1)] = substr($i, eq + 1)
	}
	m = metric_of(f)
	# Other jobs on the CPUs only ever slow a batch down: the best batch
	# of a launch is the least disturbed one.
	v = f[m]
	if (stat != "median" && m == "usec" && "min" in f) v = f["min"]
	if (stat != "median" && m != "usec" && "max" in f) v = f["max"]
	if (m != "" && f["round"] != "" && f["transport"] != "") {
		k = f["bench"]
		if (k == "depth")
			k = k " " f["kind"] " " f["depth"]
		k = k " " f["size"]
		if (!(k in unit)) {
			unit[k] = m
			order[++nkeys] = k
		}
		val[k, f["transport"], f["round"] + 0] = v + 0
		mid[k, f["transport"], f["round"] + 0] = f[m] + 0
		if (f["round"] + 0 > nrounds)
			nrounds = f["round"] + 0
	}
	for (x in f)
		delete f[x]
}

function print_table(    nt, tl, i, j, k, hdr, sep, line) {
	nt = split(transports, tl, " ")
	hdr = "| benchmark | unit |"
	sep = "| --- | --- |"
	for (i = 1; i <= nt; i++) {
		hdr = hdr " " tl[i] " |"
		sep = sep " ---: |"
	}
	for (i = 1; i <= nt; i++)
		if (base != "" && tl[i] != base) {
			hdr = hdr " " base "/" tl[i] " |"
			sep = sep " ---: |"
		}
	# The two peers against each other as well, when tm is the base.
	peers = (base == "tm" && index(" " transports " ", " ob1 ") && \
		 index(" " transports " ", " ucx "))
	if (peers) {
		hdr = hdr " ucx/ob1 |"
		sep = sep " ---: |"
	}
	print hdr
	print sep
	for (j = 1; j <= nkeys; j++) {
		k = order[j]
		if (!is_key_row(k))
			continue
		line = "| " label(k) " | " unit[k] " |"
		for (i = 1; i <= nt; i++)
			line = line " " cell(k, tl[i]) " |"
		for (i = 1; i <= nt; i++)
			if (base != "" && tl[i] != base)
				line = line " " ratio_cell(k, base, k, tl[i]) " |"
		if (peers)
			line = line " " ratio_cell(k, "ucx", k, "ob1") " |"
		print line
	}
}

# Latency at the deepest queue over latency at depth 0, same launch.
function print_depth(    nt, tl, i, j, k, p, kinds, nk, dmax, sz, line) {
	nt = split(transports, tl, " ")
	for (j = 1; j <= nkeys; j++) {
		split(order[j], p, " ")
		if (p[1] != "depth") continue
		if (!(p[2] in seen)) { seen[p[2]] = 1; kinds[++nk] = p[2] }
		if (p[3] + 0 > dmax) dmax = p[3] + 0
		sz = p[4]
	}
	if (nk == 0) return
	line = "| queue (D=" dmax " vs D=0) |"
	for (i = 1; i <= nt; i++) line = line " " tl[i] " |"
	print line
	line = "| --- |"
	for (i = 1; i <= nt; i++) line = line " ---: |"
	print line
	for (j = 1; j <= nk; j++) {
		line = "| " kinds[j] " |"
		for (i = 1; i <= nt; i++)
			line = line " " ratio_cell("depth " kinds[j] " " dmax " " sz, tl[i], \
				"depth " kinds[j] " 0 " sz, tl[i]) " |"
		print line
	}
}

# The vCPU placement regimes (these VMs switch every 10-30 s, and the
# slow one doubles a small message's latency or worse): a round is "fast"
# when every transport's 8 B latency in it (its launch's median batch,
# whatever the stat: one stray batch does not make a regime) is within
# 1.6x of that transport's lower quartile over the rounds, else "mixed"
# (at least one ran slow).  Ratios then take the rounds of
# one kind only (regime_only: "fast", "mixed"; empty: all).
function classify(    r, tl, nt, i, vals, n) {
	nt = split(transports, tl, " ")
	for (i = 1; i <= nt; i++) {
		n = 0
		for (r = 1; r <= nrounds; r++)
			if (("latency 8", tl[i], r) in mid)
				vals[++n] = mid["latency 8", tl[i], r]
		sort_n(vals, n)
		lat_q1[tl[i]] = n ? quant(vals, n, 0.25) : ""
	}
	for (r = 1; r <= nrounds; r++) {
		regime[r] = "fast"
		for (i = 1; i <= nt; i++)
			if (("latency 8", tl[i], r) in mid &&
			    mid["latency 8", tl[i], r] > 1.6 * lat_q1[tl[i]])
				regime[r] = "mixed"
	}
}

function round_ok(r) {
	return regime_only == "" || regime[r] == regime_only
}

function regime_rounds(kind,    r, n) {
	n = 0
	for (r = 1; r <= nrounds; r++)
		n += regime[r] == kind
	return n
}

# The 8 B latency and rate and the 1 KiB rate over each regime's rounds.
function print_regimes(    kinds, j, got) {
	classify()
	print ""
	print "| by regime (tm, per-round median) | goal | rounds | measured [IQR] | |"
	print "| --- | --- | ---: | ---: | --- |"
	split("fast mixed", kinds, " ")
	for (j = 1; j <= 2; j++) {
		regime_only = kinds[j]
		got = best_ratio("latency 8", 0)
		regime_row(kinds[j] ": 8 B latency / better of ob1,ucx", got, "<=", 1.3)
		got = best_ratio("rate 8", 1)
		regime_row(kinds[j] ": 8 B message rate / better of ob1,ucx", got, ">=", 0.6)
		got = ratio_cell("rate 1024", "tm", "rate 1024", "ucx")
		regime_row(kinds[j] ": 1 KiB message rate / ucx", got, ">=", 1.0)
	}
	regime_only = ""
	print ""
	print "A round is fast when each transport's 8 B latency in it (median"
	print "batch) is within 1.6x of that transport's lower quartile over the"
	print "rounds; mixed when one or more ran in the slow vCPU placement regime."
}

function regime_row(name, got, op, goal,    ok) {
	if (got == "-") {
		printf "| %s | %s %s | 0 | - | not measured |\n", name, op, goal
		return
	}
	ok = (op == "<=") ? last_ratio <= goal : last_ratio >= goal
	printf "| %s | %s %s | %d | %s | %s |\n", name, op, goal, \
		regime_rounds(regime_only), got, ok ? "met" : "NOT met"
}

# Per-round ratio of tm against the better of ob1/ucx in that round.
function best_ratio(k, higher,    r, a, n, b, v) {
	n = 0
	for (r = 1; r <= nrounds; r++) {
		if (!round_ok(r) || !((k, "tm", r) in val)) continue
		b = ""
		if ((k, "ob1", r) in val) b = val[k, "ob1", r]
		if ((k, "ucx", r) in val) {
			v = val[k, "ucx", r]
			if (b == "" || (higher ? v > b : v < b)) b = v
		}
		if (b != "" && b > 0) a[++n] = val[k, "tm", r] / b
	}
	if (n == 0) return "-"
	sort_n(a, n)
	last_ratio = quant(a, n, 0.5)
	return sprintf(rfmt, last_ratio, quant(a, n, 0.25), quant(a, n, 0.75))
}

# A target row: got is a ratio cell (last_ratio holds its median).  An
# optional stretch is the issue's aim beyond the requirement (e.g. <= 1.0
# required, 0.9 the aim): both are judged.
function target(name, got, op, goal, stretch,    ok, aim, g) {
	g = op " " goal
	if (stretch != "")
		g = g " (aim " stretch ")"
	if (got == "-") {
		printf "| %s | %s | - | not measured |\n", name, g
		return
	}
	ok = (op == "<=") ? last_ratio <= goal : last_ratio >= goal
	aim = ""
	if (stretch != "") {
		if (op == "<=")
			aim = last_ratio <= stretch ? ", aim met" : ", aim not met"
		else
			aim = last_ratio >= stretch ? ", aim met" : ", aim not met"
	}
	printf "| %s | %s | %s | %s%s |\n", name, g, got, \
		ok ? "met" : "NOT met", aim
}

function print_targets(    kinds, j, d) {
	# Enough digits that "NOT met" is never shown next to the goal itself.
	rfmt = "%.3f [%.3f-%.3f]"
	print "| target (tm, per-round median) | goal | measured [IQR] | |"
	print "| --- | --- | ---: | --- |"
	# issue 18: 8 B latency <= 1.3x (aim 0.9x), 8 B rate >= 0.6x (aim 1.1x)
	target("8 B latency / better of ob1,ucx", best_ratio("latency 8", 0), "<=", 1.3, 0.9)
	target("1 KiB latency / ucx", ratio_cell("latency 1024", "tm", "latency 1024", "ucx"), "<=", 1.0)
	target("1 MiB bandwidth / ucx", ratio_cell("bw 1048576", "tm", "bw 1048576", "ucx"), ">=", 1.0)
	target("4 MiB bandwidth / ucx", ratio_cell("bw 4194304", "tm", "bw 4194304", "ucx"), ">=", 1.0)
	target("8 B message rate / better of ob1,ucx", best_ratio("rate 8", 1), ">=", 0.6, 1.1)
	target("1 KiB message rate / ucx", ratio_cell("rate 1024", "tm", "rate 1024", "ucx"), ">=", 1.0)
	# osu_latency_mt -t 1:2: rank 1's two threads share its core, as
	# ob1's do: the same oversubscription
	target("8 B latency, threads 1:2 / ob1", ratio_cell("latency_mt 8", "tm", "latency_mt 8", "ob1"), "<=", 1.0)
	target("1 KiB latency, threads 1:2 / ob1", ratio_cell("latency_mt 1024", "tm", "latency_mt 1024", "ob1"), "<=", 1.0)
	split("posted any unexp", kinds, " ")
	for (j = 1; j <= 3; j++) {
		d = "depth " kinds[j]
		target("depth 4096 " kinds[j] " / tm depth 0", \
		       ratio_cell(d " 4096 8", "tm", d " 0 8", "tm"), "<=", 1.5)
	}
	# the same goals measured by OSU 7.4 (run.sh --osu)
	if (("osu_latency 8", "tm", 1) in val || ("osu_mbw_mr 8", "tm", 1) in val) {
		target("OSU 8 B latency / better of ob1,ucx", best_ratio("osu_latency 8", 0), "<=", 1.3, 0.9)
		target("OSU 1 KiB latency / ucx", ratio_cell("osu_latency 1024", "tm", "osu_latency 1024", "ucx"), "<=", 1.0)
		target("OSU 8 B message rate / better of ob1,ucx", best_ratio("osu_mbw_mr 8", 1), ">=", 0.6, 1.1)
	}
	if (("latency 8", "tm", 1) in val)
		print_regimes()
}

# Median over rounds of transport t at key k; "" if never measured.
function median_of(k, t,    vals, n) {
	n = collect(k, t, vals)
	return n ? quant(vals, n, 0.5) : ""
}

# One row of the issue's table: the median per transport (a rate shown
# as ns per message, 1000 / median Mmsgs) and tm against the better peer.
function issue_row(name, k, higher,    nt, tl, i, v, line, r) {
	nt = split(transports, tl, " ")
	line = "| " name " |"
	for (i = 1; i <= nt; i++) {
		v = median_of(k, tl[i])
		if (v == "") line = line " - |"
		else if (higher) line = line sprintf(" %.0f |", v > 0 ? 1000 / v : 0)
		else line = line sprintf(" %.3f |", v)
	}
	r = best_ratio(k, higher)
	print line " " r " |"
}

# Issue 18's headline table: 8 B and 1 KiB latency and rate (window 64),
# ours and OSU's, tm against the better of ob1/ucx in the same round.
function print_issue(    nt, tl, i, hdr, sep) {
	rfmt = "%.2fx [%.2f-%.2f]"
	nt = split(transports, tl, " ")
	hdr = "| measure (median over rounds) |"
	sep = "| --- |"
	for (i = 1; i <= nt; i++) { hdr = hdr " " tl[i] " |"; sep = sep " ---: |" }
	print hdr " tm vs better of ob1,ucx [IQR] |"
	print sep " ---: |"
	issue_row("8 B half round trip (us)", "latency 8", 0)
	issue_row("8 B message rate (ns per message, window 64)", "rate 8", 1)
	issue_row("1 KiB half round trip (us)", "latency 1024", 0)
	issue_row("1 KiB message rate (ns per message, window 64)", "rate 1024", 1)
	issue_row("OSU 7.4 osu_latency 8 B (us)", "osu_latency 8", 0)
	issue_row("OSU 7.4 osu_mbw_mr 8 B (ns per message, window 64)", "osu_mbw_mr 8", 1)
	issue_row("OSU 7.4 osu_latency 1 KiB (us)", "osu_latency 1024", 0)
	issue_row("OSU 7.4 osu_mbw_mr 1 KiB (ns per message, window 64)", "osu_mbw_mr 1024", 1)
}

# The Intel MPI Benchmarks (run.sh --imb): each benchmark and size as
# measured, medians over rounds, tm against the better peer per round.
function print_imb(    nt, tl, i, j, k, p, hdr, sep, line, v, u) {
	rfmt = "%.2fx [%.2f-%.2f]"
	nt = split(transports, tl, " ")
	hdr = "| IMB-MPI1 | unit |"
	sep = "| --- | --- |"
	for (i = 1; i <= nt; i++) { hdr = hdr " " tl[i] " |"; sep = sep " ---: |" }
	print hdr " tm vs better of ob1,ucx [IQR] |"
	print sep " ---: |"
	for (j = 1; j <= nkeys; j++) {
		k = order[j]
		split(k, p, " ")
		if (substr(p[1], 1, 4) != "imb_") continue
		u = unit[k]
		line = "| " substr(p[1], 5) " " human(p[2]) " | " u " |"
		for (i = 1; i <= nt; i++) {
			v = median_of(k, tl[i])
			line = line " " fmt(v, u) " |"
		}
		print line " " best_ratio(k, u != "usec") " |"
	}
}

# gnuplot data: x median q1 q3 over rounds, one file per benchmark and
# transport (the interquartile range, as in the tables: the min-max range
# of a run with a busy round would flatten every other line).
function write_data(    nt, tl, i, j, k, p, file, vals, n, x) {
	nt = split(transports, tl, " ")
	for (i = 1; i <= nt; i++)
		for (j = 1; j <= nkeys; j++) {
			k = order[j]
			n = collect(k, tl[i], vals)
			if (n == 0) continue
			split(k, p, " ")
			if (p[1] == "depth") {
				file = datadir "/depth_" p[2] "_" tl[i] ".dat"
				x = p[3]
			} else {
				file = datadir "/" p[1] "_" tl[i] ".dat"
				x = p[2]
			}
			printf "%s %s %s %s\n", x, quant(vals, n, 0.5), \
				quant(vals, n, 0.25), quant(vals, n, 0.75) > file
		}
}

END {
	rfmt = "%.2f [%.2f-%.2f]"
	if (datadir != "") write_data()
	if (part == "table") print_table()
	else if (part == "depth") print_depth()
	else if (part == "targets") print_targets()
	else if (part == "issue") print_issue()
	else if (part == "imb") print_imb()
}
