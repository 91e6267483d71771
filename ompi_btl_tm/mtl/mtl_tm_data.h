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
 *   send     pml cm's thin convertor (Open MPI 4.1, MTL_TM_CONV_THIN):
 *            built by hand, with the local convertor's flags only
 *            (CONVERTOR_HOMOGENEOUS; no CONVERTOR_SEND, no datatype
 *            flags), and only for data pml cm found contiguous for its
 *            count (opal_datatype_is_contiguous_memory_layout), with
 *            pBaseBuf = buf + true_lb: the bytes are local_size bytes at
 *            pBaseBuf, whatever the datatype.  Or a prepared convertor
 *            (CONVERTOR_SEND; every send on Open MPI 5.0, persistent and
 *            buffered ones on 4.1) not completed (a count or size of 0
 *            is, and Open MPI's helper gives no buffer for it), whose
 *            datatype flags, which preparing copies into the convertor's,
 *            say contiguous and without gaps (so any count of it is one
 *            block; one element of a type with gaps at its ends is left
 *            to the helper, whose test, opal_datatype_is_contiguous_
 *            memory_layout, takes it): the bytes start true_lb past
 *            pBaseBuf (= buf).  One test of the flags tells the three
 *            apart.
 *   receive  the convertor's datatype flags without gaps (NO_GAPS; count
 *            1 of a type with gaps at its ends is left to the helper), not
 *            completed (a receive convertor is always prepared, and
 *            preparing marks a length of 0 completed); the bytes from
 *            pBaseBuf plus the datatype's true lower bound, where
 *            opal_convertor_get_current_pointer puts them (a type
 *            without gaps is contiguous: its first byte is its true
 *            lower bound; Open MPI's helper reads the same offset off
 *            the type's description).
 *
 * mtl_tm_send_start_of() is the start of a prepared convertor's data of
 * one element of a contiguous type with gaps at its ends: Open MPI 4.1's
 * helper sends from pBaseBuf there, true_lb bytes before the data.
 */
#ifndef MTL_TM_DATA_H
#define MTL_TM_DATA_H

#include "mtl_tm_compat.h"

#include <stdbool.h>
#include <stddef.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/datatype/opal_datatype.h"

/* What a convertor's flags must say for its bytes to be used in place. */
#define MTL_TM_CONV_TESTED \
	(CONVERTOR_HOMOGENEOUS | CONVERTOR_COMPLETED | MTL_TM_CONV_DEVICE)
/* A datatype whose elements, any number of them, are one block. */
#define MTL_TM_DT_SOLID \
	(OPAL_DATATYPE_FLAG_CONTIGUOUS | OPAL_DATATYPE_FLAG_NO_GAPS)

/* The flags the send test looks at: its two accepted values are
 * MTL_TM_CONV_THIN and MTL_TM_CONV_SOLID_SEND. */
#define MTL_TM_CONV_SEND_TESTED \
	(MTL_TM_CONV_TESTED | CONVERTOR_SEND | MTL_TM_DT_SOLID)
#define MTL_TM_CONV_SOLID_SEND \
	(CONVERTOR_HOMOGENEOUS | CONVERTOR_SEND | MTL_TM_DT_SOLID)

static inline bool mtl_tm_send_in_place(const struct opal_convertor_t *c,
					void **buf, size_t *len)
{
	uint32_t f = c->flags & MTL_TM_CONV_SEND_TESTED;

	*len = c->local_size;
#ifdef MTL_TM_CONV_THIN
	if (OPAL_LIKELY(f == MTL_TM_CONV_THIN)) {
		*buf = c->pBaseBuf;
		return true;
	}
#endif
	if (OPAL_UNLIKELY(f != MTL_TM_CONV_SOLID_SEND))
		return false;
	*buf = c->pBaseBuf + c->pDesc->true_lb;
	return true;
}

/* Where a message's bytes start in the user's memory (c prepared). */
static inline void *mtl_tm_user_buf(const struct opal_convertor_t *c)
{
	return c->pBaseBuf + c->pDesc->true_lb;
}

static inline bool mtl_tm_recv_in_place(const struct opal_convertor_t *c,
					void **buf, size_t *len)
{
	if (OPAL_UNLIKELY((c->flags & (MTL_TM_CONV_TESTED |
				       OPAL_DATATYPE_FLAG_NO_GAPS)) !=
			  (CONVERTOR_HOMOGENEOUS | OPAL_DATATYPE_FLAG_NO_GAPS)))
		return false;
	*buf = c->pBaseBuf + c->pDesc->true_lb;
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
