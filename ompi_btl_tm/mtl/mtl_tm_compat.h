/*
 * mtl_tm_compat.h - what differs between the two Open MPI releases mtl tm
 * builds against, in one place, so that the rest of mtl/ is written once:
 * 4.1 (ORTE runtime, PMIx behind opal's pmix framework) and 5.0 (PRRTE
 * launches, opal calls PMIx directly).  OMPI_MAJOR_VERSION (ompi_config.h)
 * selects; configure refuses anything older than 4.1.
 *
 *   MTL_TM_DECLSPEC        visibility of the component symbol
 *   MTL_TM_MODEX_GLOBAL    modex scope: every process of the job reads it
 *   mtl_tm_comm_cid(c)     this process's context id of c: what its
 *                          receives and probes match in the tag
 *   mtl_tm_peer_cid(c, r, &cid)  the context id rank r of c knows c by:
 *                          what a send to r carries.  The same as ours for
 *                          a communicator made from another (dup, split,
 *                          ...: Open MPI agrees on one id, "global index");
 *                          for one made from a group (MPI-4 sessions, 5.0)
 *                          each process picks its own.  Then each member
 *                          publishes its id at add_comm (mtl_tm_publish_cid,
 *                          a PMIx key named after the communicator's
 *                          extended id, which all members share), and the
 *                          first send to a peer fetches the peer's (PMIx
 *                          waits for it to be published, at most
 *                          MTL_TM_CID_TIMEOUT s) into c->c_index_vec, where
 *                          Open MPI keeps remote ids.  Open MPI 5.0.7's own
 *                          route (ompi_comm_get_remote_cid, which asks the
 *                          PMIx group for PMIX_GROUP_LOCAL_CID) answers
 *                          "not found" under Debian 13's PRRTE 3.0.8.
 *   mtl_tm_publish_cid(c)  at add_comm: an OMPI status
 *   MTL_TM_FLAG_EXT_CID    tells pml cm the MTL copes with such ids (5.0;
 *                          without it pml cm refuses sessions)
 *   mtl_tm_marker_dir()    a directory that lives until mpirun ends and is
 *                          removed with it, or NULL (mtl_tm_show_error)
 *   MTL_TM_KEY_LOCAL_PEERS, MTL_TM_TYPE_STRING  the job's ranks on this
 *                          node, as OPAL_MODEX_RECV_VALUE_OPTIONAL names
 *                          the key and the string type
 *   mtl_tm_fence()         commits this process's modex data and waits
 *                          until every process of the job has, collecting
 *                          theirs; an OPAL status
 *   mtl_tm_modex_recv_now(p, key, &d, &size)  process p's blob under key
 *                          (OPAL_MODEX_SEND_STRING's byte object; free *d),
 *                          or OPAL_ERR_NOT_FOUND at once if the PMIx server
 *                          has none (PMIX_IMMEDIATE): without it a key that
 *                          was never published kept the caller waiting 2 s
 *                          (4.1: the server waits for it to be posted)
 *   MTL_TM_INIT_PARAMS     mtl_init's parameters; 5.0 adds an OUT flag:
 *   mtl_tm_init_no_accelerator()  sets it: the MTL moves host memory only
 *                          (the component's accelerator_support field, 5.0
 *                          only, stays false: zero-initialised)
 *   MTL_TM_ATTR_COPY_PARAMS  the parameters of Open MPI's internal copy
 *                          function of a communicator attribute (4.1 adds
 *                          the new communicator; mtl_tm_fini.c)
 *   MTL_TM_CONV_DEVICE     a convertor's flags that say its memory is a
 *                          device's (CUDA in 4.1, any accelerator in 5.0):
 *                          never in place (mtl_tm_data.h)
 *   MTL_TM_CONV_THIN       4.1 only (without heterogeneous support): the
 *                          flags, of those mtl_tm_data.h tests, of pml
 *                          cm's thin send convertor, which pml cm builds
 *                          by hand for contiguous data (5.0 prepares
 *                          every send convertor; mtl_tm_data.h)
 *
 * Include it instead of Open MPI's mutex, pmix and rte headers.
 */
#ifndef MTL_TM_COMPAT_H
#define MTL_TM_COMPAT_H

#include "ompi_config.h"

#include <inttypes.h>
#include <stdio.h>

