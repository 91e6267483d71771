/*
 * diff.c - differential and exhaustive tests of the matching engine.
 *
 * Node 0 receives; nodes 1..K send to it.  A schedule of application
 * events (posts, cancels, probes, matched probes, sends) and card events
 * (soft HCA MANUAL steps: list ops, arrivals, wire moves, reads) is run
 * through engine + soft HCA.  Every linearisation point carries a stamp of
 * the engine's clock (tm_engine.h); afterwards a plain reference matcher
 * (two linear lists) replays posts, arrivals (in the order the card decided
 * them), cancels and probes in stamp order, and the matched pairs, lengths,
 * truncation, data bytes, probe and cancel results must agree.  Also
 * checked: each sender's messages arrive once and in order, every request
 * completes exactly once, no FIN is unknown or missing, the card list and
 * all queues end empty; and what diff_card.c asks of the card (node 0
 * sends too, so FIN/ACK reach it; a pre-posted phase must be matched on
 * the card; engine and card agree on counts and op slots at the end).  A
 * failure prints the seed that reproduces it.
 *
 * Random mode (test_differential): --seed N --events M [--tags T]
 *   [--ops O] [--mtu U] [--senders K] [--random] [--fault prefix|sync|order] [--notm]
 *   Without --seed it runs the CI matrix (>= 1e6 events) and, with faults
 *   injected, checks that the test notices them.
 * Exhaustive mode (test_exhaustive, -DDIFF_EXHAUSTIVE): every interleaving
 *   of a fixed small scenario (posts, arrivals per sender, list ops, engine
 *   progress, reads) by depth-first search over the choices, on one world
 *   reused between runs.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "diff.h"

/* ---- random numbers (xorshift64*) and choice sources ---------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* Exhaustive mode replays a prefix of choices, then takes 0s. */
struct dfs {
	int on;
	int len;
	int pos;
	int val[512];
	int lim[512];
};
static struct dfs D;
int diff_notm;

int choose(int n)
{
	if (!D.on)
		return (int)(rng() % (uint64_t)n);
	if (D.pos == D.len) {
		if (D.len == 512)
			tap_bail("exhaustive: choice stack overflow");
		D.val[D.len] = 0;
		D.lim[D.len++] = n;
	}
	return D.val[D.pos++];
}

/* Next choice vector; 0 when all explored. */
static __attribute__((unused)) int dfs_next(void)
{
	while (D.len > 0) {
		if (D.val[D.len - 1] + 1 < D.lim[D.len - 1]) {
			D.val[D.len - 1]++;
			return 1;
		}
		D.len--;
	}
	return 0;
}

struct dstate S;

void fail(const char *fmt, ...)
{
	va_list ap;

	if (S.failed++)
		return;
	va_start(ap, fmt);
	vsnprintf(S.why, sizeof(S.why), fmt, ap);
	va_end(ap);
}

void *grow(void *p, int *cap, int need, size_t sz)
{
	if (need <= *cap)
		return p;
	*cap = need * 2 + 16;
	p = realloc(p, (size_t)*cap * sz);
	if (!p)
		tap_bail("out of memory");
	return p;
}

void log_ev(const struct ev *e)
{
	S.evs = grow(S.evs, &S.capevs, S.nevs + 1, sizeof(*S.evs));
	S.evs[S.nevs++] = *e;
}

uint8_t pattern(int node, uint32_t seq, size_t i)
{
	return (uint8_t)(node * 31 + seq * 7 + i * 13 + 1);
}

uint8_t *rbuf(int slot)
{
	return S.w.node[0].arena + (size_t)slot * SLOT;
}

uint8_t *sbuf(int node, int slot)
{
	return S.w.node[node].arena + (size_t)slot * SLOT;
}

struct dsend *send_of(int node, uint32_t seq)
{
	uint32_t i = (seq - S.seq_base[node]) & TM_APP_SEQ_MASK;

	if (node < 1 || node > S.k || i >= (uint32_t)S.nsends[node])
		return NULL;
	return S.sends[node][i];
}

/* ---- runs ------------------------------------------------------------ */

