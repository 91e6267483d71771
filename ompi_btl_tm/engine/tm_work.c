/*
 * tm_work.c - deferred work.  Contract: tm_work.h.
 */
#include "engine/tm_offload.h"
#include "engine/tm_ops.h"
#include "engine/tm_reply.h"
#include "engine/tm_tx.h"
#include "engine/tm_work.h"

int tme_flush_work_slow(struct tm_engine *eng)
{
	struct tm_xport *x = &eng->x;
	int n = 0;

	if (x->fatal)
		return 0; /* stopped: no more posts */
	/* Each test below is the first test of the function it guards, so
	 * the common nothing-to-do case costs no call into another module. */
	if (x->ops.add_failed)
		n += tmx_report_add_failures(x);
	if (!ucs_list_is_empty(&x->ops.opq))
		n += tmx_flush_ops(x);
	/* before maybe_sync: an ADD carries the count */
	if (!ucs_list_is_empty(&eng->offload.promo_ready)) {
		n += tme_promote(eng);
		/* promoted receives go to the card now: they waited already */
		tmx_add_flush(x);
	}
	if (tmx_count_now(x) != x->ops.reported)
		tmx_maybe_sync(x);
	if (!ucs_list_is_empty(&eng->reply.owed))
		n += tme_reply_pay_owed(eng);
	if (tme_reply_owes_rep(&eng->reply))
		n += tme_reply_pay_reps(eng);
	if (x->tx.tx_queued)
		n += tmx_flush_tx(x);
	/* the handlers above may have queued more, or left some: look at
	 * what is really there */
	if (ucs_list_is_empty(&x->ops.opq) && !x->ops.add_failed &&
	    !tme_promo_due(eng) &&
	    !tmx_sync_wanted(x) && ucs_list_is_empty(&eng->reply.owed) &&
	    !tme_reply_owes_rep(&eng->reply) && !x->tx.tx_queued)
		x->pending &= ~TM_PEND_WORK;
	return n;
}
