/* text.c — the growable text buffer the code generators write into.
 *
 * Consumes: printf-style requests from the renderers (src/codegen) and the
 * printers (print.c).  Produces: kn_str, a NUL-terminated buffer (`oom` set,
 * and further writes ignored, once an allocation fails).
 *
 * kn_str_printf formats the conversions generated code is made of (d i u x X
 * c s and %%, with flags - 0 + space, a width and a precision, given or `*`,
 * and the lengths hh h l ll z j t) itself: libc's vsnprintf took a third of
 * the C core's time when it plans a new size of a symbolic graph (~10^4
 * calls of a few conversions each).  A format with any other conversion
 * (floats, %o, %p, %n, the # flag, %L, positional arguments, %lc, %ls)
 * goes to vsnprintf whole: the formatter writes until it meets one, then
 * drops what it wrote (the format is parsed once in the common case).
 * kn_str_put and kn_str_int append bytes and a decimal without a format.
 * `kn_str_printf_check` compares the two formatters on a table of formats
 * and values (tests/compile/test_text.py).
 */
#include "../kiln.h"
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* room for k more bytes and a NUL; 0, or -1 with oom set */
static int
reserve(kn_str *s, size_t k)
{
    if (s->p && s->n + k < s->cap)
        return 0;
    size_t ncap = s->cap ? s->cap * 2 : 4096;
    while (ncap < s->n + k + 1)
        ncap *= 2;
    char *np = realloc(s->p, ncap);
    if (np == NULL) {
        s->oom = 1;
        return -1;
    }
    s->p = np;
    s->cap = ncap;
    return 0;
}

static void
put(kn_str *s, const char *p, size_t k)
{
    if (reserve(s, k) < 0)
        return;
    memcpy(s->p + s->n, p, k);
    s->n += k;
    s->p[s->n] = '\0';
}

static void
pad(kn_str *s, char c, long k)
{
    if (k <= 0 || reserve(s, (size_t)k) < 0)
        return;
    memset(s->p + s->n, c, (size_t)k);
    s->n += (size_t)k;
    s->p[s->n] = '\0';
}

enum { F_LEFT = 1, F_ZERO = 2, F_PLUS = 4, F_SPACE = 8 };

/* one integer conversion: its digits (magnitude u in base 10 or 16), sign,
   flags (F_*), precision (minimum digits, -1 none) and width */
static void
put_int(kn_str *s, uint64_t u, int neg, char conv, int flags, long width, long prec)
{
    char dig[24];
    int nd = 0;
    if (conv == 'x' || conv == 'X') {
        const char *digits = conv == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
        while (u) {
            dig[nd++] = digits[u & 15];
            u >>= 4;
        }
    } else {
        while (u) {   /* (a constant divisor: a multiply, not a division) */
            dig[nd++] = (char)('0' + u % 10);
            u /= 10;
        }
    }
    if (prec < 0 && nd == 0)
        dig[nd++] = '0';   /* (precision 0 writes no digit for 0) */
    int sig = conv == 'd' || conv == 'i';
    char sign = neg ? '-' : sig && (flags & F_PLUS) ? '+' : sig && (flags & F_SPACE) ? ' ' : 0;
    long zeros = prec > nd ? prec - nd : 0;
    long len = nd + zeros + (sign != 0);
    int left = flags & F_LEFT;
    if (!left && prec < 0 && (flags & F_ZERO) && width > len) {
        zeros += width - len;
        len = width;
    }
    if (!left)
        pad(s, ' ', width - len);
    if (sign)
        put(s, &sign, 1);
    pad(s, '0', zeros);
    if (reserve(s, (size_t)nd) == 0) {
        for (int k = nd - 1; k >= 0; k--)
            s->p[s->n++] = dig[k];
        s->p[s->n] = '\0';
    }
    if (left)
        pad(s, ' ', width - len);
}

/* fmt written with the conversions above; -1 at the first one it does not
   write (the caller then drops what it wrote and asks libc) */
