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
 * an RDMA device) gives one message per node (mtl_tm_show_error) and the
 * component declines; so does a parameter it cannot use (mtl_tm.c, at
 * init), naming the parameter, and a job no provider fits
 * (mtl_tm_select.c).
 *
 * Parameters.  Each layer owns its settings and their defaults: the
 * engine's come from tm_engine_config_default(), the device layer's from
 * tm_dev_config_default() and, for the provider's own settings (provider
 * choice, registration cache, soft HCA limits), from the descriptors of
 * dev/tm_dev_param.h, which also name each one's environment variable.
 * This file writes no default of another layer and reads no environment.
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


struct mtl_tm_params mtl_tm_params;
int mtl_tm_output = -1;

static int mtl_tm_component_register(void);
static int mtl_tm_component_open(void);
static int mtl_tm_component_close(void);
static int mtl_tm_component_query(mca_base_module_t **module, int *priority);
static mca_mtl_base_module_t *mtl_tm_component_init(MTL_TM_INIT_PARAMS);

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

static int reg(const char *name, const char *help, mca_base_var_type_t type,
	       mca_base_var_enum_t *enumerator, int flags,
	       mca_base_var_info_lvl_t level, void *storage)
{
	return mca_base_component_var_register(&mca_mtl_tm_component.mtl_version,
					       name, help, type, enumerator, 0,
					       flags, level,
					       MCA_BASE_VAR_SCOPE_READONLY,
					       storage);
}

/* Enumerators live as long as the variables that point at them. */
static mca_base_var_enum_value_t dev_enum_values[TM_DEV_NPARAMS][8];

static mca_base_var_enum_t *dev_enum(unsigned i)
{
	const struct tm_dev_param *d = &tm_dev_params[i];
	mca_base_var_enum_t *e = NULL;
	char ename[64];
	unsigned k;

	for (k = 0; d->names[k] && k < 7; k++) {
		dev_enum_values[i][k].value = (int)k;
		dev_enum_values[i][k].string = d->names[k];
	}
	snprintf(ename, sizeof(ename), "mtl_tm_%s", d->name);
	if (mca_base_var_enum_create(ename, dev_enum_values[i], &e) !=
	    OPAL_SUCCESS)
		return NULL;
	return e;
}

/*
 * The device layer's settings (dev/tm_dev_param.h) as MCA parameters: the
 * layer gives each one's default with its environment variable applied, so
 * that ompi_info shows what a run would use and an explicit MCA setting
 * wins over the environment.
 */
static void register_dev_params(void)
{
	struct mtl_tm_params *p = &mtl_tm_params;
	const struct tm_dev_param *d;
	mca_base_var_enum_t *e;
	char help[768];
	unsigned i;
	int level;

	p->dev_env_rc = tm_dev_param_defaults(p->dev, &p->dev_env_bad);
	for (i = 0; i < TM_DEV_NPARAMS; i++) {
		d = &tm_dev_params[i];
		snprintf(help, sizeof(help),
			 "%s. Default from the environment variable %s if set.",
			 d->help, d->env);
		level = d->expert ? OPAL_INFO_LVL_9 : OPAL_INFO_LVL_3;
		switch (d->type) {
		case TM_DEV_PARAM_UINT:
			p->dev_store[i].u = (unsigned int)p->dev[i];
			p->dev_var[i] = reg(d->name, help,
					    MCA_BASE_VAR_TYPE_UNSIGNED_INT,
					    NULL, 0, level, &p->dev_store[i].u);
			break;
		case TM_DEV_PARAM_U64:
			p->dev_store[i].u64 = p->dev[i];
			p->dev_var[i] = reg(d->name, help,
					    MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG,
					    NULL, 0, level,
					    &p->dev_store[i].u64);
			break;
		case TM_DEV_PARAM_BOOL:
			p->dev_store[i].b = p->dev[i] != 0;
			p->dev_var[i] = reg(d->name, help,
					    MCA_BASE_VAR_TYPE_BOOL, NULL, 0,
					    level, &p->dev_store[i].b);
			break;
		case TM_DEV_PARAM_ENUM:
			e = dev_enum(i);
			p->dev_store[i].e = (int)p->dev[i];
			p->dev_var[i] = reg(d->name, help,
					    MCA_BASE_VAR_TYPE_INT, e, 0, level,
					    &p->dev_store[i].e);
			if (e)
				OBJ_RELEASE(e);
			break;
		}
	}
}

