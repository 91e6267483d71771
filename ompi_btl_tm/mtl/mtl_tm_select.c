/*
 * mtl_tm_select.c - which provider and mode the whole job uses (mtl_tm.h,
 * "One provider for the job").
 *
 * Each rank says what it could use (MTL_TM_CAN_*: a TM card, an RDMA
 * device without tag matching, the soft HCA with or without tag matching)
 * and on which node it runs; the rule, the same on every rank:
 *   - a TM card, when every rank has one;
 *   - the soft HCA, when the job is on one node (with tag matching when
 *     every rank's soft HCA offers it);
 *   - an RDMA device without tag matching (every message matched in
 *     software) otherwise, when every rank has one;
 *   - nothing: the job cannot use mtl tm, and says why.
 * At init a rank knows only itself and how many ranks share its node, so
 * it guesses (the rule applied as if every rank were like it) and opens
 * that; at add_procs the published offers decide, and the caller opens
 * again only when some rank guessed otherwise.  This file decides and
 * words the refusal; mtl_tm.c opens and connects.
 */
#include "mtl_tm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/proc/proc.h"
#include "opal/util/output.h"

const char *mtl_tm_use_name(int use)
{
	switch (use) {
	case MTL_TM_USE_CARD: return "tag-matching card";
	case MTL_TM_USE_SOFT: return "soft HCA";
	case MTL_TM_USE_SOFT_PLAIN: return "soft HCA without tag matching";
	case MTL_TM_USE_RDMA: return "RDMA without tag matching";
	}
	return "none";
}

const char *mtl_tm_can_str(uint32_t can, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s",
		 (can & MTL_TM_CAN_CARD) ? "a tag-matching card, " : "",
		 (can & MTL_TM_CAN_RDMA) ? "an RDMA device, " : "",
		 !(can & MTL_TM_CAN_SOFT) ? "" :
		 (can & MTL_TM_CAN_SOFT_TM) ? "the soft HCA with tag matching, " :
					      "the soft HCA without tag matching, ");
	if (!*buf)
		snprintf(buf, len, "nothing");
	else
		buf[strlen(buf) - 2] = '\0'; /* the last ", " */
	return buf;
}

/* "verbs", "soft" or "auto": the provider setting as resolved. */
static const char *provider_setting(void)
{
	const char *const *names = tm_dev_param(TM_DEV_P_PROVIDER)->names;
	uint64_t v[TM_DEV_NPARAMS];
	unsigned i;

	mtl_tm_dev_values(v);
	for (i = 0; names[i]; i++)
		if (i == v[TM_DEV_P_PROVIDER])
			return names[i];
	return "auto";
}

uint32_t mtl_tm_can_local(char *vname, size_t vlen)
{
	const char *prov = provider_setting();
	struct tm_dev_survey s;
	uint32_t can = 0;

	tm_dev_survey(&s);
	snprintf(vname, vlen, "%s", s.verbs_name);
	if (strcmp(prov, "soft")) {
		if (s.verbs & TM_DEV_HAS_TM)
			can |= MTL_TM_CAN_CARD;
		if (s.verbs & TM_DEV_HAS_RC)
			can |= MTL_TM_CAN_RDMA;
	}
	if (strcmp(prov, "verbs") && s.soft) {
		can |= MTL_TM_CAN_SOFT;
		if (s.soft & TM_DEV_HAS_TM)
			can |= MTL_TM_CAN_SOFT_TM;
	}
	return can;
}

int mtl_tm_choose(uint32_t all_can, bool one_node)
{
	if (all_can & MTL_TM_CAN_CARD)
		return MTL_TM_USE_CARD;
	if (one_node && (all_can & MTL_TM_CAN_SOFT))
		return (all_can & MTL_TM_CAN_SOFT_TM) ? MTL_TM_USE_SOFT :
							MTL_TM_USE_SOFT_PLAIN;
	if (all_can & MTL_TM_CAN_RDMA)
		return MTL_TM_USE_RDMA;
	return MTL_TM_USE_NONE;
}

