/*
 * diff_app.c - the application side of the differential test: the events
 * a schedule draws at node 0 and the senders (posts, cancels, probes,
 * matched probes, sends, card steps) and the engine's callbacks, which
 * check each completion's bytes and log what the reference replays
 * (diff.h).
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "diff.h"

/* ---- callbacks ------------------------------------------------------- */

void arrival_hook(void *arg, const struct tm_arrival *a)
{
	struct ev e = { .stamp = a->stamp, .type = EV_ARR };

	(void)arg;
	/* every engine has this hook; node 0's own messages to the others
	 * (src 0) arrive at their engines, whose clocks are not node 0's */
	if (a->env.src == 0)
		return;
	e.node = a->peer < EU_MAXN ? S.inv_peer[a->peer] : -1;
	e.seq = a->send_seq;
	e.ctx = (int)a->env.ctx;
	e.src = a->env.src;
	e.tag = a->env.tag;
	log_ev(&e);
}

static void recv_cb(struct tm_recv *r)
{
	struct drecv *d = (struct drecv *)r;
	struct dsend *s;
	uint8_t *b = rbuf(d->slot);
	size_t i;

	if (d->done++) {
		fail("recv %d completed twice", d->id);
		return;
	}
	S.outstanding--;
	d->data_ok = 1;
	if (r->status == TM_REQ_CANCELLED) {
		struct ev e = { .stamp = r->cancel_stamp, .type = EV_CANCEL,
				.id = d->id };

		log_ev(&e);
	} else {
		s = r->peer < EU_MAXN ? send_of(S.inv_peer[r->peer], r->send_seq)
				      : NULL;
		if (!s) {
			fail("recv %d: unknown message peer %u seq %u", d->id,
			     r->peer, r->send_seq);
		} else {
			for (i = 0; i < r->recv_len && i < d->len; i++)
				if (b[i] != pattern(s->node, s->s.seq, i))
					d->data_ok = 0;
		}
	}
	for (i = d->len; i < d->len + GUARD; i++)
		if (b[i] != 0xa5)
			d->data_ok = 0;
	if (!d->data_ok)
		fail("recv %d: data bytes wrong or written past the buffer",
		     d->id);
	S.rslot_free[S.nrfree++] = d->slot;
}

static void send_cb(struct tm_send *s)
{
	struct dsend *d = (struct dsend *)s;

	if (d->done++) {
		/* a cancelled completed send reports its outcome once more */
		if (!d->sc_rearm || d->done != 2)
			fail("send %d/%u completed twice", d->node, s->seq);
		return;
	}
	if (s->status != TM_REQ_OK &&
	    !(s->status == TM_REQ_CANCELLED && d->sc_asked))
		fail("send %d/%u failed", d->node, s->seq);
	S.sslot_free[d->node][S.nsfree[d->node]++] = d->slot;
}

/* ---- application events ---------------------------------------------- */

static const size_t rlens[] = { 40, 100, 1024, 1500, 3000, 20000, 32768,
				40, 100, 1024, 0, 8 };
static const size_t slens[] = { 0, 1, 50, 1000, 1024, 2000, 6000, 30000 };
static const int tags[] = { 0, 1, 2, -3 };

static struct drecv *new_recv(int slot, size_t len)
{
	struct drecv *d = calloc(1, sizeof(*d));

	if (!d)
		tap_bail("out of memory");
	S.recvs = grow(S.recvs, &S.caprecvs, S.nrecvs + 1, sizeof(*S.recvs));
	d->id = S.nrecvs;
	S.recvs[S.nrecvs++] = d;
	d->slot = slot;
	d->len = len;
	d->r.cb = recv_cb;
	/* the engine's part as a reused request leaves it: the engine may
	 * read nothing there it did not write (MPI recycles requests) */
	memset(&d->r.priv, 0xff, sizeof(d->r.priv));
	memset(rbuf(slot), 0xa5, len + GUARD);
	S.outstanding++;
	return d;
}

void post_recv_env(int ctx, int src, int tag, size_t len)
{
	struct drecv *d;
	struct ev e = { .type = EV_POST };

	if (!S.nrfree)
		return;
	d = new_recv(S.rslot_free[--S.nrfree], len);
	d->ctx = ctx;
	d->src = src;
	d->tag = tag;
	if (tm_engine_irecv(S.w.node[0].eng, &d->r, (uint32_t)ctx, src, tag,
			    rbuf(d->slot), len, S.w.node[0].mr) != TM_OK)
		fail("irecv failed");
	e.stamp = d->r.post_stamp;
	e.id = d->id;
	log_ev(&e);
}

