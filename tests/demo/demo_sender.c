/*
 * demo_sender.c - softhca_demo's sender: sends the message table (eager
 * and NO_TAG messages carry their payload, the rendezvous one only its
 * RVH, naming a buffer the peer's card reads), then waits for every send
 * completion and the FIN that frees the rendezvous buffer (contract:
 * demo.h).
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

/* The rendezvous source: its own MR, readable by the peer only. */
struct rndv_src {
	uint8_t *buf;		/* NULL: the table has no rendezvous */
	struct ibv_mr *mr;
	unsigned int msg;
};

static void rndv_open(struct proc *p, struct rndv_src *r)
{
	unsigned int m;

	for (m = 0; m < NUM_MSGS; m++) {
		if (msgs[m].kind != MSG_RNDV)
			continue;
		if (posix_memalign((void **)&r->buf, 4096, msgs[m].len))
			die(p, "posix_memalign", ENOMEM);
		fill(r->buf, m, msgs[m].len);
		r->mr = p->sv->reg_mr(p->pd, r->buf, msgs[m].len,
				      IBV_ACCESS_REMOTE_READ);
		if (!r->mr)
			die(p, "reg_mr(rendezvous buffer)", errno);
		r->msg = m;
		break;
	}
}

/* Message m as one signalled SEND: TMH, then payload or RVH. */
static void send_msg(struct proc *p, unsigned int m, const struct rndv_src *r)
{
	const struct msg *mg = &msgs[m];
	struct ibv_tmh *tmh;
	struct ibv_rvh *rvh;
	uint8_t *buf;
	uint32_t len = sizeof(*tmh);
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int ret;

	buf = arena_alloc(p, sizeof(*tmh) + sizeof(*rvh) + mg->len);
	tmh = (struct ibv_tmh *)buf;
	memset(tmh, 0, sizeof(*tmh));
	tmh->app_ctx = htobe32(m);
	tmh->tag = htobe64(mg->tag);
	switch (mg->kind) {
	case MSG_EAGER:
	case MSG_NO_TAG:
		tmh->opcode = mg->kind == MSG_EAGER ? IBV_TMH_EAGER :
						      IBV_TMH_NO_TAG;
		fill(buf + len, m, mg->len);
		len += mg->len;
		break;
	case MSG_RNDV:
		tmh->opcode = IBV_TMH_RNDV;
		rvh = (struct ibv_rvh *)(buf + len);
		rvh->va = htobe64((uintptr_t)r->buf);
		rvh->rkey = htobe32(r->mr->rkey);
		rvh->len = htobe32(mg->len);
		len += sizeof(*rvh);
		break;
	}

	sge.addr = (uintptr_t)buf;
	sge.length = len;
	sge.lkey = p->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID_SEND + m;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	ret = ibv_post_send(p->qp, &wr, &bad);
	if (ret)
		die(p, "ibv_post_send", ret);
	say(p, "sent msg %u: %s tag 0x%llx, %u bytes on the wire",
	    m, mg->kind == MSG_EAGER ? "EAGER" :
	       mg->kind == MSG_RNDV ? "RNDV" : "NO_TAG",
	    (unsigned long long)mg->tag, len);
}

/* Plain buffer b got a message: it must be the FIN of the rendezvous. */
static void fin_cqe(struct proc *p, const struct cqe *e,
		    const struct rndv_src *r)
{
	int b = e->wr_id - WRID_PLAIN;
	struct ibv_tmh *t = (void *)p->plain[b];
	struct ibv_rvh *rv = (void *)(t + 1);

	if (e->opcode != IBV_WC_TM_NO_TAG ||
	    e->byte_len < sizeof(*t) + sizeof(*rv) ||
	    t->opcode != IBV_TMH_FIN) {
		fail(p, "plain buffer %d: not a FIN", b);
	} else if (be64toh(t->tag) != msgs[r->msg].tag ||
		   be64toh(rv->va) != (uintptr_t)r->buf ||
		   be32toh(rv->len) != msgs[r->msg].len) {
		fail(p, "FIN names tag 0x%llx va 0x%llx len %u",
		     (unsigned long long)be64toh(t->tag),
		     (unsigned long long)be64toh(rv->va),
		     be32toh(rv->len));
	} else {
		say(p, "FIN for tag 0x%llx (msg %u): rendezvous buffer may be reused",
		    (unsigned long long)be64toh(t->tag),
		    be32toh(t->app_ctx));
	}
	post_plain(p, b);
}

/* Send completions, and the FIN that ends the rendezvous. */
static void wait_sends_and_fin(struct proc *p, const struct rndv_src *r)
{
	unsigned int sends_done = 0;
	bool fin = false;
	double start = now();
	struct cqe c[16];
	int i, n;

	while (sends_done < NUM_MSGS || (r->buf && !fin)) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (i = 0; i < n; i++) {
			struct cqe *e = &c[i];

			if (e->status != IBV_WC_SUCCESS) {
				fail(p, "wr_id 0x%llx: %s",
				     (unsigned long long)e->wr_id,
				     ibv_wc_status_str(e->status));
				if (e->wr_id >= WRID_SEND)
					sends_done++;
				continue;
			}
			if (e->wr_id >= WRID_SEND) {
				if (e->opcode != IBV_WC_SEND)
					fail(p, "send completion with opcode %s",
					     opcode_str(e->opcode));
				sends_done++;
			} else if (e->wr_id >= WRID_PLAIN &&
				   e->wr_id < WRID_PLAIN + NUM_PLAIN) {
				fin_cqe(p, e, r);
				fin = true;
			} else {
				fail(p, "stray completion wr_id 0x%llx",
				     (unsigned long long)e->wr_id);
			}
		}
		check_timeout(p, start, "send completions and FIN");
	}
}

int sender(struct proc *p)
{
	struct rndv_src r = { 0 };
	unsigned int m;
	char tok;
	int ret;

	setup(p, true);
	connect_qp(p);
	rndv_open(p, &r);

	pipe_read(p, &tok, 1);
	if (tok != 'R')
		die(p, "peer not ready", EPROTO);
	say(p, "receiver is ready: sending %d messages", NUM_MSGS);
	for (m = 0; m < NUM_MSGS; m++)
		send_msg(p, m, &r);
	wait_sends_and_fin(p, &r);

	/* Keep our card running until the receiver has seen everything. */
	tok = 'D';
	pipe_write(p, &tok, 1);
	drain_until_token(p, "the receiver to finish");

	if (r.mr && (ret = p->sv->dereg_mr(r.mr)))
		fail(p, "dereg_mr: %s", strerror(ret));
	free(r.buf);
	teardown(p);
	say(p, "%s", p->errors ? "FAILED" : "done");
	return p->errors ? 1 : 0;
}