#if OMPI_MAJOR_VERSION >= 5

#include "opal/mca/threads/mutex.h"
#include "opal/mca/pmix/pmix-internal.h"
#include "ompi/runtime/ompi_rte.h"
#include "ompi/communicator/communicator.h"

#define MTL_TM_DECLSPEC OMPI_DECLSPEC
#define MTL_TM_MODEX_GLOBAL PMIX_GLOBAL
#define mtl_tm_comm_cid(c) ompi_comm_get_local_cid(c)
#define MTL_TM_FLAG_EXT_CID MCA_MTL_BASE_FLAG_SUPPORTS_EXT_CID
#define MTL_TM_CID_TIMEOUT 60
#define MTL_TM_KEY_LOCAL_PEERS PMIX_LOCAL_PEERS
#define MTL_TM_TYPE_STRING PMIX_STRING

static inline void mtl_tm_cid_key(const ompi_communicator_t *c, char *key,
				  size_t size)
{
	snprintf(key, size, "mtl.tm.cid.%" PRIx64 ".%" PRIx64,
		 c->c_contextid.cid_base, c->c_contextid.cid_sub.u64);
}

static inline int mtl_tm_publish_cid(ompi_communicator_t *c)
{
	char key[PMIX_MAX_KEYLEN + 1];
	pmix_value_t v;
	pmix_status_t rc;

	if (OMPI_COMM_IS_GLOBAL_INDEX(c))
		return OMPI_SUCCESS;
	mtl_tm_cid_key(c, key, sizeof(key));
	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_UINT32;
	v.data.uint32 = ompi_comm_get_local_cid(c);
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_Commit();
	return opal_pmix_convert_status(rc);
}

static inline int mtl_tm_fetch_cid(ompi_communicator_t *c, int r,
				   uint32_t *cid)
{
	ompi_proc_t *proc = ompi_comm_peer_lookup(c, r);
	char key[PMIX_MAX_KEYLEN + 1];
	uint32_t timeout = MTL_TM_CID_TIMEOUT;
	pmix_value_t *v = NULL;
	pmix_proc_t p;
	pmix_info_t info;
	pmix_status_t rc;

	if (!proc)
		return OMPI_ERR_NOT_FOUND;
	mtl_tm_cid_key(c, key, sizeof(key));
	OPAL_PMIX_CONVERT_NAME(&p, &proc->super.proc_name);
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_UINT32);
	rc = PMIx_Get(&p, key, &info, 1, &v);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS || !v || v->type != PMIX_UINT32) {
		if (v)
			PMIX_VALUE_RELEASE(v);
		return rc != PMIX_SUCCESS ? opal_pmix_convert_status(rc) :
		       OMPI_ERR_TYPE_MISMATCH;
	}
	*cid = v->data.uint32;
	PMIX_VALUE_RELEASE(v);
	c->c_index_vec[r] = *cid;
	return OMPI_SUCCESS;
}

static inline int mtl_tm_peer_cid(ompi_communicator_t *c, int r,
				  uint32_t *cid)
{
	if (OPAL_LIKELY(OMPI_COMM_IS_GLOBAL_INDEX(c))) {
		*cid = c->c_index;
		return OMPI_SUCCESS;
	}
	if (c->c_index_vec[r]) {
		*cid = c->c_index_vec[r];
		return OMPI_SUCCESS;
	}
	return mtl_tm_fetch_cid(c, r, cid);
}
/* PRRTE's session directory of this job: removed when mpirun ends. */
#define mtl_tm_marker_dir() (ompi_process_info.job_session_dir)
#define MTL_TM_INIT_PARAMS \
	bool progress_threads, bool mpi_threads, bool *accelerator_support
#define mtl_tm_init_no_accelerator() (*accelerator_support = false)
#define MTL_TM_CONV_DEVICE \
	(CONVERTOR_ACCELERATOR | CONVERTOR_ACCELERATOR_UNIFIED)
#define MTL_TM_ATTR_COPY_PARAMS \
	MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag

static inline int mtl_tm_modex_recv_now(const opal_process_name_t *p,
					const char *key, void **d,
					int32_t *size)
{
	pmix_value_t *v = NULL;
	bool now = true;
	pmix_proc_t proc;
	pmix_info_t info;
	pmix_status_t rc;

	*size = 0;
	OPAL_PMIX_CONVERT_NAME(&proc, p);
	PMIX_INFO_LOAD(&info, PMIX_IMMEDIATE, &now, PMIX_BOOL);
	rc = PMIx_Get(&proc, key, &info, 1, &v);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS || !v || v->type != PMIX_BYTE_OBJECT) {
		if (v)
			PMIX_VALUE_RELEASE(v);
		return OPAL_ERR_NOT_FOUND;
	}
	*d = v->data.bo.bytes;
	*size = (int32_t)v->data.bo.size;
	v->data.bo.bytes = NULL; /* now the caller's */
	v->data.bo.size = 0;
	PMIX_VALUE_RELEASE(v);
	return OPAL_SUCCESS;
}

static inline int mtl_tm_fence(void)
{
	pmix_info_t info;
	bool collect = true;
	pmix_status_t rc;

	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS)
		return opal_pmix_convert_status(rc);
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	rc = PMIx_Fence(NULL, 0, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	return opal_pmix_convert_status(rc);
}

#else /* Open MPI 4.1 */

#include "opal/threads/mutex.h"
#include "opal/mca/pmix/pmix.h"
#include "ompi/mca/rte/rte.h"
#include "ompi/communicator/communicator.h"

#define MTL_TM_DECLSPEC OMPI_MODULE_DECLSPEC
#define MTL_TM_MODEX_GLOBAL OPAL_PMIX_GLOBAL
#define mtl_tm_comm_cid(c) ompi_comm_get_cid(c)
#define mtl_tm_peer_cid(c, r, cid) \
	(*(cid) = ompi_comm_get_cid(c), OMPI_SUCCESS)
#define mtl_tm_publish_cid(c) OMPI_SUCCESS
#define MTL_TM_KEY_LOCAL_PEERS OPAL_PMIX_LOCAL_PEERS
#define MTL_TM_TYPE_STRING OPAL_STRING
#define MTL_TM_FLAG_EXT_CID 0
/* The job family's, not the job's: ORTE removes the job's directory as
 * soon as the job aborts, while late ranks may still get here. */
#define mtl_tm_marker_dir() (ompi_process_info.jobfam_session_dir)
#define MTL_TM_INIT_PARAMS bool progress_threads, bool mpi_threads
#define mtl_tm_init_no_accelerator() ((void)0)
#define MTL_TM_CONV_DEVICE (CONVERTOR_CUDA | CONVERTOR_CUDA_UNIFIED)
#if !OPAL_ENABLE_HETEROGENEOUS_SUPPORT
#define MTL_TM_CONV_THIN CONVERTOR_HOMOGENEOUS
#endif
#define MTL_TM_ATTR_COPY_PARAMS \
	MPI_Comm comm, int keyval, void *extra, void *in, void *out, \
	int *flag, MPI_Comm newcomm

static inline int mtl_tm_modex_recv_now(const opal_process_name_t *p,
					const char *key, void **d,
					int32_t *size)
{
	opal_value_t *kv = NULL, *info = OBJ_NEW(opal_value_t);
	opal_list_t ilist;
	int rc = OPAL_ERR_OUT_OF_RESOURCE;

	*size = 0;
	OBJ_CONSTRUCT(&ilist, opal_list_t);
	if (info) {
		info->key = strdup(OPAL_PMIX_IMMEDIATE);
		info->type = OPAL_BOOL;
		info->data.flag = true;
		opal_list_append(&ilist, &info->super);
		rc = opal_pmix.get(p, key, &ilist, &kv);
	}
	OPAL_LIST_DESTRUCT(&ilist);
	if (rc != OPAL_SUCCESS || !kv || kv->type != OPAL_BYTE_OBJECT) {
		if (kv)
			OBJ_RELEASE(kv);
		return OPAL_ERR_NOT_FOUND;
	}
	*d = kv->data.bo.bytes;
	*size = kv->data.bo.size;
	kv->data.bo.bytes = NULL; /* now the caller's */
	OBJ_RELEASE(kv);
	return OPAL_SUCCESS;
}

static inline int mtl_tm_fence(void)
{
	int rc = opal_pmix.commit();

	return rc == OPAL_SUCCESS ? opal_pmix.fence(NULL, 1) : rc;
}

#endif

#endif /* MTL_TM_COMPAT_H */