static void world_open(const struct dcfg *c, uint64_t seed)
{
	struct eu_opts o;
	int i;

	eu_opts_default(&o);
	o.max_num_tags = c->tags;
	o.max_ops = c->ops;
	o.mtu = c->mtu;
	o.sched = c->random_card ? SOFTHCA_SCHED_RANDOM : SOFTHCA_SCHED_MANUAL;
	o.no_tm = c->notm;
	diff_notm = c->notm;
	o.seed = seed | 1;
	o.arena_len = (size_t)SLOT * (NSLOT + NREV);
	o.ecfg.eager_limit = 1024;
	o.ecfg.n_plain = 64;
	o.ecfg.n_send_slots = 64;
	o.ecfg.test = &(struct tm_engine_test){ .faults = c->faults,
						.arrival_hook = arrival_hook,
						.cancel_hook = cancel_hook };
	/* no timer-driven keepalives: a seed must replay the same schedule
	 * (test_peer_fail covers keepalives); the longest period allowed is
	 * a minute, far longer than any send here waits */
	o.ecfg.keepalive_ms = TM_KEEPALIVE_MAX_MS;
	o.ecfg.offload_thresh = c->thresh;
	if (eu_world_init(&S.w, 1 + c->k, &o))
		tap_bail("cannot open the soft HCA world");
	S.k = c->k;
	S.card_tags = c->tags;
	S.thresh = c->thresh;
	for (i = 1; i <= c->k; i++)
		S.inv_peer[S.w.node[0].peer[i]] = i;
}

/* Resets the per-run records (the world may be reused). */
static void run_reset(void)
{
	int i, j;

	for (i = 0; i < S.nrecvs; i++)
		free(S.recvs[i]);
	for (i = 0; i < EU_MAXN; i++) {
		for (j = 0; j < S.nsends[i]; j++)
			free(S.sends[i][j]);
		S.seq_base[i] = (S.seq_base[i] + (uint32_t)S.nsends[i]) &
				TM_APP_SEQ_MASK;
		S.nsends[i] = 0;
		S.nsfree[i] = 0;
		for (j = 0; j < NSLOT; j++)
			S.sslot_free[i][S.nsfree[i]++] = j;
	}
	S.nrecvs = S.nevs = 0;
	S.nrfree = 0;
	for (j = 0; j < NSLOT; j++)
		S.rslot_free[S.nrfree++] = j;
	S.outstanding = 0;
	S.failed = 0;
	S.why[0] = 0;
}

/* Node 0's open receives cancelled (first all but a matched probe's),
 * then what is left unexpected drained with catch-all receives. */
static void drain_node0(void)
{
	struct tm_engine_stats st;
	int i, round;

	for (i = 0; i < S.nrecvs; i++)
		if (!S.recvs[i]->done && !S.recvs[i]->cancel_req &&
		    !S.recvs[i]->mrecv) {
			S.recvs[i]->cancel_req = 1;
			tm_engine_cancel_recv(S.w.node[0].eng, &S.recvs[i]->r);
		}
	eu_pump(&S.w);
	/* drain what is left unexpected with catch-all receives */
	for (round = 0; round < 10000; round++) {
		tm_engine_get_stats(S.w.node[0].eng, &st);
		if (!st.uq_len || !S.nrfree)
			break;
		for (i = 0; i < 2; i++) {
			post_recv_env(i, TM_ANY_SRC, TM_ANY_TAG, 32768);
			post_recv_env(i, TM_ANY_SRC, -3, 32768);
		}
		eu_pump(&S.w);
		for (i = 0; i < S.nrecvs; i++)
			if (!S.recvs[i]->done && !S.recvs[i]->cancel_req) {
				S.recvs[i]->cancel_req = 1;
				tm_engine_cancel_recv(S.w.node[0].eng,
						      &S.recvs[i]->r);
			}
		eu_pump(&S.w);
	}
}

/* The end every run must reach: engines idle, every request completed,
 * no error counted, queues and card lists empty. */
