/*
 * mtl_tm_pvar.h - the component's MPI_T performance variables.
 *
 * Contract
 * --------
 * Every number the statistics line shows (mtl_tm(7), "Statistics") is a
 * pvar named mtl_tm_<name>, registered by mtl_tm_pvar_register() at the
 * component's registration, and the line is printed from
 * mtl_tm_pvar_read(): one table (mtl_tm_pvar.c) says which engine counter
 * each one is, for the tools and for the line alike.
 *
 *   counters   (MPI_T_PVAR_CLASS_COUNTER, unsigned long long, read-only,
 *              continuous): enum mtl_tm_pv up to MTL_TM_PV_NCOUNTERS, in
 *              the order of the line;
 *   card_entries       the card's list occupancy (CLASS_LEVEL) ...
 *   card_entries_hwm   ... and its high-water mark (CLASS_HIGHWATERMARK);
 *   posted_recvq_length, unexpected_msgq_length: bound to a communicator
 *              (MPI_T_BIND_MPI_COMM, CLASS_SIZE, one value): its receives
 *              posted and not matched, its unexpected messages not
 *              received.  A tool allocates the handle with the address
 *              of its MPI_Comm, as MPI says.
 *
 * All read the engine under mtl_tm.lock when a tool asks (never on the data
 * path), and read 0 while no engine is open.
 */
#ifndef MTL_TM_PVAR_H
#define MTL_TM_PVAR_H

enum mtl_tm_pv {
	MTL_TM_PV_RECEIVES,
	MTL_TM_PV_TO_CARD,
	MTL_TM_PV_FROM_UQ,
	MTL_TM_PV_SW_CONFLICT,
	MTL_TM_PV_SW_LIST_FULL,
	MTL_TM_PV_SW_OPS_BUSY,
	MTL_TM_PV_SW_SMALL_BUF,
	MTL_TM_PV_SW_LONG_BUF,
	MTL_TM_PV_SW_NO_STAGE,
	MTL_TM_PV_SW_NO_OFFLOAD,
	MTL_TM_PV_SW_NO_TM,
	MTL_TM_PV_SW_BELOW_THRESH,
	MTL_TM_PV_SW_REG_FAIL,
	MTL_TM_PV_CARD_MATCHED,
	MTL_TM_PV_UNEXPECTED,
	MTL_TM_PV_RNDV_CARD,
	MTL_TM_PV_RNDV_SW,
	MTL_TM_PV_TRUNCATED,
	MTL_TM_PV_CANCELLED,
	MTL_TM_PV_SCANCEL_REQ,
	MTL_TM_PV_SCANCEL_OK,
	MTL_TM_PV_SCANCEL_LATE,
	MTL_TM_PV_SYNCS,
	MTL_TM_PV_PROMOTED,
	MTL_TM_PV_ERRORS,
	MTL_TM_PV_UNEXP_THROTTLED,
	MTL_TM_PV_UNEXP_SPILLED,
	MTL_TM_PV_NCOUNTERS,
	MTL_TM_PV_CARD_ENTRIES = MTL_TM_PV_NCOUNTERS,
	MTL_TM_PV_CARD_ENTRIES_HWM,
	MTL_TM_PV_N
};

/* Registers every pvar (the component's register callback). */
void mtl_tm_pvar_register(void);

/* Every variable of enum mtl_tm_pv, now (all 0 with no engine). */
void mtl_tm_pvar_read(unsigned long long v[MTL_TM_PV_N]);

#endif /* MTL_TM_PVAR_H */
