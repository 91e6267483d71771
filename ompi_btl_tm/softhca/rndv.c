/*
 * rndv.c - the card's rendezvous reads: a matched RNDV (match.c) queues a
 * read job; the scheduler steps it (by cross-memory attach, SH_READ_CHUNK
 * at a time, paced as mr.c says, or by asking the owner's card with a
 * READ_REQ whose READ_RESP packets ingress.c hands here); the data
 * completion ends it and queues the FIN on the QP's send side (egress.c).
 *
 * Called by the scheduler (sh_rndv_step, sh_rndv_ready), by match.c
 * (sh_rndv_queue), ingress.c (sh_rndv_data) and by whoever flushes or
 * resets a QP (sh_rndv_drop); calls only down (CQ write, egress, mr).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"

void sh_rndv_queue(struct sh_context *ctx, struct sh_read_job *job)
{
	job->next = NULL;
	if (ctx->jobs_tail)
		ctx->jobs_tail->next = job;
	else
		ctx->jobs = job;
	ctx->jobs_tail = job;
}

static void job_unlink(struct sh_context *ctx, struct sh_read_job *job)
{
	struct sh_read_job **pp, *prev = NULL;

	for (pp = &ctx->jobs; *pp; prev = *pp, pp = &(*pp)->next)
		if (*pp == job) {
			*pp = job->next;
			if (ctx->jobs_tail == job)
				ctx->jobs_tail = prev;
			return;
		}
}

/* The data completion, then (if the data is in place) the FIN. */
static void job_finish(struct sh_context *ctx, struct sh_read_job *job,
		       enum ibv_wc_status status)
{
	struct sh_qp *qp = job->qp;
	struct sh_srq *srq = qp->srq;
	struct sh_cqe cqe = {
		.wr_id = job->recv_wr_id,
		.status = status,
		.opcode = IBV_WC_TM_RECV,
		.byte_len = job->len,
		.tag = job->tag,
		.priv = job->priv,
		.qp_num = qp->qp.qp_num,
		.src_qp = qp->dest_qpn,
		.srq = srq,
		.release_handle = job->handle,
	};

	/* no SYNC_REQ: mlx5 sets it only on list ops and unexpected ones */
	cqe.wc_flags = IBV_WC_TM_DATA_VALID;
	sh_cq_push(srq->cq, &cqe);
	if (status == IBV_WC_SUCCESS) {
		srq->card_reads++;
		sh_qp_queue_fin(qp, job->hdr);
	}
	job_unlink(ctx, job);
	free(job);
}

static bool job_step(struct sh_context *ctx, struct sh_read_job *job)
{
	struct sh_qp *qp = job->qp;
	enum ibv_wc_status st;
	uint32_t chunk;

	if (qp->qp.state == IBV_QPS_ERR) {
		job_finish(ctx, job, IBV_WC_WR_FLUSH_ERR);
		return true;
	}
	if (sh_peer_cma(ctx, qp->peer)) {
		if (!sh_read_allow(ctx))
			return false;
		chunk = job->len - job->done < SH_READ_CHUNK
				? job->len - job->done : SH_READ_CHUNK;
		sh_read_used(ctx, chunk);
		st = sh_remote_read(ctx, qp->peer, job->va + job->done,
				    job->rkey, job->sge, job->num_sge,
				    job->done, chunk);
		job->done += chunk;
		if (st != IBV_WC_SUCCESS || job->done == job->len)
			job_finish(ctx, job, st);
		return true;
	}
	/* Copy read: ask the owner's card to send the bytes. */
	if (!sh_qp_out_read_req(qp, job->len, job->va, job->rkey,
				&job->req_id))
		/* a failed QP: its flush drops the job */
		return qp->qp.state == IBV_QPS_ERR;
	job->started = true;
	return true;
}

static bool job_ready(const struct sh_read_job *job)
{
	return !job->started;
}

bool sh_rndv_ready(const struct sh_context *ctx)
{
	for (const struct sh_read_job *job = ctx->jobs; job; job = job->next)
		if (job_ready(job))
			return true;
	return false;
}

bool sh_rndv_step(struct sh_context *ctx)
{
	for (struct sh_read_job *job = ctx->jobs; job; job = job->next)
		if (job_ready(job))
			return job_step(ctx, job);
	return false;
}

bool sh_rndv_data(struct sh_qp *qp, const struct sh_pkt *pkt,
		  const uint8_t *data)
{
	struct sh_context *ctx = qp->ctx;
	struct sh_read_job *job;

	for (job = ctx->jobs; job; job = job->next)
		if (job->qp == qp && job->started && job->req_id == pkt->req_id)
			break;
	/* (jobs are dropped only with the QP's packets: nobody asked) */
	if (!job)
		return false;
	if (pkt->status != IBV_WC_SUCCESS) {
		job_finish(ctx, job, IBV_WC_REM_ACCESS_ERR);
		return true;
	}
	/* In order, inside what was asked, and last exactly at the end. */
	if (pkt->va != job->done || pkt->len > job->len - job->done ||
	    !(pkt->flags & SH_PKT_LAST) != (job->done + pkt->len < job->len))
		return false; /* the QP's flush drops the job */
	sh_scatter(job->sge, job->num_sge, job->done, data, pkt->len);
	job->done += pkt->len;
	if (pkt->flags & SH_PKT_LAST)
		job_finish(ctx, job, IBV_WC_SUCCESS);
	return true;
}

void sh_rndv_drop(struct sh_context *ctx, struct sh_qp *qp)
{
	struct sh_read_job *job = ctx->jobs, *next;

	for (; job; job = next) {
		next = job->next;
		if (job->qp == qp)
			job_finish(ctx, job, IBV_WC_WR_FLUSH_ERR);
	}
}
