/*
 * http_parse.c — see http_parse.h for the contract.
 *
 * The parser walks the buffer line by line. A line ends at "\n" (an optional
 * "\r" before it is dropped; a "\r" anywhere else is a control character and
 * makes the line invalid). Each complete line is checked at once, so errors
 * come out as early as the bytes allow. The last, incomplete line gets only
 * the checks that cannot change when more bytes arrive (method syntax,
 * target length, a folded header, the header count): that is what keeps
 * "a prefix of a good head needs more bytes" true, and the fuzzer checks it.
 *
 * The request target is %-decoded into req->path and then normalised in
 * place: empty and "." segments vanish, ".." removes the previous segment,
 * and a ".." with nothing left to remove is an attempt to leave the root:
 * 403. Decoding happens first, so "%2e%2e" and "%2F" count as ".." and "/".
 */
#include "http_parse.h"

#include <string.h>

/* tchar from RFC 7230 3.2.6: the characters of a method or a header name. */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return true;
    default:
        return false;
    }
}

/* A header value byte: VCHAR, obs-text, SP or HTAB. */
static bool is_field_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* s[0..n) equals the lower-case literal lit, ignoring ASCII case. */
static bool ieq(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if (lower((unsigned char)s[i]) != (unsigned char)lit[i])
            return false;
    return i == n && lit[i] == '\0';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- request target ------------------------------------------------------ */

/* normalise() rewrites the decoded path p[0..n) (starting with '/') in place
 * into "/" or "/a/b" and NUL-terminates it. Every kept segment is preceded by
 * at least one '/' in the input and gets exactly one in the output, so the
 * write index never passes the read index. Returns HTTP_OK or 403. */
static int normalise(char *p, size_t n, bool *dir_hint)
{
    size_t r = 0, w = 0;
    bool dir = false;
    while (r < n) {
        while (r < n && p[r] == '/')
            r++;
        size_t s = r;
        while (r < n && p[r] != '/')
            r++;
        size_t len = r - s;
        if (len == 0 || (len == 1 && p[s] == '.')) {
            dir = true;
            continue;
        }
        if (len == 2 && p[s] == '.' && p[s + 1] == '.') {
            if (w == 0)
                return 403; /* above the root */
            while (p[w - 1] != '/')
                w--;
            w--;
            dir = true;
            continue;
        }
        p[w++] = '/';
        memmove(p + w, p + s, len);
        w += len;
        dir = false;
    }
    if (w == 0)
        p[w++] = '/';
    p[w] = '\0';
    *dir_hint = dir;
    return HTTP_OK;
}

/* parse_target() takes origin-form ("/path?query") or absolute-form
 * ("http://host/path"); the query and anything after '#' are ignored. */
static int parse_target(const char *t, size_t n, struct http_request *req)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
            return 400;

    size_t i = 0;
    if (t[0] != '/') {
        if (n >= 7 && ieq(t, 7, "http://"))
            i = 7;
        else if (n >= 8 && ieq(t, 8, "https://"))
            i = 8;
        else
            return 400; /* "*", relative paths, other schemes */
        while (i < n && t[i] != '/' && t[i] != '?' && t[i] != '#')
            i++;
    }
    size_t end = i;
    while (end < n && t[end] != '?' && t[end] != '#')
        end++;

    char *p = req->path; /* room for n + 2 bytes: a leading '/' and a NUL */
    size_t w = 0;
    p[w++] = '/';
    for (size_t k = i; k < end; k++) {
        unsigned char c = (unsigned char)t[k];
        if (c == '%') {
            if (k + 2 >= end)
                return 400; /* truncated escape */
            int h = hexval((unsigned char)t[k + 1]), l = hexval((unsigned char)t[k + 2]);
            if (h < 0 || l < 0)
                return 400;
            c = (unsigned char)(h * 16 + l);
            if (c == 0)
                return 400; /* %00 */
            k += 2;
        }
        p[w++] = (char)c;
    }
    return normalise(p, w, &req->dir_hint);
}

