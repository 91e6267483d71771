/*
 * diff_ref.c - the reference matcher of the differential test: two plain
 * lists (posted receives, unexpected messages) fed the engine's events in
 * stamp order; the engine's pairs, lengths, truncation, probe and cancel
 * results must be the reference's.
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "diff.h"

static int accepts(int ctx, int src, int tag, const struct dsend *m)
{
	if (ctx != m->ctx)
		return 0;
	if (src != TM_ANY_SRC && src != m->node)
		return 0;
	if (tag == TM_ANY_TAG)
		return m->tag >= 0;
	return tag == m->tag;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	return x->stamp < y->stamp ? -1 : x->stamp > y->stamp;
}

struct refpair {
	struct dsend *m;
	int cancelled;
};

void reference_check(void)
{
	struct dsend **uq = calloc((size_t)S.nevs + 1, sizeof(*uq));
	int *posted = calloc((size_t)S.nevs + 1, sizeof(int));
	struct refpair *pair = calloc((size_t)S.nrecvs + 1, sizeof(*pair));
	uint32_t next_seq[EU_MAXN];
	int nuq = 0, npost = 0, i, j;
	struct drecv *d;
	struct dsend *m;

	if (!uq || !posted || !pair)
		tap_bail("out of memory");
	for (i = 0; i < EU_MAXN; i++)
		next_seq[i] = S.seq_base[i];
	qsort(S.evs, (size_t)S.nevs, sizeof(*S.evs), ev_cmp);
	for (i = 0; i < S.nevs && !S.failed; i++) {
		struct ev *e = &S.evs[i];

		if (i && e->stamp == S.evs[i - 1].stamp)
			fail("two events with stamp %lu",
			     (unsigned long)e->stamp);
		switch (e->type) {
		case EV_POST:
			d = S.recvs[e->id];
			for (j = 0; j < nuq; j++)
				if (accepts(d->ctx, d->src, d->tag, uq[j]))
					break;
			if (j < nuq) {
				pair[e->id].m = uq[j];
				memmove(&uq[j], &uq[j + 1],
					sizeof(*uq) * (size_t)(nuq - j - 1));
				nuq--;
			} else {
				posted[npost++] = e->id;
			}
			break;
		case EV_ARR:
			/* sends withdrawn before posting leave their seq out */
			while ((m = send_of(e->node, next_seq[e->node])) &&
			       m->sc_local) {
				m->ref_withdrawn = 1;
				next_seq[e->node] = (next_seq[e->node] + 1) &
						    TM_APP_SEQ_MASK;
			}
			m = send_of(e->node, e->seq);
			if (!m || e->seq != next_seq[e->node]) {
				fail("arrival %d/%u out of order or unknown (expected %u)",
				     e->node, e->seq, next_seq[e->node]);
				break;
			}
			next_seq[e->node] = (e->seq + 1) & TM_APP_SEQ_MASK;
			if (e->ctx != m->ctx || e->tag != m->tag ||
			    e->src != m->node)
				fail("arrival %d/%u: envelope changed", e->node,
				     e->seq);
			for (j = 0; j < npost; j++) {
				d = S.recvs[posted[j]];
				if (accepts(d->ctx, d->src, d->tag, m))
					break;
			}
			if (j < npost) {
				pair[posted[j]].m = m;
				memmove(&posted[j], &posted[j + 1],
					sizeof(int) * (size_t)(npost - j - 1));
				npost--;
			} else {
				uq[nuq++] = m;
			}
			break;
		case EV_CANCEL:
			for (j = 0; j < npost; j++)
				if (posted[j] == e->id)
					break;
			if (j == npost) {
				fail("recv %d cancelled but the reference matched it",
				     e->id);
				break;
			}
			pair[e->id].cancelled = 1;
			memmove(&posted[j], &posted[j + 1],
				sizeof(int) * (size_t)(npost - j - 1));
			npost--;
			break;
		case EV_SCANCEL:
			/* RC order: the message arrived before the REQ; it is
			 * withdrawn exactly when still unexpected */
			m = send_of(e->node, e->seq);
			for (j = 0; m && j < nuq; j++)
				if (uq[j] == m)
					break;
			if (!m || ((e->seq - S.seq_base[e->node]) &
				   TM_APP_SEQ_MASK) >=
				  ((next_seq[e->node] - S.seq_base[e->node]) &
				   TM_APP_SEQ_MASK)) {
				fail("send cancel %d/%u before its message arrived",
				     e->node, e->seq);
				break;
			}
			if ((j < nuq) != e->found) {
				fail("send cancel %d/%u: engine %s, reference %s",
				     e->node, e->seq,
				     e->found ? "withdrew it" : "late",
				     j < nuq ? "unexpected" : "matched");
				break;
			}
			if (e->found) {
				m->ref_withdrawn = 1;
				memmove(&uq[j], &uq[j + 1],
					sizeof(*uq) * (size_t)(nuq - j - 1));
				nuq--;
			}
			break;
		case EV_PROBE:
		case EV_CLAIM:
			for (j = 0; j < nuq; j++)
				if (accepts(e->ctx, e->src, e->tag, uq[j]))
					break;
			if ((j < nuq) != e->found ||
			    (e->found && (uq[j]->node != e->node ||
					  uq[j]->s.seq != e->seq))) {
				fail("probe at stamp %lu: engine %s %d/%u, reference %s %d/%u",
				     (unsigned long)e->stamp,
				     e->found ? "found" : "none", e->node, e->seq,
				     j < nuq ? "found" : "none",
				     j < nuq ? uq[j]->node : -1,
				     j < nuq ? uq[j]->s.seq : 0);
				break;
			}
			if (e->type == EV_CLAIM && e->found) {
				pair[e->id].m = uq[j];
				memmove(&uq[j], &uq[j + 1],
					sizeof(*uq) * (size_t)(nuq - j - 1));
				nuq--;
			}
			break;
		}
	}
	for (i = 0; i < S.nrecvs && !S.failed; i++) {
		d = S.recvs[i];
		if ((d->r.status == TM_REQ_CANCELLED) != pair[i].cancelled) {
			fail("recv %d: cancelled %d, reference %d", i,
			     d->r.status == TM_REQ_CANCELLED, pair[i].cancelled);
			break;
		}
		if (pair[i].cancelled)
			continue;
		m = pair[i].m;
		if (!m) {
			fail("recv %d completed but the reference matched nothing",
			     i);
			break;
		}
		if (S.inv_peer[d->r.peer] != m->node || d->r.send_seq != m->s.seq) {
			fail("recv %d (stamp %lu) got %d/%u, reference %d/%u", i,
			     (unsigned long)d->r.post_stamp,
			     S.inv_peer[d->r.peer], d->r.send_seq, m->node,
			     m->s.seq);
			break;
		}
		if (d->r.msg_len != m->len ||
		    (d->r.status == TM_REQ_TRUNCATED) != (m->len > d->len) ||
		    (d->r.status != TM_REQ_OK && d->r.status != TM_REQ_TRUNCATED)) {
			fail("recv %d: len %lu status %d, message %zu buffer %zu",
			     i, (unsigned long)d->r.msg_len, d->r.status, m->len,
			     d->len);
			break;
		}
	}
	for (i = 1; i <= S.k && !S.failed; i++)
		for (j = 0; j < S.nsends[i]; j++) {
			m = S.sends[i][j];
			m->ref_withdrawn |= m->sc_local;
			if ((m->s.status == TM_REQ_CANCELLED) !=
			    m->ref_withdrawn) {
				fail("send %d/%u: cancelled %d, reference withdrew it %d",
				     i, m->s.seq,
				     m->s.status == TM_REQ_CANCELLED,
				     m->ref_withdrawn);
				break;
			}
		}
	if (!S.failed && nuq)
		fail("%d messages left unmatched in the reference", nuq);
	free(uq);
	free(posted);
	free(pair);
}

