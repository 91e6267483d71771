/*
 * mpi_wildcard.c - MPI_ANY_SOURCE / MPI_ANY_TAG receives interleaved with
 * specific ones, on the expected path (receive posted first) and the
 * unexpected path (message first), checked against MPI's matching rules.
 *
 * Rank 0 runs a script of steps, made up as it goes (from the seed):
 *   POST  rank 0 posts MPI_Irecv(source or ANY_SOURCE, tag or ANY_TAG);
 *   BATCH rank 0 tells sender s (a token on another communicator) to send
 *         a few messages (MPI_Isend / MPI_Issend, tags 1..3, sizes 0 B ..
 *         70 KB: eager and rendezvous), then waits until they are there:
 *         every receive they matched completes, and if the last one is
 *         unexpected (it then carries the batch's own tag), MPI_Iprobe
 *         finds it by that tag (a sender's messages are not overtaken, so
 *         the earlier ones are there as well).
 * Alongside, rank 0 keeps a reference matcher: the pending receives in
 * post order and, per sender, its unexpected messages in send order.
 *   - A message that arrives takes the earliest-posted pending receive
 *     that accepts it (MPI: a receive is not overtaken by a later one).
 *   - A receive posted takes, of the senders it accepts, a sender's
 *     earliest unexpected message it accepts (MPI: messages of one
 *     sender are not overtaken).  Between senders MPI sets no order (ob1
 *     scans its peers in rank order): when more than one sender has a
 *     candidate, rank 0 waits for the receive and checks that it got one
 *     of the candidates, then follows that choice.
 * So the message each receive gets is fixed (up to that one freedom), and
 * any difference is reported: the status source, tag and count and every
 * byte are checked.  At the end, pending receives get a message each and
 * leftover messages an exact receive each, so everything completes.
 *
 * Scripts: one written out by hand; rounds of receives posted and then
 * messages made for them (the expected path); random ones biased to the
 * expected path, to the unexpected path, and evenly mixed.
 */
#include "mpitest.h"

#define MAXMSGS 4096
#define MAXBATCH 8
#define MAXSIZE 70000

struct msg {
	int src, tag, seq, size;
	int recv;          /* the receive that gets it, -1 while unmatched */
};

struct rcv {
	int src, tag;
	int msg;           /* the message it must get, -1 while pending */
	int step;          /* when it was posted */
	int done;          /* completed and checked */
	MPI_Request req;
	void *buf;
};

static struct msg msgs[MAXMSGS];
static int nmsgs;
static struct rcv rcvs[MAXMSGS];
static int nrcvs;
static int pend[MAXMSGS], npend;          /* pending receives, post order */
static int unexp[64][MAXMSGS], nunexp[64]; /* per sender, send order */
static int next_seq[64];
static int nbatches, nsteps;
static int n_expected, n_unexpected, n_choice;
static MPI_Comm data, ctl;
static const char *script_name;

static const int msizes[] = { 0, 1, 16, 100, 255, 1000, 4096, 5000,
			      8192, 9000, 20000, MAXSIZE };
#define NMSIZES ((int)(sizeof(msizes) / sizeof(msizes[0])))

static int accepts(const struct rcv *r, const struct msg *m)
{
	return (r->src == MPI_ANY_SOURCE || r->src == m->src) &&
	       (r->tag == MPI_ANY_TAG || r->tag == m->tag);
}

static uint64_t msg_key(const struct msg *m)
{
	return ((uint64_t)m->src << 40) ^ ((uint64_t)m->seq << 8) ^ 0x5a;
}

static const char *spec(int src, int tag)
{
	static char b[4][48];
	static int i;
	char s[16], t[16];

	i = (i + 1) & 3;
	if (src == MPI_ANY_SOURCE)
		snprintf(s, sizeof(s), "ANY_SOURCE");
	else
		snprintf(s, sizeof(s), "%d", src);
	if (tag == MPI_ANY_TAG)
		snprintf(t, sizeof(t), "ANY_TAG");
	else
		snprintf(t, sizeof(t), "%d", tag);
	snprintf(b[i], sizeof(b[i]), "(%s, %s)", s, t);
	return b[i];
}

