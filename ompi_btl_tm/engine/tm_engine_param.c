/*
 * tm_engine_param.c - the matching engine's settings table (see
 * tm_engine_param.h): each setting declared once.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "engine/tm_engine.h"
#include "engine/tm_engine_param.h"
#include "engine/tm_wire.h"

_Static_assert(TMH_LEN == 16, "TM_ENGINE_EAGER_LIMIT_MAX counts a 16-byte TMH");

/* A setting and the field of struct tm_engine_config that holds it. */
struct engine_setting {
	struct tm_param d;
	size_t offset, size;
};

#define FIELD(f) offsetof(struct tm_engine_config, f), \
		 sizeof(((struct tm_engine_config *)0)->f)

static const struct engine_setting settings[TM_ENGINE_NPARAMS] = {
	[TM_SETTING_EAGER_LIMIT] = { {
		"eager_limit",
		"Largest payload in bytes sent eagerly (in one message with the tag header); larger messages use rendezvous (the receiver's card reads the sender's buffer). Also sizes each plain receive buffer and send slot",
		TM_PARAM_SIZE, NULL, NULL, 0,
		8192, 0, TM_ENGINE_EAGER_LIMIT_MAX }, FIELD(eager_limit) },
	[TM_SETTING_N_PLAIN] = { {
		"plain_buffers",
		"Plain receive buffers (each of eager_limit bytes plus the tag header) posted to the TM-SRQ: unexpected and control messages land there, and a tag-matching card needs at least 33 of them",
		TM_PARAM_UINT, NULL, NULL, 0,
		256, TM_ENGINE_N_PLAIN_MIN, TM_ENGINE_N_PLAIN_MAX },
		FIELD(n_plain) },
	[TM_SETTING_N_SEND_SLOTS] = { {
		"send_slots",
		"Registered send buffers: every eager send and control message goes out of one",
		TM_PARAM_UINT, NULL, NULL, 0,
		256, TM_ENGINE_N_SEND_SLOTS_MIN, TM_ENGINE_N_SEND_SLOTS_MAX },
		FIELD(n_send_slots) },
	[TM_SETTING_OFFLOAD] = { {
		"offload",
		"Post receives to the card (false: keep every receive in software, for comparison)",
		TM_PARAM_BOOL, NULL, NULL, 0, 1, 0, 1 }, FIELD(offload) },
	[TM_SETTING_OFFLOAD_THRESH] = { {
		"offload_thresh",
		"Receives whose buffer is shorter than this many bytes are matched in software and never posted to the card: for a small message the card's list operations cost the host more than matching it, and a card-held receive shorter than eager_limit is copied out of a staging buffer anyway (0: every receive the card can take goes to it)",
		TM_PARAM_SIZE, NULL, NULL, 0,
		TM_OFFLOAD_THRESH_DEFAULT, 0, SIZE_MAX },
		FIELD(offload_thresh) },
	[TM_SETTING_ADD_CHAIN] = { {
		"add_chain",
		"Receives bound for the card that are posted before the next progress call have their ADDs posted as one chain of at most this many (one doorbell).  The card learns of them only then: a card that matches on its own while the host computes (a ConnectX) cannot match a receive until its chain goes, so a message arriving meanwhile is unexpected and the receive is taken back; 1 posts each ADD with its receive, at once",
		TM_PARAM_UINT, NULL, NULL, 0,
		TM_ADD_CHAIN_MAX, 1, TM_ADD_CHAIN_MAX },
		FIELD(add_chain) },
	[TM_SETTING_KEEPALIVE_MS] = { {
		"keepalive_ms",
		"A send waiting this many milliseconds for its peer's reply (rendezvous FIN, synchronous-send ACK), or a receive or probe naming a peer, probes the peer, so that a dead peer fails it instead of hanging (0: the engine's default); bounded so that a dead peer is found within about a minute",
		TM_PARAM_UINT, NULL, NULL, 0,
		TM_KEEPALIVE_MS_DEFAULT, 0, TM_KEEPALIVE_MAX_MS },
		FIELD(keepalive_ms) },
	[TM_SETTING_UNEXPECTED_MEM] = { {
		"unexpected_mem",
		"Bytes the copies of unexpected messages may take.  Past that an unexpected message keeps its plain receive buffer until it is received, and once those run out senders wait (the back-pressure of a card out of receive buffers) instead of the receiver's memory growing; held messages not received for a millisecond are copied out one per millisecond, so that control messages still get through",
		TM_PARAM_SIZE, NULL, NULL, 0,
		TM_UNEXPECTED_MEM_DEFAULT, 0, SIZE_MAX },
		FIELD(unexpected_mem) },
};

const struct tm_param *tm_engine_param(unsigned i)
{
	return i < TM_ENGINE_NPARAMS ? &settings[i].d : NULL;
}

void tm_engine_config_default(struct tm_engine_config *cfg)
{
	unsigned i;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < TM_ENGINE_NPARAMS; i++)
		tm_engine_param_set(cfg, i, settings[i].d.def);
}

uint64_t tm_engine_param_get(const struct tm_engine_config *cfg, unsigned i)
{
	const char *p = (const char *)cfg + settings[i].offset;
	uint32_t u32;
	uint64_t u64;
	int b;

	switch (settings[i].size) {
	case sizeof(uint64_t):
		memcpy(&u64, p, sizeof(u64));
		return u64;
	case sizeof(uint32_t):
		/* a 32-bit field is either uint32_t or an int flag */
		if (settings[i].d.type == TM_PARAM_BOOL) {
			memcpy(&b, p, sizeof(b));
			return b != 0;
		}
		memcpy(&u32, p, sizeof(u32));
		return u32;
	}
	return 0;
}

void tm_engine_param_set(struct tm_engine_config *cfg, unsigned i, uint64_t v)
{
	char *p = (char *)cfg + settings[i].offset;
	uint32_t u32;
	int b;

	switch (settings[i].size) {
	case sizeof(uint64_t):
		memcpy(p, &v, sizeof(v));
		break;
	case sizeof(uint32_t):
		if (settings[i].d.type == TM_PARAM_BOOL) {
			b = v != 0;
			memcpy(p, &b, sizeof(b));
			break;
		}
		/* too wide for the field: its largest value, outside every
		 * 32-bit setting's bounds (tm_engine_config_check names it) */
		u32 = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		memcpy(p, &u32, sizeof(u32));
		break;
	}
}

int tm_engine_config_check(const struct tm_engine_config *cfg,
			   enum tm_engine_setting *bad)
{
	enum tm_engine_setting b = TM_SETTING_NONE;
	uint64_t v;
	unsigned i;

	for (i = 0; i < TM_ENGINE_NPARAMS && b == TM_SETTING_NONE; i++) {
		v = tm_engine_param_get(cfg, i);
		if (v < settings[i].d.min || v > settings[i].d.max)
			b = (enum tm_engine_setting)i;
	}
	if (bad)
		*bad = b;
	return b == TM_SETTING_NONE ? TM_OK : TM_ERR_INVALID;
}
