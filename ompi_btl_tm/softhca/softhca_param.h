/*
 * softhca_param.h - the soft HCA's settings, each declared once, in
 * SOFTHCA_SETTINGS below: the field of struct softhca_config (softhca.h)
 * that holds it, its environment variable, default, bounds and help.
 *
 * Contract
 * --------
 * softhca_param(i), i < SOFTHCA_NSETTINGS (an enum softhca_setting),
 * describes setting i (tm_param.h: name, help, type, env, def, min, max).
 * The device layer publishes these descriptors as they are
 * (dev/tm_dev_param.h), so the MTL makes each one an MCA parameter.
 * softhca_param_get()/_set() read and write setting i of a config by index.
 * softhca_config_default() (softhca.h) writes the defaults of this table.
 *
 * softhca_config_check() judges a whole config: every setting within its
 * bounds, and the rendezvous header no larger than the MTU (blamed on the
 * header).  softhca_config_from_env() applies each setting's variable,
 * parsed by tm_param_parse() (tm_param.h), the rule every layer uses: a
 * boolean reads 1/0, yes/no, true/false everywhere.  Both return 0 or
 * EINVAL with the setting refused in *bad and a sentence naming it (its
 * variable, the value, what is allowed) in why[len], for the caller to
 * print: nothing here prints.
 *
 * The environment is read once per config: by softhca_config_from_env(),
 * which a context's open calls only while no config was set
 * (softhca_set_config).  A config a caller sets (the MTL's, from parameters
 * whose defaults the environment gave) is what its contexts get; the
 * environment does not override it afterwards.
 *
 * Adding a setting: a field in struct softhca_config and one entry below
 * (and the count in dev/tm_dev_param.h, which the build asks for); the
 * environment, the device layer and the MTL's MCA parameters pick it up by
 * themselves (mtl_tm(7) documents it: a test compares the page with what
 * the component registers).
 */
#ifndef SOFTHCA_PARAM_H
#define SOFTHCA_PARAM_H

#include <stddef.h>
#include <stdint.h>
#include "tm_param.h"

struct softhca_config;

/*
 * X(ID, field, TYPE, "ENV", default, min, max, expert, "help"): TYPE is a
 * tm_param_type without its TM_PARAM_ prefix; an ENUM's names are
 * softhca_<field>_names (softhca_param.c).  The order is the order
 * callers see the settings in.
 */
