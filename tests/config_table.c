/*
 * config_table — the WEFT_* variables' table (src/config.c) against the
 * README and against bad input.
 *
 *   config_table README.md   checks; config_table --print   prints the rows
 *
 * Proves:
 *  - the README's "Environment" table is the table, row for row (name,
 *    meaning, default, in order): a variable added, renamed or redocumented
 *    in one place and not the other fails here;
 *  - every value is checked when loaded: a number out of its range, not a
 *    number, a word not among its words, a string too long each count as
 *    unset (the default applies); good ones are taken;
 *  - weft_config_get() gives numeric variables as the last load took them:
 *    ENOENT unset or refused, EINVAL for a word variable, an unknown name
 *    or a NULL out.
 */
#include "check.h"
#include "config.h"

static void row(char *buf, size_t n, const struct weft__cfg_var *v)
{
    snprintf(buf, n, "| `%s` | %s | %s |", v->name, v->doc, v->dflt);
}

static void check_readme(const char *path)
{
    check_phase("the README's table");
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    char line[2048];
    bool in_env = false;
    int i = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "## ", 3) == 0) {
            in_env = strcmp(line, "## Environment") == 0;
            continue;
        }
        if (!in_env || strncmp(line, "| `WEFT_", 8) != 0)
            continue;
        char want[2048];
        CHECK(i < WEFT__CFG_N, "the README lists more variables than the table: %s", line);
        row(want, sizeof want, &weft__cfg_vars[i]);
        CHECK(strcmp(line, want) == 0,
              "README row %d differs from src/config.c (tests/config_table --print gives the "
              "rows):\n  README: %s\n  table:  %s", i + 1, line, want);
        i++;
    }
    fclose(f);
    CHECK(i == WEFT__CFG_N, "the README lists %d of the table's %d variables", i, WEFT__CFG_N);
}

static void set(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    weft__cfg_load();
}

static void check_values(void)
{
    check_phase("bad values count as unset");
    for (int i = 0; i < WEFT__CFG_N; i++)
        unsetenv(weft__cfg_vars[i].name);
    weft__cfg_load();
    long long out = -7;
    CHECK_RC(weft_config_get("WEFT_MUTEX_SPIN", &out), ENOENT);
    CHECK(out == -7, "a refused get wrote %lld", out);
    CHECK(weft__cfg_num(WEFT__CFG_MUTEX_SPIN, 100) == 100, "unset: not the default");

    const char *bad_num[] = { "", "abc", "12x", "-1", "1000001", "99999999999999999999999" };
    for (size_t k = 0; k < sizeof bad_num / sizeof *bad_num; k++) {
        set("WEFT_MUTEX_SPIN", bad_num[k]);
        CHECK(weft__cfg_num(WEFT__CFG_MUTEX_SPIN, 100) == 100, "WEFT_MUTEX_SPIN=\"%s\" taken",
              bad_num[k]);
        CHECK_RC(weft_config_get("WEFT_MUTEX_SPIN", &out), ENOENT);
    }
    set("WEFT_MUTEX_SPIN", "0");
    CHECK(weft__cfg_num(WEFT__CFG_MUTEX_SPIN, 100) == 0, "WEFT_MUTEX_SPIN=0 not taken");
    set("WEFT_MUTEX_SPIN", "1000000");
    CHECK_RC(weft_config_get("WEFT_MUTEX_SPIN", &out), 0);
    CHECK(out == 1000000, "WEFT_MUTEX_SPIN=1000000 read as %lld", out);
    set("WEFT_MUTEX_SPIN", NULL);
    CHECK_RC(weft_config_get("WEFT_MUTEX_SPIN", &out), ENOENT);

    set("WEFT_STACK_COPY", "2");
    CHECK(weft__cfg_num(WEFT__CFG_STACK_COPY, 0) == 0, "WEFT_STACK_COPY=2 taken");
    set("WEFT_STACK_COPY", NULL);

    set("WEFT_POLLER", "kqueue");
    CHECK(weft__cfg_str(WEFT__CFG_POLLER) == NULL, "WEFT_POLLER=kqueue taken");
    set("WEFT_POLLER", "epol");
    CHECK(weft__cfg_str(WEFT__CFG_POLLER) == NULL, "WEFT_POLLER=epol taken");
    set("WEFT_POLLER", "uring");
    CHECK(weft__cfg_str(WEFT__CFG_POLLER) && strcmp(weft__cfg_str(WEFT__CFG_POLLER), "uring") == 0,
          "WEFT_POLLER=uring not taken");
    set("WEFT_POLLER", NULL);
    CHECK(weft__cfg_str(WEFT__CFG_POLLER) == NULL, "unset WEFT_POLLER still set");

    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    set("WEFT_SCHED", longname);
    CHECK(weft__cfg_str(WEFT__CFG_SCHED) == NULL, "a 299-byte WEFT_SCHED taken");
    set("WEFT_SCHED", "fifo");
    CHECK(weft__cfg_str(WEFT__CFG_SCHED) && strcmp(weft__cfg_str(WEFT__CFG_SCHED), "fifo") == 0,
          "WEFT_SCHED=fifo not taken");
    set("WEFT_SCHED", NULL);

    check_phase("weft_config_get's errors");
    CHECK_RC(weft_config_get("WEFT_POLLER", &out), EINVAL);   /* a word */
    CHECK_RC(weft_config_get("WEFT_NO_SUCH", &out), EINVAL);
    CHECK_RC(weft_config_get(NULL, &out), EINVAL);
    CHECK_RC(weft_config_get("WEFT_SPIN_NS", NULL), EINVAL);

    check_phase("weft_init reads them again");
    setenv("WEFT_SPIN_NS", "12345", 1);
    CHECK_RC(weft_init(NULL), 0);
    CHECK_RC(weft_config_get("WEFT_SPIN_NS", &out), 0);
    CHECK(out == 12345, "WEFT_SPIN_NS read as %lld after weft_init", out);
    weft_shutdown();
    unsetenv("WEFT_SPIN_NS");
    CHECK_RC(weft_init(NULL), 0);
    CHECK_RC(weft_config_get("WEFT_SPIN_NS", &out), ENOENT);
    weft_shutdown();
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        char buf[2048];
        for (int i = 0; i < WEFT__CFG_N; i++) {
            row(buf, sizeof buf, &weft__cfg_vars[i]);
            puts(buf);
        }
        return 0;
    }
    check_watchdog(WATCHDOG_SECS);
    if (argc == 2)
        check_readme(argv[1]);
    check_values();
    printf("config_table: ok (%d variables)\n", WEFT__CFG_N);
    return 0;
}