static const char *rdesc(int r)
{
	static char b[2][160];
	static int i;

	i ^= 1;
	snprintf(b[i], sizeof(b[i]), "%s: receive #%d %s posted at step %d",
		 script_name, r, spec(rcvs[r].src, rcvs[r].tag), rcvs[r].step);
	return b[i];
}

static const char *mdesc(int m)
{
	static char b[2][120];
	static int i;

	i ^= 1;
	snprintf(b[i], sizeof(b[i]),
		 "message %d (from rank %d, its #%d, tag %d, %d B)", m,
		 msgs[m].src, msgs[m].seq, msgs[m].tag, msgs[m].size);
	return b[i];
}

/* Waits for receive r and checks it got message rcvs[r].msg. */
static void complete(int r)
{
	struct rcv *q = &rcvs[r];
	const struct msg *m = &msgs[q->msg];
	char what[400];
	MPI_Status st;
	int rc, n;

	snprintf(what, sizeof(what), "%s must get %s", rdesc(r),
		 mdesc(q->msg));
	rc = mt_wait(&q->req, &st, what);
	q->done = 1;
	if (rc != MPI_SUCCESS) {
		mt_fail("%s: %s", what, mt_errstr(rc));
		return;
	}
	n = mt_count(&st, MPI_BYTE);
	if (st.MPI_SOURCE != m->src || st.MPI_TAG != m->tag ||
	    n != m->size) {
		mt_fail("%s: got source %d tag %d, %d B", what, st.MPI_SOURCE,
			st.MPI_TAG, n);
		return;
	}
	mt_check_data(q->buf, m->size, msg_key(m), what);
}

static void match(int r, int m)
{
	rcvs[r].msg = m;
	msgs[m].recv = r;
}

static void post(int src, int tag)
{
	int r = nrcvs++, cand[64], nc = 0;
	struct rcv *q = &rcvs[r];

	if (nrcvs > MAXMSGS)
		mt_abort("script too long");
	*q = (struct rcv){ .src = src, .tag = tag, .msg = -1, .step = nsteps };
	q->buf = mt_malloc(MAXSIZE);
	/*
	 * Room for the largest message: a wrong match is reported by the
	 * checks, and ob1 (which writes past a too-small buffer) cannot
	 * corrupt the heap.
	 */
	MT_CALL(MPI_Irecv(q->buf, MAXSIZE, MPI_BYTE, src, tag, data,
			  &q->req));
	/* each accepted sender's earliest accepted unexpected message */
	for (int s = 1; s < mt_size; s++) {
		if (src != MPI_ANY_SOURCE && src != s)
			continue;
		for (int j = 0; j < nunexp[s]; j++)
			if (accepts(q, &msgs[unexp[s][j]])) {
				cand[nc++] = j | s << 16;
				break;
			}
	}
	if (nc == 0) {
		pend[npend++] = r;
	} else {
		int pick = 0;

		if (nc > 1) {
			/* MPI leaves the choice open: see which it took */
			MPI_Status st;
			char what[300];
			int rc, f = 0;

			snprintf(what, sizeof(what),
				 "%s has %d senders' messages to choose from",
				 rdesc(r), nc);
			n_choice++;
			/* keep the request live: read where it came from */
			{
				double end = mt_now() + MT_HANG_SECONDS;

				do {
					rc = MPI_Request_get_status(q->req, &f,
								    &st);
					if (!f && mt_now() > end)
						mt_abort("%s: no completion",
							 what);
				} while (rc == MPI_SUCCESS && !f);
			}
			if (rc != MPI_SUCCESS) {
				mt_fail("%s: %s", what, mt_errstr(rc));
				st.MPI_SOURCE = -1;
			}
			for (pick = 0; pick < nc; pick++)
				if ((cand[pick] >> 16) == st.MPI_SOURCE)
					break;
			if (pick == nc) {
				mt_fail("%s: got a message from rank %d, which has no message it accepts",
					what, st.MPI_SOURCE);
				pick = 0;
			}
		}
		{
			int s = cand[pick] >> 16, j = cand[pick] & 0xffff;
			int m = unexp[s][j];

			match(r, m);
			memmove(&unexp[s][j], &unexp[s][j + 1],
				(nunexp[s] - j - 1) * sizeof(int));
			nunexp[s]--;
			n_unexpected++;
			if (nc > 1)
				complete(r);
		}
	}
	nsteps++;
}

