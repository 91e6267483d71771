/*
 * mtl_tm_addr.c - the QPs and their addresses (mtl_tm.h, "Addressing"):
 * one pair per rank of the job, published in the modex (under the key of
 * mtl_tm_modex.c), and connected to a rank's pair at add_procs.
 */
#include "mtl_tm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"

void mtl_tm_qps_destroy(void)
{
	uint32_t r;

	if (!mtl_tm.eps)
		return;
	for (r = 0; r < mtl_tm.nprocs; r++)
		tm_dev_pair_destroy(mtl_tm.dev, &mtl_tm.eps[r].qps);
	free(mtl_tm.eps);
	mtl_tm.eps = NULL;
}

/* Why pair r could not be made, and, for a QP limit, which one to raise. */
static void qp_pair_error(uint32_t r, int rc, int err)
{
	const char *hint = "";
	char buf[200];

	if (err == ENOMEM &&
	    !strcmp(tm_dev_provider_name(mtl_tm.dev), "soft")) {
		snprintf(buf, sizeof(buf),
			 "; the soft HCA's QP limit is mtl_tm_softhca_max_qp "
			 "(%llu): raise it to at least %u, two QPs per rank",
			 (unsigned long long)mtl_tm_setting_value(
				 MTL_TM_DEV0 + TM_DEV_P_SOFT_MAX_QP),
			 2 * mtl_tm.nprocs);
		hint = buf;
	} else if (err == ENOMEM) {
		hint = "; the device's QP limit (max_qp) or locked memory "
		       "(ulimit -l) may be too small for two QPs per rank";
	}
	opal_output(0, "mtl tm: %s: cannot create QP pair %u of %u: %s (%s)%s",
		    mtl_tm.dev->name, r, mtl_tm.nprocs, tm_status_str(rc),
		    strerror(err), hint);
}

/* One QP pair per rank of the job, and their numbers in the modex. */
int mtl_tm_qps_publish(void)
{
	struct mtl_tm_modex *m;
	struct tm_dev_pair_addr a;
	size_t size;
	uint32_t r;
	int rc;

	mtl_tm.eps = calloc(mtl_tm.nprocs, sizeof(*mtl_tm.eps));
	size = sizeof(*m) + mtl_tm.nprocs * sizeof(m->qpn[0]);
	m = calloc(1, size);
	if (!mtl_tm.eps || !m) {
		free(m);
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	mtl_tm_modex_fill(m, mtl_tm.can, mtl_tm.use);
	m->nqp = mtl_tm.nprocs;
	strncpy(m->provider, tm_dev_provider_name(mtl_tm.dev),
		sizeof(m->provider) - 1);
	for (r = 0; r < mtl_tm.nprocs; r++) {
		rc = tm_dev_pair_create(mtl_tm.dev, &mtl_tm.eps[r].qps);
		if (rc != TM_OK) {
			qp_pair_error(r, rc, errno);
			free(m);
			return OMPI_ERR_OUT_OF_RESOURCE;
		}
		mtl_tm.eps[r].vpid = r;
		tm_dev_pair_addr(mtl_tm.dev, &mtl_tm.eps[r].qps, &a);
		m->qpn[r].rx = a.rx_qpn;
		m->qpn[r].tx = a.tx_qpn;
	}
	m->addr = a;
	m->addr.rx_qpn = m->addr.tx_qpn = 0;
	rc = mtl_tm_modex_send(m, size);
	free(m);
	if (rc != OPAL_SUCCESS) {
		opal_output(0, "mtl tm: modex send failed: %d", rc);
		return rc;
	}
	return OMPI_SUCCESS;
}

/* Connects our QP for rank vpid to that rank's QP for us. */
int mtl_tm_connect(struct mtl_tm_endpoint *ep, const opal_process_name_t *name)
{
	struct mtl_tm_modex *m = NULL;
	struct tm_dev_pair_addr addr;
	int32_t size = 0;
	int rc;

	if (ep->vpid == mtl_tm.my_vpid) {
		/* loopback: our pair for ourselves talks to itself */
		tm_dev_pair_addr(mtl_tm.dev, &ep->qps, &addr);
	} else {
		rc = mtl_tm_modex_recv(name, mtl_tm.again, (void **)&m,
				       &size);
		if (rc != OPAL_SUCCESS || !m) {
			opal_output(0, "mtl tm: no modex data from rank %u: %d",
				    ep->vpid, rc);
			return OMPI_ERR_UNREACH;
		}
		if ((size_t)size < sizeof(*m) || m->magic != MTL_TM_MODEX_MAGIC ||
		    m->nqp != mtl_tm.nprocs ||
		    (size_t)size < sizeof(*m) + m->nqp * sizeof(m->qpn[0])) {
			opal_output(0, "mtl tm: bad modex data from rank %u (size %d)",
				    ep->vpid, (int)size);
			free(m);
			return OMPI_ERR_UNREACH;
		}
		if (strncmp(m->provider, tm_dev_provider_name(mtl_tm.dev),
			    sizeof(m->provider))) {
			opal_output(0, "mtl tm: rank %u uses provider %.8s, this rank %s: they cannot talk (set mtl_tm_provider alike everywhere)",
				    ep->vpid, m->provider,
				    tm_dev_provider_name(mtl_tm.dev));
			free(m);
			return OMPI_ERR_UNREACH;
		}
		addr = m->addr;
		addr.rx_qpn = m->qpn[mtl_tm.my_vpid].rx;
		addr.tx_qpn = m->qpn[mtl_tm.my_vpid].tx;
		free(m);
	}
	rc = tm_dev_pair_connect(mtl_tm.dev, &ep->qps, &addr);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: cannot connect to rank %u (QPs %u/%u): %s",
			    ep->vpid, addr.rx_qpn, addr.tx_qpn,
			    tm_status_str(rc));
		return OMPI_ERR_UNREACH;
	}
	rc = tm_engine_add_peer(mtl_tm.eng, &ep->qps, &ep->peer);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: cannot add rank %u to the engine: %s",
			    ep->vpid, tm_status_str(rc));
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	ep->connected = true;
	opal_output_verbose(20, mtl_tm_output,
			    "mtl tm: rank %u: QPs %u/%u connected to rank %u QPs %u/%u",
			    mtl_tm.my_vpid,
			    (ep->qps.rx ? ep->qps.rx : ep->qps.tx)->qp_num,
			    ep->qps.tx->qp_num, ep->vpid, addr.rx_qpn,
			    addr.tx_qpn);
	return OMPI_SUCCESS;
}

