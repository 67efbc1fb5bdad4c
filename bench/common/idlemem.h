/*
 * idlemem.h — what the C programs of the "memory per idle thread" section
 * share (bench/weft/idlemem.c, bench/peers/kernel/idlemem.c; the C++, Go and
 * Rust peers do the same in their own language). bench/README.md, "Memory
 * per idle thread", has the method; in short:
 *
 *   <program> --threads T
 *
 * allocates and touches its own per-thread bookkeeping (handles, a counter
 * per thread), reads the resident set (rss_before, /proc/self/statm), then
 * creates T threads that each block (weft_park, sem_wait, ...); the last one
 * to arrive records the time. With all T blocked it reads the resident set
 * again (rss_after), wakes every thread, joins them all and checks that each
 * ran to completion exactly once. It prints
 *
 *   RESULT bench=idlemem impl=<impl> param=threads=<T>
 *          value=<(rss_after - rss_before) / T> unit=B/thread
 *          create_ns=<(last arrival - first create) / T> rss_before=<bytes>
 *          rss_after=<bytes> vsz_per_thread=<virtual size growth / T>
 *
 * (one line; extra tokens become details of the row), and exits 0; 1 with
 * FAIL on stderr when the check fails; 2 for a bad command line; 75 with
 * "LIMIT <what>: <error> after <k> of <T> threads" on stderr when creation
 * hits a resource limit.
 */
#ifndef WEFT_BENCH_IDLEMEM_H
#define WEFT_BENCH_IDLEMEM_H

#include "bench.h"

#include <unistd.h>

#define IDLEMEM_MAX_THREADS 100000000u

/* A reading of /proc/self/statm, in bytes. */
struct idlemem_mem {
    uint64_t vsz;
    uint64_t rss;
};

static inline struct idlemem_mem idlemem_read(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%llu %llu", &size, &resident) != 2)
        bench_fail("idlemem: cannot read /proc/self/statm: %s", strerror(errno));
    fclose(f);
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    return (struct idlemem_mem){ size * page, resident * page };
}

/* idlemem_threads() parses "--threads T" (or --threads=T), 1 <= T <= 10^8. */
static inline size_t idlemem_threads(int argc, char **argv)
{
    const char *val = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            val = argv[++i];
        else if (strncmp(argv[i], "--threads=", 10) == 0)
            val = argv[i] + 10;
        else
            goto usage;
    }
    if (val) {
        char *end;
        errno = 0;
        unsigned long long t = strtoull(val, &end, 10);
        if (!errno && *end == '\0' && end != val && val[0] != '-' && t >= 1 &&
            t <= IDLEMEM_MAX_THREADS)
            return (size_t)t;
        fprintf(stderr, "%s: bad value for --threads: %s\n", argv[0], val);
    }
usage:
    fprintf(stderr, "usage: %s --threads T   (1 <= T <= %u)\n", argv[0], IDLEMEM_MAX_THREADS);
    exit(2);
}

/* idlemem_alloc() returns n zeroed elements of size bytes, every page
 * touched (bookkeeping is resident before the first reading, so it does not
 * count as the threads' memory); without memory it exits 75 (LIMIT). */
static inline void *idlemem_alloc(size_t n, size_t size, size_t threads)
{
    volatile char *c = calloc(n, size);
    if (!c) {
        fprintf(stderr, "LIMIT bookkeeping: %s after 0 of %zu threads\n", strerror(ENOMEM),
                threads);
        exit(75);
    }
    size_t bytes = n * size;
    for (size_t off = 0; off < bytes; off += 4096)
        c[off] = 0;
    if (bytes != 0)
        c[bytes - 1] = 0;
    return (void *)c;
}

/* idlemem_report() prints the RESULT line; extra (may be "") is appended
 * to it: more " key=value" tokens. */
static inline void idlemem_report(const char *impl, size_t threads, struct idlemem_mem before,
                                  struct idlemem_mem after, uint64_t create_ns,
                                  const char *extra)
{
    double t = (double)threads;
    printf("RESULT bench=idlemem impl=%s param=threads=%zu value=%.1f unit=B/thread "
           "create_ns=%.1f rss_before=%llu rss_after=%llu vsz_per_thread=%.0f%s\n",
           impl, threads, ((double)after.rss - (double)before.rss) / t, (double)create_ns / t,
           (unsigned long long)before.rss, (unsigned long long)after.rss,
           ((double)after.vsz - (double)before.vsz) / t, extra);
    fflush(stdout);
}

/* idlemem_check() checks that every thread ran to completion exactly once:
 * ran[i] == 1 for all i. */
static inline void idlemem_check(const char *impl, const uint32_t *ran, size_t threads)
{
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < threads; i++)
        if (ran[i] != 1 && wrong++ == 0)
            first = i;
    if (wrong)
        bench_fail("%s idlemem: %zu of %zu threads did not run to completion exactly once "
                   "(thread %zu ran %u times)", impl, wrong, threads, first, ran[first]);
}

#endif