void mtl_tm_use_config(int use, struct tm_dev_config *cfg)
{
	bool soft = use == MTL_TM_USE_SOFT || use == MTL_TM_USE_SOFT_PLAIN;

	cfg->provider = soft ? "soft" : "verbs";
	cfg->tm = use == MTL_TM_USE_CARD || use == MTL_TM_USE_SOFT ?
		  TM_DEV_TM_ON : TM_DEV_TM_OFF;
}

bool mtl_tm_one_node(void)
{
	return (uint32_t)ompi_process_info.num_local_peers + 1 >= mtl_tm.nprocs;
}

static const char *host(void)
{
	return ompi_process_info.nodename ? ompi_process_info.nodename : "?";
}

/* What to run instead, for a job that spans nodes. */
#define MTL_TM_INSTEAD \
	"Across nodes without an RDMA device, use --mca pml ob1 --mca btl\n" \
	"tcp,self,vader (or pml ucx); to use mtl tm there, give every node an\n" \
	"InfiniBand or RoCE device (the kernel's soft-RoCE, rdma_rxe, will do)."

void mtl_tm_show_no_local(uint32_t can)
{
	const char *prov = provider_setting();
	char offer[MTL_TM_CAN_STR_LEN];

	if (!strcmp(prov, "soft"))
		mtl_tm_show_error("no-provider",
				  "mtl_tm_provider is \"soft\" (the built-in soft HCA), but this job\n"
				  "spans several nodes (%u of its %u ranks run on host %s), and the\n"
				  "soft HCA reaches only the processes of its own node.  The tm MTL\n"
				  "declines.  Use mtl_tm_provider auto or verbs on RDMA devices.\n"
				  MTL_TM_INSTEAD,
				  ompi_process_info.num_local_peers + 1,
				  mtl_tm.nprocs, host());
	else if (!strcmp(prov, "verbs"))
		mtl_tm_show_error("no-provider",
				  "mtl_tm_provider is \"verbs\", but libibverbs lists no device on\n"
				  "host %s that can carry it (InfiniBand or RoCE, with an SRQ and an\n"
				  "active port), with or without tag matching.  The tm MTL declines.\n"
				  "Use mtl_tm_provider auto (the soft HCA, on one node).\n"
				  MTL_TM_INSTEAD, host());
	else
		mtl_tm_show_error("no-provider",
				  "this job spans several nodes (%u of its %u ranks run on host %s),\n"
				  "and host %s has no RDMA device the tm MTL can use between nodes\n"
				  "(InfiniBand or RoCE with an active port; the soft HCA reaches only\n"
				  "its own node).  The tm MTL declines.\n" MTL_TM_INSTEAD,
				  ompi_process_info.num_local_peers + 1,
				  mtl_tm.nprocs, host(), host());
	opal_output_verbose(10, mtl_tm_output, "mtl tm: rank %u offers %s",
			    mtl_tm.my_vpid,
			    mtl_tm_can_str(can, offer, sizeof(offer)));
}

/*
 * Does Open MPI place rank vpid on this node?  Its locality flags come from
 * the launcher (PMIx), not from host names, which the modex cuts to 63
 * characters: a long name made a one-node job look like several, two
 * hosts sharing a 63-character prefix like one.
 */
static bool on_my_node(uint32_t vpid)
{
	opal_process_name_t name = *OMPI_PROC_MY_NAME;
	ompi_proc_t *p;

	if (vpid == name.vpid)
		return true;
	name.vpid = vpid;
	p = (ompi_proc_t *)ompi_proc_for_name(name);
	return p && OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags);
}