static void check_end_state(void)
{
	struct tm_engine_stats st;
	int i;

	for (i = 0; i <= S.k; i++) {
		tm_engine_get_stats(S.w.node[i].eng, &st);
		if (!tm_engine_idle(S.w.node[i].eng))
			fail("node %d not idle at the end: ops %u queued %u tx %lu reads %lu sends %lu",
			     i, st.ops_outstanding, st.ops_in_queue,
			     (unsigned long)st.tx_queued,
			     (unsigned long)st.reads_active,
			     (unsigned long)st.sends_waiting);
	}
	for (i = 0; i < S.nrecvs; i++)
		if (!S.recvs[i]->done)
			fail("recv %d never completed", i);
	for (i = 1; i <= S.k; i++)
		for (int j = 0; j < S.nsends[i]; j++)
			if (!S.sends[i][j]->done)
				fail("send %d/%u never completed (buffer held)", i,
				     S.sends[i][j]->s.seq);
	for (i = 0; i <= S.k; i++) {
		tm_engine_get_stats(S.w.node[i].eng, &st);
		if (st.errors || st.fin_unknown || st.claim_del_failed ||
		    st.malformed || st.posted || st.uq_len || st.card_entries)
			fail("node %d: errors %lu fin_unknown %lu claim_del_failed %lu malformed %lu posted %lu uq %lu entries %u",
			     i, (unsigned long)st.errors,
			     (unsigned long)st.fin_unknown,
			     (unsigned long)st.claim_del_failed,
			     (unsigned long)st.malformed,
			     (unsigned long)st.posted, (unsigned long)st.uq_len,
			     st.card_entries);
	}
}

/* The totals over runs, for totals(). */
static void add_totals(void)
{
	struct tm_engine_stats st;
	int i;

	for (i = 1; i <= S.k; i++) {
		tm_engine_get_stats(S.w.node[i].eng, &st);
		S.t_sc_req += st.scancel_req;
		S.t_sc_ok += st.scancel_ok;
		S.t_sc_late += st.scancel_late;
	}
	tm_engine_get_stats(S.w.node[0].eng, &st);
	S.t_recvs += (uint64_t)S.nrecvs;
	for (i = 1; i <= S.k; i++)
		S.t_sends += (uint64_t)S.nsends[i];
	S.t_card += st.card_matched;
	S.t_claim += st.unexp_claimed;
	S.t_cancel += st.cancel_ok;
	S.t_conflict += st.sw_conflict;
	S.t_full += st.sw_list_full + st.sw_ops_full;
	S.t_late += st.cancel_late;
	S.t_rndv_sw += st.rndv_sw;
	S.t_syncs += st.syncs;
	S.t_promoted += st.promoted;
	for (i = 0; i < S.nrecvs; i++)
		S.t_matched += S.recvs[i]->r.status != TM_REQ_CANCELLED;
}

static void finish_and_check(void)
{
	struct softhca_stats hs;

	drain_node0();
	rev_drain();
	rev_fini();
	card_phase();
	card_agree();
	check_end_state();
	add_totals();
	memset(&hs, 0, sizeof(hs));
	softhca_query_stats(S.w.node[0].dev->ctx, &hs);
	if (hs.list_entries)
		fail("the card still holds %u entries", hs.list_entries);
	if (!S.failed)
		reference_check();
}

/* One random schedule; returns 0 if engine and reference agree. */
static int run_random(const struct dcfg *c, uint64_t seed)
{
	uint64_t ev;
	int x, failed;

	rng_state = seed * 0x9e3779b97f4a7c15ULL + 1;
	world_open(c, seed);
	run_reset();
	memset(S.seq_base, 0, sizeof(S.seq_base)); /* fresh engines */
	S.phase_on = 1;
	rev_reset();
	for (ev = 0; ev < c->events && !S.failed; ev++) {
		x = choose(100);
		if (x < 14)
			ev_post();
		else if (x < 19)
			ev_cancel();
		else if (x < 21)
			ev_probe(0);
		else if (x < 22)
			ev_probe(1);
		else if (x < 37)
			ev_send();
		else if (x < 38)
			ev_scancel();
		else if (x < 41)
			ev_rsend();
		else if (x < 45 || c->random_card)
			tm_engine_progress(S.w.node[choose(1 + S.k)].eng);
		else
			ev_card();
	}
	S.events += c->events;
	if (!S.failed)
		finish_and_check();
	eu_world_fini(&S.w);
	rev_free();
	failed = S.failed;
	if (failed)
		return failed; /* keep S.why for the caller */
	run_reset();
	return 0;
}

