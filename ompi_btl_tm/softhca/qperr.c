/*
 * qperr.c - a QP's error state, as any step of the card raises it.
 *
 * A step that finds a QP broken (a malformed packet, a dead peer, a
 * lying ring, an access error) moves it to the error state here: the
 * state changes and the peer sees the ring closed at once, and the QP is
 * marked for a flush.  The flush itself (the head WR completes with the
 * reason, the rest of its work with IBV_WC_WR_FLUSH_ERR) is the
 * scheduler's, run before the verbs call that raised the error returns
 * (sched.c, qp_flush), because it touches every queue of the QP and
 * those queues' owners (egress, match, rndv) are the ones raising it.
 * Calls only down: the CQ write (cq.c) and the peer check (shm.c).
 */
#include "softhca_priv.h"
#include "softhca_sched.h"

void sh_qp_error(struct sh_qp *qp, enum ibv_wc_status why)
{
	qp->qp.state = IBV_QPS_ERR;
	if (qp->in)
		atomic_store(&qp->in->closed, 1);
	if (!qp->flush_pending) {
		qp->flush_pending = true;
		qp->flush_why = why;
		qp->ctx->flush_n++;
	}
	/* a poll must not take the quiet path before the flush */
	sh_sched_kick(qp->ctx);
}

/*
 * A packet that breaks the protocol: dropped, counted, and the QP goes to
 * the error state, as a card's does on a malformed request.
 */
void sh_qp_bad_packet(struct sh_qp *qp)
{
	qp->ctx->bad_packets++;
	if (qp->qp.state != IBV_QPS_ERR)
		sh_qp_error(qp, IBV_WC_REM_INV_REQ_ERR);
}

/* A peer whose process is gone never answers: fail what waits on it. */
void sh_qp_check_peer(struct sh_qp *qp)
{
	if (!qp->peer || qp->qp.state == IBV_QPS_ERR)
		return;
	qp->peer->checked_ns = sh_now_ns();
	if (sh_peer_dead(qp->peer))
		sh_qp_error(qp, IBV_WC_RETRY_EXC_ERR);
}

/* A WR of a QP in the error state completes flushed, as on RC. */
void sh_qp_flush_wr(struct sh_qp *qp, struct sh_cq *cq, uint64_t wr_id,
		    enum ibv_wc_opcode opcode)
{
	struct sh_cqe cqe = {
		.wr_id = wr_id,
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = opcode,
		.qp_num = qp->qp.qp_num,
		.release_handle = -1,
	};

	sh_cq_push(cq, &cqe);
}
