/*
 * demo_receiver.c - softhca_demo's receiver: adds the tagged entries,
 * checks every completion against the message table (which entry, which
 * flags, the payload bytes, the order the card decided), answers the
 * unexpected message with a TAG_SYNC and prints the card's counters
 * (contract: demo.h).
 */
#include <endian.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "softhca/softhca.h"
#include "demo.h"

/* The receiver's tagged buffers. */
struct entry {
	uint64_t tag;
	uint64_t mask;
	uint32_t size;
	int msg;		/* message expected to land here */
	uint8_t *buf;
	uint32_t handle;
	unsigned int seen;	/* union of wc flags */
	uint32_t data_len;
	bool done;
};

static struct entry entries[] = {
	{ .tag = 0x100, .mask = ~0ULL, .size = 256, .msg = 0 },
	{ .tag = TAG_7_ANY, .mask = MASK_HI, .size = 256, .msg = 3 },
	{ .tag = 0x101, .mask = ~0ULL, .size = 16384, .msg = 4 },
	{ .tag = 0x102, .mask = ~0ULL, .size = 65536, .msg = 5 },
};

static void add_entries(struct proc *p)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(entries); i++) {
		struct entry *e = &entries[i];
		struct ibv_sge sge;
		struct ibv_ops_wr wr;

		e->buf = arena_alloc(p, e->size);
		sge.addr = (uintptr_t)e->buf;
		sge.length = e->size;
		sge.lkey = p->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WRID_OP + i;
		wr.opcode = IBV_WR_TAG_ADD;
		wr.flags = IBV_OPS_TM_SYNC | IBV_OPS_SIGNALED;
		wr.tm.unexpected_cnt = 0;
		wr.tm.add.recv_wr_id = WRID_TAGGED + i;
		wr.tm.add.sg_list = &sge;
		wr.tm.add.num_sge = 1;
		wr.tm.add.tag = e->tag;
		wr.tm.add.mask = e->mask;
		post_op(p, &wr, "ibv_post_srq_ops(TAG_ADD)");
		e->handle = wr.tm.handle;
		wait_op(p, wr.wr_id, IBV_WC_TM_ADD);
		say(p, "TAG_ADD entry %u: tag 0x%llx mask 0x%llx, %u bytes, handle %u",
		    i, (unsigned long long)e->tag,
		    (unsigned long long)e->mask, e->size, e->handle);
	}
}

static int first_seen[NUM_MSGS];
static int arrivals;

static void arrived(unsigned int m)
{
	if (!first_seen[m])
		first_seen[m] = ++arrivals;
}

static void tagged_cqe(struct proc *p, const struct cqe *c)
{
	unsigned int i = c->wr_id - WRID_TAGGED;
	struct entry *e = &entries[i];
	const struct msg *mg = &msgs[e->msg];
	size_t bad;

	if (c->opcode != IBV_WC_TM_RECV) {
		fail(p, "entry %u: opcode %s, wanted TM_RECV", i,
		     opcode_str(c->opcode));
		return;
	}
	if (c->status != IBV_WC_SUCCESS) {
		fail(p, "entry %u: status %s", i, ibv_wc_status_str(c->status));
		e->done = true;
		return;
	}
	if (c->flags & IBV_WC_TM_MATCH) {
		if (e->seen & IBV_WC_TM_MATCH)
			fail(p, "entry %u matched twice", i);
		if (c->tm.tag != mg->tag || c->tm.priv != (uint32_t)e->msg)
			fail(p, "entry %u: tm_info tag 0x%llx priv %u, wanted 0x%llx %d",
			     i, (unsigned long long)c->tm.tag, c->tm.priv,
			     (unsigned long long)mg->tag, e->msg);
		arrived(e->msg);
	}
	if (c->flags & IBV_WC_TM_DATA_VALID) {
		if (!((e->seen | c->flags) & IBV_WC_TM_MATCH))
			fail(p, "entry %u: DATA_VALID before MATCH", i);
		if (c->byte_len != mg->len)
			fail(p, "entry %u: %u bytes, wanted %u", i,
			     c->byte_len, mg->len);
		bad = check(e->buf, e->msg, mg->len);
		if (bad != mg->len)
			fail(p, "entry %u: payload differs at byte %zu", i, bad);
		else
			say(p, "msg %d: %u bytes in tagged entry %u, payload ok (%s)",
			    e->msg, mg->len, i,
			    (e->seen & IBV_WC_TM_MATCH) ?
			    "MATCH then DATA_VALID" : "one completion");
		e->done = true;
	}
	e->seen |= c->flags;
}

