/*
 * tm_cancel.c - send cancel.  Contract: tm_cancel.h.
 */
#include <stdlib.h>
#include "engine/tm_cancel.h"
#include "engine/tm_recv.h"
#include "engine/tm_reply.h"
#include "engine/tm_rx.h"
#include "engine/tm_send.h"
#include "engine/tm_tx.h"
#include "engine/tm_umem.h"
#include "engine/tm_work.h"

/* ---- sender side ---------------------------------------------------- */

static int cancel_send(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);
	int rearm, rc;

	if (s->peer >= eng->x.npeers)
		return TM_ERR_INVALID;
	if (q->cflags & S_CANCEL_ASKED)
		return TM_ERR_NOT_FOUND;
	if (q->waiting && tme_send_withdraw(eng, s, TM_REQ_CANCELLED)) {
		eng->x.st.scancel_req++;
		eng->x.st.scancel_ok++;
		return TM_OK;
	}
	if (!q->waiting && (s->status != TM_REQ_OK || (q->cflags & S_REPLIED)))
		return TM_ERR_NOT_FOUND; /* failed, cancelled, or matched */
	if (eng->x.peers[s->peer]->dead)
		return TM_ERR_NOT_FOUND; /* pending ones already failed */
	/* pending and posted: only a rendezvous or synchronous send waits
	 * for a reply, and that wait covers the REP too */
	if (q->waiting && !(q->waiting & S_WAIT_REPLY))
		return TM_ERR_NOT_FOUND;
	rearm = !q->waiting;
	if (rearm) {
		if (tme_wait_reply_start(eng, s) != TM_OK)
			return TM_ERR_NO_MEMORY;
		eng->send.sends_waiting++;
	}
	rc = tme_queue_ctrl(eng, s->peer, TM_CTRL_CANCEL_REQ, s->seq, 0);
	if (rc != TM_OK) {
		if (rearm) {
			tme_wait_reply_end(eng, s);
			eng->send.sends_waiting--;
		}
		return rc;
	}
	q->cflags |= S_CANCEL_ASKED | (rearm ? S_CANCEL_REARMED : 0);
	eng->x.st.scancel_req++;
	return TM_OK;
}

void tme_on_cancel_rep(struct tm_engine *eng, uint32_t peer, uint32_t app,
		       uint64_t tag)
{
	struct tm_send *s = tme_find_send(eng, peer, app & TM_APP_SEQ_MASK);
	struct tme_send *q = s ? sp(s) : NULL;

	if (tag != TM_CANCEL_DONE && tag != TM_CANCEL_LATE) {
		eng->x.st.malformed++;
		return;
	}
	if (tag == TM_CANCEL_LATE)
		eng->x.st.scancel_late++;
	/* a pending send whose FIN/ACK beat the LATE reply is gone already */
	if (!s || !(q->cflags & S_CANCEL_ASKED)) {
		if (tag == TM_CANCEL_DONE)
			eng->x.st.malformed++; /* withdrawn, yet nobody asked */
		return;
	}
	q->cflags &= ~S_CANCEL_ASKED;
	if (tag == TM_CANCEL_DONE) {
		eng->x.st.scancel_ok++;
		s->status = TM_REQ_CANCELLED;
	} else {
		q->cflags |= S_REPLIED;
		if (!(q->cflags & S_CANCEL_REARMED))
			return; /* its FIN/ACK is still to come */
	}
	q->cflags &= ~S_CANCEL_REARMED;
	tme_wait_reply_end(eng, s);
	tme_send_try_done(eng, s);
}

/* ---- receiver side -------------------------------------------------- */

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

	if (peer >= eng->x.npeers) {
		eng->x.st.malformed++;
		return;
	}
	/* the decision's linearisation point, for the differential test */
	w.stamp = eng->clock++;
	ucs_list_for_each(m, &eng->recv.all_msgs, all) {
		if (m->peer != peer || (m->app & TM_APP_SEQ_MASK) != seq)
			continue;
		if (m->in_uq) {
			tm_mq_msg_remove(&eng->mq, &m->mq);
			ucs_list_del(&m->all);
			tme_msg_free(eng, m);
			outcome = TM_CANCEL_DONE;
			eng->x.st.scancel_served++;
		}
		break;
	}
	if (eng->x.test.cancel_hook) {
		w.peer = peer;
		w.send_seq = seq;
		w.withdrawn = outcome == TM_CANCEL_DONE;
		eng->x.test.cancel_hook(eng->x.test.hook_arg, &w);
	}
	tme_reply_cancel_rep(eng, peer, seq, outcome);
}

/* ---- entry point (tm_engine.h) -------------------------------------- */

int tm_engine_cancel_send(struct tm_engine *eng, struct tm_send *s)
{
	int rc;

	if (eng->x.fatal)
		return eng->x.fatal;
	tmx_drain(&eng->x);
	rc = cancel_send(eng, s);
	tme_call_end(eng);
	return rc;
}

