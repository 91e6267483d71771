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
 * an RDMA device) gives one message per job (mtl_tm_show_error) and the
 * component declines; so does a parameter it cannot use (mtl_tm.c, at
 * init), naming the parameter, and a job no provider fits
 * (mtl_tm_select.c).
 *
 * Parameters.  Each layer describes its settings in a table (tm_param.h):
 * the engine's (engine/tm_engine_param.h: eager limit, buffers, offload,
 * keepalive, each with its default and bounds) and the device layer's
 * (dev/tm_dev_param.h: provider, registration cache, how much of the card
 * to use, the soft HCA's limits, with their environment variables).  One
 * loop makes every entry of both an MCA parameter, named and documented as
 * its table says; adding a setting to a table adds the parameter.  This
 * file writes no default of another layer and reads no environment.
 */
#include "mtl_tm.h"
#include "mtl_tm_pvar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

const struct tm_param *mtl_tm_setting(unsigned i)
{
	return i < MTL_TM_DEV0 ? tm_engine_param(i) :
			       tm_dev_param(i - MTL_TM_DEV0);
}

uint64_t mtl_tm_setting_value(unsigned i)
{
	const struct mtl_tm_params *p = &mtl_tm_params;

	switch (mtl_tm_setting(i)->type) {
	case TM_PARAM_UINT: return p->store[i].u;
	case TM_PARAM_U64: return p->store[i].u64;
	case TM_PARAM_SIZE: return p->store[i].sz;
	case TM_PARAM_BOOL: return p->store[i].b;
	case TM_PARAM_ENUM:
		/* a negative index is refused by the device layer */
		return p->store[i].e < 0 ? UINT64_MAX : (uint64_t)p->store[i].e;
	}
	return 0;
}

void mtl_tm_dev_values(uint64_t values[TM_DEV_NPARAMS])
{
	unsigned i;

	for (i = 0; i < TM_DEV_NPARAMS; i++)
		values[i] = mtl_tm_setting_value(MTL_TM_DEV0 + i);
}

/* Enumerators live as long as the variables that point at them. */
static mca_base_var_enum_value_t enum_values[MTL_TM_NSETTINGS][8];

static mca_base_var_enum_t *make_enum(unsigned i, const struct tm_param *d)
{
	mca_base_var_enum_t *e = NULL;
	char ename[64];
	unsigned k;

	for (k = 0; d->names[k] && k < 7; k++) {
		enum_values[i][k].value = (int)k;
		enum_values[i][k].string = d->names[k];
	}
	snprintf(ename, sizeof(ename), "mtl_tm_%s", d->name);
	if (mca_base_var_enum_create(ename, enum_values[i], &e) != OPAL_SUCCESS)
		return NULL;
	return e;
}

/* What ompi_info shows for a setting: its help, bounds, variable. */
static void setting_help(const struct tm_param *d, char *help, size_t size)
{
	int n = snprintf(help, size, "%s", d->help);

	if (d->max && d->type != TM_PARAM_BOOL && n >= 0 && (size_t)n < size)
		n += snprintf(help + n, size - n, " (%llu to %llu)",
			      (unsigned long long)d->min,
			      (unsigned long long)d->max);
	if (n >= 0 && (size_t)n < size)
		n += snprintf(help + n, size - n, ".");
	if (d->env && n >= 0 && (size_t)n < size)
		snprintf(help + n, size - n,
			 " Default from the environment variable %s if set.",
			 d->env);
}

/* Setting i as an MCA variable, its storage set to value first. */
static int register_setting(unsigned i, uint64_t value)
{
	const struct tm_param *d = mtl_tm_setting(i);
	struct mtl_tm_params *p = &mtl_tm_params;
	int level = d->expert ? OPAL_INFO_LVL_9 : OPAL_INFO_LVL_4;
	mca_base_var_enum_t *e;
	char help[768];
	int var = -1;

	setting_help(d, help, sizeof(help));
	switch (d->type) {
	case TM_PARAM_UINT:
		p->store[i].u = (unsigned int)value;
		return reg(d->name, help, MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL,
			   0, level, &p->store[i].u);
	case TM_PARAM_U64:
		p->store[i].u64 = value;
		return reg(d->name, help, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG,
			   NULL, 0, level, &p->store[i].u64);
	case TM_PARAM_SIZE:
		p->store[i].sz = (size_t)value;
		return reg(d->name, help, MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0,
			   level, &p->store[i].sz);
	case TM_PARAM_BOOL:
		p->store[i].b = value != 0;
		return reg(d->name, help, MCA_BASE_VAR_TYPE_BOOL, NULL, 0,
			   level, &p->store[i].b);
	case TM_PARAM_ENUM:
		e = make_enum(i, d);
		p->store[i].e = (int)value;
		var = reg(d->name, help, MCA_BASE_VAR_TYPE_INT, e, 0, level,
			  &p->store[i].e);
		if (e)
			OBJ_RELEASE(e);
		break;
	}
	return var;
}

/*
 * Every described setting of the engine and the device layer, with its
 * layer's default: the device layer gives its defaults with their
 * environment variables applied, so that ompi_info shows what a run would
 * use and an explicit MCA setting wins over the environment.
 */
static void register_settings(void)
{
	struct mtl_tm_params *p = &mtl_tm_params;
	uint64_t dev[TM_DEV_NPARAMS];
	struct tm_engine_config ecfg;
	unsigned i;

	tm_engine_config_default(&ecfg);
	p->dev_env_rc = tm_dev_param_defaults(dev, &p->dev_env_bad);
	for (i = 0; i < MTL_TM_NSETTINGS; i++)
		p->var[i] = register_setting(i, i < MTL_TM_DEV0 ?
					     tm_engine_param_get(&ecfg, i) :
					     dev[i - MTL_TM_DEV0]);
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

	p->priority = 50;
	p->verbose = 0;
	p->rndv_threshold = 0;
	reg("priority",
	    "Priority of the tm MTL when it offers itself (pml cm competes with pml ob1 at 20). It offers itself only if the mtl selection names tm or a TM-capable HCA is present.",
	    MCA_BASE_VAR_TYPE_INT, NULL, 0, OPAL_INFO_LVL_3, &p->priority);
	reg("verbose",
	    "Verbosity of the tm MTL (0: errors only; 10: selection, device and peer set-up, statistics at finalize; 20: more set-up detail)",
	    MCA_BASE_VAR_TYPE_INT, NULL, 0, OPAL_INFO_LVL_5, &p->verbose);
	/*
	 * Not a synonym of eager_limit: it meant eager_limit + 1, and a
	 * synonym would carry the value over unchanged.
	 */
	p->rndv_var = reg("rndv_threshold",
	    "Deprecated: use mtl_tm_eager_limit. If set, messages of at least this many bytes use rendezvous (eager_limit = rndv_threshold - 1).",
	    MCA_BASE_VAR_TYPE_SIZE_T, NULL, MCA_BASE_VAR_FLAG_DEPRECATED,
	    OPAL_INFO_LVL_9, &p->rndv_threshold);
	mtl_tm.connect_timeout_ms = 60000;
	reg("connect_timeout",
	    "Milliseconds a connection to a peer may take, from its first use (mtl tm connects on first use); past that, the requests naming that peer fail. A peer answers only while it is in an MPI call, so this covers a peer busy outside MPI.",
	    MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, OPAL_INFO_LVL_5,
	    &mtl_tm.connect_timeout_ms);
	register_settings();
	mtl_tm_pvar_register();
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
 * between Open MPI 4.1 and 5.0).  Returns the marker's descriptor (written to
 * once the message is out: report_done), -1 if another process reports,
 * -2 if there is no marker to decide by (a singleton: report).
 */