/*
 * Sender s sends n messages with these tags and sizes; the last one (and
 * those with tag 0) gets the batch's own tag, unless keep_tags.
 */
static void batch_tags(int s, int n, const int *tags, const int *szs,
		       int keep_tags)
{
	int tok[2 + 2 * MAXBATCH], b = nbatches++, last = -1;

	if (nmsgs + n > MAXMSGS)
		mt_abort("script too long");
	tok[0] = b;
	tok[1] = n;
	for (int i = 0; i < n; i++) {
		int m = nmsgs++, j;

		msgs[m] = (struct msg){
			.src = s,
			.tag = !keep_tags && !tags[i] ? 100 + b : tags[i],
			.seq = next_seq[s]++,
			.size = szs[i],
			.recv = -1,
		};
		for (j = 0; j < npend; j++)
			if (accepts(&rcvs[pend[j]], &msgs[m]))
				break;
		if (!keep_tags && i == n - 1 && j == npend) {
			/* the last one waits unexpected: give it the batch's
			 * own tag, so that MPI_Iprobe can tell it is there */
			msgs[m].tag = 100 + b;
			for (j = 0; j < npend; j++)
				if (accepts(&rcvs[pend[j]], &msgs[m]))
					break;
		}
		tok[2 + 2 * i] = msgs[m].tag;
		tok[3 + 2 * i] = msgs[m].size;
		if (j < npend) {
			match(pend[j], m);
			memmove(&pend[j], &pend[j + 1],
				(npend - j - 1) * sizeof(int));
			npend--;
			n_expected++;
		} else {
			unexp[s][nunexp[s]++] = m;
		}
		last = m;
	}
	MT_CALL(MPI_Send(tok, 2 + 2 * n, MPI_INT, s, 0, ctl));
	/* wait until the batch is there */
	for (int m = last - n + 1; m <= last; m++)
		if (msgs[m].recv >= 0)
			complete(msgs[m].recv);
	if (msgs[last].recv < 0) {
		char what[300];

		snprintf(what, sizeof(what),
			 "%s: step %d: %s should be waiting, unexpected",
			 script_name, nsteps, mdesc(last));
		mt_wait_arrived(s, msgs[last].tag, data, MPI_STATUS_IGNORE,
				what);
	}
	nsteps++;
}

static void batch(int s, int n, const int *tags, const int *szs)
{
	batch_tags(s, n, tags, szs, 0);
}

static void sender_loop(void)
{
	MPI_Request *reqs = mt_malloc(MAXMSGS * sizeof(*reqs));
	void **bufs = mt_malloc(MAXMSGS * sizeof(*bufs));
	int tok[2 + 2 * MAXBATCH], nreq = 0;

	for (;;) {
		MT_CALL(MPI_Recv(tok, 2 + 2 * MAXBATCH, MPI_INT, 0, 0, ctl,
				 MPI_STATUS_IGNORE));
		if (tok[1] < 0)
			break;
		for (int i = 0; i < tok[1]; i++) {
			struct msg m = { .src = mt_rank, .tag = tok[2 + 2 * i],
					 .seq = next_seq[mt_rank]++,
					 .size = tok[3 + 2 * i] };

			if (nreq >= MAXMSGS)
				mt_abort("too many messages");
			bufs[nreq] = mt_malloc(m.size);
			mt_fill(bufs[nreq], m.size, msg_key(&m));
			if (m.seq % 4 == 3)
				MT_CALL(MPI_Issend(bufs[nreq], m.size,
						   MPI_BYTE, 0, m.tag, data,
						   &reqs[nreq]));
			else
				MT_CALL(MPI_Isend(bufs[nreq], m.size, MPI_BYTE,
						  0, m.tag, data,
						  &reqs[nreq]));
			nreq++;
		}
	}
	MT_CALL(mt_waitall(nreq, reqs, MPI_STATUSES_IGNORE,
			   "the script's sends"));
	for (int i = 0; i < nreq; i++)
		free(bufs[i]);
	free(reqs);
	free(bufs);
}

static void begin(const char *name)
{
	script_name = name;
	mt_set_phase("%s", name);
	for (int r = 0; r < nrcvs; r++)
		free(rcvs[r].buf);
	nmsgs = nrcvs = npend = nsteps = 0;
	n_expected = n_unexpected = n_choice = 0;
	memset(nunexp, 0, sizeof(nunexp));
}

