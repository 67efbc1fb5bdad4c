/*
 * ring_args.h — the command line of the C ring programs (bench/weft/ring.c,
 * bench/peers/kernel/ring.c), per the ring contract in bench/README.md:
 *
 *   <program> --n N --threads T --rounds M [--<extra> V]
 *
 * "--opt V" and "--opt=V" both work. N >= 2, T a positive multiple of N,
 * M >= 1, T*M bounded; --workers is refused with the program's reason. Any
 * bad input prints what was wrong and the usage line, and exits 2.
 */
#ifndef WEFT_BENCH_RING_ARGS_H
#define WEFT_BENCH_RING_ARGS_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_MAX_N (1u << 30)   /* values on the ring go up to N (an int) */

struct ring_args {
    size_t n, threads;      /* N, T */
    uint64_t rounds;        /* M */
    const char *extra;      /* the value of the extra option, or its default */
    const char *extra2;     /* the value of the second extra option, or its default */
};

/* What a program tells ring_args_parse(). */
struct ring_cli {
    const char *usage;       /* the usage line after the program name */
    const char *extra_opt;   /* e.g. "--sync", or NULL for none */
    const char *extra_dflt;  /* its default value */
    const char *extra2_opt;  /* a second one, or NULL */
    const char *extra2_dflt;
    const char *no_workers;  /* why --workers is refused */
};

static _Noreturn void ring_usage(const char *argv0, const struct ring_cli *cli, const char *fmt,
                                 const char *what)
{
    fprintf(stderr, "%s: ", argv0);
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\nusage: %s %s\n  N >= 2, T a positive multiple of N, M >= 1\n", argv0,
            cli->usage);
    exit(2);
}

/* ring_count() reads a decimal count in [min, max] for option opt. */
static uint64_t ring_count(const char *argv0, const struct ring_cli *cli, const char *opt,
                           const char *s, uint64_t min, uint64_t max)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        ring_usage(argv0, cli, "bad value for %s", opt);
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        ring_usage(argv0, cli, "bad value for %s", opt);
    return v;
}

/* ring_args_parse() fills *ra from the command line or exits 2. */
static void ring_args_parse(int argc, char **argv, const struct ring_cli *cli,
                            struct ring_args *ra)
{
    const char *argv0 = argv[0], *sn = NULL, *st = NULL, *sm = NULL;
    ra->extra = cli->extra_dflt;
    ra->extra2 = cli->extra2_dflt;
    for (int a = 1; a < argc; a++) {
        const char *opt = argv[a], *eq = strchr(opt, '=');
        size_t len = eq ? (size_t)(eq - opt) : strlen(opt);
        const char **dst = NULL;
        if (len == 3 && strncmp(opt, "--n", 3) == 0)
            dst = &sn;
        else if (len == 9 && strncmp(opt, "--threads", 9) == 0)
            dst = &st;
        else if (len == 8 && strncmp(opt, "--rounds", 8) == 0)
            dst = &sm;
        else if (cli->extra_opt && len == strlen(cli->extra_opt) &&
                 strncmp(opt, cli->extra_opt, len) == 0)
            dst = &ra->extra;
        else if (cli->extra2_opt && len == strlen(cli->extra2_opt) &&
                 strncmp(opt, cli->extra2_opt, len) == 0)
            dst = &ra->extra2;
        else if (len == 9 && strncmp(opt, "--workers", 9) == 0)
            ring_usage(argv0, cli, cli->no_workers, opt);
        else
            ring_usage(argv0, cli, "unknown option %s", opt);
        if (eq)
            *dst = eq + 1;
        else if (a + 1 < argc)
            *dst = argv[++a];
        else
            ring_usage(argv0, cli, "%s needs a value", opt);
    }
    if (!sn)
        ring_usage(argv0, cli, "%s is required", "--n");
    if (!st)
        ring_usage(argv0, cli, "%s is required", "--threads");
    if (!sm)
        ring_usage(argv0, cli, "%s is required", "--rounds");
    ra->n = (size_t)ring_count(argv0, cli, "--n", sn, 2, RING_MAX_N);
    ra->threads = (size_t)ring_count(argv0, cli, "--threads", st, 1, INT_MAX);
    ra->rounds = ring_count(argv0, cli, "--rounds", sm, 1, (uint64_t)1 << 40);
    if (ra->threads % ra->n)
        ring_usage(argv0, cli, "%s must be a positive multiple of --n", "--threads");
}

#endif
