/*
 * mtl_tm_component.c - the MCA side of mtl tm: parameters, open/close,
 * selection, init.
 *
 * Selection.  pml cm takes the priority of the MTL it selects and competes
 * with pml ob1 (20).  A plain mpirun on a machine without a TM-capable
 * card must keep Open MPI's usual transport, so the component only offers
 * itself when
 *   - the user asked for it: the "mtl" selection includes "tm"
 *     (--mca mtl tm, OMPI_MCA_mtl=tm, a params file), or
 *   - a TM-capable real HCA is present (libibverbs device with
 *     IBV_TM_CAP_RC),
 * and then with mtl_tm_priority (default 50, above ob1).  Otherwise it
 * declines in query, before init, so the soft HCA is never even opened.
 * Both conditions come from the job's environment and the node's
 * hardware, so every rank of a job on uniform nodes decides alike, as the
 * PML consistency check requires; on mixed nodes, say --mca mtl tm or
 * --mca mtl ^tm.
 *
 * A requested provider that is not there (mtl_tm_provider verbs without
 * a card) gives one message per node (mtl_tm_show_error) and the
 * component declines.
 */
#include "mtl_tm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/util/output.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/mca/rte/rte.h"

#include "softhca/softhca.h"
#include "verbs/tm_verbs.h"

struct mtl_tm_params mtl_tm_params;
int mtl_tm_output = -1;

static int mtl_tm_component_register(void);
static int mtl_tm_component_open(void);
static int mtl_tm_component_close(void);
static int mtl_tm_component_query(mca_base_module_t **module, int *priority);
static mca_mtl_base_module_t *mtl_tm_component_init(bool progress_threads,
						    bool mpi_threads);

mca_mtl_base_component_2_0_0_t mca_mtl_tm_component = {
	.mtl_version = {
		MCA_MTL_BASE_VERSION_2_0_0,
		.mca_component_name = "tm",
		MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
		.mca_open_component = mtl_tm_component_open,
		.mca_close_component = mtl_tm_component_close,
		.mca_query_component = mtl_tm_component_query,
		.mca_register_component_params = mtl_tm_component_register,
	},
	.mtl_data = {
		MCA_BASE_METADATA_PARAM_NONE
	},
	.mtl_init = mtl_tm_component_init,
};

static const mca_base_var_enum_value_t provider_values[] = {
	{ MTL_TM_PROVIDER_AUTO, "auto" },
	{ MTL_TM_PROVIDER_SOFT, "soft" },
	{ MTL_TM_PROVIDER_VERBS, "verbs" },
	{ 0, NULL }
};

/* MANUAL is for unit tests only: under MPI nothing would ever step it. */
static const mca_base_var_enum_value_t sched_values[] = {
	{ SOFTHCA_SCHED_AUTO, "auto" },
	{ SOFTHCA_SCHED_RANDOM, "random" },
	{ 0, NULL }
};

static void reg(const char *name, const char *help, mca_base_var_type_t type,
		mca_base_var_enum_t *enumerator, mca_base_var_info_lvl_t level,
		void *storage)
{
	(void)mca_base_component_var_register(&mca_mtl_tm_component.mtl_version,
					      name, help, type, enumerator, 0,
					      0, level,
					      MCA_BASE_VAR_SCOPE_READONLY,
					      storage);
}

static void reg_enum(const char *name, const char *help,
		     const mca_base_var_enum_value_t *values,
		     mca_base_var_info_lvl_t level, int *storage)
{
	mca_base_var_enum_t *e = NULL;
	char ename[64];

	snprintf(ename, sizeof(ename), "mtl_tm_%s", name);
	if (mca_base_var_enum_create(ename, values, &e) != OPAL_SUCCESS)
		e = NULL;
	reg(name, help, MCA_BASE_VAR_TYPE_INT, e, level, storage);
	if (e)
		OBJ_RELEASE(e);
}