static int
format_plain(kn_str *s, const char *f, va_list ap)
{
    while (*f && !s->oom) {
        const char *pc = strchr(f, '%');
        if (pc == NULL)
            pc = f + strlen(f);
        if (pc > f)
            put(s, f, (size_t)(pc - f));
        if (!*pc)
            return 0;
        f = pc + 1;
        if (*f == '%') {
            put(s, "%", 1);
            f++;
            continue;
        }
        int flags = 0;
        for (;; f++) {
            if (*f == '-')
                flags |= F_LEFT;
            else if (*f == '0')
                flags |= F_ZERO;
            else if (*f == '+')
                flags |= F_PLUS;
            else if (*f == ' ')
                flags |= F_SPACE;
            else
                break;
        }
        long width = 0, prec = -1;
        if (*f == '*') {
            int w = va_arg(ap, int);
            if (w < 0) {
                flags |= F_LEFT;
                w = -w;
            }
            width = w;
            f++;
        } else
            while (*f >= '0' && *f <= '9')
                width = width * 10 + (*f++ - '0');
        if (*f == '$')
            return -1;   /* (positional arguments) */
        if (*f == '.') {
            f++;
            prec = 0;
            if (*f == '*') {
                int p = va_arg(ap, int);
                prec = p < 0 ? -1 : p;
                f++;
            } else
                while (*f >= '0' && *f <= '9')
                    prec = prec * 10 + (*f++ - '0');
        }
        char len = 0;   /* H hh, h, l, L ll, z, j, t */
        if (*f == 'h' || *f == 'l') {
            len = f[1] == f[0] ? (*f == 'h' ? 'H' : 'L') : *f;
            f += f[1] == f[0] ? 2 : 1;
        } else if (*f == 'z' || *f == 'j' || *f == 't')
            len = *f++;
        char conv = *f++;
        switch (conv) {
        case 'd': case 'i': case 'u': case 'x': case 'X':
            break;
        case 'c': case 's':
            if ((flags & F_ZERO) || len)
                return -1;   /* (a 0 flag there is undefined; wide characters) */
            break;
        default:
            return -1;
        }
        if (conv == 's') {
            const char *str = va_arg(ap, const char *);
            if (str == NULL)
                str = "(null)";
            size_t k = prec >= 0 ? strnlen(str, (size_t)prec) : strlen(str);
            int left = flags & F_LEFT;
            if (!left)
                pad(s, ' ', width - (long)k);
            put(s, str, k);
            if (left)
                pad(s, ' ', width - (long)k);
        } else if (conv == 'c') {
            char ch = (char)va_arg(ap, int);
            int left = flags & F_LEFT;
            if (!left)
                pad(s, ' ', width - 1);
            put(s, &ch, 1);
            if (left)
                pad(s, ' ', width - 1);
        } else if (conv == 'd' || conv == 'i') {
            int64_t v;
            switch (len) {
            case 'H': v = (signed char)va_arg(ap, int); break;
            case 'h': v = (short)va_arg(ap, int); break;
            case 'l': v = va_arg(ap, long); break;
            case 'L': v = va_arg(ap, long long); break;
            case 'z': v = va_arg(ap, ssize_t); break;
            case 'j': v = va_arg(ap, intmax_t); break;
            case 't': v = va_arg(ap, ptrdiff_t); break;
            default: v = va_arg(ap, int);
            }
            uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
            put_int(s, u, v < 0, conv, flags, width, prec);
        } else {   /* u x X */
            uint64_t u;
            switch (len) {
            case 'H': u = (unsigned char)va_arg(ap, unsigned); break;
            case 'h': u = (unsigned short)va_arg(ap, unsigned); break;
            case 'l': u = va_arg(ap, unsigned long); break;
            case 'L': u = va_arg(ap, unsigned long long); break;
            case 'z': u = va_arg(ap, size_t); break;
            case 'j': u = va_arg(ap, uintmax_t); break;
            case 't': u = (uint64_t)va_arg(ap, ptrdiff_t); break;
            default: u = va_arg(ap, unsigned);
            }
            put_int(s, u, 0, conv, flags, width, prec);
        }
    }
    return 0;
}

static void
format_libc(kn_str *s, const char *fmt, va_list ap)
{
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        size_t room = s->cap - s->n;
        int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? room : 0, fmt, aq);
        va_end(aq);
        if (k < 0) {
            s->oom = 1;
            return;
        }
        if (s->p && (size_t)k < room) {
            s->n += (size_t)k;
            return;
        }
        if (reserve(s, (size_t)k) < 0)
            return;
    }
}

static void
vformat(kn_str *s, const char *fmt, va_list ap)
{
    if (s->oom || reserve(s, 0) < 0)   /* (an empty result still leaves a NUL-terminated buffer) */
        return;
    size_t at = s->n;
    va_list aq;
    va_copy(aq, ap);
    int rc = format_plain(s, fmt, aq);
    va_end(aq);
    if (rc < 0 && !s->oom) {
        s->n = at;
        s->p[at] = '\0';
        format_libc(s, fmt, ap);
    }
}

void
kn_str_printf(kn_str *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(s, fmt, ap);
    va_end(ap);
}

void
kn_str_put(kn_str *s, const char *p, size_t k)
{
    if (!s->oom)
        put(s, p, k);
}

void
kn_str_int(kn_str *s, long long v)
{
    if (!s->oom)
        put_int(s, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0, 'd', 0, 0, -1);
}

void
kn_str_free(kn_str *s)
{
    free(s->p);
    s->p = NULL;
    s->n = s->cap = 0;
}

/* ------------------------------------------------------------ self-check */

static void
check_libc(kn_str *bad, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    format_libc(bad, fmt, ap);
    va_end(ap);
}

/* both formatters on one call; appends a line to `bad` where they differ */
static void
check_one(kn_str *bad, const char *fmt, ...)
{
    kn_str mine = {0};
    char theirs[512];
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    vformat(&mine, fmt, ap);
    vsnprintf(theirs, sizeof theirs, fmt, aq);
    va_end(aq);
    va_end(ap);
    if (mine.oom || strcmp(mine.p ? mine.p : "", theirs) != 0)
        check_libc(bad, "format \"%s\": kiln \"%s\", libc \"%s\"\n", fmt, mine.p ? mine.p : "(oom)", theirs);
    kn_str_free(&mine);
}