void mtl_tm_dev_values(uint64_t values[TM_DEV_NPARAMS])
{
	const struct mtl_tm_params *p = &mtl_tm_params;
	unsigned i;

	for (i = 0; i < TM_DEV_NPARAMS; i++) {
		switch (tm_dev_params[i].type) {
		case TM_DEV_PARAM_UINT: values[i] = p->dev_store[i].u; break;
		case TM_DEV_PARAM_U64: values[i] = p->dev_store[i].u64; break;
		case TM_DEV_PARAM_BOOL: values[i] = p->dev_store[i].b; break;
		case TM_DEV_PARAM_ENUM:
			/* a negative index is refused by the device layer */
			values[i] = p->dev_store[i].e < 0 ? UINT64_MAX :
				    (uint64_t)p->dev_store[i].e;
			break;
		}
	}
}

bool mtl_tm_var_set(int var)
{
	mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
	const void *value = NULL;

	if (var < 0 ||
	    mca_base_var_get_value(var, &value, &source, NULL) != OPAL_SUCCESS)
		return false;
	return source != MCA_BASE_VAR_SOURCE_DEFAULT;
}

static int mtl_tm_component_register(void)
{
	struct mtl_tm_params *p = &mtl_tm_params;
	struct tm_engine_config ecfg;
	struct tm_dev_config dcfg;

	/* Every default is its layer's own: no number is written twice. */
	tm_engine_config_default(&ecfg);
	tm_dev_config_default(&dcfg);
	p->priority = 50;
	p->verbose = 0;
	p->eager_limit = ecfg.eager_limit;
	p->rndv_threshold = 0;
	p->n_plain = ecfg.n_plain;
	p->send_slots = ecfg.n_send_slots;
	p->offload = ecfg.offload != 0;
	p->keepalive_ms = ecfg.keepalive_ms;
	p->max_tags = dcfg.max_num_tags;
	p->max_ops = dcfg.max_ops;

	reg("priority",
	    "Priority of the tm MTL when it offers itself (pml cm competes with pml ob1 at 20). It offers itself only if the mtl selection names tm or a TM-capable HCA is present.",
	    MCA_BASE_VAR_TYPE_INT, NULL, 0, OPAL_INFO_LVL_3, &p->priority);
	reg("verbose",
	    "Verbosity of the tm MTL (0: errors only; 10: selection, device and peer set-up, statistics at finalize; 20: more set-up detail)",
	    MCA_BASE_VAR_TYPE_INT, NULL, 0, OPAL_INFO_LVL_5, &p->verbose);
	p->eager_var = reg("eager_limit",
	    "Largest payload in bytes sent eagerly (in one message with the tag header); larger messages use rendezvous (the receiver's card reads the sender's buffer). Also sizes each plain receive buffer and send slot.",
	    MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, OPAL_INFO_LVL_4,
	    &p->eager_limit);
	/*
	 * Not a synonym of eager_limit: it meant eager_limit + 1, and a
	 * synonym would carry the value over unchanged.
	 */
	p->rndv_var = reg("rndv_threshold",
	    "Deprecated: use mtl_tm_eager_limit. If set, messages of at least this many bytes use rendezvous (eager_limit = rndv_threshold - 1).",
	    MCA_BASE_VAR_TYPE_SIZE_T, NULL, MCA_BASE_VAR_FLAG_DEPRECATED,
	    OPAL_INFO_LVL_9, &p->rndv_threshold);
	reg("max_tags",
	    "Tagged receive entries to use on the card's matching list (0: all the device offers)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, OPAL_INFO_LVL_5,
	    &p->max_tags);
	reg("max_ops",
	    "Outstanding tag-list operations on the card (0: as the hardware allows: 2 per tag + 2, within the device's command-queue limit)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, OPAL_INFO_LVL_5,
	    &p->max_ops);
	reg("plain_buffers",
	    "Plain receive buffers (each of eager_limit bytes plus the tag header) posted to the TM-SRQ: unexpected and control messages land there",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, OPAL_INFO_LVL_5,
	    &p->n_plain);
	reg("send_slots",
	    "Registered send buffers for eager sends and control messages (at least 1)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, OPAL_INFO_LVL_5,
	    &p->send_slots);
	reg("offload",
	    "Post receives to the card (false: keep every receive in software, for comparison)",
	    MCA_BASE_VAR_TYPE_BOOL, NULL, 0, OPAL_INFO_LVL_5, &p->offload);
	reg("keepalive_ms",
	    "A send waiting this many milliseconds for its peer's reply (rendezvous FIN, synchronous-send ACK) probes the peer, so that a dead peer fails it instead of hanging (0: the engine's default)",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, OPAL_INFO_LVL_5,
	    &p->keepalive_ms);
	register_dev_params();
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
 * Decided by creating a marker in a session directory that lives until
 * mpirun ends and is removed with it (mtl_tm_marker_dir(), which differs
 * between Open MPI 4.1 and 5.0).  Without one (singleton), yes.
 */
static bool first_to_report(const char *topic)
{
	const char *dir = mtl_tm_marker_dir();
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
 * the first to get there prints it (opal_output stream 0: stderr), the
 * others only at verbosity 10.  Neither orte_show_help (when a failing
 * MPI_Init follows, mpirun loses the message about half the time: "Data
 * unpack would read past end of buffer") nor "local rank 0 prints" (the job
 * may be aborted by a faster rank before rank 0 gets here) is reliable, and
 * opal_show_help would need a help file in Open MPI's own data directory,
 * which a component loaded from a build tree cannot put there.
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
		opal_output(0, "%s\nmtl tm (%s): %s\n%s", dashes, topic, body,
			    dashes);
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

/* Did the settings ask for a real card, nothing else? */
static bool verbs_required(void)
{
	const char *const *names = tm_dev_params[TM_DEV_P_PROVIDER].names;
	uint64_t v[TM_DEV_NPARAMS];
	unsigned i;

	mtl_tm_dev_values(v);
	for (i = 0; names[i]; i++)
		if (i == v[TM_DEV_P_PROVIDER])
			return !strcmp(names[i], "verbs");
	return false;
}

static int mtl_tm_component_query(mca_base_module_t **module, int *priority)
{
	bool requested = tm_requested();
	bool need_verbs = verbs_required();
	struct tm_dev_survey sv = { 0 };
	bool card = false;

	*module = NULL;
	*priority = -1;
	if (!requested || need_verbs) {
		tm_dev_survey(&sv);
		card = sv.verbs & TM_DEV_HAS_TM;
		if (sv.verbs)
			opal_output_verbose(10, mtl_tm_output,
					    "mtl tm: libibverbs device %s%s",
					    sv.verbs_name,
					    card ? " (tag matching)" : "");
	}
	if (!requested && !card) {
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: not requested (no tm in the mtl selection) and no TM-capable HCA: declining");
		return OMPI_ERR_NOT_AVAILABLE;
	}
	if (need_verbs && !(sv.verbs & TM_DEV_HAS_RC) && !card) {
		/* the verbs provider runs on any RDMA device, with tag
		 * matching or without (mtl_tm_select.c) */
		mtl_tm_show_no_local(0);
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

static mca_mtl_base_module_t *mtl_tm_component_init(MTL_TM_INIT_PARAMS)
{
	mtl_tm_init_no_accelerator();
	if (mtl_tm_module_init(mpi_threads) != OMPI_SUCCESS)
		return NULL;
	return &mtl_tm.super;
}
