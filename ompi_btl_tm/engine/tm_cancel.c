/*
 * tm_cancel.c - MPI_Cancel of sends: a request/reply exchange with the
 * receiver, who alone knows whether the message was matched.
 *
 * Contract (argument: doc/DESIGN.md, "Send cancel"):
 *  - a send still queued on its peer (never posted) is withdrawn here,
 *    at once: nothing of it reached the wire;
 *  - a send whose FIN/ACK came was matched: too late, nothing is asked;
 *  - otherwise the sender posts a CANCEL_REQ naming (its QP, seq) behind
 *    the send on the same QP.  RC delivers in order, so the receiver has
 *    processed the message's arrival before the REQ: the message is either
 *    still in the unexpected queue (removed, never delivered: DONE), or was
 *    matched by the card, by a software receive, by a claim whose DEL is
 *    outstanding, or by a matched probe (LATE: it is delivered);
 *  - the sender keeps the send waiting until the CANCEL_REP (a pending
 *    send) or re-arms it (an eager send that had completed when posted),
 *    so the receiver may still read a rendezvous buffer meanwhile; the
 *    keepalive covers the wait, and a peer that dies fails the send
 *    TM_REQ_ERROR: one outcome on each side;
 *  - a REP the receiver cannot allocate is owed (cancel_owed) and sent
 *    from tme_flush_work, in order; more owed than TM_CANCEL_OWED_MAX stops
 *    the engine (loud: the sender would otherwise wait for good).
 * Owns: tm_send.cflags S_CANCEL_*, cancel_owed*, the scancel_* statistics.
 */
#include <stdlib.h>
#include "engine/tm_engine_priv.h"

/* Both CANCEL messages are a bare header with nothing to do at their
 * completion, so they travel as TX_ACK items (and share its fault site). */
static int queue_ctrl(struct tm_engine *eng, uint32_t peer, uint32_t ctrl,
		      uint32_t seq, uint64_t tag)
{
	struct tm_tx *tx = tme_tx_new(eng, TX_ACK, peer);

	if (!tx)
		return TM_ERR_NO_MEMORY;
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 (ctrl << TM_APP_CTRL_SHIFT) | (seq & TM_APP_SEQ_MASK), tag);
	tx->hdr_len = TMH_LEN;
	tme_tx_queue(eng, tx);
	return TM_OK;
}

/* ---- sender side ---------------------------------------------------- */

/* s is queued (never posted): take it off its peer's queue, or 0. */
static int withdraw_queued(struct tm_engine *eng, struct tm_send *s)
{
	struct tm_tx *tx;

	ucs_list_for_each(tx, &eng->peers[s->peer]->txq, link) {
		if (tx->send != s)
			continue;
		ucs_list_del(&tx->link);
		eng->tx_queued--;
		tme_tx_free(tx);
		s->status = TM_REQ_CANCELLED;
		s->waiting &= ~S_WAIT_CQE;
		tme_wait_reply_end(eng, s);
		tme_send_try_done(eng, s);
		return 1;
	}
	return 0;
}

static int cancel_send(struct tm_engine *eng, struct tm_send *s)
{
	int rearm, rc;

	if (s->peer >= eng->npeers)
		return TM_ERR_INVALID;
	if (s->cflags & S_CANCEL_ASKED)
		return TM_ERR_NOT_FOUND;
	if (s->waiting && withdraw_queued(eng, s)) {
		eng->st.scancel_req++;
		eng->st.scancel_ok++;
		return TM_OK;
	}
	if (!s->waiting && (s->status != TM_REQ_OK || (s->cflags & S_REPLIED)))
		return TM_ERR_NOT_FOUND; /* failed, cancelled, or matched */
	if (eng->peers[s->peer]->dead)
		return TM_ERR_NOT_FOUND; /* pending ones already failed */
	/* pending and posted: only a rendezvous or synchronous send waits
	 * for a reply, and that wait covers the REP too */
	if (s->waiting && !(s->waiting & S_WAIT_REPLY))
		return TM_ERR_NOT_FOUND;
	rearm = !s->waiting;
	if (rearm) {
		if (tme_wait_reply_start(eng, s) != TM_OK)
			return TM_ERR_NO_MEMORY;
		eng->sends_waiting++;
	}
	rc = queue_ctrl(eng, s->peer, TM_CTRL_CANCEL_REQ, s->seq, 0);
	if (rc != TM_OK) {
		if (rearm) {
			tme_wait_reply_end(eng, s);
			eng->sends_waiting--;
		}
		return rc;
	}
	s->cflags |= S_CANCEL_ASKED | (rearm ? S_CANCEL_REARMED : 0);
	eng->st.scancel_req++;
	return TM_OK;
}