/* Returns 1 if it was the unexpected message (software now holds it). */
static int plain_cqe(struct proc *p, const struct cqe *c)
{
	int b = c->wr_id - WRID_PLAIN;
	const struct ibv_tmh *t = (const void *)p->plain[b];
	unsigned int m;
	size_t bad;
	int unexp = 0;

	if (c->status != IBV_WC_SUCCESS) {
		fail(p, "plain buffer %d: status %s", b,
		     ibv_wc_status_str(c->status));
		goto repost;
	}
	if (c->byte_len < sizeof(*t)) {
		fail(p, "plain buffer %d: %u bytes, no TMH", b, c->byte_len);
		goto repost;
	}
	m = be32toh(t->app_ctx);
	if (m >= NUM_MSGS) {
		fail(p, "plain buffer %d: app_ctx %u", b, m);
		goto repost;
	}
	if (c->opcode == IBV_WC_TM_NO_TAG) {
		if (msgs[m].kind != MSG_NO_TAG || t->opcode != IBV_TMH_NO_TAG)
			fail(p, "TM_NO_TAG completion for msg %u", m);
	} else if (c->opcode == IBV_WC_TM_RECV || c->opcode == IBV_WC_RECV) {
		/* Unexpected: the whole message, TMH included. */
		if (c->flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID))
			fail(p, "unexpected arrival with MATCH/DATA_VALID");
		if (msgs[m].kind != MSG_EAGER || msgs[m].entry >= 0 ||
		    t->opcode != IBV_TMH_EAGER ||
		    be64toh(t->tag) != msgs[m].tag)
			fail(p, "msg %u arrived unexpected", m);
		else
			unexp = 1;
		arrived(m);
	} else {
		fail(p, "plain buffer %d: opcode %s", b, opcode_str(c->opcode));
		goto repost;
	}
	if (c->byte_len != sizeof(*t) + msgs[m].len) {
		fail(p, "msg %u: %u bytes in plain buffer, wanted %zu", m,
		     c->byte_len, sizeof(*t) + msgs[m].len);
	} else {
		bad = check((const uint8_t *)(t + 1), m, msgs[m].len);
		if (bad != msgs[m].len)
			fail(p, "msg %u: payload differs at byte %zu", m, bad);
		else
			say(p, "msg %u: %s tag 0x%llx, %u bytes in plain buffer %d, payload ok",
			    m, unexp ? "unexpected" : "NO_TAG",
			    (unsigned long long)be64toh(t->tag), msgs[m].len,
			    b);
	}
repost:
	post_plain(p, b);
	return unexp;
}


/* What the receiver has had so far, and whether it is all there. */
struct rx_state {
	int plain_done, plain_want, sw_unexpected, synced;
	int sync_pending;
};

static bool rx_complete(const struct rx_state *s)
{
	unsigned int i, entries_done;

	for (entries_done = 0, i = 0; i < ARRAY_SIZE(entries); i++)
		entries_done += entries[i].done;
	return entries_done == ARRAY_SIZE(entries) &&
	       s->plain_done == s->plain_want &&
	       s->synced == s->sw_unexpected && !s->sync_pending;
}

