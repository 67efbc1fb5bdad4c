/*
 * opts.h — the command line of the issue 5 programs (fairness, wake-up
 * latency): a table of unsigned options, each "--name V" or "--name=V".
 *
 * An option not in the table, a missing or non-decimal value, or one outside
 * [min, max] prints what was wrong and the usage line, and exits 2. Options
 * that are not given keep the value the caller put in them.
 */
#ifndef WEFT_BENCH_OPTS_H
#define WEFT_BENCH_OPTS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_opt {
    const char *name;        /* "--threads" */
    uint64_t *val;           /* in: the default; out: the value given */
    uint64_t min, max;
};

static _Noreturn void bench_opts_usage(const char *argv0, const char *usage, const char *what,
                                       const char *opt)
{
    fprintf(stderr, "%s: %s %s\nusage: %s %s\n", argv0, what, opt, argv0, usage);
    exit(2);
}

/* bench_opts_parse() fills the table's values from argv or exits 2. */
static void bench_opts_parse(int argc, char **argv, const char *usage, struct bench_opt *opts,
                             size_t nopts)
{
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *eq = strchr(arg, '='), *s;
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        struct bench_opt *o = NULL;
        for (size_t k = 0; k < nopts && !o; k++)
            if (strlen(opts[k].name) == len && strncmp(arg, opts[k].name, len) == 0)
                o = &opts[k];
        if (!o)
            bench_opts_usage(argv[0], usage, "unknown option", arg);
        if (eq)
            s = eq + 1;
        else if (a + 1 < argc)
            s = argv[++a];
        else
            bench_opts_usage(argv[0], usage, "a value is needed for", o->name);
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (*s < '0' || *s > '9' || errno || *end || v < o->min || v > o->max)
            bench_opts_usage(argv[0], usage, "bad value for", o->name);
        *o->val = v;
    }
}

#endif /* WEFT_BENCH_OPTS_H */
