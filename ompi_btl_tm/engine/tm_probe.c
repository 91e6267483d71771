/*
 * tm_probe.c - probes and matched probes.  Contract: tm_probe.h.
 */
#include "engine/tm_probe.h"
#include "engine/tm_send.h"

int tme_probe(struct tm_engine *eng, uint32_t ctx, int32_t src, int32_t tag,
	      uint32_t peer, struct tm_msg **msg, struct tm_probe_info *info)
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
		tm_mq_msg_remove(&eng->mq, &m->mq);
		m->in_uq = 0; /* matched by the probe: a cancel is late */
		*msg = m;
	}
	return TM_OK;
}