void ev_post(void)
{
	int src = choose(4) == 0 ? TM_ANY_SRC : 1 + choose(S.k);
	int tag = choose(4) == 0 ? TM_ANY_TAG : tags[choose(4)];

	post_recv_env(choose(2), src, tag, rlens[choose(choose(4) ? 10 : 12)]);
}

void ev_cancel(void)
{
	struct drecv *d;
	int i, tries;

	for (tries = 0; tries < 4 && S.nrecvs; tries++) {
		i = S.nrecvs - 1 - choose(S.nrecvs < 64 ? S.nrecvs : 64);
		d = S.recvs[i];
		if (d->done || d->cancel_req || d->mrecv)
			continue;
		d->cancel_req = 1;
		tm_engine_cancel_recv(S.w.node[0].eng, &d->r);
		return;
	}
}

void ev_probe(int claim)
{
	struct tm_probe_info pi;
	struct tm_msg *m = NULL;
	struct ev e = { .type = claim ? EV_CLAIM : EV_PROBE };
	struct drecv *d;
	int rc;

	if (claim && !S.nrfree)
		return;
	e.ctx = choose(2);
	e.src = choose(3) == 0 ? TM_ANY_SRC : 1 + choose(S.k);
	e.tag = choose(3) == 0 ? TM_ANY_TAG : tags[choose(4)];
	if (claim)
		rc = tm_engine_improbe(S.w.node[0].eng, (uint32_t)e.ctx, e.src,
				       e.tag, &m, &pi);
	else
		rc = tm_engine_iprobe(S.w.node[0].eng, (uint32_t)e.ctx, e.src,
				      e.tag, &pi);
	e.stamp = pi.stamp;
	e.found = rc == TM_OK;
	if (e.found) {
		e.node = S.inv_peer[pi.peer];
		e.seq = pi.send_seq;
	}
	if (claim && e.found) {
		d = new_recv(S.rslot_free[--S.nrfree], rlens[choose(choose(4) ? 10 : 12)]);
		d->mrecv = 1;
		d->claim_node = e.node;
		d->claim_seq = e.seq;
		e.id = d->id;
		log_ev(&e);
		tm_engine_imrecv(S.w.node[0].eng, &d->r, m, rbuf(d->slot),
				 d->len, S.w.node[0].mr);
		return;
	}
	log_ev(&e);
}

void send_env(int node, int ctx, int tag, size_t len, unsigned flags)
{
	struct dsend *d;
	uint8_t *b;
	size_t i;

	if (!S.nsfree[node])
		return;
	d = calloc(1, sizeof(*d));
	if (!d)
		tap_bail("out of memory");
	memset(&d->s.priv, 0xff, sizeof(d->s.priv)); /* as in new_recv */
	d->node = node;
	d->slot = S.sslot_free[node][--S.nsfree[node]];
	d->len = len;
	d->ctx = ctx;
	d->tag = tag;
	d->s.cb = send_cb;
	S.sends[node] = grow(S.sends[node], &S.capsends[node],
			     S.nsends[node] + 1, sizeof(*S.sends[node]));
	S.sends[node][S.nsends[node]++] = d;
	/* the engine assigns the seq; the pattern needs it first */
	d->s.seq = (S.seq_base[node] + (uint32_t)S.nsends[node] - 1) &
		   TM_APP_SEQ_MASK;
	b = sbuf(node, d->slot);
	for (i = 0; i < len; i++)
		b[i] = pattern(node, d->s.seq, i);
	if (tm_engine_isend(S.w.node[node].eng, &d->s, S.w.node[node].peer[0],
			    (uint32_t)ctx, node, tag, b, len,
			    S.w.node[node].mr, flags) != TM_OK)
		fail("isend failed");
	if (d->s.seq != ((S.seq_base[node] + (uint32_t)S.nsends[node] - 1) &
			 TM_APP_SEQ_MASK))
		fail("send seq %u not the expected one", d->s.seq);
}

void ev_send(void)
{
	int node = 1 + choose(S.k);

	send_env(node, choose(2), tags[choose(4)], slens[choose(8)],
		 choose(5) == 0 ? TM_SEND_SYNC : 0);
}

/* One unit of card work somewhere; returns whether anything moved. */
int ev_card(void)
{
	int node = choose(3) ? 0 : 1 + choose(S.k);
	int kind = choose(4);

	return softhca_step(S.w.node[node].dev->ctx, (enum softhca_work)kind,
			    SOFTHCA_ANY_QP);
}
