/*
 * fuzz_parse.c — libFuzzer target for the httpd request parser.
 *
 * Feeds the input as a pipelined buffer: parses requests one after another
 * until something other than HTTP_OK comes back, and aborts when a result
 * breaks the contract of http_parse.h:
 *   - the answer is HTTP_OK, HTTP_NEED_MORE or one of the documented statuses;
 *   - an accepted head is within the buffer and HTTP_MAX_HEAD, and parsing
 *     exactly its bytes again gives the same result;
 *   - a strict prefix of an accepted head needs more bytes (checked on an
 *     exact-size copy, so ASan catches a read past the prefix);
 *   - the path is absolute and normalised: no "//", "." or ".." segment, no
 *     trailing "/" (except "/" itself), no control byte it could not decode.
 * The same bytes also go to the HTTP-date parser, whose results must survive
 * a format/parse round trip.
 *
 * Built by examples/httpd/CMakeLists.txt when the compiler is clang; run with
 * `make fuzz` (seeds: examples/httpd/fuzz_seeds/).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

#define REQUIRE(cond)                                                                      \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz_parse: %s:%d: contract broken: %s\n", __FILE__, __LINE__, \
                    #cond);                                                                \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

static int parse_copy(const char *p, size_t n, struct http_request *r)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    int rc = http_parse_request(copy, n, r);
    free(copy);
    return rc;
}

static void check_path(const char *p)
{
    size_t n = strlen(p);
    REQUIRE(n >= 1 && n <= HTTP_MAX_TARGET + 1 && p[0] == '/');
    REQUIRE(n == 1 || p[n - 1] != '/');
    REQUIRE(strstr(p, "//") == NULL);
    REQUIRE(strstr(p, "/./") == NULL && strstr(p, "/../") == NULL);
    REQUIRE(!(n >= 2 && strcmp(p + n - 2, "/.") == 0));
    REQUIRE(!(n >= 3 && strcmp(p + n - 3, "/..") == 0));
}

static void check_date(const char *p, size_t n)
{
    int64_t t, t2;
    char buf[30];
    if (n > 64 || !http_parse_date(p, n, &t))
        return;
    if (t < 0 || t > 253402300799)
        return; /* outside what http_format_date() writes */
    REQUIRE(http_format_date(t, buf) == 29);
    REQUIRE(http_parse_date(buf, 29, &t2) && t2 == t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    size_t off = 0;
    for (;;) {
        struct http_request r, r2;
        int rc = http_parse_request(buf + off, size - off, &r);
        switch (rc) {
        case HTTP_OK: case HTTP_NEED_MORE:
        case 400: case 403: case 405: case 413: case 414: case 431: case 505:
            break;
        default:
            REQUIRE(!"unexpected result");
        }
        if (rc != HTTP_OK)
            break;
        REQUIRE(r.head_len > 0 && r.head_len <= size - off && r.head_len <= HTTP_MAX_HEAD);
        REQUIRE(r.method == HTTP_METHOD_GET || r.method == HTTP_METHOD_HEAD);
        REQUIRE(r.version == 10 || r.version == 11);
        check_path(r.path);

        REQUIRE(parse_copy(buf + off, r.head_len, &r2) == HTTP_OK);
        REQUIRE(r2.head_len == r.head_len && strcmp(r2.path, r.path) == 0 &&
                r2.keep_alive == r.keep_alive && r2.has_ims == r.has_ims);
        REQUIRE(parse_copy(buf + off, r.head_len - 1, &r2) == HTTP_NEED_MORE);
        REQUIRE(parse_copy(buf + off, r.head_len / 2, &r2) == HTTP_NEED_MORE);
        off += r.head_len;
    }
    check_date(buf, size);
    free(buf);
    return 0;
}
