/*
 * tm_status.c - the names of the status codes (tm_status.h).
 */
#include "tm_status.h"

const char *tm_status_str(int status)
{
	switch (status) {
	case TM_OK: return "ok";
	case TM_ERR_NO_DEVICE: return "no device";
	case TM_ERR_NO_MEMORY: return "out of memory";
	case TM_ERR_INVALID: return "invalid argument";
	case TM_ERR_RANGE: return "value outside the tag layout";
	case TM_ERR_IO: return "verbs call failed";
	case TM_ERR_NOT_FOUND: return "not found";
	case TM_ERR_BUSY: return "busy";
	case TM_ERR_UNSUPPORTED: return "unsupported";
	case TM_ERR_PEER_DEAD: return "peer died";
	}
	return "unknown status";
}