/* Everything pending gets its counterpart; all complete; senders stop. */
static void finish_script(void)
{
	int stop[2] = { -1, -1 };
	int left = 0;

	/* one message per pending receive, in post order: each takes it */
	while (npend > 0) {
		const struct rcv *q = &rcvs[pend[0]];
		int s = q->src == MPI_ANY_SOURCE ? 1 + npend % (mt_size - 1) :
						   q->src;
		int tag = q->tag == MPI_ANY_TAG ? 1 : q->tag;
		int sz = 100, r = pend[0];

		/* a one-message batch with the receive's tag: it takes it */
		batch_tags(s, 1, &tag, &sz, 1);
		if (rcvs[r].msg < 0)
			mt_abort("script error: receive %d left", r);
	}
	/* one exact receive per leftover message, per sender in order */
	for (int s = 1; s < mt_size; s++)
		while (nunexp[s] > 0) {
			int m = unexp[s][0];

			post(s, msgs[m].tag);
			left++;
		}
	for (int r = 0; r < nrcvs; r++)
		if (!rcvs[r].done) {
			if (rcvs[r].msg < 0)
				mt_abort("script error: receive %d unmatched",
					 r);
			complete(r);
		}
	for (int s = 1; s < mt_size; s++)
		MT_CALL(MPI_Send(stop, 2, MPI_INT, s, 0, ctl));
}

/* The hand-written script: the classic cases, sender 1 (and 2 if any). */
static void fixed_script(void)
{
	int s2 = mt_size > 2 ? 2 : 1;
	int t1[] = { 2, 2, 1, 0 }, z1[] = { 10, 20000, 0, 30 };
	int t2[] = { 1, 1, 0 }, z2[] = { 5, 5, 9000 };
	int t3[] = { 3, 1, 2, 0 }, z3[] = { 0, 70000, 7, 1 };

	/* expected path: wildcards posted before specific ones */
	post(1, MPI_ANY_TAG);
	post(MPI_ANY_SOURCE, 2);
	post(1, 2);
	post(MPI_ANY_SOURCE, MPI_ANY_TAG);
	batch(1, 4, t1, z1);
	/* unexpected path: messages from two senders, then receives */
	batch(s2, 3, t2, z2);
	batch(1, 4, t3, z3);
	post(MPI_ANY_SOURCE, 1);
	post(1, MPI_ANY_TAG);
	post(MPI_ANY_SOURCE, MPI_ANY_TAG);
	post(s2, 1);
	/* a specific receive after a wildcard that takes its message */
	post(MPI_ANY_SOURCE, MPI_ANY_TAG);
	post(1, 2);
}

/*
 * A random script: p_post is the chance (percent) that a step is a POST;
 * with aim, most messages are made for a pending receive (a tag that one
 * of them accepts), so that they meet posted receives (the expected path)
 * and wildcards posted earlier compete with specific receives posted later.
 */
static void random_script(uint64_t *rng, int nstep, int p_post, int aim)
{
	for (int i = 0; i < nstep; i++) {
		if ((int)(mt_rand(rng) % 100) < p_post) {
			int src = mt_rand(rng) % 100 < 35 ?
					  MPI_ANY_SOURCE :
					  1 + (int)(mt_rand(rng) %
						    (mt_size - 1));
			int t = mt_rand(rng) % 100;
			int tag = t < 35 ? MPI_ANY_TAG :
				  t < 90 ? 1 + (int)(mt_rand(rng) % 3) :
					   100 + nbatches +
						   (int)(mt_rand(rng) % 3);

			post(src, tag);
		} else {
			int s = 1 + (int)(mt_rand(rng) % (mt_size - 1));
			int n = 1 + (int)(mt_rand(rng) % 5);
			int tags[5], szs[5];

			for (int k = 0; k < n; k++) {
				tags[k] = 1 + (int)(mt_rand(rng) % 3);
				szs[k] = msizes[mt_rand(rng) % NMSIZES];
				if (aim && npend > 0 &&
				    mt_rand(rng) % 100 < 80) {
					const struct rcv *q =
						&rcvs[pend[mt_rand(rng) %
							   npend]];

					/* not a batch's own tag (100 + b):
					 * the probe that tells batch b is
					 * there must find its last message,
					 * not an older one with that tag */
					if ((q->src == s ||
					     q->src == MPI_ANY_SOURCE) &&
					    q->tag != MPI_ANY_TAG &&
					    q->tag < 100)
						tags[k] = q->tag;
				}
			}
			batch(s, n, tags, szs);
		}
	}
}