/* The offer in a rank's modex blob, or -1 (none: it declined). */
static int64_t offer_of(uint32_t vpid, char *node, size_t len, int *use)
{
	opal_process_name_t name = *OMPI_PROC_MY_NAME;
	struct mtl_tm_modex *m = NULL;
	int32_t size = 0;
	int64_t can;
	int rc;

	name.vpid = vpid;
	rc = mtl_tm_modex_recv(&name, false, (void **)&m, &size);
	if (rc != OPAL_SUCCESS || !m || (size_t)size < sizeof(*m) ||
	    m->magic != MTL_TM_MODEX_MAGIC) {
		free(m);
		return -1;
	}
	snprintf(node, len, "%.*s", (int)sizeof(m->node), m->node);
	*use = (int)m->use;
	can = m->can;
	free(m);
	return can;
}

/* The refusal at add_procs: rank `bad` (host bhost) lacks what the rest
 * could have used together. */
static void show_no_common(uint32_t bad, const char *bhost, int64_t bcan,
			   bool one_node)
{
	if (bcan < 0)
		mtl_tm_show_error("no-provider",
				  "rank %u published no tm address: its tm MTL declined (see its\n"
				  "message), so this job cannot use mtl tm.", bad);
	else
		mtl_tm_show_error("no-provider",
				  "no provider every rank of this job can use: rank %u on host %s\n"
				  "offers %s%s%s%s, and the job %s.  The tm MTL cannot\n"
				  "mix providers.\n" MTL_TM_INSTEAD,
				  bad, bhost,
				  (bcan & MTL_TM_CAN_CARD) ? "a TM card, " : "",
				  (bcan & MTL_TM_CAN_RDMA) ? "an RDMA device, " : "",
				  (bcan & MTL_TM_CAN_SOFT) ? "the soft HCA, " : "",
				  bcan ? "nothing else" : "nothing",
				  one_node ? "runs on one node" :
					     "spans several nodes");
}

/* The first rank lacking what the job would need (for the message). */
static void name_culprit(bool one_node)
{
	uint32_t need = one_node ? MTL_TM_CAN_SOFT | MTL_TM_CAN_RDMA :
				   MTL_TM_CAN_RDMA;
	char node[sizeof(((struct mtl_tm_modex *)0)->node) + 1];
	int64_t can;
	uint32_t r;
	int u;

	for (r = 0; r < mtl_tm.nprocs; r++) {
		can = offer_of(r, node, sizeof(node), &u);
		if (can >= 0 && (can & need))
			continue;
		show_no_common(r, node, can, one_node);
		return;
	}
	show_no_common(0, host(), 0, one_node);
}

int mtl_tm_agree(int mine, int *use)
{
	char node[sizeof(((struct mtl_tm_modex *)0)->node) + 1];
	bool one_node = true, guessed = true;
	char offer[MTL_TM_CAN_STR_LEN];
	uint32_t r, all = ~0u;
	int64_t can;
	int u;

	for (r = 0; r < mtl_tm.nprocs; r++) {
		can = offer_of(r, node, sizeof(node), &u);
		if (can < 0) {
			show_no_common(r, "?", -1, true);
			return OMPI_ERR_UNREACH;
		}
		if (!on_my_node(r))
			one_node = false;
		if (u != mine)
			guessed = false;
		all &= (uint32_t)can;
	}
	*use = mtl_tm_choose(all, one_node);
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: rank %u: every rank of the job (on %s) offers %s: %s%s",
			    mtl_tm.my_vpid,
			    one_node ? "one node" : "several nodes",
			    mtl_tm_can_str(all, offer, sizeof(offer)),
			    mtl_tm_use_name(*use),
			    guessed ? "" : " (not every rank guessed it: opening again)");
	if (*use == MTL_TM_USE_NONE) {
		name_culprit(one_node);
		return OMPI_ERR_UNREACH;
	}
	return guessed && *use == mine ? OMPI_SUCCESS : OMPI_ERR_WOULD_BLOCK;
}

void mtl_tm_modex_fill(struct mtl_tm_modex *m, uint32_t can, int use)
{
	m->magic = MTL_TM_MODEX_MAGIC;
	m->can = can;
	m->use = (uint32_t)use;
	strncpy(m->node, host(), sizeof(m->node) - 1);
}
