/*
 * mtl_tm_data.h - where a message's bytes are: in place in the user's
 * buffer, read off pml cm's convertor with a few tests, or (anything
 * else) through Open MPI's datatype helpers
 * (ompi/mca/mtl/base/mtl_base_datatype.h: a packed copy of a send, a
 * staging buffer of a receive), which mtl_tm_send.c and mtl_tm_recv.c
 * call when these say no.
 *
 * In place means: one architecture (CONVERTOR_HOMOGENEOUS: nothing to
 * convert), host memory (none of MTL_TM_CONV_DEVICE, mtl_tm_compat.h),
 * and a datatype whose count elements are one block of memory.
 *
 *   send     the convertor not completed (a count or size of 0 is, and
 *            Open MPI's helper gives no buffer for it), the datatype
 *            contiguous and without gaps (so any count of it is one
 *            block; one element of a type with gaps at its ends is left
 *            to the helper, whose test, opal_datatype_is_contiguous_
 *            memory_layout, takes it), and its data at the buffer's
 *            first byte (true_lb 0).  pml cm hands
 *            over two kinds of send convertor: a thin send's, built by
 *            hand for a contiguous type with pBaseBuf = buf + true_lb, and
 *            a prepared one (persistent sends; CONVERTOR_SEND set) with
 *            pBaseBuf = buf.  With true_lb 0 both start at pBaseBuf.
 *   receive  the convertor's datatype flags without gaps (NO_GAPS; count
 *            1 of a type with gaps at its ends is left to the helper), a
 *            length above 0; the bytes from pBaseBuf plus the first
 *            element's displacement, as Open MPI's helper reads it.
 *
 * mtl_tm_send_start_of() is the start of a prepared convertor's data of a
 * contiguous type with true_lb != 0: Open MPI 4.1's helper sends from
 * pBaseBuf there, true_lb bytes before the data.
 */
#ifndef MTL_TM_DATA_H
#define MTL_TM_DATA_H

#include "mtl_tm_compat.h"

#include <stdbool.h>
#include <stddef.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/datatype/opal_datatype.h"
#include "opal/datatype/opal_datatype_internal.h"

/* What a convertor's flags must say for its bytes to be used in place. */
#define MTL_TM_CONV_TESTED \
	(CONVERTOR_HOMOGENEOUS | CONVERTOR_COMPLETED | MTL_TM_CONV_DEVICE)
/* A datatype whose elements, any number of them, are one block. */
#define MTL_TM_DT_SOLID \
	(OPAL_DATATYPE_FLAG_CONTIGUOUS | OPAL_DATATYPE_FLAG_NO_GAPS)

static inline bool mtl_tm_send_in_place(const struct opal_convertor_t *c,
					void **buf, size_t *len)
{
	const opal_datatype_t *dt = c->pDesc;

	if (OPAL_UNLIKELY((c->flags & MTL_TM_CONV_TESTED) !=
			  CONVERTOR_HOMOGENEOUS || !dt || dt->true_lb ||
			  (dt->flags & MTL_TM_DT_SOLID) != MTL_TM_DT_SOLID))
		return false;
	*buf = c->pBaseBuf;
	*len = c->local_size;
	return true;
}

static inline bool mtl_tm_recv_in_place(const struct opal_convertor_t *c,
					void **buf, size_t *len)
{
	const dt_type_desc_t *d = c->use_desc;

	if (OPAL_UNLIKELY((c->flags & (MTL_TM_CONV_TESTED |
				       OPAL_DATATYPE_FLAG_NO_GAPS)) !=
			  (CONVERTOR_HOMOGENEOUS | OPAL_DATATYPE_FLAG_NO_GAPS) ||
			  !c->local_size))
		return false;
	*buf = c->pBaseBuf + d->desc[d->used].end_loop.first_elem_disp;
	*len = c->local_size;
	return true;
}

/* A prepared send convertor of a contiguous type, in host memory on one
 * architecture, whose data does not start at its buffer: the start. */
static inline bool mtl_tm_send_start_of(const struct opal_convertor_t *c,
					void **buf, size_t *len)
{
	const opal_datatype_t *dt = c->pDesc;

	if ((c->flags & (MTL_TM_CONV_TESTED | CONVERTOR_SEND)) !=
	    (CONVERTOR_HOMOGENEOUS | CONVERTOR_SEND) || !dt ||
	    !opal_datatype_is_contiguous_memory_layout(dt, c->count))
		return false;
	*buf = c->pBaseBuf + c->bConverted + dt->true_lb;
	*len = c->local_size;
	return true;
}

#endif /* MTL_TM_DATA_H */
