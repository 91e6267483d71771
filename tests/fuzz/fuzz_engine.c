/*
 * fuzz_engine.c - libFuzzer target over the engine's parsing of what a
 * peer sends, through its public entry points only.
 *
 * Two soft-HCA nodes with engines (tests/engine/eng_util), connected.  The
 * input plays node 1 gone rogue: it posts raw sends on its QP to node 0
 * with any TMH opcode, tag, app_ctx and payload (the engine's own headers
 * included), while node 0 posts receives, probes and progresses as an
 * application would.  Node 1's engine is never progressed (the raw sends'
 * completions are not its own), only its card, so node 0 sees nothing but
 * the input.  A crash, sanitizer report, leak or hang is a finding.
 *
 * Input: a sequence of records, each an opcode byte and its operands.
 */
#include <infiniband/tm_types.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/eng_util.h"
#include "softhca/softhca.h"

enum {
	OP_RAW,       /* u8 TMH opcode, u64 tag, u32 app_ctx, u16 len, bytes */
	OP_RECV,      /* u32 ctx, i32 src, i32 tag, u16 len */
	OP_PROGRESS,
	OP_PROBE,     /* u32 ctx, i32 src, i32 tag */
	OP_COUNT
};

#define MAX_RECV 32

struct in {
	const uint8_t *p;
	size_t n;
};

static void take(struct in *in, void *dst, size_t n)
{
	if (in->n < n) {
		memset(dst, 0, n);
		in->n = 0;
		return;
	}
	memcpy(dst, in->p, n);
	in->p += n;
	in->n -= n;
}

static void pump0(struct eu_world *w)
{
	for (int i = 0; i < 4; i++) {
		softhca_drain(w->node[1].dev->ctx);
		softhca_drain(w->node[0].dev->ctx);
		tm_engine_progress(w->node[0].eng);
	}
}

static void raw_send(struct eu_world *w, struct in *in, size_t *used)
{
	struct eu_node *b = &w->node[1];
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	uint8_t op = 0, *msg;
	uint64_t tag = 0;
	uint32_t app = 0;
	uint16_t len = 0;
	struct ibv_tmh *tmh;

	take(in, &op, 1);
	take(in, &tag, 8);
	take(in, &app, 4);
	take(in, &len, 2);
	len %= 8192;
	if (*used + sizeof(*tmh) + len > b->arena_len)
		return;
	msg = b->arena + *used;
	*used += (sizeof(*tmh) + len + 63) & ~(size_t)63;
	tmh = (struct ibv_tmh *)msg;
	memset(tmh, 0, sizeof(*tmh));
	tmh->opcode = op % 4;
	tmh->app_ctx = app;
	tmh->tag = tag;
	take(in, msg + sizeof(*tmh), len);
	sge.addr = (uintptr_t)msg;
	sge.length = (uint32_t)(sizeof(*tmh) + len);
	sge.lkey = b->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	ibv_post_send(b->qp[0].tx, &wr, &bad);
	softhca_drain(b->dev->ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct eu_recv recvs[MAX_RECV];
	struct in in = { data, size };
	struct eu_opts o;
	struct eu_world w;
	size_t used = 0, rused = 0;
	int nrecv = 0, steps = 0;

	eu_opts_default(&o);
	o.sched = SOFTHCA_SCHED_MANUAL;
	o.max_num_tags = 16;
	o.arena_len = 1 << 20;
	if (eu_world_init(&w, 2, &o))
		abort();
	memset(recvs, 0, sizeof(recvs));
	while (in.n && steps++ < 128) {
		struct tm_probe_info info;
		uint32_t ctx = 0;
		int32_t src = 0, tag = 0;
		uint16_t len = 0;
		uint8_t op = 0;

		take(&in, &op, 1);
		switch (op % OP_COUNT) {
		case OP_RAW:
			raw_send(&w, &in, &used);
			break;
		case OP_RECV:
			take(&in, &ctx, 4);
			take(&in, &src, 4);
			take(&in, &tag, 4);
			take(&in, &len, 2);
			if (nrecv == MAX_RECV ||
			    rused + len > w.node[0].arena_len)
				break;
			recvs[nrecv].r.cb = eu_recv_cb;
			tm_engine_irecv(w.node[0].eng, &recvs[nrecv].r,
					ctx % 4, (int32_t)((uint32_t)src % 3) - 1, tag,
					w.node[0].arena + rused, len,
					w.node[0].mr);
			rused += len;
			nrecv++;
			break;
		case OP_PROGRESS:
			pump0(&w);
			break;
		case OP_PROBE:
			take(&in, &ctx, 4);
			take(&in, &src, 4);
			take(&in, &tag, 4);
			tm_engine_iprobe(w.node[0].eng, ctx % 4, (int32_t)((uint32_t)src % 3) - 1,
					 tag, &info);
			break;
		}
	}
	pump0(&w);
	eu_world_fini(&w);
	return 0;
}