#define SOFTHCA_SETTINGS(X) \
	X(MTU, mtu, UINT, "SOFTHCA_MTU", 4096, 64, 1u << 20, 1, \
	  "Soft HCA: path MTU in bytes (packet payload size; eager messages above it complete in two steps as on a card)") \
	X(RING_DEPTH, ring_depth, UINT, "SOFTHCA_RING_DEPTH", 64, 2, 65536, 1, \
	  "Soft HCA: packets per QP inbound ring in shared memory") \
	X(MAX_NUM_TAGS, max_num_tags, UINT, "SOFTHCA_MAX_NUM_TAGS", 1023, 1, 65535, 1, \
	  "Soft HCA: tagged entries its matching list holds (a ConnectX-5 reports 1023)") \
	X(MAX_OPS, max_ops, UINT, "SOFTHCA_MAX_OPS", 32768, 1, 1u << 20, 1, \
	  "Soft HCA: outstanding tag-list operations it accepts") \
	X(MAX_RNDV_HDR_SIZE, max_rndv_hdr_size, UINT, "SOFTHCA_MAX_RNDV_HDR_SIZE", 64, 32, 65536, 1, \
	  "Soft HCA: largest rendezvous header (TMH + RVH + metadata) in bytes; at most the MTU") \
	X(MAX_QP, max_qp, UINT, "SOFTHCA_MAX_QP", 256, 1, 65536, 1, \
	  "Soft HCA: QPs per context; unless set, raised to what the job needs if smaller (two per rank: a QP pair per peer)") \
	X(MAX_MR, max_mr, UINT, "SOFTHCA_MAX_MR", 4096, 1, 65535, 1, \
	  "Soft HCA: memory registrations per context") \
	X(MAX_WR, max_wr, UINT, "SOFTHCA_MAX_WR", 32768, 1, 1u << 20, 1, \
	  "Soft HCA: work requests per send or receive queue") \
	X(SCHED, sched, ENUM, "SOFTHCA_SCHED", 0, 0, 2, 1, \
	  "Soft HCA: how much card work each verbs call does: auto (all that is ready) or random (a random amount, to shake out races)") \
	X(SEED, seed, U64, "SOFTHCA_SEED", 0, 0, UINT64_MAX, 1, \
	  "Soft HCA: seed of the random scheduling mode (0: from pid and time)") \
	X(FORCE_COPY_READ, force_copy_read, BOOL, "SOFTHCA_FORCE_COPY_READ", 0, 0, 1, 1, \
	  "Soft HCA: never read a peer's memory with process_vm_readv; always use the read request/response packets (the fallback when the kernel refuses cross-memory attach)") \
	/* 2^31: a length must stay below 2^32 with the headers added */ \
	X(MAX_MSG_SZ, max_msg_sz, UINT, "SOFTHCA_MAX_MSG_SZ", 1u << 30, 4096, 1u << 31, 1, \
	  "Soft HCA: the port's max_msg_sz, the longest message or RDMA read it does in one go (a ConnectX reports 1 GiB); longer rendezvous transfers are read in pieces") \
	X(NO_TM, no_tm, BOOL, "SOFTHCA_NO_TM", 0, 0, 1, 1, \
	  "Soft HCA: offer no tag matching (its tm_caps read zero, as on an RDMA device without it), so that every message is matched in software over plain RC: the mode of such devices, on one machine") \
	X(MAX_SGE, max_sge, UINT, "SOFTHCA_MAX_SGE", 1, 1, 16, 1, \
	  "Soft HCA: SGEs per tagged buffer (tm_caps.max_sge; a ConnectX reports 1)") \
	X(STRICT, strict, BOOL, "TM_SOFTHCA_STRICT", 1, 0, 1, 1, \
	  "Soft HCA: behave as mlx5 does where a more lenient model would pass (doc/mlx5-rules.md); false only for the soft HCA's own unit tests") \
	X(SINGLE_THREADED, single_threaded, BOOL, "SOFTHCA_SINGLE_THREADED", 0, 0, 1, 1, \
	  "Soft HCA: contexts take no lock on the data path, as mlx5 with MLX5_SINGLE_THREADED: one thread at a time may use each") \
	X(RXE_CQ, rxe_cq, UINT, "SOFTHCA_RXE_CQ", 0, 0, 2, 1, \
	  "Soft HCA, for tests: model the completion queue of rdma-core's rxe before release 55 (0: no; 1: with rxe's vendor id; 2: named rxe0, vendor id 0)")

enum softhca_setting {
#define SOFTHCA_SETTING_ID(id, ...) SOFTHCA_S_##id,
	SOFTHCA_SETTINGS(SOFTHCA_SETTING_ID)
#undef SOFTHCA_SETTING_ID
	SOFTHCA_NSETTINGS
};

const struct tm_param *softhca_param(unsigned i);
uint64_t softhca_param_get(const struct softhca_config *cfg, unsigned i);
/* Stores v in setting i's field (a value too wide for it: the field's
 * largest, which softhca_config_check then refuses). */
void softhca_param_set(struct softhca_config *cfg, unsigned i, uint64_t v);

int softhca_config_check(const struct softhca_config *cfg, unsigned *bad,
			 char *why, size_t len);
int softhca_config_from_env(struct softhca_config *cfg, unsigned *bad,
			    char *why, size_t len);

#endif /* SOFTHCA_PARAM_H */