static int mtl_tm_component_register(void)
{
	struct mtl_tm_params *p = &mtl_tm_params;
	struct softhca_config sh;

	/*
	 * The soft HCA's defaults (and its SOFTHCA_* environment) become the
	 * parameters' defaults, so ompi_info shows what a run would use; an
	 * explicit MCA setting wins over the environment.
	 */
	softhca_config_default(&sh);
	(void)softhca_config_from_env(&sh);

	p->priority = 50;
	p->verbose = 0;
	p->provider = MTL_TM_PROVIDER_AUTO;
	p->eager_limit = 8192;
	p->rndv_threshold = 8193;
	p->max_tags = 0;
	p->max_ops = 0;
	p->n_plain = 1024;
	p->plain_size = 8192 + 64;
	p->send_slots = 256;
	p->offload = true;
	p->keepalive_ms = 1000;
	p->sh_mtu = sh.mtu;
	p->sh_ring_depth = sh.ring_depth;
	p->sh_max_num_tags = sh.max_num_tags;
	p->sh_max_ops = sh.max_ops;
	p->sh_max_rndv_hdr_size = sh.max_rndv_hdr_size;
	p->sh_max_qp = sh.max_qp;
	p->sh_max_mr = sh.max_mr;
	p->sh_max_wr = sh.max_wr;
	p->sh_sched = sh.sched == SOFTHCA_SCHED_RANDOM ? SOFTHCA_SCHED_RANDOM :
		      SOFTHCA_SCHED_AUTO;
	p->sh_seed = sh.seed;

	reg("priority",
	    "Priority of the tm MTL when it offers itself (pml cm competes with pml ob1 at 20). It offers itself only if the mtl selection names tm or a TM-capable HCA is present.",
	    MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_3, &p->priority);
	reg("verbose",
	    "Verbosity of the tm MTL (0: errors only; 10: selection, device and peer set-up; 50: per-call tracing)",
	    MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, &p->verbose);
	reg_enum("provider",
		 "Device provider: auto (a TM-capable libibverbs device if present, else the soft HCA), soft (the built-in soft HCA), verbs (a real TM-capable HCA through libibverbs; fails if none). The environment variable TM_DEV_PROVIDER overrides it.",
		 provider_values, OPAL_INFO_LVL_3, &p->provider);
	reg("eager_limit",
	    "Largest payload in bytes sent eagerly (in one message with the tag header); larger ones use rendezvous. Bounded by plain_buffer_size.",
	    MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_4, &p->eager_limit);
	reg("rndv_threshold",
	    "Messages of at least this many bytes use rendezvous (the card reads the sender's buffer). The effective eager size is the smaller of eager_limit and rndv_threshold - 1.",
	    MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_4,
	    &p->rndv_threshold);
	reg("max_tags",
	    "Tagged receive entries to use on the card's matching list (0: all the device offers)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_5,
	    &p->max_tags);
	reg("max_ops",
	    "Outstanding tag-list operations to use on the card (0: all the device offers)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_5,
	    &p->max_ops);
	reg("plain_buffers",
	    "Plain receive buffers posted to the TM-SRQ (unexpected and control messages land there; < 32768)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_5,
	    &p->n_plain);
	reg("plain_buffer_size",
	    "Size in bytes of each plain receive buffer; must hold the tag header plus eager_limit bytes",
	    MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, &p->plain_size);
	reg("send_slots",
	    "Registered send buffers for eager sends and control messages",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_5,
	    &p->send_slots);
	reg("offload",
	    "Post receives to the card (false: keep every receive in software, for comparison)",
	    MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_5, &p->offload);
	reg("keepalive_ms",
	    "A send waiting this many milliseconds for its peer's reply (rendezvous FIN, synchronous-send ACK) probes the peer, so that a dead peer fails it instead of hanging (0: the engine's default, 1000)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_5,
	    &p->keepalive_ms);

	reg("softhca_mtu",
	    "Soft HCA: path MTU in bytes (packet payload size; eager messages above it complete in two steps as on a card)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9, &p->sh_mtu);
	reg("softhca_ring_depth",
	    "Soft HCA: packets per QP inbound ring in shared memory",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_ring_depth);
	reg("softhca_max_num_tags",
	    "Soft HCA: tagged entries its matching list holds (a ConnectX-5 reports 1023)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_max_num_tags);
	reg("softhca_max_ops",
	    "Soft HCA: outstanding tag-list operations it accepts",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_max_ops);
	reg("softhca_max_rndv_hdr_size",
	    "Soft HCA: largest rendezvous header (TMH + RVH + metadata) in bytes",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_max_rndv_hdr_size);
	reg("softhca_max_qp",
	    "Soft HCA: QPs per context (raised to the job size if smaller: one QP per peer)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_max_qp);
	reg("softhca_max_mr",
	    "Soft HCA: memory registrations per context",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_max_mr);
	reg("softhca_max_wr",
	    "Soft HCA: work requests per send or receive queue",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_9,
	    &p->sh_max_wr);
	reg_enum("softhca_sched",
		 "Soft HCA: how much card work each verbs call does: auto (all that is ready) or random (a random amount, to shake out races)",
		 sched_values, OPAL_INFO_LVL_9, &p->sh_sched);
	reg("softhca_seed",
	    "Soft HCA: seed of the random scheduling mode (0: from pid and time)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, OPAL_INFO_LVL_9,
	    &p->sh_seed);
	return OMPI_SUCCESS;
}

static int mtl_tm_component_open(void)
{
	mtl_tm_output = opal_output_open(NULL);
	opal_output_set_verbosity(mtl_tm_output, mtl_tm_params.verbose);
	return OMPI_SUCCESS;
}

static int mtl_tm_component_close(void)
{
	if (mtl_tm_output >= 0)
		opal_output_close(mtl_tm_output);
	mtl_tm_output = -1;
	return OMPI_SUCCESS;
}

/*
 * Is this the first process of the job on this node to report topic?
 * Decided by creating a marker in the session directory of mpirun's job
 * family, which lives until mpirun ends (the job's own directory is
 * cleaned as soon as the job aborts, while late ranks may still get here)
 * and is removed with it.  Without one (singleton), yes.
 */
static bool first_to_report(const char *topic)
{
	const char *dir = ompi_process_info.jobfam_session_dir;
	char path[4096];
	int fd;

	if (!dir)
		return true;
	snprintf(path, sizeof(path), "%s/mtl_tm.%u.%s", dir,
		 (unsigned)OMPI_PROC_MY_NAME->jobid, topic);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	opal_output_verbose(20, mtl_tm_output, "mtl tm: marker %s: %s", path,
			    fd < 0 ? strerror(errno) : "created");
	if (fd < 0)
		return errno != EEXIST;
	close(fd);
	return true;
}

/*
 * An error the user must see once, not once per rank.  Every rank of a
 * node hits it alike (it comes from parameters or the node's hardware), so
 * the first to get there prints it on stderr, the others only at verbosity
 * 10.  Neither orte_show_help (when a failing MPI_Init follows, mpirun
 * loses the message about half the time: "Data unpack would read past end
 * of buffer") nor "local rank 0 prints" (the job may be aborted by a faster
 * rank before rank 0 gets here) is reliable.
 */
void mtl_tm_show_error(const char *topic, const char *fmt, ...)
{
	static const char dashes[] =
		"--------------------------------------------------------------------------";
	char body[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	if (first_to_report(topic)) {
		fprintf(stderr, "%s\nmtl tm (%s): %s\n%s\n", dashes, topic, body,
			dashes);
		fflush(stderr);
	} else {
		opal_output_verbose(10, mtl_tm_output, "mtl tm (%s): %s",
				    topic, body);
	}
}

/* Does the "mtl" selection (an include list, not ^exclude) name tm? */
static bool tm_requested(void)
{
	const char *sel = ompi_mtl_base_framework.framework_selection;
	const char *p;
	size_t n;

	if (!sel || sel[0] == '^')
		return false;
	for (p = sel; *p; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		if (n == 2 && !strncmp(p, "tm", 2))
			return true;
	}
	return false;
}

/* The provider tm_dev_open() will use: TM_DEV_PROVIDER wins there too. */
static int effective_provider(void)
{
	const char *env = getenv("TM_DEV_PROVIDER");

	if (env && !strcmp(env, "soft"))
		return MTL_TM_PROVIDER_SOFT;
	if (env && !strcmp(env, "verbs"))
		return MTL_TM_PROVIDER_VERBS;
	if (env && !strcmp(env, "auto"))
		return MTL_TM_PROVIDER_AUTO;
	return mtl_tm_params.provider;
}

/*
 * Is there a libibverbs device with RC tag matching?  Opens each device
 * briefly; the soft HCA is not a libibverbs device and is not counted.
 */
static bool tm_card_present(void)
{
	const struct tm_verbs *v = &tm_verbs_ibv;
	struct ibv_device_attr_ex attr;
	struct ibv_device **list;
	struct ibv_context *ctx;
	bool found = false;
	int i, n = 0;

	list = v->get_device_list(&n);
	if (!list)
		return false;
	for (i = 0; i < n && !found; i++) {
		ctx = v->open_device(list[i]);
		if (!ctx)
			continue;
		memset(&attr, 0, sizeof(attr));
		if (!ibv_query_device_ex(ctx, NULL, &attr) &&
		    (attr.tm_caps.flags & IBV_TM_CAP_RC)) {
			found = true;
			opal_output_verbose(10, mtl_tm_output,
					    "mtl tm: TM-capable device %s",
					    v->get_device_name(list[i]));
		}
		v->close_device(ctx);
	}
	v->free_device_list(list);
	return found;
}

static int mtl_tm_component_query(mca_base_module_t **module, int *priority)
{
	bool requested = tm_requested();
	int prov = effective_provider();
	bool card = false;

	*module = NULL;
	*priority = -1;
	if (!requested || prov == MTL_TM_PROVIDER_VERBS)
		card = tm_card_present();
	if (!requested && !card) {
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: not requested (no tm in the mtl selection) and no TM-capable HCA: declining");
		return OMPI_ERR_NOT_AVAILABLE;
	}
	if (prov == MTL_TM_PROVIDER_VERBS && !card) {
		mtl_tm_show_error("no-verbs-device",
				  "The tm MTL was asked for the \"verbs\" provider (a real HCA with\n"
				  "hardware tag matching), but libibverbs lists no device with\n"
				  "IBV_TM_CAP_RC on host %s, so the tm MTL declines (with\n"
				  "--mca pml cm, MPI_Init then fails to select a PML).\n\n"
				  "Use --mca mtl_tm_provider soft (the built-in soft HCA) or auto.",
				  ompi_process_info.nodename ?
				  ompi_process_info.nodename : "?");
		return OMPI_ERR_NOT_AVAILABLE;
	}
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: offering priority %d (%s%s)",
			    mtl_tm_params.priority,
			    requested ? "requested" : "",
			    card ? (requested ? ", TM card" : "TM card") : "");
	*priority = mtl_tm_params.priority;
	*module = (mca_base_module_t *)&mtl_tm.super;
	return OMPI_SUCCESS;
}

static mca_mtl_base_module_t *mtl_tm_component_init(bool progress_threads,
						    bool mpi_threads)
{
	if (mtl_tm_module_init(mpi_threads) != OMPI_SUCCESS)
		return NULL;
	return &mtl_tm.super;
}
