/*
 * tm_probe.c - probes: look at the unexpected queue without receiving
 * (tm_engine_iprobe*), or take a message out of it for tm_engine_imrecv
 * (tm_engine_improbe*).  A probe naming a peer that died fails
 * (tme_probe_missed, tm_send.c: the probing paces its keepalive).
 * A matched probe is a match: a send cancel that arrives later is late.
 */
#include "engine/tm_engine_priv.h"

static struct tm_msg *probe(struct tm_engine *eng, uint32_t ctx, int32_t src,
			    int32_t tag, struct tm_probe_info *info)
{
	struct tm_mq_msg *q;
	struct tm_msg *m;
	uint64_t rtag, mask;

	tme_drain(eng);
	tm_tag_recv(ctx, src, tag, &rtag, &mask);
	q = tm_mq_find_msg(&eng->mq, rtag, mask);
	info->stamp = eng->clock++;
	if (!q)
		return NULL;
	m = ucs_container_of(q, struct tm_msg, mq);
	tme_env_from_tag(&info->env, m->tag);
	info->len = m->len;
	info->peer = m->peer;
	info->send_seq = m->app & TM_APP_SEQ_MASK;
	return m;
}

static int probe_args_bad(struct tm_engine *eng, uint32_t ctx, int32_t src,
			  uint32_t peer)
{
	return ctx > TM_MAX_CTX || (peer != TM_PEER_ANY &&
				    (peer >= eng->npeers || src == TM_ANY_SRC));
}

int tm_engine_iprobe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		     int32_t tag, struct tm_probe_info *info)
{
	return tm_engine_iprobe_from(eng, ctx, src, tag, TM_PEER_ANY, info);
}

int tm_engine_iprobe_from(struct tm_engine *eng, uint32_t ctx, int32_t src,
			  int32_t tag, uint32_t peer,
			  struct tm_probe_info *info)
{
	int rc;

	if (probe_args_bad(eng, ctx, src, peer))
		return TM_ERR_RANGE;
	if (eng->fatal)
		return eng->fatal;
	rc = probe(eng, ctx, src, tag, info) ? TM_OK :
	     tme_probe_missed(eng, peer);
	tme_flush_work(eng);
	tme_fire_done(eng);
	return rc;
}

int tm_engine_improbe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		      int32_t tag, struct tm_msg **msg,
		      struct tm_probe_info *info)
{
	return tm_engine_improbe_from(eng, ctx, src, tag, TM_PEER_ANY, msg,
				      info);
}

int tm_engine_improbe_from(struct tm_engine *eng, uint32_t ctx, int32_t src,
			   int32_t tag, uint32_t peer, struct tm_msg **msg,
			   struct tm_probe_info *info)
{
	struct tm_msg *m;
	int rc;

	if (probe_args_bad(eng, ctx, src, peer))
		return TM_ERR_RANGE;
	if (eng->fatal)
		return eng->fatal;
	m = probe(eng, ctx, src, tag, info);
	if (m) {
		tm_mq_msg_remove(&eng->mq, &m->mq);
		m->in_uq = 0; /* matched by the probe: a cancel is late */
	}
	*msg = m;
	rc = m ? TM_OK : tme_probe_missed(eng, peer);
	tme_flush_work(eng);
	tme_fire_done(eng);
	return rc;
}
