/*
 * http_parse.h — the HTTP/1.x request-head parser of examples/httpd. No I/O,
 * no allocation, no global state: bytes in, a parsed request or a status out.
 *
 * http_parse_request() looks at the start of a buffer that holds one or more
 * requests (pipelining) and answers one of three things:
 *
 *   HTTP_OK          a complete, acceptable request head; req->head_len bytes
 *                    were used (call again at buf + head_len for the next one)
 *   HTTP_NEED_MORE   the head is not complete yet and nothing is wrong so far
 *   400..505         the status to answer with; the connection should close
 *
 * Errors are reported as soon as the bytes that prove them are there (a
 * malformed request line is answered before its headers arrive), and a
 * prefix of an acceptable head always gives HTTP_NEED_MORE.
 *
 * The order of the checks, which decides the status when several apply:
 *   request line   method token (400), target length (414), shape of the
 *                  line (400), version syntax (400), version 1.0/1.1 (505),
 *                  method GET/HEAD (405), target form, %-decoding and NUL
 *                  (400), ".." above the root (403)
 *   each header    more than HTTP_MAX_HEADERS lines (431), obs-fold, name
 *                  and value syntax, a second Host, bad Content-Length (400)
 *   end of head    Host missing in HTTP/1.1 (400), a body announced:
 *                  Content-Length > 0 or any Transfer-Encoding (413)
 *   at any point   HTTP_MAX_HEAD bytes without the end of the head (413)
 */
#ifndef HTTPD_HTTP_PARSE_H
#define HTTPD_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD    8192 /* request line + headers + blank line, bytes */
#define HTTP_MAX_TARGET  2048 /* request-target as sent (before decoding), bytes */
#define HTTP_MAX_HEADERS 64   /* header lines */
#define HTTP_MAX_METHOD  32   /* method token, bytes */

#define HTTP_OK        0
#define HTTP_NEED_MORE (-1)

enum http_method { HTTP_METHOD_OTHER = 0, HTTP_METHOD_GET, HTTP_METHOD_HEAD };

struct http_request {
    enum http_method method; /* set as soon as the method is known */
    int version;             /* 10 or 11 once the version is known, else 0 */
    bool keep_alive;         /* HTTP/1.1 unless "close"; 1.0 only with "keep-alive" */
    bool has_ims;            /* a valid If-Modified-Since was sent */
    int64_t ims;             /* its value, seconds since the epoch (UTC) */
    bool dir_hint;           /* the path ended in "/", "/." or "/..": must be a directory */
    size_t head_len;         /* bytes used, leading blank lines included */
    char path[HTTP_MAX_TARGET + 2]; /* %-decoded, normalised, "/" or "/a/b":
                                       no "." or ".." segments, no "//", no NUL */
};

/* http_parse_request() parses the request head at the start of buf[0..len)
 * into *req. Returns HTTP_OK, HTTP_NEED_MORE or an error status (see above).
 * Only the first HTTP_MAX_HEAD bytes are ever looked at. */
int http_parse_request(const char *buf, size_t len, struct http_request *req);

/* http_reason() is the reason phrase of status ("Not Found"), or "Unknown". */
const char *http_reason(int status);

/* http_parse_date() parses an HTTP-date in any of the three forms RFC 7231
 * 7.1.1.1 requires (IMF-fixdate, RFC 850, asctime) into seconds since the
 * epoch. Returns true on success. */
bool http_parse_date(const char *s, size_t n, int64_t *out);

/* http_format_date() writes t as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37
 * GMT", 29 characters) plus a NUL into out and returns 29. */
size_t http_format_date(int64_t t, char out[30]);

#endif /* HTTPD_HTTP_PARSE_H */
