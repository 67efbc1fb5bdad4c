/* hello.c — the smallest weft program: spawn uthreads from main, join them. */
#include <stdint.h>
#include <stdio.h>

#include <weft/weft.h>

static weft_mutex_t lock = WEFT_MUTEX_INIT;
static long total;

static void *work(void *arg)
{
    for (int i = 0; i < 1000; i++) {
        weft_mutex_lock(&lock);
        total += (long)(intptr_t)arg;
        weft_mutex_unlock(&lock);
        weft_yield();
    }
    return arg;
}

int main(void)
{
    weft_t t[8];
    for (intptr_t i = 0; i < 8; i++)
        if (weft_spawn(&t[i], NULL, work, (void *)i) != 0)
            return 1;
    for (int i = 0; i < 8; i++)
        weft_join(t[i], NULL);
    printf("hello from weft: total %ld on %d vcores\n", total, weft_num_vcores());
    weft_shutdown();
    return total == 28000 ? 0 : 1;
}
