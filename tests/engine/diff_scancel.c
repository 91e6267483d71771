/*
 * diff_scancel.c - send cancels in the differential test: MPI_Cancel of
 * random sends to node 0, and the engine's report of each decision (the
 * reference, diff_ref.c, checks it against its unexpected queue).
 */
#include "tap.h"
#include "diff.h"

/* node 0 decided a CANCEL_REQ: log it at its stamp */
void cancel_hook(void *arg, const struct tm_withdrawal *w)
{
	struct ev e = { .stamp = w->stamp, .type = EV_SCANCEL };

	(void)arg;
	e.node = w->peer < EU_MAXN ? S.inv_peer[w->peer] : -1;
	e.seq = w->send_seq;
	e.found = w->withdrawn;
	log_ev(&e);
}

/* MPI_Cancel of a random send to node 0 (once per send). */
void ev_scancel(void)
{
	int node = 1 + choose(S.k), rc;
	struct dsend *d;

	if (!S.nsends[node])
		return;
	d = S.sends[node][choose(S.nsends[node])];
	if (d->sc_asked)
		return;
	d->sc_asked = 1;
	d->sc_rearm = d->done == 1;
	rc = tm_engine_cancel_send(S.w.node[node].eng, &d->s);
	if (rc != TM_OK)
		d->sc_rearm = 0;
	/* done inside the call: taken off the send queue, never on the wire
	 * (a REQ's answer cannot have come yet) */
	d->sc_local = rc == TM_OK && !d->sc_rearm && d->done;
	if (rc != TM_OK && rc != TM_ERR_NOT_FOUND)
		fail("send cancel %d/%u: %d", node, d->s.seq, rc);
}
