/* placeholder, replaced below */
#include <errno.h>
#include "poller.h"
static int init_none(void) { return ENOSYS; }
const struct weft__poller_ops weft__poll_uring = { .name = "io_uring", .init = init_none };