static void cfg_print(const struct dcfg *c, uint64_t seed, char *out,
		      size_t n)
{
	snprintf(out, n, "--seed %lu --events %lu --tags %u --ops %u --mtu %u --senders %d --thresh %zu%s%s%s",
		 (unsigned long)seed, (unsigned long)c->events, c->tags, c->ops,
		 c->mtu, c->k, c->thresh, c->random_card ? " --random" : "",
		 c->notm ? " --notm" : "",
		 c->faults & TM_FAULT_PREFIX ? " --fault prefix" :
		 c->faults & TM_FAULT_SYNC_AHEAD ? " --fault sync" :
		 c->faults & TM_FAULT_SYNC_ORDER ? " --fault order" : "");
}

/* What the runs so far exercised in the engine. */
static __attribute__((unused)) void totals(void)
{
	tap_diag("recvs %lu sends %lu card-matched %lu claimed %lu cancelled %lu late-cancel %lu conflict %lu full %lu sw-rndv %lu syncs %lu",
		 (unsigned long)S.t_recvs, (unsigned long)S.t_sends,
		 (unsigned long)S.t_card, (unsigned long)S.t_claim,
		 (unsigned long)S.t_cancel, (unsigned long)S.t_late,
		 (unsigned long)S.t_conflict, (unsigned long)S.t_full,
		 (unsigned long)S.t_rndv_sw, (unsigned long)S.t_syncs);
	tap_diag("promoted %lu; of %lu receives that matched, %.1f%% matched on the card",
		 (unsigned long)S.t_promoted, (unsigned long)S.t_matched,
		 S.t_matched ? 100.0 * (double)S.t_card / (double)S.t_matched : 0.0);
	tap_diag("node 0 sent %lu messages the other way; pre-posted phases: %lu of %lu receives matched on the card",
		 (unsigned long)S.t_rsends, (unsigned long)S.t_phase_card,
		 (unsigned long)S.t_phase_recvs);
	tap_diag("send cancels %lu: withdrawn %lu, late %lu",
		 (unsigned long)S.t_sc_req, (unsigned long)S.t_sc_ok,
		 (unsigned long)S.t_sc_late);
}

/* Runs seeds until n runs pass or one fails; returns the failing seed+1. */
static __attribute__((unused)) uint64_t run_many(const struct dcfg *c, uint64_t seed0, int n)
{
	char buf[256];
	int i;

	for (i = 0; i < n; i++) {
		if (run_random(c, seed0 + (uint64_t)i)) {
			cfg_print(c, seed0 + (uint64_t)i, buf, sizeof(buf));
			tap_diag("FAIL: %s", S.why);
			tap_diag("reproduce: test_differential %s", buf);
			return seed0 + (uint64_t)i + 1;
		}
	}
	return 0;
}

#ifndef DIFF_EXHAUSTIVE

static const struct dcfg matrix[] = {
	/* tags ops mtu k random faults events notm thresh */
	{ 1, 1, 0, 2, 0, 0, 2000, 0, 0 },
	{ 2, 1, 256, 2, 0, 0, 2000, 0, 0 },
	{ 1, 4, 0, 3, 0, 0, 2000, 0, 0 },
	{ 4, 2, 0, 2, 0, 0, 2000, 0, 0 },
	{ 16, 8, 1024, 3, 0, 0, 2000, 0, 0 },
	{ 0, 0, 0, 3, 0, 0, 2000, 0, 0 },
	{ 1, 1, 0, 2, 1, 0, 2000, 0, 0 },
	{ 8, 4, 0, 3, 1, 0, 2000, 0, 0 },
	{ 0, 0, 0, 2, 1, 0, 2000, 0, 0 },
	/* no tag matching: the engine is the whole matcher */
	{ 0, 0, 0, 3, 0, 0, 2000, 1, 0 },
	{ 0, 0, 256, 2, 1, 0, 2000, 1, 0 },
	/* receives below 1 KiB matched in software (offload_thresh), the
	 * rest on the card: both kinds for the same source and tag */
	{ 4, 2, 0, 3, 0, 0, 2000, 0, 1024 },
	{ 1, 1, 0, 2, 1, 0, 2000, 0, 1024 },
	{ 16, 8, 256, 3, 1, 0, 2000, 0, 1024 },
};

