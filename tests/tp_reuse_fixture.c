/*
 * tp_reuse_fixture.c — the fault scripts/check-tp-reuse.py looks for, made
 * on purpose (never linked into anything): the address of a thread-local
 * variable taken before a call that may switch the uthread to another
 * kernel thread and used after it. The tp-reuse-fixture test requires the
 * checker to report it, so that a checker that no longer understands the
 * compiler's code fails instead of passing everything.
 */
extern __thread int weft_fixture_tls;
void weft__ctx_swap(void *save, void *to_sp); /* a switch primitive, by name */
void weft_fixture_use(int *p);

/* The address goes to a function before and after the switch, so every
 * compiler and mode materialises it once (thread pointer + offset) and keeps
 * it in a callee-saved register. */
void weft_fixture_stale_tls(void *save, void *to)
{
    int *p = &weft_fixture_tls;
    weft_fixture_use(p);
    weft__ctx_swap(save, to);
    weft_fixture_use(p); /* the old thread's variable */
}
