/*
 * mtl_tm_pvar.c - MPI_T performance variables (mtl_tm_pvar.h has the
 * contract).  One table names each variable and the field of struct
 * tm_engine_stats it shows; the statistics line (mtl_tm.c, log_stats)
 * reads the same table through mtl_tm_pvar_read().
 */
#include <stddef.h>
#include <string.h>
#include "mtl_tm.h"
#include "mtl_tm_pvar.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "ompi/communicator/communicator.h"

struct pv_desc {
	const char *name;        /* after "mtl_tm_" */
	const char *help;
	int var_class;
	size_t off;              /* in struct tm_engine_stats */
	size_t size;             /* 4 or 8 bytes */
};

#define STAT(f) offsetof(struct tm_engine_stats, f), \
	sizeof(((struct tm_engine_stats *)0)->f)
#define COUNTER(id, nm, f, h) \
	[id] = { nm, h, MCA_BASE_PVAR_CLASS_COUNTER, STAT(f) }

static const struct pv_desc pv[MTL_TM_PV_N] = {
	COUNTER(MTL_TM_PV_RECEIVES, "receives", recv_posted,
		"Receives posted"),
	COUNTER(MTL_TM_PV_TO_CARD, "receives_to_card", recv_to_card,
		"Receives placed on the card's matching list when posted"),
	COUNTER(MTL_TM_PV_FROM_UQ, "receives_from_unexpected", sw_matched_uq,
		"Receives that matched a message already in the unexpected queue"),
	COUNTER(MTL_TM_PV_SW_CONFLICT, "sw_conflict", sw_conflict,
		"Receives kept in software when posted: an earlier receive held in software could take the same message (MPI's order)"),
	COUNTER(MTL_TM_PV_SW_LIST_FULL, "sw_list_full", sw_list_full,
		"Receives kept in software when posted: no free entry on the card's list"),
	COUNTER(MTL_TM_PV_SW_OPS_BUSY, "sw_ops_busy", sw_ops_full,
		"Receives kept in software when posted: no free list-operation slot"),
	COUNTER(MTL_TM_PV_SW_SMALL_BUF, "sw_small_buffer", sw_small_buf,
		"Receives kept in software when posted: no staging buffers, and the buffer may be too small for a rendezvous header"),
	COUNTER(MTL_TM_PV_SW_LONG_BUF, "sw_long_buffer", sw_long_buf,
		"Receives kept in software when posted: longer than the device reads at once (max_msg_sz)"),
	COUNTER(MTL_TM_PV_SW_NO_STAGE, "sw_no_staging", sw_no_stage,
		"Receives kept in software when posted: a small buffer and no staging buffer free"),
	COUNTER(MTL_TM_PV_SW_NO_OFFLOAD, "sw_offload_off", sw_no_offload,
		"Receives kept in software when posted: mtl_tm_offload is false (the device has tag matching)"),
	COUNTER(MTL_TM_PV_SW_NO_TM, "sw_no_tag_matching", sw_no_tm,
		"Receives kept in software when posted: the job runs without tag matching (an RDMA device or a soft HCA without it), where every receive not taken from the unexpected queue is one"),
	COUNTER(MTL_TM_PV_SW_BELOW_THRESH, "sw_below_threshold", sw_below_thresh,
		"Receives kept in software when posted: shorter than mtl_tm_offload_thresh (matched in software, which costs the host less than the card's list operations)"),
	COUNTER(MTL_TM_PV_SW_REG_FAIL, "sw_registration_failed", sw_reg_fail,
		"Receives kept in software when posted: their buffer could not be registered"),
	COUNTER(MTL_TM_PV_CARD_MATCHED, "card_matched", card_matched,
		"Messages the card matched to a posted receive"),
	COUNTER(MTL_TM_PV_UNEXPECTED, "unexpected", unexpected,
		"Messages that arrived before a matching receive was on the card"),
	COUNTER(MTL_TM_PV_RNDV_CARD, "rndv_card", rndv_card,
		"Rendezvous messages whose data the card read"),
	COUNTER(MTL_TM_PV_RNDV_SW, "rndv_sw", rndv_sw,
		"Rendezvous messages whose data software read"),
	COUNTER(MTL_TM_PV_TRUNCATED, "truncated", truncated,
		"Receives that ended truncated (MPI_ERR_TRUNCATE)"),
	COUNTER(MTL_TM_PV_CANCELLED, "recv_cancelled", cancel_ok,
		"Receives cancelled (MPI_Cancel)"),
	COUNTER(MTL_TM_PV_SCANCEL_REQ, "send_cancels", scancel_req,
		"MPI_Cancel calls on sends the engine acted on"),
	COUNTER(MTL_TM_PV_SCANCEL_OK, "send_cancels_ok", scancel_ok,
		"Send cancels that withdrew the send (never delivered)"),
	COUNTER(MTL_TM_PV_SCANCEL_LATE, "send_cancels_late", scancel_late,
		"Send cancels too late: the receiver had matched the send"),
	COUNTER(MTL_TM_PV_SYNCS, "syncs", syncs,
		"Explicit synchronisation operations posted to the card (after unexpected messages)"),
	COUNTER(MTL_TM_PV_PROMOTED, "promoted", promoted,
		"Receives held in software and moved to the card later"),
	COUNTER(MTL_TM_PV_ERRORS, "errors", errors,
		"Error completions (a failed peer, a QP in error)"),
	COUNTER(MTL_TM_PV_UNEXP_THROTTLED, "unexp_throttled", unexp_throttled,
		"Unexpected messages that kept their plain buffer, not copied: their copies had reached mtl_tm_unexpected_mem"),
	COUNTER(MTL_TM_PV_UNEXP_SPILLED, "unexp_spilled", unexp_spilled,
		"Held unexpected messages copied out over mtl_tm_unexpected_mem because none was received for a millisecond"),
	[MTL_TM_PV_CARD_ENTRIES] = { "card_entries",
		"Entries on the card's matching list now",
		MCA_BASE_PVAR_CLASS_LEVEL, STAT(card_entries) },
	[MTL_TM_PV_CARD_ENTRIES_HWM] = { "card_entries_hwm",
		"The most entries the card's matching list held at once",
		MCA_BASE_PVAR_CLASS_HIGHWATERMARK, STAT(card_entries_max) },
};

