/*
 * test_survey.c - which devices count (dev/tm_dev.h, tm_dev_survey): the
 * soft HCA plays a TM card in libibverbs' place, once cabled and once with
 * its port down (SOFTHCA_PORT_DOWN).  An uncabled card must count as no
 * card, or a one-node job on a box with one refuses the soft HCA and fails
 * in MPI_Init.
 */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "dev/tm_dev.h"
#include "softhca/softhca.h"
#include "softhca/softhca_param.h"

static void set_port_down(int down)
{
	struct softhca_config c;

	softhca_config_default(&c);
	c.port_down = down;
	if (softhca_set_config(&c))
		tap_bail("softhca_set_config");
}

int main(void)
{
	struct softhca_config c;
	struct tm_dev_survey s;
	char why[200];
	unsigned bad;
	struct tm_dev_config cfg;
	struct tm_dev *d = NULL;
	int rc;

	set_port_down(0);
	tm_dev_survey_with(&s, softhca_verbs());
	tap_check(s.verbs == (TM_DEV_HAS_TM | TM_DEV_HAS_RC) &&
		  !strcmp(s.verbs_name, "softtm0"),
		  "a cabled TM card counts, with tag matching (%d, '%s')",
		  s.verbs, s.verbs_name);

	set_port_down(1);
	tm_dev_survey_with(&s, softhca_verbs());
	tap_check(s.verbs == 0 && s.verbs_name[0] == 0,
		  "a TM card whose port is down counts as no card (%d, '%s')",
		  s.verbs, s.verbs_name);
	tap_check(s.soft == 0, "... nor as a soft HCA (%d)", s.soft);
	tm_dev_config_default(&cfg);
	cfg.verbs = softhca_verbs();
	cfg.rcache = 0;
	rc = tm_dev_open(&cfg, &d);
	tap_check(rc == TM_ERR_NO_DEVICE && !d,
		  "opening it finds no device (%d: %s)", rc,
		  tm_dev_open_why() ? tm_dev_open_why() : "-");

	softhca_config_default(&c);
	setenv("SOFTHCA_PORT_DOWN", "1", 1);
	rc = softhca_config_from_env(&c, &bad, why, sizeof(why));
	tap_check(!rc && c.port_down == 1,
		  "SOFTHCA_PORT_DOWN=1 in the environment sets it (%d)", rc);
	setenv("SOFTHCA_PORT_DOWN", "0", 1);
	rc = softhca_config_from_env(&c, &bad, why, sizeof(why));
	tap_check(!rc && c.port_down == 0, "... and =0 clears it (%d)", rc);
	return tap_done();
}
