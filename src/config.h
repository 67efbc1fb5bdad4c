/*
 * config.h — the WEFT_* environment variables: one table (config.c), read
 * once at every weft_init.
 *
 * Each variable has a kind (a number in a range, one of a few words, or a
 * free string), its default and its meaning as the README's table shows
 * them (the test config_table holds the README to this table, and
 * tests/CMakeLists.txt takes from it the variables a test unsets). A bad
 * value is refused with a message on stderr naming the variable, the value
 * and what it may be, and counts as unset. The modules read the values
 * kept here, never the environment.
 */
#ifndef WEFT_CONFIG_H
#define WEFT_CONFIG_H

#include <stdbool.h>

enum weft__cfg {
    WEFT__CFG_VCORES,
    WEFT__CFG_STACK_SIZE,
    WEFT__CFG_STACK_COPY,
    WEFT__CFG_SCHED,
    WEFT__CFG_PRIO_AGING_MS,
    WEFT__CFG_BOARD,
    WEFT__CFG_PREEMPT_US,
    WEFT__CFG_PREEMPT_TICKER,
    WEFT__CFG_PREEMPT_SIGNALS,
    WEFT__CFG_NOTIF_SIGNAL,
    WEFT__CFG_SPIN_NS,
    WEFT__CFG_MUTEX_SPIN,
    WEFT__CFG_MAX_GUARDED_STACKS,
    WEFT__CFG_POLLER,
    WEFT__CFG_OFFLOAD_THREADS,
    WEFT__CFG_TLS,
    WEFT__CFG_TLS_ARCH_PRCTL,
    WEFT__CFG_N
};

struct weft__cfg_var {
    const char *name;                /* WEFT_... */
    const char *words;               /* one of these words, '|'-separated; "" any
                                        string; NULL: a number in [min, max] */
    long long min, max;
    const char *dflt;                /* the default, as the README says it */
    const char *doc;                 /* what it means, as the README says it */
};

/* weft__cfg_vars: the table, indexed by enum weft__cfg. */
extern const struct weft__cfg_var weft__cfg_vars[WEFT__CFG_N];

/* weft__cfg_load() reads every variable from the environment (weft_init,
 * under its lock), refusing bad values with a message. */
void weft__cfg_load(void);

/* weft__cfg_num() is a number variable's value as loaded, or dflt if it was
 * unset or refused (or before the first weft_init). Any context. */
long long weft__cfg_num(enum weft__cfg id, long long dflt);

/* weft__cfg_str() is a word or string variable's value as loaded, or NULL
 * if unset or refused. Any context; valid until the next weft__cfg_load. */
const char *weft__cfg_str(enum weft__cfg id);

/* weft__cfg_find() is the index of the variable called name, or -1. */
int weft__cfg_find(const char *name);

#endif /* WEFT_CONFIG_H */
