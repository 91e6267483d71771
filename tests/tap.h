/*
 * tap.h - the smallest TAP producer the tests need.
 *
 * Each test program prints a "1..N" plan (or a trailing plan via
 * tap_done()), then one "ok K - name" / "not ok K - name" line per
 * behaviour; automake's tap-driver counts them.  tap_check() never aborts,
 * so one broken behaviour does not hide the others; a test that cannot go on
 * calls tap_bail().  A program of several files numbers its lines as one.
 */
#ifndef TESTS_TAP_H
#define TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* One count per program, however many of its files check: a weak
 * definition in each file, which the linker makes one. */
__attribute__((weak)) int tap_count;
__attribute__((weak)) int tap_failed;

static inline int tap_check(int cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int tap_check(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

/* A diagnostic line, shown by the driver in the log. */
static inline void tap_diag(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static inline void tap_bail(const char *why) __attribute__((noreturn));
static inline void tap_bail(const char *why)
{
	printf("Bail out! %s\n", why);
	fflush(stdout);
	exit(1);
}

/* Prints the trailing plan; returns the exit status for main(). */
static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#endif /* TESTS_TAP_H */
