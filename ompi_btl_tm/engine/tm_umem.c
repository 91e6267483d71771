/*
 * tm_umem.c - the memory unexpected messages take.  Contract: tm_umem.h.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_rx.h"
#include "engine/tm_tx.h"
#include "engine/tm_umem.h"

/* What a copy of m costs (msg_alloc's sizes). */
static size_t msg_size(const struct tm_msg *m)
{
	if (m->plain == TM_MSG_RECYCLED)
		return sizeof(*m) + TM_MSG_SMALL;
	return sizeof(*m) + (m->rndv ? 0 : (size_t)m->len);
}

/*
 * Small copies are recycled, so that a program whose receives come late
 * does not malloc and free one per message.
 */
struct tm_msg *tme_msg_alloc(struct tm_engine *eng, uint32_t plen)
{
	size_t size = sizeof(struct tm_msg) +
		      (plen > TM_MSG_SMALL ? plen : TM_MSG_SMALL);
	struct tm_msg *m;

	/* (spills may have taken copy_bytes past copy_max) */
	if (eng->recv.copy_bytes >= eng->recv.copy_max ||
	    size > eng->recv.copy_max - eng->recv.copy_bytes) {
		eng->x.st.unexp_throttled++;
		return NULL;
	}
	if (plen > TM_MSG_SMALL) {
		m = malloc(size);
		if (m)
			m->plain = TM_MSG_MALLOC;
	} else if (!ucs_list_is_empty(&eng->recv.msg_free)) {
		eng->recv.n_msg_free--;
		m = ucs_list_extract_head(&eng->recv.msg_free, struct tm_msg,
					  all);
		m->plain = TM_MSG_RECYCLED;
	} else {
		m = malloc(size);
		if (m)
			m->plain = TM_MSG_RECYCLED;
	}
	if (m)
		eng->recv.copy_bytes += size;
	return m;
}

void tme_msg_hold(struct tm_engine *eng, struct tm_msg *m, uint32_t idx)
{
	m->plain = (int32_t)idx;
	eng->x.st.msg_held++;
	if (!eng->recv.n_held++) {
		eng->recv.held_ns = tmx_now_ns();
		tmx_pend(&eng->x, TM_PEND_HELD);
	}
}

void tme_msg_free(struct tm_engine *eng, struct tm_msg *m)
{
	if (m->plain >= 0) {
		eng->recv.n_held--;
		eng->recv.held_freed++;
		tmx_post_plain(&eng->x, (uint32_t)m->plain);
		return;
	}
	eng->recv.copy_bytes -= msg_size(m);
	if (m->plain == TM_MSG_RECYCLED &&
	    eng->recv.n_msg_free < TM_MSG_KEEP) {
		ucs_list_add_head(&eng->recv.msg_free, &m->all);
		eng->recv.n_msg_free++;
	} else {
		free(m);
	}
}

/* The oldest held message that only waits in the unexpected queue (one
 * claimed or handed out by a probe is named elsewhere: left alone). */
static struct tm_msg *oldest_held(struct tme_recv_state *rs)
{
	struct tm_msg *m;

	ucs_list_for_each(m, &rs->all_msgs, all)
		if (m->plain >= 0 && m->in_uq)
			return m;
	return NULL;
}

/* Moves held message m into a copy of its own, and its buffer back: the
 * copy, or NULL (no memory; m unchanged). */
static struct tm_msg *spill(struct tm_engine *eng, struct tm_msg *m)
{
	size_t len = m->rndv ? 0 : (size_t)m->len;
	struct tm_msg *c;

	/* the allocation site of every copy (tests inject "no memory") */
	c = tmx_fault(&eng->x, TM_SITE_ALLOC_MSG) ? NULL :
	    malloc(sizeof(*c) + len);
	if (!c)
		return NULL;
	*c = *m;
	c->plain = TM_MSG_MALLOC;
	c->data = (uint8_t *)(c + 1);
	memcpy(c->data, m->data, len);
	ucs_list_replace(&m->all, &c->all);
	tm_mq_msg_move(&eng->mq, &m->mq, &c->mq);
	eng->recv.copy_bytes += msg_size(c);
	eng->x.st.unexp_spilled++;
	tme_msg_free(eng, m);
	return c;
}

struct tm_msg *tme_msg_take(struct tm_engine *eng, struct tm_msg *m)
{
	struct tm_msg *c = m->plain >= 0 ? spill(eng, m) : NULL;

	return c ? c : m;
}

int tme_umem_spill(struct tm_engine *eng)
{
	uint64_t now;
	struct tm_msg *m;

	if (!eng->recv.n_held) {
		eng->x.pending &= ~TM_PEND_HELD;
		return 0;
	}
	now = tmx_now_ns();
	if (eng->recv.held_freed != eng->recv.held_seen) {
		/* the program is receiving what it holds: no need */
		eng->recv.held_seen = eng->recv.held_freed;
		eng->recv.held_ns = now;
		return 0;
	}
	if (now - eng->recv.held_ns < TM_UMEM_SPILL_NS)
		return 0;
	eng->recv.held_ns = now;
	m = oldest_held(&eng->recv);
	return m && spill(eng, m) ? 1 : 0;
}