/*
 * Expected-path script: rounds of a few receives posted (wildcards and
 * specific ones mixed), then messages made for them until none is left
 * pending: each message meets the earliest posted receive that accepts
 * it, which is often not the one it was made for.
 */
static void expected_script(uint64_t *rng, int rounds)
{
	for (int round = 0; round < rounds; round++) {
		int k = 1 + (int)(mt_rand(rng) % 8);

		for (int i = 0; i < k; i++) {
			int src = mt_rand(rng) % 100 < 40 ?
					  MPI_ANY_SOURCE :
					  1 + (int)(mt_rand(rng) %
						    (mt_size - 1));
			int tag = mt_rand(rng) % 100 < 40 ?
					  MPI_ANY_TAG :
					  1 + (int)(mt_rand(rng) % 3);

			post(src, tag);
		}
		for (int tries = 0; npend > 0 && tries < 20; tries++) {
			const struct rcv *q =
				&rcvs[pend[mt_rand(rng) % npend]];
			int s = q->src != MPI_ANY_SOURCE ?
					q->src :
					1 + (int)(mt_rand(rng) % (mt_size - 1));
			int n = 1 + (int)(mt_rand(rng) % 4), tags[4], szs[4];

			for (int j = 0; j < n; j++) {
				const struct rcv *p =
					&rcvs[pend[mt_rand(rng) % npend]];

				tags[j] = p->tag != MPI_ANY_TAG &&
							  (p->src == s ||
							   p->src ==
								   MPI_ANY_SOURCE) ?
						  p->tag :
						  1 + (int)(mt_rand(rng) % 3);
				szs[j] = msizes[mt_rand(rng) % NMSIZES];
			}
			batch(s, n, tags, szs);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nstep, p_post, aim;
	} kinds[] = {
		{ "random script, mostly expected", 150, 70, 1 },
		{ "random script, mostly unexpected", 150, 25, 0 },
		{ "random script, mixed", 200, 50, 1 },
	};
	uint64_t rng;
	int te = 0, tu = 0, tc = 0;

	mt_init(&argc, &argv, "mpi_wildcard", 2);
	rng = mt_seed();
	if (mt_size > 64)
		mt_abort("at most 64 ranks");
	data = mt_dup(MPI_COMM_WORLD);
	ctl = mt_dup(MPI_COMM_WORLD);

	for (int k = -2; k < 3; k++) {
		const char *name = k == -2 ? "hand-written script" :
				   k == -1 ? "expected-path script" :
					     kinds[k].name;
		int wild_src = 0, wild_tag = 0;

		mt_set_phase("%s", name);
		if (mt_rank == 0) {
			begin(name);
			if (k == -2)
				fixed_script();
			else if (k == -1)
				expected_script(&rng, 40);
			else
				random_script(&rng, kinds[k].nstep,
					      kinds[k].p_post, kinds[k].aim);
			for (int r = 0; r < nrcvs; r++) {
				wild_src += rcvs[r].src == MPI_ANY_SOURCE;
				wild_tag += rcvs[r].tag == MPI_ANY_TAG;
			}
			finish_script();
		} else {
			sender_loop();
		}
		MT_CALL(MPI_Barrier(data));
		mt_checked("%s: %d receives (%d ANY_SOURCE, %d ANY_TAG), %d messages: %d met a posted receive, %d arrived unexpected (%d with a choice of senders)",
			   name, nrcvs, wild_src, wild_tag, nmsgs, n_expected,
			   n_unexpected, n_choice);
		te += n_expected;
		tu += n_unexpected;
		tc += n_choice;
	}
	mt_checked("in all %d matches on the expected path, %d on the unexpected path (%d with a choice of senders), each the pair MPI's order rules demand",
		   te, tu, tc);
	MPI_Comm_free(&data);
	MPI_Comm_free(&ctl);
	return mt_finish();
}
