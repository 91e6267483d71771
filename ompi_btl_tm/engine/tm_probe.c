/*
 * tm_probe.c - probes and matched probes.  Contract: tm_probe.h.
 */
#include "engine/tm_probe.h"
#include "engine/tm_rx.h"
#include "engine/tm_send.h"
#include "engine/tm_umem.h"
#include "engine/tm_work.h"

/* msg NULL: a peek; else the message, out of the queue.  TM_OK,
 * TM_ERR_NOT_FOUND or TM_ERR_PEER_DEAD. */
static int probe(struct tm_engine *eng, struct tm_probe_info *info,
		 struct tm_msg **msg)
{
	struct tm_mq_msg *q;
	struct tm_msg *m;

	q = tm_mq_find_msg(&eng->mq, info->tag, info->mask);
	info->stamp = eng->clock++;
	if (msg)
		*msg = NULL;
	if (!q)
		return tme_probe_missed(eng, info->from);
	m = ucs_container_of(q, struct tm_msg, mq);
	tme_env_from_tag(&info->env, m->tag);
	info->len = m->len;
	info->peer = m->peer;
	info->send_seq = m->app & TM_APP_SEQ_MASK;
	if (msg) {
		/* its plain buffer must not go with it (tm_umem.h) */
		m = tme_msg_take(eng, m);
		tm_mq_msg_remove(&eng->mq, &m->mq);
		m->in_uq = 0; /* matched by the probe: a cancel is late */
		*msg = m;
	}
	return TM_OK;
}

/* ---- entry points (tm_engine.h) ------------------------------------ */

int tm_engine_probe(struct tm_engine *eng, struct tm_probe_info *info,
		    struct tm_msg **msg)
{
	int rc;

	if (!tm_tag_recv_ok(info->tag, info->mask) ||
	    (info->from != TM_PEER_ANY &&
	     (info->from >= eng->x.npeers || !(info->mask & TM_MASK_SRC))))
		return TM_ERR_RANGE;
	if (eng->x.fatal)
		return eng->x.fatal;
	tmx_drain(&eng->x);
	/* a program that only probes drives no progress: held messages
	 * must still make way for what it probes for (tm_umem.h) */
	if (eng->x.pending & TM_PEND_HELD)
		tme_umem_spill(eng);
	rc = probe(eng, info, msg);
	tme_call_end(eng);
	return rc;
}
