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
static int probe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		 int32_t tag, uint32_t peer, struct tm_msg **msg,
		 struct tm_probe_info *info)
{
	struct tm_mq_msg *q;
	struct tm_msg *m;
	uint64_t rtag, mask;

	tm_tag_recv(ctx, src, tag, &rtag, &mask);
	q = tm_mq_find_msg(&eng->mq, rtag, mask);
	info->stamp = eng->clock++;
	if (msg)
		*msg = NULL;
	if (!q)
		return tme_probe_missed(eng, peer);
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

static int probe_call(struct tm_engine *eng, uint32_t ctx, int32_t src,
		      int32_t tag, uint32_t peer, struct tm_msg **msg,
		      struct tm_probe_info *info)
{
	int rc;

	if (ctx > TM_MAX_CTX || (peer != TM_PEER_ANY &&
				 (peer >= eng->x.npeers || src == TM_ANY_SRC)))
		return TM_ERR_RANGE;
	if (eng->x.fatal)
		return eng->x.fatal;
	tmx_drain(&eng->x);
	/* a program that only probes drives no progress: held messages
	 * must still make way for what it probes for (tm_umem.h) */
	if (eng->x.pending & TM_PEND_HELD)
		tme_umem_spill(eng);
	rc = probe(eng, ctx, src, tag, peer, msg, info);
	tme_call_end(eng);
	return rc;
}

int tm_engine_iprobe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		     int32_t tag, struct tm_probe_info *info)
{
	return probe_call(eng, ctx, src, tag, TM_PEER_ANY, NULL, info);
}

int tm_engine_iprobe_from(struct tm_engine *eng, uint32_t ctx, int32_t src,
			  int32_t tag, uint32_t peer,
			  struct tm_probe_info *info)
{
	return probe_call(eng, ctx, src, tag, peer, NULL, info);
}

int tm_engine_improbe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		      int32_t tag, struct tm_msg **msg,
		      struct tm_probe_info *info)
{
	return probe_call(eng, ctx, src, tag, TM_PEER_ANY, msg, info);
}

int tm_engine_improbe_from(struct tm_engine *eng, uint32_t ctx, int32_t src,
			   int32_t tag, uint32_t peer, struct tm_msg **msg,
			   struct tm_probe_info *info)
{
	return probe_call(eng, ctx, src, tag, peer, msg, info);
}