static unsigned long long field(const struct tm_engine_stats *st,
				const struct pv_desc *d)
{
	const char *p = (const char *)st + d->off;

	if (d->size == sizeof(uint32_t))
		return *(const uint32_t *)p;
	return *(const uint64_t *)p;
}

/* The engine's statistics now; all 0 with no engine open. */
static void stats_now(struct tm_engine_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!mtl_tm.eng)
		return;
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	tm_engine_get_stats(mtl_tm.eng, st);
	OPAL_THREAD_UNLOCK(&mtl_tm.lock);
}

void mtl_tm_pvar_read(unsigned long long v[MTL_TM_PV_N])
{
	struct tm_engine_stats st;
	int i;

	stats_now(&st);
	for (i = 0; i < MTL_TM_PV_N; i++)
		v[i] = field(&st, &pv[i]);
}

static int get_stat(const struct mca_base_pvar_t *pvar, void *value,
		    void *obj)
{
	struct tm_engine_stats st;

	stats_now(&st);
	*(unsigned long long *)value = field(&st, pvar->ctx);
	return OPAL_SUCCESS;
}

/* ---- per communicator ----------------------------------------------- */

enum { COMM_POSTED, COMM_UNEXPECTED };
static const int comm_which[] = { COMM_POSTED, COMM_UNEXPECTED };

/*
 * One value per communicator.  The tool passes the address of its MPI_Comm
 * (MPI-3.1 14.3.7); MPI_T_pvar_handle_alloc hands the communicator itself
 * down, as pml ob1's queue lengths take it.
 */
static int comm_notify(struct mca_base_pvar_t *pvar,
		       mca_base_pvar_event_t event, void *obj, int *count)
{
	if (event != MCA_BASE_PVAR_HANDLE_BIND)
		return OPAL_SUCCESS;
	if (!obj || ompi_comm_invalid((struct ompi_communicator_t *)obj))
		return OPAL_ERR_BAD_PARAM;
	*count = 1;
	return OPAL_SUCCESS;
}

static int get_comm_queue(const struct mca_base_pvar_t *pvar, void *value,
			  void *obj)
{
	struct ompi_communicator_t *comm = obj;
	uint64_t posted = 0, unexpected = 0;

	if (mtl_tm.eng) {
		OPAL_THREAD_LOCK(&mtl_tm.lock);
		tm_engine_ctx_queues(mtl_tm.eng, mtl_tm_comm_cid(comm),
				     &posted, &unexpected);
		OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	}
	*(unsigned long long *)value =
		*(const int *)pvar->ctx == COMM_POSTED ? posted : unexpected;
	return OPAL_SUCCESS;
}

/* ---- registration ---------------------------------------------------- */

static void reg(const char *name, const char *help, int var_class, int bind,
		mca_base_get_value_fn_t get, mca_base_notify_fn_t notify,
		const void *ctx)
{
	int rc;

	rc = mca_base_component_pvar_register(
		&mca_mtl_tm_component.mtl_version, name, help,
		OPAL_INFO_LVL_4, var_class,
		MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, bind,
		MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
		get, NULL, notify, (void *)ctx);
	/* a tool misses one variable; MPI works on */
	if (rc < 0)
		opal_output(0, "mtl tm: cannot register pvar mtl_tm_%s: %d",
			    name, rc);
}

/* Connections made through the connection manager (loopback not
 * counted): a rank holds what it talks to. */
static int get_connected(const struct mca_base_pvar_t *pvar, void *value,
			 void *obj)
{
	(void)pvar;
	(void)obj;
	*(unsigned long long *)value = 0;
	if (!mtl_tm.eng)
		return OPAL_SUCCESS;
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	*(unsigned long long *)value = mtl_tm.nconnected;
	OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	return OPAL_SUCCESS;
}

void mtl_tm_pvar_register(void)
{
	int i;

	for (i = 0; i < MTL_TM_PV_N; i++)
		reg(pv[i].name, pv[i].help, pv[i].var_class,
		    MCA_BASE_VAR_BIND_NO_OBJECT, get_stat, NULL, &pv[i]);
	reg("connected_peers",
	    "Peers this rank is connected to (connections made on first use, by either side; the loopback not counted)",
	    MCA_BASE_PVAR_CLASS_LEVEL, MCA_BASE_VAR_BIND_NO_OBJECT,
	    get_connected, NULL, NULL);
	reg("posted_recvq_length",
	    "Receives posted on a communicator and not yet matched",
	    MCA_BASE_PVAR_CLASS_SIZE, MCA_BASE_VAR_BIND_MPI_COMM,
	    get_comm_queue, comm_notify, &comm_which[COMM_POSTED]);
	reg("unexpected_msgq_length",
	    "Messages arrived on a communicator and not yet received (nor claimed by a matched probe)",
	    MCA_BASE_PVAR_CLASS_SIZE, MCA_BASE_VAR_BIND_MPI_COMM,
	    get_comm_queue, comm_notify, &comm_which[COMM_UNEXPECTED]);
}