/* ---- request line ---------------------------------------------------------- */

/* parse_request_line() checks "METHOD SP target SP HTTP/d.d" in p[0..n).
 * complete == false: the line has not ended yet; only the checks that more
 * bytes cannot undo are made, and HTTP_NEED_MORE means "fine so far". */
static int parse_request_line(const char *p, size_t n, bool complete, struct http_request *req)
{
    size_t i = 0;
    while (i < n && p[i] != ' ') {
        if (!is_tchar((unsigned char)p[i]) || i >= HTTP_MAX_METHOD)
            return 400;
        i++;
    }
    if (i == n)
        return complete ? 400 : HTTP_NEED_MORE;
    if (i == 0)
        return 400;
    if (i == 3 && memcmp(p, "GET", 3) == 0)
        req->method = HTTP_METHOD_GET;
    else if (i == 4 && memcmp(p, "HEAD", 4) == 0)
        req->method = HTTP_METHOD_HEAD;
    else
        req->method = HTTP_METHOD_OTHER; /* methods are case-sensitive */

    const char *t = p + i + 1;
    size_t rest = n - i - 1, tlen = 0;
    while (tlen < rest && t[tlen] != ' ') {
        if (tlen >= HTTP_MAX_TARGET)
            return 414;
        tlen++;
    }
    if (tlen == rest)
        return complete ? 400 : HTTP_NEED_MORE; /* no version (HTTP/0.9 style) */
    if (tlen == 0)
        return 400;
    if (!complete)
        return HTTP_NEED_MORE;

    const char *v = t + tlen + 1;
    size_t vn = rest - tlen - 1;
    if (vn != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit(v[5]) || v[6] != '.' ||
        !is_digit(v[7]))
        return 400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return 505;
    req->version = v[7] == '1' ? 11 : 10;
    if (req->method == HTTP_METHOD_OTHER)
        return 405;
    return parse_target(t, tlen, req);
}

/* ---- headers ------------------------------------------------------------- */

struct head_state {
    bool host, te, body, conn_close, conn_keep_alive;
    const char *cl; /* first Content-Length value, for comparing repeats */
    size_t cl_len;
};

static void parse_connection(const char *v, size_t n, struct head_state *st)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (ieq(v + s, e - s, "close"))
            st->conn_close = true;
        else if (ieq(v + s, e - s, "keep-alive"))
            st->conn_keep_alive = true;
    }
}

/* parse_header() checks one complete header line p[0..n) (not blank, not a
 * continuation) and records what the server needs from it. */
static int parse_header(const char *p, size_t n, struct head_state *st, struct http_request *req)
{
    size_t colon = 0;
    while (colon < n && p[colon] != ':') {
        if (!is_tchar((unsigned char)p[colon]))
            return 400; /* includes "Name :" with a space before the colon */
        colon++;
    }
    if (colon == n || colon == 0)
        return 400;
    const char *v = p + colon + 1;
    size_t vn = n - colon - 1;
    while (vn && (*v == ' ' || *v == '\t'))
        v++, vn--;
    while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
        vn--;
    for (size_t i = 0; i < vn; i++)
        if (!is_field_char((unsigned char)v[i]))
            return 400;

    switch (colon) {
    case 4:
        if (ieq(p, 4, "host")) {
            if (st->host)
                return 400; /* RFC 7230 5.4: more than one Host */
            st->host = true;
        }
        break;
    case 10:
        if (ieq(p, 10, "connection"))
            parse_connection(v, vn, st);
        break;
    case 14:
        if (ieq(p, 14, "content-length")) {
            if (vn == 0)
                return 400;
            for (size_t i = 0; i < vn; i++) {
                if (!is_digit(v[i]))
                    return 400;
                if (v[i] != '0')
                    st->body = true;
            }
            if (st->cl && (st->cl_len != vn || memcmp(st->cl, v, vn) != 0))
                return 400; /* two different lengths */
            st->cl = v;
            st->cl_len = vn;
        }
        break;
    case 17:
        if (ieq(p, 17, "transfer-encoding"))
            st->te = true;
        else if (ieq(p, 17, "if-modified-since") && !req->has_ims)
            req->has_ims = http_parse_date(v, vn, &req->ims); /* invalid: ignored */
        break;
    }
    return HTTP_OK;
}

