/*
 * diff.h - what the parts of the differential test share: the records of
 * one run (receives and sends at node 0, the event log the reference
 * matcher replays) and the helpers that make them.
 *
 *   diff.c       schedules, runs, main (and test_exhaustive's, via .inc)
 *   diff_app.c   the application's events and the engine's callbacks
 *   diff_ref.c   the reference matcher and the comparison
 *   diff_scancel.c send cancels and the engine's report of each
 *   diff_card.c  what the card must do: traffic from node 0 to the
 *                senders (FIN/ACK reach the matching node), the pre-posted
 *                phase (card-match share), count and op-slot agreement
 */
#ifndef DIFF_H
#define DIFF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "eng_util.h"
#include "engine/tm_engine_test.h"

#define SLOT (32 * 1024 + 64)
#define NSLOT 48
#define GUARD 16
#define MAXK (EU_MAXN - 1)
/* arena slots after the NSLOT: node 0's sends to the others, and the
 * others' catch-all receives for them */
#define NREV 8
#define RPOST 4

/* a catch-all receive at node j >= 1 for node 0's messages */
struct rrecv {
	struct tm_recv r;
	int node;
	int slot;
	int posted;
	int done;
	uint32_t idx;          /* post order: it must get node 0's idx-th send */
};

/* a send from node 0 to node j >= 1 */
struct rsend {
	struct tm_send s;
	int node;
	int slot;
	int done;
	size_t len;
};

struct drecv {
	struct tm_recv r;
	int id;
	int done;
	int ctx, src, tag;
	int slot;
	size_t len;
	int data_ok;
	int cancel_req;
	int mrecv;            /* from a matched probe: its claim */
	int claim_node;
	uint32_t claim_seq;
};

struct dsend {
	struct tm_send s;
	int node;
	int done;
	int slot;
	size_t len;
	int ctx, tag;
	int sc_asked;         /* tm_engine_cancel_send was called */
	int sc_rearm;         /* ... on it completed: a second callback */
	int sc_local;         /* ... withdrawn before it was posted */
	int ref_withdrawn;    /* the reference took it out of its queue */
};

/* EV_SCANCEL: a send-cancel decided at node 0 (found: withdrawn) */
enum { EV_POST, EV_ARR, EV_CANCEL, EV_PROBE, EV_CLAIM, EV_SCANCEL };

struct ev {
	uint64_t stamp;
	int type;
	int id;                    /* recv id */
	int ctx, src, tag;         /* probe/claim envelope */
	int found, node;           /* probe/claim result; arrival sender */
	uint32_t seq;
};

struct dstate {
	struct eu_world w;
	int k;                     /* senders */
	int inv_peer[EU_MAXN];     /* node 0's peer id -> node */
	struct drecv **recvs;
	int nrecvs, caprecvs;
	struct dsend **sends[EU_MAXN]; /* by node, by seq */
	int nsends[EU_MAXN], capsends[EU_MAXN];
	uint32_t seq_base[EU_MAXN];    /* engine seq of this run's first send */
	struct ev *evs;
	int nevs, capevs;
	int rslot_free[NSLOT], nrfree;
	int sslot_free[EU_MAXN][NSLOT], nsfree[EU_MAXN];
	int outstanding;           /* receives not done */
	char why[256];
	int failed;
	uint64_t events;
	/* totals over runs, to show the schedules exercise the engine */
	uint64_t t_recvs, t_sends, t_card, t_claim, t_cancel, t_conflict,
		 t_full, t_late, t_rndv_sw, t_syncs, t_promoted, t_matched,
		 t_sc_req, t_sc_ok, t_sc_late;
	/* traffic from node 0 to the others (diff_card.c) */
	int rev_on;
	struct rrecv rr[EU_MAXN][RPOST];
	uint32_t rr_next[EU_MAXN];  /* post index of the next catch-all */
	struct rsend **rs[EU_MAXN]; /* node 0's sends to node j, in order */
	int nrs[EU_MAXN], caprs[EU_MAXN];
	int rsfree[NREV], nrsfree;
	uint32_t rr_got[EU_MAXN];   /* catch-alls that got a message */
	/* the pre-posted phase (diff_card.c) */
	int phase_on;
	uint32_t card_tags;         /* the card list's size (0: default) */
	size_t thresh;              /* the engine's offload_thresh */
	uint64_t t_rsends, t_phase_recvs, t_phase_card;
};

struct dcfg {
	uint32_t tags, ops, mtu;
	int k;
	int random_card;      /* soft HCA RANDOM mode instead of MANUAL steps */
	unsigned faults;
	uint64_t events;
	int notm;             /* devices without tag matching (tm_dev.h): all
			       * in software, never a list op */
	size_t thresh;        /* the engine's offload_thresh (0: none) */
};


extern struct dstate S;
extern int diff_notm;         /* the current run's dcfg.notm */

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *grow(void *p, int *cap, int need, size_t sz);
int choose(int n);
uint8_t pattern(int node, uint32_t seq, size_t i);
uint8_t *rbuf(int slot);
uint8_t *sbuf(int node, int slot);
struct dsend *send_of(int node, uint32_t seq);

void log_ev(const struct ev *e);

/* diff_app.c: one application event each (a drawn one may do nothing);
 * ev_card returns whether the card step moved anything */
void arrival_hook(void *arg, const struct tm_arrival *a);
void ev_post(void);
void ev_cancel(void);
void ev_probe(int claim);         /* claim: a matched probe and imrecv */
void ev_send(void);
int ev_card(void);
/* a receive at node 0, a send from node to node 0, with this envelope */
void post_recv_env(int ctx, int src, int tag, size_t len);
void send_env(int node, int ctx, int tag, size_t len, unsigned flags);

/* diff_scancel.c */
void cancel_hook(void *arg, const struct tm_withdrawal *w);
void ev_scancel(void);            /* MPI_Cancel of a random send */

/* diff_ref.c: replays the log; fail()s on the first disagreement */
void reference_check(void);

/* diff_card.c */
void rev_reset(void);             /* run start: catch-alls posted */
void ev_rsend(void);              /* node 0 sends to a random node */
void rev_drain(void);             /* every node-0 send completed */
void rev_fini(void);              /* catch-alls cancelled and checked */
void rev_free(void);              /* records freed (also after a failure) */
void card_phase(void);            /* pre-posted receives: the card share */
void card_agree(void);            /* counts, entries, op slots at the end */

#endif