static int parse_fault(const char *s)
{
	if (!strcmp(s, "prefix"))
		return TM_FAULT_PREFIX;
	if (!strcmp(s, "sync"))
		return TM_FAULT_SYNC_AHEAD;
	if (!strcmp(s, "order"))
		return TM_FAULT_SYNC_ORDER;
	tap_bail("unknown fault");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seed", 1, NULL, 's' }, { "events", 1, NULL, 'e' },
		{ "tags", 1, NULL, 't' }, { "ops", 1, NULL, 'o' },
		{ "mtu", 1, NULL, 'm' }, { "senders", 1, NULL, 'k' },
		{ "random", 0, NULL, 'r' }, { "fault", 1, NULL, 'f' },
		{ "total", 1, NULL, 'T' }, { "notm", 0, NULL, 'n' },
		{ "thresh", 1, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct dcfg c = { 2, 2, 0, 2, 0, 0, 5000, 0, 0 };
	uint64_t seed = 0, total = 2000000, bad;
	int have_seed = 0, ch, i, runs;
	size_t m;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 's': seed = strtoull(optarg, NULL, 0); have_seed = 1; break;
		case 'e': c.events = strtoull(optarg, NULL, 0); break;
		case 't': c.tags = (uint32_t)atoi(optarg); break;
		case 'o': c.ops = (uint32_t)atoi(optarg); break;
		case 'm': c.mtu = (uint32_t)atoi(optarg); break;
		case 'k': c.k = atoi(optarg); break;
		case 'r': c.random_card = 1; break;
		case 'f': c.faults = (unsigned)parse_fault(optarg); break;
		case 'T': total = strtoull(optarg, NULL, 0); break;
		case 'n': c.notm = 1; break;
		case 'h': c.thresh = strtoull(optarg, NULL, 0); break;
		default: tap_bail("bad option");
		}
	}
	if (c.k < 1 || c.k > MAXK)
		tap_bail("--senders out of range");
	if (have_seed) {
		bad = run_many(&c, seed, 1);
		tap_check(!bad, "differential seed %lu, %lu events",
			  (unsigned long)seed, (unsigned long)c.events);
		totals();
		return tap_done();
	}
	/* the CI matrix: each configuration gets total/len(matrix) events */
	for (m = 0; m < sizeof(matrix) / sizeof(matrix[0]); m++) {
		struct dcfg mc = matrix[m];
		char buf[256];

		runs = (int)((total / (sizeof(matrix) / sizeof(matrix[0])) +
			      mc.events - 1) / mc.events);
		if (runs < 1)
			runs = 1;
		bad = run_many(&mc, 1000 * (m + 1), runs);
		cfg_print(&mc, 1000 * (m + 1), buf, sizeof(buf));
		tap_check(!bad, "differential x%d: %s", runs, buf);
	}
	tap_diag("%lu events in total", (unsigned long)S.events);
	totals();
	tap_check(S.events >= total, "at least %lu events", (unsigned long)total);
	/* the test must notice a broken engine */
	for (i = 0; i < 3; i++) {
		static const unsigned f[] = { TM_FAULT_PREFIX, TM_FAULT_SYNC_AHEAD,
					      TM_FAULT_SYNC_ORDER };
		static const char *name[] = { "prefix rule ignored",
					      "sync count one ahead",
					      "queued ops carry the current count" };
		struct dcfg fc = { 1, 1, 0, 2, 0, f[i], 2000, 0, 0 };

		if (i == 2)
			fc.tags = 4;
		bad = run_many(&fc, 7000, 200);
		tap_check(bad != 0, "fault detected: %s (seed %lu)", name[i],
			  (unsigned long)(bad ? bad - 1 : 0));
	}
	{
		/* the prefix rule against receives held below the
		 * threshold, which are counted only when asked */
		struct dcfg fc = { 4, 2, 0, 2, 0, TM_FAULT_PREFIX, 2000, 0,
				   1024 };

		bad = run_many(&fc, 9000, 200);
		tap_check(bad != 0, "fault detected: prefix rule ignored, with offload_thresh (seed %lu)",
			  (unsigned long)(bad ? bad - 1 : 0));
	}
	return tap_done();
}

#endif /* !DIFF_EXHAUSTIVE */

#ifdef DIFF_EXHAUSTIVE
#include "diff_exhaustive.inc"
#endif