/* ---- the request head --------------------------------------------------------- */

int http_parse_request(const char *buf, size_t len, struct http_request *req)
{
    req->method = HTTP_METHOD_OTHER;
    req->version = 0;
    req->keep_alive = false;
    req->has_ims = false;
    req->ims = 0;
    req->dir_hint = false;
    req->head_len = 0;
    req->path[0] = '\0';

    size_t win = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
    int more = len >= HTTP_MAX_HEAD ? 413 : HTTP_NEED_MORE; /* answer when a line is cut */
    size_t pos = 0;

    /* RFC 7230 3.5: ignore blank lines before the request line. */
    for (;;) {
        if (pos < win && buf[pos] == '\n')
            pos += 1;
        else if (pos + 1 < win && buf[pos] == '\r' && buf[pos + 1] == '\n')
            pos += 2;
        else
            break;
    }

    const char *line = buf + pos;
    const char *nl = memchr(line, '\n', win - pos);
    if (!nl) {
        size_t n = win - pos;
        if (n && line[n - 1] == '\r')
            n--; /* may be the start of CRLF */
        int r = parse_request_line(line, n, false, req);
        return r != HTTP_NEED_MORE ? r : more;
    }
    size_t n = (size_t)(nl - line);
    if (n && line[n - 1] == '\r')
        n--;
    int r = parse_request_line(line, n, true, req);
    if (r != HTTP_OK)
        return r;
    pos = (size_t)(nl - buf) + 1;

    struct head_state st = { 0 };
    int nheaders = 0;
    for (;;) {
        line = buf + pos;
        nl = memchr(line, '\n', win - pos);
        if (!nl) {
            n = win - pos;
            bool blank_so_far = n == 0 || (n == 1 && line[0] == '\r');
            if (!blank_so_far) {
                if (line[0] == ' ' || line[0] == '\t')
                    return 400;
                if (nheaders >= HTTP_MAX_HEADERS)
                    return 431;
            }
            return more;
        }
        n = (size_t)(nl - line);
        if (n && line[n - 1] == '\r')
            n--;
        pos = (size_t)(nl - buf) + 1;
        if (n == 0)
            break; /* the blank line: end of the head */
        if (line[0] == ' ' || line[0] == '\t')
            return 400; /* obs-fold (RFC 7230 3.2.4) */
        if (++nheaders > HTTP_MAX_HEADERS)
            return 431;
        r = parse_header(line, n, &st, req);
        if (r != HTTP_OK)
            return r;
    }

    if (req->version == 11 && !st.host)
        return 400;
    if (st.te || st.body)
        return 413; /* GET and HEAD take no body */
    req->keep_alive = req->version == 11 ? !st.conn_close : st.conn_keep_alive && !st.conn_close;
    req->head_len = pos;
    return HTTP_OK;
}

