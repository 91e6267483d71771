/*
 * mtl_tm_compat.h - what differs between the two Open MPI releases mtl tm
 * builds against, in one place, so that the rest of mtl/ is written once:
 * 4.1 (ORTE runtime, PMIx behind opal's pmix framework) and 5.0 (PRRTE
 * launches, opal calls PMIx directly).  OMPI_MAJOR_VERSION (ompi_config.h)
 * selects; configure refuses anything older than 4.1.
 *
 *   MTL_TM_DECLSPEC        visibility of the component symbol
 *   MTL_TM_MODEX_GLOBAL    modex scope: every process of the job reads it
 *   mtl_tm_comm_cid(c)     the context id the tag carries: the same in
 *                          every member (pml cm without extended ids)
 *   mtl_tm_marker_dir()    a directory that lives until mpirun ends and is
 *                          removed with it, or NULL (mtl_tm_show_error)
 *   mtl_tm_fence()         commits this process's modex data and waits
 *                          until every process of the job has, collecting
 *                          theirs; an OPAL status
 *   MTL_TM_INIT_PARAMS     mtl_init's parameters; 5.0 adds an OUT flag:
 *   mtl_tm_init_no_accelerator()  sets it: the MTL moves host memory only
 *                          (the component's accelerator_support field, 5.0
 *                          only, stays false: zero-initialised)
 *
 * Include it instead of Open MPI's mutex, pmix and rte headers.
 */
#ifndef MTL_TM_COMPAT_H
#define MTL_TM_COMPAT_H

#include "ompi_config.h"

#if OMPI_MAJOR_VERSION >= 5

#include "opal/mca/threads/mutex.h"
#include "opal/mca/pmix/pmix-internal.h"
#include "ompi/runtime/ompi_rte.h"
#include "ompi/communicator/communicator.h"

#define MTL_TM_DECLSPEC OMPI_DECLSPEC
#define MTL_TM_MODEX_GLOBAL PMIX_GLOBAL
#define mtl_tm_comm_cid(c) ompi_comm_get_local_cid(c)
/* PRRTE's session directory of this job: removed when mpirun ends. */
#define mtl_tm_marker_dir() (ompi_process_info.job_session_dir)
#define MTL_TM_INIT_PARAMS \
	bool progress_threads, bool mpi_threads, bool *accelerator_support
#define mtl_tm_init_no_accelerator() (*accelerator_support = false)

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
/* The job family's, not the job's: ORTE removes the job's directory as
 * soon as the job aborts, while late ranks may still get here. */
#define mtl_tm_marker_dir() (ompi_process_info.jobfam_session_dir)
#define MTL_TM_INIT_PARAMS bool progress_threads, bool mpi_threads
#define mtl_tm_init_no_accelerator() ((void)0)

static inline int mtl_tm_fence(void)
{
	int rc = opal_pmix.commit();

	return rc == OPAL_SUCCESS ? opal_pmix.fence(NULL, 1) : rc;
}

#endif

#endif /* MTL_TM_COMPAT_H */
