/*
 * parse_test.c — unit tests of examples/httpd's request parser (no sockets).
 *
 * A table of single requests (good ones with the path and keep-alive they
 * must give, bad ones with their status), then the things a table cannot say:
 * every prefix of a good head needs more bytes, pipelined buffers, the exact
 * limits (2 KiB target, 64 headers, 8 KiB head) from both sides, early errors
 * on incomplete input, and the HTTP-date parser and formatter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

static int failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            fprintf(stderr, "%s:%d: FAIL (%s): ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* Parses a copy of exactly n bytes, so that ASan sees any read past the end. */
static int parse_n(const char *s, size_t n, struct http_request *r)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, s, n);
    int rc = http_parse_request(copy, n, r);
    free(copy);
    return rc;
}

static int parse(const char *s, struct http_request *r)
{
    return parse_n(s, strlen(s), r);
}

#define H11 " HTTP/1.1\r\nHost: x\r\n\r\n"

enum { ANY = -1 };

struct good {
    const char *in;
    const char *path;
    int keep_alive; /* 0, 1 or ANY */
    int method;     /* enum http_method */
    int dir_hint;
};

static const struct good goods[] = {
    { "GET /" H11, "/", 1, HTTP_METHOD_GET, 1 },
    { "GET /index.html HTTP/1.0\r\n\r\n", "/index.html", 0, HTTP_METHOD_GET, 0 },
    { "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.0\r\nconnection:Keep-Alive\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", "/", 0, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "/", 0, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade,  CLOSE \r\n\r\n", "/", 0, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    /* header names are case-insensitive */
    { "HEAD /a/b.txt HTTP/1.1\r\nHOST: x\r\n\r\n", "/a/b.txt", 1, HTTP_METHOD_HEAD, 0 },
    { "GET / HTTP/1.1\r\nhOsT: x\r\nCONNECTION: CLOSE\r\n\r\n", "/", 0, HTTP_METHOD_GET, 1 },
    /* decoding and normalising */
    { "GET /a%20b.txt?x=1&y=%zz" H11, "/a b.txt", 1, HTTP_METHOD_GET, 0 },
    { "GET /a/./b/../c" H11, "/a/c", ANY, HTTP_METHOD_GET, 0 },
    { "GET //a//b/" H11, "/a/b", ANY, HTTP_METHOD_GET, 1 },
    { "GET /a/.." H11, "/", ANY, HTTP_METHOD_GET, 1 },
    { "GET /a/b/." H11, "/a/b", ANY, HTTP_METHOD_GET, 1 },
    { "GET /sub/%2e%2e/index.html" H11, "/index.html", ANY, HTTP_METHOD_GET, 0 },
    { "GET /a%2Fb" H11, "/a/b", ANY, HTTP_METHOD_GET, 0 },
    { "GET /%41%62%63" H11, "/Abc", ANY, HTTP_METHOD_GET, 0 },
    { "GET /a#frag" H11, "/a", ANY, HTTP_METHOD_GET, 0 },
    { "GET /caf\xc3\xa9" H11, "/caf\xc3\xa9", ANY, HTTP_METHOD_GET, 0 },
    /* absolute-form */
    { "GET http://example.com/x/y?q HTTP/1.1\r\nHost: example.com\r\n\r\n", "/x/y", 1, HTTP_METHOD_GET, 0 },
    { "GET HTTP://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET https://example.com:8443?q HTTP/1.1\r\nHost: e\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    /* line endings, blank lines before the request, odd but valid headers */
    { "GET / HTTP/1.1\nHost: x\n\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n", "/x", 1, HTTP_METHOD_GET, 0 },
    { "\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n", "/x", 1, HTTP_METHOD_GET, 0 },
    { "GET /" " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 000\r\nContent-Length: 000\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Pad: \t a b \t\r\nX-8bit: \xff\xfe\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost:\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
    { "GET / HTTP/1.1\r\nHost: x\r\n!#$%&'*+-.^_`|~09azAZ: token chars\r\n\r\n", "/", 1, HTTP_METHOD_GET, 1 },
};

struct bad {
    const char *in;
    int status;
};

static const struct bad bads[] = {
    /* 400: the request line */
    { "GARBAGE\r\n\r\n", 400 },
    { "GET /\r\n\r\n", 400 },                      /* HTTP/0.9 style, no version */
    { "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400 },  /* two spaces */
    { " GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400 },  /* trailing space */
    { "GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400 },
    { "GET / http/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET / HTTP/1.10\r\nHost: x\r\n\r\n", 400 },
    { "GET / HTTP/1\r\nHost: x\r\n\r\n", 400 },
    { "GET / HTTP/a.b\r\nHost: x\r\n\r\n", 400 },
    { "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400 },   /* not a token */
    { "GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET / HTTP/1.1\rHost: x\r\n\r\n", 400 },     /* bare CR */
    { "GET /\r HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET a/b HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET ftp://x/y HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    /* 400: percent-encoding */
    { "GET /%zz" H11, 400 },
    { "GET /%4" H11, 400 },
    { "GET /a% HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
    { "GET /%4?x" H11, 400 },
    { "GET /%g0" H11, 400 },
    { "GET /%00" H11, 400 },
    { "GET /a%00.html" H11, 400 },
    /* 400: headers */
    { "GET / HTTP/1.1\r\n\r\n", 400 },                        /* no Host in 1.1 */
    { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo\r\n\r\n", 400 },      /* no colon */
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo : bar\r\n\r\n", 400 }, /* space before colon */
    { "GET / HTTP/1.1\r\nHost: x\r\n: bar\r\n\r\n", 400 },    /* empty name */
    { "GET / HTTP/1.1\r\nHost: x\r\nFo(o: bar\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\r\n b\r\n\r\n", 400 },   /* obs-fold */
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\r\n\tb\r\n\r\n", 400 },  /* obs-fold, tab */
    { "GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400 },  /* whitespace before the first header */
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\rb\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\x01\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\x7f\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 0\r\n\r\n", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n", 400 },
    /* 403: above the root */
    { "GET /.." H11, 403 },
    { "GET /../etc/passwd" H11, 403 },
    { "GET /%2e%2e/etc/passwd" H11, 403 },
    { "GET /%2E%2E%2Fetc%2Fpasswd" H11, 403 },
    { "GET /a/../../x" H11, 403 },
    { "GET /./../x" H11, 403 },
    { "GET http://h/../x HTTP/1.1\r\nHost: h\r\n\r\n", 403 },
    /* 405: other methods, case-sensitive names */
    { "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", 405 },
    { "PUT /x" H11, 405 },
    { "DELETE /x" H11, 405 },
    { "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 405 },
    { "get /" H11, 405 },
    { "Head /" H11, 405 },
    { "BREW /pot" H11, 405 },
    /* 413: a body */
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0001\r\n\r\n", 413 },
    { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999999\r\n\r\n", 413 },
    { "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 413 },
    { "HEAD / HTTP/1.1\r\nHost: x\r\ntransfer-encoding: identity\r\n\r\n", 413 },
    { "GET / HTTP/1.0\r\nContent-Length: 1\r\n\r\nx", 413 },
    /* 505 */
    { "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505 },
    { "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505 },
    { "GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505 },
    { "GET / HTTP/3.1\r\n\r\n", 505 },
};

/* Incomplete but fine so far. */
static const char *const need_more[] = {
    "", "G", "GET", "GET ", "GET /", "GET / HTTP/1.1", "GET / HTTP/1.1\r",
    "GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: x", "GET / HTTP/1.1\r\nHost: x\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\n\r", "\r", "\r\n", "\r\n\r\n", "\n\n\r",
    "G T", /* method "G", target "T", no version yet */
    "POST", /* 405, but only once the line is complete */
};

/* Incomplete, but already wrong: answered without waiting. */
static const struct bad early[] = {
    { "G\tT", 400 },
    { "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\r\n b", 400 },
    { "GET / HTTP/2.0\r\n", 505 },
    { "POST / HTTP/1.1\r\n", 405 },
    { "GET /%zz HTTP/1.1\r\n", 400 },
    { "GET /../x HTTP/1.1\r\n", 403 },
    { "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n", 400 },
};

static void test_table(void)
{
    struct http_request r;
    for (size_t i = 0; i < sizeof goods / sizeof goods[0]; i++) {
        const struct good *g = &goods[i];
        int rc = parse(g->in, &r);
        CHECK(rc == HTTP_OK, "good[%zu] %s: got %d", i, g->in, rc);
        if (rc != HTTP_OK)
            continue;
        CHECK(strcmp(r.path, g->path) == 0, "good[%zu] %s: path '%s', want '%s'", i, g->in, r.path,
              g->path);
        CHECK(r.head_len == strlen(g->in), "good[%zu]: head_len %zu of %zu", i, r.head_len,
              strlen(g->in));
        if (g->keep_alive != ANY)
            CHECK(r.keep_alive == (g->keep_alive == 1), "good[%zu] %s: keep_alive %d", i, g->in,
                  r.keep_alive);
        CHECK((int)r.method == g->method, "good[%zu]: method %d", i, r.method);
        CHECK(r.dir_hint == (g->dir_hint == 1), "good[%zu] %s: dir_hint %d", i, g->in, r.dir_hint);
        CHECK(r.version == 10 || r.version == 11, "good[%zu]: version %d", i, r.version);
    }
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        int rc = parse(bads[i].in, &r);
        CHECK(rc == bads[i].status, "bad[%zu] '%s': got %d, want %d", i, bads[i].in, rc,
              bads[i].status);
    }
    for (size_t i = 0; i < sizeof need_more / sizeof need_more[0]; i++) {
        int rc = parse(need_more[i], &r);
        CHECK(rc == HTTP_NEED_MORE, "need_more[%zu] '%s': got %d", i, need_more[i], rc);
    }
    for (size_t i = 0; i < sizeof early / sizeof early[0]; i++) {
        int rc = parse(early[i].in, &r);
        CHECK(rc == early[i].status, "early[%zu] '%s': got %d, want %d", i, early[i].in, rc,
              early[i].status);
    }
}

/* "..." and "..x" are ordinary names, not "..". */
static void test_dots(void)
{
    struct http_request r;
    CHECK(parse("GET /..." H11, &r) == HTTP_OK && strcmp(r.path, "/...") == 0, "'/...' -> %s", r.path);
    CHECK(parse("GET /..x/.y" H11, &r) == HTTP_OK && strcmp(r.path, "/..x/.y") == 0, "%s", r.path);
    CHECK(parse("GET /a/%2e" H11, &r) == HTTP_OK && strcmp(r.path, "/a") == 0, "%s", r.path);
}

/* A NUL is never acceptable: not raw in the line, not in a header. */
static void test_nul_bytes(void)
{
    struct http_request r;
    static const char line[] = "GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(parse_n(line, sizeof line - 1, &r) == 400, "NUL in target");
    static const char hdr[] = "GET / HTTP/1.1\r\nHost: x\r\nFoo: a\0b\r\n\r\n";
    CHECK(parse_n(hdr, sizeof hdr - 1, &r) == 400, "NUL in header value");
    static const char meth[] = "G\0T / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(parse_n(meth, sizeof meth - 1, &r) == 400, "NUL in method");
}

/* Every strict prefix of a good head needs more bytes. */
static void test_prefixes(void)
{
    struct http_request r;
    for (size_t i = 0; i < sizeof goods / sizeof goods[0]; i++) {
        const char *in = goods[i].in;
        size_t n = strlen(in);
        for (size_t k = 0; k < n; k++) {
            int rc = parse_n(in, k, &r);
            CHECK(rc == HTTP_NEED_MORE, "good[%zu] prefix %zu: got %d", i, k, rc);
        }
    }
}

static void test_pipelined(void)
{
    static const char buf[] =
        "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
        "HEAD /two HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        "GET /four HTTP/1.1\r\nHo";
    static const char *const paths[] = { "/one", "/two", "/three" };
    struct http_request r;
    size_t off = 0, n = sizeof buf - 1;
    for (int i = 0; i < 3; i++) {
        int rc = http_parse_request(buf + off, n - off, &r);
        CHECK(rc == HTTP_OK, "pipelined %d: %d", i, rc);
        if (rc != HTTP_OK)
            return;
        CHECK(strcmp(r.path, paths[i]) == 0, "pipelined %d: %s", i, r.path);
        CHECK(r.method == (i == 1 ? HTTP_METHOD_HEAD : HTTP_METHOD_GET), "pipelined %d: method", i);
        CHECK(r.keep_alive == (i != 2), "pipelined %d: keep_alive", i);
        off += r.head_len;
    }
    CHECK(http_parse_request(buf + off, n - off, &r) == HTTP_NEED_MORE, "pipelined tail");

    /* 50 requests back to back, as the client test sends them */
    char big[50 * 64];
    size_t len = 0;
    for (int i = 0; i < 50; i++)
        len += (size_t)snprintf(big + len, sizeof big - len, "GET /f%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
    off = 0;
    for (int i = 0; i < 50; i++) {
        int rc = http_parse_request(big + off, len - off, &r);
        char want[16];
        snprintf(want, sizeof want, "/f%d", i);
        CHECK(rc == HTTP_OK && strcmp(r.path, want) == 0, "pipelined50 %d: rc %d path %s", i, rc, r.path);
        if (rc != HTTP_OK)
            return;
        off += r.head_len;
    }
    CHECK(off == len, "pipelined50 used %zu of %zu", off, len);
    CHECK(http_parse_request(big + off, len - off, &r) == HTTP_NEED_MORE, "pipelined50 end");

    /* a bad request after a good one: the good one first */
    static const char mixed[] = "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /%zz HTTP/1.1\r\n\r\n";
    CHECK(http_parse_request(mixed, sizeof mixed - 1, &r) == HTTP_OK, "mixed first");
    CHECK(http_parse_request(mixed + r.head_len, sizeof mixed - 1 - r.head_len, &r) == 400,
          "mixed second");
}

static char *request_with_target(size_t tlen)
{
    char *s = malloc(tlen + 64);
    strcpy(s, "GET /");
    memset(s + 5, 'a', tlen - 1);
    strcpy(s + 4 + tlen, H11);
    return s;
}

static void test_limits(void)
{
    struct http_request r;

    /* target: 2048 bytes fine, 2049 too long, known as soon as byte 2049 is in */
    char *s = request_with_target(HTTP_MAX_TARGET);
    CHECK(parse(s, &r) == HTTP_OK && strlen(r.path) == HTTP_MAX_TARGET, "target 2048");
    free(s);
    s = request_with_target(HTTP_MAX_TARGET + 1);
    CHECK(parse(s, &r) == 414, "target 2049");
    CHECK(parse_n(s, 4 + HTTP_MAX_TARGET + 1, &r) == 414, "target 2049, line incomplete");
    CHECK(parse_n(s, 4 + HTTP_MAX_TARGET, &r) == HTTP_NEED_MORE, "target 2048, line incomplete");
    free(s);
    s = request_with_target(6000);
    CHECK(parse(s, &r) == 414, "target 6000");
    free(s);
    /* an encoded target counts as sent: 682 "%41" = 2046 bytes + "/" fine */
    {
        char buf[4096] = "GET /";
        for (int i = 0; i < 682; i++)
            strcat(buf, "%41");
        strcat(buf, H11);
        CHECK(parse(buf, &r) == HTTP_OK && strlen(r.path) == 683, "encoded target");
    }
    /* method: 32 bytes is still a method (rejected with 405), 33 is not */
    {
        char buf[128];
        snprintf(buf, sizeof buf, "%.32s /" H11, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH");
        CHECK(parse(buf, &r) == 405, "method 32");
        snprintf(buf, sizeof buf, "%.33s /" H11, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH");
        CHECK(parse(buf, &r) == 400, "method 33");
        CHECK(parse_n(buf, 33, &r) == 400, "method 33, incomplete");
    }

    /* header lines: 64 fine, 65 too many (also before the 65th line ends) */
    char *h = malloc(HTTP_MAX_HEAD);
    for (int count = 63; count <= 66; count++) {
        size_t n = (size_t)sprintf(h, "GET / HTTP/1.1\r\nHost: x\r\n");
        for (int i = 1; i < count; i++)
            n += (size_t)sprintf(h + n, "X-%d: v\r\n", i);
        size_t before_blank = n;
        n += (size_t)sprintf(h + n, "\r\n");
        int want = count <= HTTP_MAX_HEADERS ? HTTP_OK : 431;
        CHECK(parse_n(h, n, &r) == want, "%d headers", count);
        if (count == HTTP_MAX_HEADERS + 1) {
            /* the 65th line has started: already known */
            size_t cut = before_blank - 4;
            CHECK(parse_n(h, cut, &r) == 431, "65th header, incomplete");
        }
    }
    free(h);

    /* head: exactly HTTP_MAX_HEAD bytes fine, one more is 413 */
    char *big = malloc(HTTP_MAX_HEAD + 64);
    for (size_t total = HTTP_MAX_HEAD - 1; total <= HTTP_MAX_HEAD + 1; total++) {
        size_t n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ");
        size_t pad = total - n - 4;
        memset(big + n, 'p', pad);
        n += pad;
        memcpy(big + n, "\r\n\r\n", 4);
        n += 4;
        CHECK(n == total, "built %zu", n);
        int rc = parse_n(big, n, &r);
        CHECK(rc == (total <= HTTP_MAX_HEAD ? HTTP_OK : 413), "head of %zu bytes: %d", total, rc);
        /* with more (pipelined) bytes behind it, the same answer */
        memcpy(big + n, "GET / ", 6);
        rc = parse_n(big, n + 6, &r);
        CHECK(rc == (total <= HTTP_MAX_HEAD ? HTTP_OK : 413), "head of %zu bytes + more: %d", total, rc);
    }
    /* an unfinished head: fine below the limit, 413 at it */
    memset(big, 'a', HTTP_MAX_HEAD);
    memcpy(big, "GET / HTTP/1.1\r\nHost: x\r\nX: ", 28);
    CHECK(parse_n(big, HTTP_MAX_HEAD - 1, &r) == HTTP_NEED_MORE, "8191 unfinished");
    CHECK(parse_n(big, HTTP_MAX_HEAD, &r) == 413, "8192 unfinished");
    /* blank lines before the request count towards the head */
    for (size_t i = 0; i < HTTP_MAX_HEAD; i += 2)
        memcpy(big + i, "\r\n", 2);
    CHECK(parse_n(big, HTTP_MAX_HEAD, &r) == 413, "8 KiB of blank lines");
    CHECK(parse_n(big, HTTP_MAX_HEAD - 2, &r) == HTTP_NEED_MORE, "8190 bytes of blank lines");
    free(big);
}

static void test_ims(void)
{
    struct http_request r;
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
                &r) == HTTP_OK && r.has_ims && r.ims == 784111777, "IMS fixdate");
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nif-modified-since: Sunday, 06-Nov-94 08:49:37 GMT\r\n\r\n",
                &r) == HTTP_OK && r.has_ims && r.ims == 784111777, "IMS rfc850");
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nIF-MODIFIED-SINCE: Sun Nov  6 08:49:37 1994\r\n\r\n",
                &r) == HTTP_OK && r.has_ims && r.ims == 784111777, "IMS asctime");
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: yesterday\r\n\r\n", &r) == HTTP_OK &&
              !r.has_ims, "IMS invalid is ignored");
    CHECK(parse("GET /" H11, &r) == HTTP_OK && !r.has_ims, "no IMS");
}

static void test_dates(void)
{
    char buf[30];
    int64_t t;
    CHECK(http_format_date(784111777, buf) == 29 && strcmp(buf, "Sun, 06 Nov 1994 08:49:37 GMT") == 0,
          "format: %s", buf);
    http_format_date(0, buf);
    CHECK(strcmp(buf, "Thu, 01 Jan 1970 00:00:00 GMT") == 0, "format 0: %s", buf);
    http_format_date(951782400, buf); /* 2000-02-29 */
    CHECK(strcmp(buf, "Tue, 29 Feb 2000 00:00:00 GMT") == 0, "format leap: %s", buf);

    static const char *const ok[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
    };
    for (int i = 0; i < 3; i++)
        CHECK(http_parse_date(ok[i], strlen(ok[i]), &t) && t == 784111777, "parse %s", ok[i]);
    CHECK(http_parse_date("Thu, 29 Feb 2024 00:00:00 GMT", 29, &t) && t == 1709164800, "leap day");
    CHECK(http_parse_date("Thursday, 01-Jan-70 00:00:00 GMT", 32, &t) && t == 0, "rfc850 1970");
    CHECK(http_parse_date("Saturday, 01-Jan-00 00:00:00 GMT", 32, &t) && t == 946684800, "rfc850 2000");

    static const char *const bad[] = {
        "", "Sun", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 GMT ",
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 31 Feb 1994 08:49:37 GMT",
        "Wed, 29 Feb 2023 00:00:00 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06-Nov-1994 08:49:37 GMT", "1994-11-06T08:49:37Z", "Sun, 06 Nov 1994 08:49 GMT",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(!http_parse_date(bad[i], strlen(bad[i]), &t), "parse should fail: '%s'", bad[i]);

    /* format and parse agree, 1970 .. 2242, every day and a spread of times */
    for (int64_t d = 0; d < 100000; d += 1) {
        int64_t v = d * 86400 + (d * 7919) % 86400;
        http_format_date(v, buf);
        CHECK(http_parse_date(buf, 29, &t) && t == v, "round trip %lld: %s", (long long)v, buf);
        if (t != v)
            break;
    }
}

static void test_reasons(void)
{
    static const int codes[] = { 200, 304, 400, 403, 404, 405, 413, 414, 431, 505 };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        CHECK(strcmp(http_reason(codes[i]), "Unknown") != 0, "reason %d", codes[i]);
    CHECK(strcmp(http_reason(431), "Request Header Fields Too Large") == 0, "431");
    CHECK(strcmp(http_reason(999), "Unknown") == 0, "999");
}

int main(void)
{
    test_table();
    test_dots();
    test_nul_bytes();
    test_prefixes();
    test_pipelined();
    test_limits();
    test_ims();
    test_dates();
    test_reasons();
    if (failures) {
        fprintf(stderr, "parse_test: %d failure(s)\n", failures);
        return 1;
    }
    printf("parse_test: all passed\n");
    return 0;
}