/* ---- statuses and dates ----------------------------------------------------- */

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static const char wdays[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

/* Days since 1970-01-01 of a proleptic Gregorian date, and back
 * (H. Hinnant's algorithms: no tables, no time zone, no libc). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static char *put_digits(char *p, int v, int width)
{
    for (int i = width - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
    return p + width;
}

size_t http_format_date(int64_t t, char out[30])
{
    if (t < 0)
        t = 0;
    if (t > 253402300799) /* 9999-12-31T23:59:59Z: keep four year digits */
        t = 253402300799;
    int64_t days = t / 86400, y;
    int secs = (int)(t % 86400), m, d;
    civil_from_days(days, &y, &m, &d);
    char *p = out;
    memcpy(p, wdays[(days + 4) % 7], 3); /* 1970-01-01 was a Thursday */
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    p = put_digits(p, d, 2);
    *p++ = ' ';
    memcpy(p, months[m - 1], 3);
    p += 3;
    *p++ = ' ';
    p = put_digits(p, (int)y, 4);
    *p++ = ' ';
    p = put_digits(p, secs / 3600, 2);
    *p++ = ':';
    p = put_digits(p, secs / 60 % 60, 2);
    *p++ = ':';
    p = put_digits(p, secs % 60, 2);
    memcpy(p, " GMT", 5);
    return 29;
}

/* Reads exactly `count` digits at s[*i]. */
static bool digits(const char *s, size_t n, size_t *i, int count, int *val)
{
    int v = 0;
    for (int k = 0; k < count; k++, (*i)++) {
        if (*i >= n || !is_digit(s[*i]))
            return false;
        v = v * 10 + (s[*i] - '0');
    }
    *val = v;
    return true;
}

static bool lit(const char *s, size_t n, size_t *i, const char *l)
{
    size_t k = strlen(l);
    if (n - *i < k || memcmp(s + *i, l, k) != 0)
        return false;
    *i += k;
    return true;
}

static int month_at(const char *s, size_t n, size_t *i)
{
    if (n - *i < 3)
        return 0;
    for (int m = 0; m < 12; m++)
        if (memcmp(s + *i, months[m], 3) == 0) {
            *i += 3;
            return m + 1;
        }
    return 0;
}

/* "hh:mm:ss" */
static bool clock_at(const char *s, size_t n, size_t *i, int *h, int *mi, int *se)
{
    return digits(s, n, i, 2, h) && lit(s, n, i, ":") && digits(s, n, i, 2, mi) &&
           lit(s, n, i, ":") && digits(s, n, i, 2, se) && *h < 24 && *mi < 60 && *se <= 60;
}

bool http_parse_date(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
        i++;
    if (i < 3 || i > 9) /* "Sun" .. "Wednesday" */
        return false;

    int y, m, d, h, mi, se;
    if (lit(s, n, &i, ", ")) {
        if (!digits(s, n, &i, 2, &d))
            return false;
        if (lit(s, n, &i, " ")) { /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
            if (!(m = month_at(s, n, &i)) || !lit(s, n, &i, " ") || !digits(s, n, &i, 4, &y))
                return false;
        } else if (lit(s, n, &i, "-")) { /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
            if (!(m = month_at(s, n, &i)) || !lit(s, n, &i, "-") || !digits(s, n, &i, 2, &y))
                return false;
            y += y < 70 ? 2000 : 1900;
        } else {
            return false;
        }
        if (!lit(s, n, &i, " ") || !clock_at(s, n, &i, &h, &mi, &se) || !lit(s, n, &i, " GMT"))
            return false;
    } else if (lit(s, n, &i, " ")) { /* asctime: Sun Nov  6 08:49:37 1994 */
        if (!(m = month_at(s, n, &i)) || !lit(s, n, &i, " "))
            return false;
        if (lit(s, n, &i, " ")) {
            if (!digits(s, n, &i, 1, &d))
                return false;
        } else if (!digits(s, n, &i, 2, &d)) {
            return false;
        }
        if (!lit(s, n, &i, " ") || !clock_at(s, n, &i, &h, &mi, &se) || !lit(s, n, &i, " ") ||
            !digits(s, n, &i, 4, &y))
            return false;
    } else {
        return false;
    }
    if (i != n)
        return false;

    static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d < 1 || d > mdays[m - 1] || (m == 2 && d == 29 && !leap))
        return false;
    *out = days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + se;
    return true;
}