static int claim_report(const char *topic, char *path, size_t len)
{
	const char *dir = mtl_tm_marker_dir();
	int fd;

	if (!dir)
		return -2;
	snprintf(path, len, "%s/mtl_tm.%u.%s", dir,
		 (unsigned)OMPI_PROC_MY_NAME->jobid, topic);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	opal_output_verbose(20, mtl_tm_output, "mtl tm: marker %s: %s", path,
			    fd < 0 ? strerror(errno) : "created");
	if (fd < 0)
		return errno == EEXIST ? -1 : -2;
	return fd;
}

static void report_done(int fd)
{
	if (fd < 0)
		return;
	if (write(fd, "reported\n", 9) < 0)
		opal_output_verbose(20, mtl_tm_output, "mtl tm: marker: %s",
				    strerror(errno));
	close(fd);
}

/*
 * A process that does not report returns its error, which may make mpirun
 * abort the job: it first gives the reporter a moment to print (until the
 * marker says so, here; a fixed moment on the other nodes), so that the
 * one message is not lost with a reporter killed half way.
 */
#define REPORT_WAIT_MS 2000

static void wait_reported(const char *path)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	struct stat st;
	int ms;

	for (ms = 0; ms < REPORT_WAIT_MS; ms += 10) {
		if (path && !stat(path, &st) && st.st_size > 0)
			return;
		nanosleep(&tick, NULL);
	}
}