int tm_engine_cancel_send(struct tm_engine *eng, struct tm_send *s)
{
	int rc;

	if (eng->fatal)
		return eng->fatal;
	tme_drain(eng);
	rc = cancel_send(eng, s);
	tme_flush_work(eng);
	tme_fire_done(eng);
	return rc;
}

void tme_on_cancel_rep(struct tm_engine *eng, uint32_t peer, uint32_t app,
		       uint64_t tag)
{
	struct tm_send *s = tm_engine_find_send(eng, peer,
						app & TM_APP_SEQ_MASK);

	if (tag != TM_CANCEL_DONE && tag != TM_CANCEL_LATE) {
		eng->st.malformed++;
		return;
	}
	if (tag == TM_CANCEL_LATE)
		eng->st.scancel_late++;
	/* a pending send whose FIN/ACK beat the LATE reply is gone already */
	if (!s || !(s->cflags & S_CANCEL_ASKED)) {
		if (tag == TM_CANCEL_DONE)
			eng->st.malformed++; /* withdrawn, yet nobody asked */
		return;
	}
	s->cflags &= ~S_CANCEL_ASKED;
	if (tag == TM_CANCEL_DONE) {
		eng->st.scancel_ok++;
		s->status = TM_REQ_CANCELLED;
	} else {
		s->cflags |= S_REPLIED;
		if (!(s->cflags & S_CANCEL_REARMED))
			return; /* its FIN/ACK is still to come */
	}
	s->cflags &= ~S_CANCEL_REARMED;
	tme_wait_reply_end(eng, s);
	tme_send_try_done(eng, s);
}

/* ---- receiver side -------------------------------------------------- */

static void owe_rep(struct tm_engine *eng, uint32_t peer, uint32_t seq,
		    uint64_t outcome)
{
	if (eng->cancel_owed_tail - eng->cancel_owed_head >= TM_CANCEL_OWED_MAX) {
		tme_engine_fatal(eng, TM_ERR_NO_MEMORY);
		return;
	}
	eng->cancel_owed[eng->cancel_owed_tail++ % TM_CANCEL_OWED_MAX] =
		((uint64_t)peer << 32) | (outcome << 24) | seq;
	tme_pend(eng, TM_PEND_WORK);
}

int tme_cancel_pay_owed(struct tm_engine *eng)
{
	uint64_t e;
	int n = 0;

	while (eng->cancel_owed_head != eng->cancel_owed_tail) {
		e = eng->cancel_owed[eng->cancel_owed_head % TM_CANCEL_OWED_MAX];
		if (queue_ctrl(eng, (uint32_t)(e >> 32), TM_CTRL_CANCEL_REP,
			       (uint32_t)e & TM_APP_SEQ_MASK,
			       (e >> 24) & 0xff) != TM_OK)
			break;
		eng->cancel_owed_head++;
		n++;
	}
	return n;
}

/*
 * The message a peer's send (seq) left here, if it is still unexpected.
 * A linear look at every message held: cancels are rare, and a message
 * outside the queue (claimed, probed) must be found to say LATE anyway.
 */
void tme_on_cancel_req(struct tm_engine *eng, uint32_t peer, uint32_t app)
{
	uint32_t seq = app & TM_APP_SEQ_MASK;
	uint64_t outcome = TM_CANCEL_LATE;
	struct tm_withdrawal w;
	struct tm_msg *m;

	if (peer >= eng->npeers) {
		eng->st.malformed++;
		return;
	}
	/* the decision's linearisation point, for the differential test */
	w.stamp = eng->clock++;
	ucs_list_for_each(m, &eng->all_msgs, all) {
		if (m->peer != peer || (m->app & TM_APP_SEQ_MASK) != seq)
			continue;
		if (m->in_uq) {
			tm_mq_msg_remove(&eng->mq, &m->mq);
			ucs_list_del(&m->all);
			tme_msg_free(eng, m);
			outcome = TM_CANCEL_DONE;
			eng->st.scancel_served++;
		}
		break;
	}
	if (eng->test.cancel_hook) {
		w.peer = peer;
		w.send_seq = seq;
		w.withdrawn = outcome == TM_CANCEL_DONE;
		eng->test.cancel_hook(eng->test.hook_arg, &w);
	}
	if (eng->cancel_owed_head != eng->cancel_owed_tail ||
	    queue_ctrl(eng, peer, TM_CTRL_CANCEL_REP, seq, outcome) != TM_OK)
		owe_rep(eng, peer, seq, outcome);
}