/* kn_str_printf against vsnprintf over a table of formats and values: ""
   when they agree everywhere, else one line per difference */
PyObject *
kn_str_printf_check(void)
{
    kn_str bad = {0};
    static const int64_t vals[] = {0, 1, -1, 7, -7, 9, 10, 99, 100, 255, 256, 4096, -4096, 65535, 123456789,
                                   -123456789, INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, INT64_MAX, INT64_MIN,
                                   (int64_t)1 << 40, -((int64_t)1 << 40)};
    static const char *const ifmts[] = {"%d", "%5d", "%-5d|", "%05d", "%+d", "% d", "%.3d", "%8.3d", "%-8.3d|",
                                        "%.0d", "%*d", "%-*d|", "%0*d", "%.*d", "%u", "%x", "%X", "%08x", "%.4x",
                                        "%i", "%hd", "%hhd", "%hu", "%hhx", "a%db%dc"};
    static const char *const lfmts[] = {"%lld", "%20lld", "%-20lld|", "%020lld", "%+lld", "%llu", "%llx",
                                        "%ld", "%lu", "%lx", "%zd", "%zu", "%jd", "%td", "%.25lld"};
    for (size_t v = 0; v < sizeof vals / sizeof *vals; v++) {
        int64_t x = vals[v];
        for (size_t k = 0; k < sizeof ifmts / sizeof *ifmts; k++) {
            const char *f = ifmts[k];
            if (strchr(f, '*'))
                check_one(&bad, f, (int)(v % 7) * 3 - 6, (int)x);
            else if (!strcmp(f, "a%db%dc"))
                check_one(&bad, f, (int)x, (int)(x >> 3));
            else
                check_one(&bad, f, (int)x);
        }
        for (size_t k = 0; k < sizeof lfmts / sizeof *lfmts; k++) {
            const char *f = lfmts[k];
            if (strstr(f, "zu"))
                check_one(&bad, f, (size_t)x);
            else if (strstr(f, "zd"))
                check_one(&bad, f, (ssize_t)x);
            else if (strstr(f, "jd"))
                check_one(&bad, f, (intmax_t)x);
            else if (strstr(f, "td"))
                check_one(&bad, f, (ptrdiff_t)x);
            else if (strchr(f, 'l') && strstr(f, "ll") == NULL)
                check_one(&bad, f, (long)x);
            else
                check_one(&bad, f, (long long)x);
        }
    }
    static const char *const strs[] = {"", "a", "kn_k12", "float v = x[i];", NULL};
    static const char *const sfmts[] = {"%s", "[%10s]", "[%-10s]", "[%.3s]", "[%8.2s]", "[%*s]", "[%-*s]",
                                        "[%.*s]", "%%%s%%", "%s%s"};
    for (size_t v = 0; v < sizeof strs / sizeof *strs; v++)
        for (size_t k = 0; k < sizeof sfmts / sizeof *sfmts; k++) {
            const char *f = sfmts[k], *str = strs[v];
            if (str == NULL && strchr(f, '.'))
                continue;   /* (libc's "(null)" under a precision is its own choice) */
            if (strchr(f, '*'))
                check_one(&bad, f, (int)v * 3 - 5, str);
            else if (!strcmp(f, "%s%s"))
                check_one(&bad, f, str, "x");
            else
                check_one(&bad, f, str);
        }
    for (int ch = 32; ch < 127; ch += 5) {
        check_one(&bad, "%c", ch);
        check_one(&bad, "[%3c]", ch);
        check_one(&bad, "[%-3c]", ch);
    }
    /* the libc path: floats and what it alone writes, mixed with plain conversions */
    check_one(&bad, "%d %g %s", 3, 1.5, "x");
    check_one(&bad, "%.17g", 0.1);
    check_one(&bad, "%#x %o", 255, 8);
    /* (written up to the conversion libc must make, then dropped and made by libc whole) */
    check_one(&bad, "[%5d|%s|%o]", 42, "ab", 8);
    check_one(&bad, "%2$d|%1$d", 3, 4);
    check_one(&bad, "no conversion");
    check_one(&bad, "%s", "");
    /* a long result grows the buffer */
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    kn_str grow = {0};
    for (int k = 0; k < 4; k++)
        kn_str_printf(&grow, "%s%d", big, k);
    if (grow.oom || grow.n != 4 * (sizeof big - 1 + 1) || strlen(grow.p) != grow.n)
        check_libc(&bad, "a growing buffer: %zu bytes, want %zu\n", grow.n, 4 * sizeof big);
    kn_str_free(&grow);
    PyObject *r = PyUnicode_FromStringAndSize(bad.p ? bad.p : "", (Py_ssize_t)bad.n);
    kn_str_free(&bad);
    return r;
}