/*
 * Does this node run rank 0 of the job?  From the job's ranks on this node
 * as PMIx lists them ("0,1,2"); yes when that is not known (a singleton).
 */
static bool node_has_rank0(void)
{
	opal_process_name_t wild;
	char *peers = NULL, *p, *end;
	bool yes = false;
	int rc;

	wild.jobid = OMPI_PROC_MY_NAME->jobid;
	wild.vpid = OMPI_NAME_WILDCARD->vpid;
	OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, MTL_TM_KEY_LOCAL_PEERS, &wild, &peers,
				       MTL_TM_TYPE_STRING);
	if (rc != OPAL_SUCCESS || !peers)
		return true;
	for (p = peers; *p && !yes; p = *end ? end + 1 : end) {
		yes = strtoul(p, &end, 10) == 0 && end != p;
		if (end == p)
			break;
	}
	free(peers);
	return yes;
}

/*
 * An error the user must see once, not once per rank or per node, and
 * reliably: printed on stderr, which mpirun forwards even when the job is
 * aborted right after.  (Open MPI's show_help, which counts duplicates at
 * mpirun, loses the message or garbles it when MPI_Init fails at once:
 * "ORTE_ERROR_LOG: Data unpack would read past end of buffer ...
 * show_help.c": lost in 2 of 12 runs of a refused parameter, with that
 * error in 2 more.)  So one process prints it: until the job has agreed on
 * its provider (init and the first add_procs, which every rank goes
 * through alike), the first one to get here on the node of rank 0 (a
 * marker in the session directory decides); later (a communicator rank 0
 * may not be in), the first one on each node.  The others say only that
 * they decline, at verbosity 10, and give it time to get out
 * (wait_reported).
 */
void mtl_tm_show_error(const char *topic, const char *fmt, ...)
{
	static const char dashes[] =
		"--------------------------------------------------------------------------";
	bool in_init = !mtl_tm.agreed;
	char body[1024], path[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	bool here = !in_init || node_has_rank0();
	int fd = here ? claim_report(topic, path, sizeof(path)) : -1;

	if (fd != -1) {
		fprintf(stderr, "%s\nmtl tm (%s): %s\n%s\n", dashes, topic,
			body, dashes);
		fflush(stderr);
		report_done(fd);
		return;
	}
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: rank %u: %s (the message is printed once per job)",
			    (unsigned)OMPI_PROC_MY_NAME->vpid, topic);
	wait_reported(here ? path : NULL);
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
	const char *const *names = tm_dev_param(TM_DEV_P_PROVIDER)->names;
	uint64_t v = mtl_tm_setting_value(MTL_TM_DEV0 + TM_DEV_P_PROVIDER);
	unsigned i;

	for (i = 0; names[i]; i++)
		if (i == v)
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
	if (mtl_tm_module_init() != OMPI_SUCCESS)
		return NULL;
	return &mtl_tm.super;
}