static void rx_cqe(struct proc *p, struct rx_state *s, const struct cqe *e)
{
	if (e->wr_id >= WRID_TAGGED &&
	    e->wr_id < WRID_TAGGED + ARRAY_SIZE(entries)) {
		tagged_cqe(p, e);
	} else if (e->wr_id >= WRID_PLAIN &&
		   e->wr_id < WRID_PLAIN + NUM_PLAIN) {
		s->sw_unexpected += plain_cqe(p, e);
		s->plain_done++;
	} else if (e->wr_id == WRID_OP + 100) {
		if (e->opcode != IBV_WC_TM_SYNC ||
		    e->status != IBV_WC_SUCCESS)
			fail(p, "TAG_SYNC: %s %s",
			     opcode_str(e->opcode),
			     ibv_wc_status_str(e->status));
		s->sync_pending = 0;
	} else {
		fail(p, "stray completion wr_id 0x%llx",
		     (unsigned long long)e->wr_id);
	}
}

/* Software has handled the unexpected message: tell the card. */
static void rx_sync(struct proc *p, struct rx_state *s)
{
	struct ibv_ops_wr wr;

	if (s->sw_unexpected <= s->synced || s->sync_pending)
		return;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID_OP + 100;
	wr.opcode = IBV_WR_TAG_SYNC;
	wr.flags = IBV_OPS_TM_SYNC | IBV_OPS_SIGNALED;
	wr.tm.unexpected_cnt = s->sw_unexpected;
	post_op(p, &wr, "ibv_post_srq_ops(TAG_SYNC)");
	say(p, "TAG_SYNC unexpected_cnt %d", s->sw_unexpected);
	s->synced = s->sw_unexpected;
	s->sync_pending = 1;
}

static void receive_all(struct proc *p)
{
	struct rx_state s = { 0 };
	struct cqe c[16];
	unsigned int m;
	double start;
	int n, k;

	for (m = 0; m < NUM_MSGS; m++)
		if (msgs[m].entry < 0)
			s.plain_want++;
	start = now();
	while (!rx_complete(&s)) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (k = 0; k < n; k++)
			rx_cqe(p, &s, &c[k]);
		rx_sync(p, &s);
		check_timeout(p, start, "the messages");
	}
}

/* Matches and unexpected arrivals come in the order they were sent;
 * every entry saw MATCH and DATA_VALID. */
static void check_verdicts(struct proc *p)
{
	unsigned int i, m;
	int k;

	for (m = 0, k = 0; m < NUM_MSGS; m++) {
		if (msgs[m].kind == MSG_NO_TAG)
			continue;
		if (first_seen[m] <= k)
			fail(p, "msg %u: not seen, or decided out of order", m);
		k = first_seen[m];
	}
	for (i = 0; i < ARRAY_SIZE(entries); i++) {
		unsigned int want = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;

		if ((entries[i].seen & want) != want)
			fail(p, "entry %u: flags 0x%x, wanted MATCH and DATA_VALID",
			     i, entries[i].seen);
	}
}

static void print_card_stats(struct proc *p)
{
	struct softhca_stats st;

	if (softhca_query_stats(p->ctx, &st) == 0)
		say(p, "card: %llu matched, %llu unexpected, %llu receiver-not-ready waits, %llu rendezvous reads (%llu process_vm_readv, %llu copy), unexpected count hw %u sw %u",
		    (unsigned long long)st.matched,
		    (unsigned long long)st.unexpected,
		    (unsigned long long)st.rnr_waits,
		    (unsigned long long)st.card_reads,
		    (unsigned long long)st.cma_reads,
		    (unsigned long long)st.copy_reads,
		    st.hw_unexpected_cnt, st.sw_unexpected_cnt);
}

int receiver(struct proc *p)
{
	char tok;

	setup(p, false);
	connect_qp(p);
	add_entries(p);

	tok = 'R';
	pipe_write(p, &tok, 1);
	receive_all(p);
	check_verdicts(p);
	print_card_stats(p);

	/* The sender is done when it has its FIN; then we can go. */
	drain_until_token(p, "the sender to finish");
	tok = 'B';
	pipe_write(p, &tok, 1);

	teardown(p);
	say(p, "%s", p->errors ? "FAILED" : "done");
	return p->errors ? 1 : 0;
}
