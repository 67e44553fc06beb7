/* load.c — from C source to a loaded shared object, through the disk cache.
 *
 * Consumes: generated C translation units (codegen/c.c, prelude included).
 * Produces: the path of a shared object in the cache:
 *   <cache>/<key[0:2]>/<key>.so   the library
 *   <cache>/<key[0:2]>/<key>.c    its source (for reading: KILN_DUMP=code)
 *   <cache>/<key[0:2]>/<key>.ok   "kiln-ok <size> <content hash>" of the .so
 * The key hashes the sources, the compiler command and flags, the compiler's
 * identity and kiln's version.  An entry whose .ok is missing or disagrees with
 * the .so (truncated, corrupted, half written) is rebuilt, never loaded.
 * Large units are split into chunks compiled in parallel and linked.  The
 * compiler runs without the GIL, each process in a process group of its own,
 * killed as a group after a time limit (config.cc_timeout).  Every failure
 * (a compiler that fails, hangs or cannot start, a full disk) removes the
 * files the build had begun: temporaries, objects, partial sources.
 */
#include "runtime.h"
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* 128-bit content hash: two independent 64-bit FNV-style lanes. */
typedef struct {
    uint64_t a, b;
} h128;

static void
h_update(h128 *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ s[i]) * 0x100000001b3ULL;
        h->b = (h->b ^ s[i]) * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
        h->b ^= h->b >> 29;
    }
}

static h128
h_init(void)
{
    h128 h = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
    return h;
}

static void
h_hex(h128 h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
}

static int
mkdirs(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char ch = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
                return -1;
            tmp[i] = ch;
        }
    }
    return 0;
}

static int
write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    int rc = fclose(f);
    if (w == n && rc == 0)
        return 0;
    int e = errno;
    unlink(path); /* never leave a partial file (a full disk) */
    errno = e;
    return -1;
}

/* path's contents written whole or not at all: into a file of this process,
   then renamed into place.  Processes sharing a cache directory (pytest
   workers, a job's ranks) can build the same entry at once; writing the path
   in place would truncate the file another process's compiler is reading. */
static int
write_file_atomic(const char *path, const char *data, size_t n, long pid)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, pid);
    if (write_file(tmp, data, n) < 0)
        return -1;
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

static char *
read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) < 0) {
        fclose(f);
        return NULL;
    }
    long sz = ftell(f);
    if (sz < 0 || fseek(f, 0, SEEK_SET) < 0) {
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)sz + 1);
    if (buf == NULL) {
        fclose(f);
        return NULL;
    }
    size_t r = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    if (r != (size_t)sz) {
        free(buf);
        return NULL;
    }
    buf[sz] = 0;
    *n = (size_t)sz;
    return buf;
}

/* "kiln-ok <size> <hash>" for the file at path; 0 ok, -1 unreadable */
static int
file_stamp(const char *path, char *out, size_t cap)
{
    size_t n;
    char *data = read_file(path, &n);
    if (data == NULL)
        return -1;
    h128 h = h_init();
    h_update(&h, data, n);
    free(data);
    char hex[33];
    h_hex(h, hex);
    snprintf(out, cap, "kiln-ok %zu %s\n", n, hex);
    return 0;
}

static int
entry_valid(const char *so, const char *ok)
{
    size_t n;
    char *want = read_file(ok, &n);
    if (want == NULL)
        return 0;
    char have[128];
    int good = file_stamp(so, have, sizeof have) == 0 && strcmp(have, want) == 0;
    free(want);
    return good;
}

/* Whether the compiler's stderr at path reports a crash of the compiler
   itself (gcc's "internal compiler error", clang's "PLEASE submit a bug
   report"): its bug, not the source's, worked around by building again at
   -O1 (gcc 12's SLP vectoriser crashes on some reductions). */
static int
compiler_crashed(const char *path)
{
    size_t n;
    char *text = read_file(path, &n);
    if (text == NULL)
        return 0;
    int crashed = strstr(text, "internal compiler error") != NULL || strstr(text, "PLEASE submit a bug report") != NULL;
    free(text);
    return crashed;
}

static double
mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Run argv lists in parallel; stderr of each goes to errpaths[i].  Each
   process leads a process group of its own (the compiler's own children,
   cc1 and as, join it).  With timeout > 0, the groups still running after
   that many seconds are killed and *timed_out is set.  Returns 0 if all
   exited 0, else the index+1 of the first failure, or -1 if a process could
   not start (errno set). */
static int
run_parallel(char ***argvs, char **errpaths, int n, double timeout, int *timed_out)
{
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    if (pids == NULL)
        return -1;
    int started = 0, failed = 0, spawn_err = 0;
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    for (int i = 0; i < n; i++) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 2, errpaths[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        int rc = posix_spawnp(&pids[i], argvs[i][0], &fa, &at, argvs[i], environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) {
            spawn_err = rc;
            pids[i] = 0;
            break;
        }
        started++;
    }
    posix_spawnattr_destroy(&at);
    /* poll (1 ms growing to 20 ms) so the time limit can be kept */
    double deadline = timeout > 0 ? mono_s() + timeout : 0;
    int left = started;
    long nap_us = 1000;
    while (left > 0) {
        for (int i = 0; i < started; i++) {
            if (pids[i] <= 0)
                continue;
            int status = 0;
            pid_t r = waitpid(pids[i], &status, WNOHANG);
            if (r == 0 || (r < 0 && errno == EINTR))
                continue;
            if (!failed && (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0))
                failed = i + 1;
            pids[i] = -1;
            left--;
        }
        if (left == 0)
            break;
        if (deadline > 0 && mono_s() >= deadline) {
            for (int i = 0; i < started; i++)
                if (pids[i] > 0) {
                    kill(-pids[i], SIGKILL);
                    while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                        ;
                    if (!failed)
                        failed = i + 1;
                }
            *timed_out = 1;
            break;
        }
        struct timespec ts = {0, nap_us * 1000};
        nanosleep(&ts, NULL);
        if (nap_us < 20000)
            nap_us *= 2;
    }
    free(pids);
    if (spawn_err) {
        errno = spawn_err;
        return -1;
    }
    return failed;
}

static PyObject *CompilerError, *ToolchainMissing, *CompilerTimeout;

PyObject *
kn_compiler_error_type(void)
{
    if (CompilerError == NULL)
        CompilerError = PyErr_NewExceptionWithDoc("kiln._C.CompilerError",
                                                  "The system C compiler failed on generated code; its subclasses: "
                                                  "CompilerTimeout (ran past kiln.config.cc_timeout), "
                                                  "ToolchainMissing (there is none).",
                                                  PyExc_RuntimeError, NULL);
    return CompilerError;
}

/* kiln._C.ToolchainMissing, a CompilerError: no C compiler configured, or it
   cannot be run.  The user's environment, not kiln's code: Python raises it
   as kiln.errors.ToolchainError with the fix. */
PyObject *
kn_toolchain_missing_type(void)
{
    PyObject *base = kn_compiler_error_type();
    if (ToolchainMissing == NULL && base != NULL)
        ToolchainMissing = PyErr_NewExceptionWithDoc("kiln._C.ToolchainMissing",
                                                     "No C compiler is configured, or it cannot be run.", base, NULL);
    return ToolchainMissing;
}

/* kiln._C.CompilerTimeout, a CompilerError: the compiler ran past
   kiln.config.cc_timeout and was stopped (a slow or hung toolchain, not
   code the compiler rejected). */
PyObject *
kn_compiler_timeout_type(void)
{
    PyObject *base = kn_compiler_error_type();
    if (CompilerTimeout == NULL && base != NULL)
        CompilerTimeout = PyErr_NewExceptionWithDoc("kiln._C.CompilerTimeout",
                                                    "The C compiler ran past kiln.config.cc_timeout and was stopped.",
                                                    base, NULL);
    return CompilerTimeout;
}

static void
split_words(char *s, char **out, int *n, int cap)
{
    char *save = NULL;
    for (char *t = strtok_r(s, " \t", &save); t && *n < cap; t = strtok_r(NULL, " \t", &save))
        out[(*n)++] = t;
}

/* The compiler's time limit in seconds (0: none): kiln.config.cc_timeout. */
static double
config_cc_timeout(void)
{
    PyObject *cfg = PyImport_ImportModule("kiln.config");
    PyObject *v = cfg ? PyObject_GetAttrString(cfg, "cc_timeout") : NULL;
    double t = v ? PyFloat_AsDouble(v) : 0;
    Py_XDECREF(v);
    Py_XDECREF(cfg);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 600;
    }
    return t;
}

/* build(units: list[str], cache_dir: str, cc: str, cflags: str, salt: str, jobs: int,
         timeout: float = kiln.config.cc_timeout) -> (so_path: str, cached: bool)
   `units` are complete translation units; each is compiled on its own (in
   parallel, up to `jobs` at a time) when there are several.  A compiler
   process still running after `timeout` seconds (0: no limit) is killed
   with its children and CompilerError raised. */
PyObject *
kn_py_build(PyObject *self, PyObject *args)
{
    PyObject *units;
    const char *cache, *cc, *cflags, *salt;
    int jobs;
    double timeout = -1;
    if (!PyArg_ParseTuple(args, "O!ssssi|d", &PyList_Type, &units, &cache, &cc, &cflags, &salt, &jobs, &timeout))
        return NULL;
    if (timeout < 0)
        timeout = config_cc_timeout();
    Py_ssize_t nu = PyList_GET_SIZE(units);
    if (nu == 0) {
        PyErr_SetString(PyExc_ValueError, "kiln: nothing to build");
        return NULL;
    }
    h128 h = h_init();
    h_update(&h, salt, strlen(salt));
    h_update(&h, cc, strlen(cc));
    h_update(&h, cflags, strlen(cflags));
    const char **texts = calloc((size_t)nu, sizeof(char *));
    Py_ssize_t *lens = calloc((size_t)nu, sizeof(Py_ssize_t));
    if (texts == NULL || lens == NULL) {
        free(texts);
        free(lens);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nu; i++) {
        texts[i] = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(units, i), &lens[i]);
        if (texts[i] == NULL) {
            free(texts);
            free(lens);
            return NULL;
        }
        h_update(&h, "\x01unit", 5);
        h_update(&h, texts[i], (size_t)lens[i]);
    }
    char key[33];
    h_hex(h, key);
    char dir[4096], so[4200], ok[4200], src[4200];
    snprintf(dir, sizeof dir, "%s/%.2s", cache, key);
    snprintf(so, sizeof so, "%s/%s.so", dir, key);
    snprintf(ok, sizeof ok, "%s/%s.ok", dir, key);
    snprintf(src, sizeof src, "%s/%s.c", dir, key);
    if (entry_valid(so, ok)) {
        free(texts);
        free(lens);
        return Py_BuildValue("(sO)", so, Py_True);
    }
    if (mkdirs(dir) < 0) {
        free(texts);
        free(lens);
        return PyErr_Format(PyExc_OSError, "kiln: cannot create cache directory %s: %s (set KILN_CACHE_DIR)", dir,
                            strerror(errno));
    }
    /* Write sources: <key>.c holds unit 0; further units <key>.<i>.c */
    int rc = 0;
    char **srcs = calloc((size_t)nu, sizeof(char *));
    char **objs = calloc((size_t)nu, sizeof(char *));
    char **errs = calloc((size_t)nu + 1, sizeof(char *));
    char ***argvs = calloc((size_t)nu + 1, sizeof(char **));
    char *flagbuf = strdup(cflags);
    char *ccbuf = strdup(cc);
    char *fl[64];
    int nfl = 0;
    char *ccw[8];
    int nccw = 0;
    PyObject *result = NULL;
    long pid = (long)getpid();
    if (!srcs || !objs || !errs || !argvs || !flagbuf || !ccbuf) {
        PyErr_NoMemory();
        goto done;
    }
    split_words(ccbuf, ccw, &nccw, 8);
    split_words(flagbuf, fl, &nfl, 64);
    if (nccw == 0) {
        PyErr_SetString(kn_toolchain_missing_type(), "kiln: no C compiler configured (set CC or kiln.config.cc)");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nu; i++) {
        srcs[i] = malloc(4300);
        objs[i] = malloc(4300);
        errs[i] = malloc(4300);
        if (!srcs[i] || !objs[i] || !errs[i]) {
            PyErr_NoMemory();
            goto done;
        }
        if (i == 0)
            snprintf(srcs[i], 4300, "%s", src);
        else
            snprintf(srcs[i], 4300, "%s/%s.%zd.c", dir, key, i);
        snprintf(objs[i], 4300, "%s/%s.%zd.%ld.o", dir, key, i, pid);
        snprintf(errs[i], 4300, "%s/%s.%zd.%ld.err", dir, key, i, pid);
        if (write_file_atomic(srcs[i], texts[i], (size_t)lens[i], pid) < 0) {
            PyErr_Format(PyExc_OSError, "kiln: cannot write %s: %s", srcs[i], strerror(errno));
            for (Py_ssize_t j = 0; j < i; j++) /* an entry never built: no sources either */
                unlink(srcs[j]);
            goto done;
        }
    }
    char tmpso[4300];
    snprintf(tmpso, sizeof tmpso, "%s.%ld.tmp", so, pid);
    errs[nu] = malloc(4300);
    if (errs[nu] == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    snprintf(errs[nu], 4300, "%s/%s.link.%ld.err", dir, key, pid);
    int retried = 0;
build:
    /* argv: cc words, flags, -c src -o obj  (or, for a single unit, -shared
       straight to the library) */
    for (Py_ssize_t i = 0; i < nu; i++) {
        free(argvs[i]);
        argvs[i] = calloc((size_t)(nccw + nfl + 8), sizeof(char *));
        if (argvs[i] == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        int a = 0;
        for (int k = 0; k < nccw; k++)
            argvs[i][a++] = ccw[k];
        for (int k = 0; k < nfl; k++)
            if (strncmp(fl[k], "-l", 2) != 0)
                argvs[i][a++] = fl[k];
        if (nu == 1) {
            argvs[i][a++] = "-shared";
        } else {
            argvs[i][a++] = "-c";
        }
        argvs[i][a++] = srcs[i];
        argvs[i][a++] = "-o";
        argvs[i][a++] = nu == 1 ? tmpso : objs[i];
        /* libraries after the sources: linkers using --as-needed drop a
           library named before anything refers to it */
        for (int k = 0; k < nfl && nu == 1; k++)
            if (strncmp(fl[k], "-l", 2) == 0)
                argvs[i][a++] = fl[k];
        argvs[i][a] = NULL;
    }
    int failed_at = 0, timed_out = 0;
    Py_BEGIN_ALLOW_THREADS
    if (jobs < 1)
        jobs = 1;
    for (Py_ssize_t i = 0; i < nu && rc == 0; i += jobs) {
        int batch = (int)((nu - i) < jobs ? (nu - i) : jobs);
        rc = run_parallel(argvs + i, errs + i, batch, timeout, &timed_out);
        if (rc > 0)
            failed_at = (int)i + rc;
    }
    if (rc == 0 && nu > 1) {
        char **largv = calloc((size_t)(nccw + nfl + nu + 8), sizeof(char *));
        if (largv == NULL) {
            rc = -2;
        } else {
            int a = 0;
            for (int k = 0; k < nccw; k++)
                largv[a++] = ccw[k];
            for (int k = 0; k < nfl; k++)
                if (strncmp(fl[k], "-l", 2) != 0)
                    largv[a++] = fl[k];
            largv[a++] = "-shared";
            for (Py_ssize_t i = 0; i < nu; i++)
                largv[a++] = objs[i];
            largv[a++] = "-o";
            largv[a++] = tmpso;
            for (int k = 0; k < nfl; k++)
                if (strncmp(fl[k], "-l", 2) == 0)
                    largv[a++] = fl[k];
            largv[a] = NULL;
            rc = run_parallel(&largv, &errs[nu], 1, timeout, &timed_out);
            if (rc > 0)
                failed_at = (int)nu + 1;
            free(largv);
        }
    }
    Py_END_ALLOW_THREADS
    if (rc == -2) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc < 0) {
        PyErr_Format(kn_toolchain_missing_type(), "kiln: cannot run the C compiler '%s': %s (install gcc or set CC)",
                     ccw[0], strerror(errno));
        goto done;
    }
    if (timed_out) {
        char msg[4600];
        snprintf(msg, sizeof msg,
                 "kiln: the C compiler ran longer than %g s on %s and was stopped "
                 "(kiln.config.cc_timeout, KILN_CC_TIMEOUT)",
                 timeout, failed_at - 1 < nu ? srcs[failed_at - 1] : "the link step");
        PyErr_SetString(kn_compiler_timeout_type(), msg);
        goto done;
    }
    if (failed_at && !retried && nfl < 64 && compiler_crashed(errs[failed_at - 1])) {
        /* the compiler crashed: once more, optimising less (a later -O wins) */
        fl[nfl++] = "-O1";
        retried = 1;
        rc = 0;
        goto build;
    }
    if (failed_at) {
        size_t en = 0;
        char *msg = read_file(errs[failed_at - 1], &en);
        PyErr_Format(kn_compiler_error_type(), "kiln: the C compiler failed on %s:\n%.4000s",
                     failed_at - 1 < nu ? srcs[failed_at - 1] : "the link step", msg ? msg : "");
        free(msg);
        goto done;
    }
    char stamp[128];
    if (file_stamp(tmpso, stamp, sizeof stamp) < 0 || rename(tmpso, so) < 0) {
        PyErr_Format(PyExc_OSError, "kiln: cannot install %s: %s", so, strerror(errno));
        goto done;
    }
    char tmpok[4300];
    snprintf(tmpok, sizeof tmpok, "%s.%ld.tmp", ok, pid);
    if (write_file(tmpok, stamp, strlen(stamp)) < 0 || rename(tmpok, ok) < 0) {
        PyErr_Format(PyExc_OSError, "kiln: cannot write %s: %s", ok, strerror(errno));
        unlink(tmpok);
        unlink(so); /* no stamp: the entry would be rebuilt anyway */
        goto done;
    }
    result = Py_BuildValue("(sO)", so, Py_False);
done:
    if (objs)
        for (Py_ssize_t i = 0; i < nu; i++)
            if (objs[i]) {
                unlink(objs[i]);
                free(objs[i]);
            }
    if (errs)
        for (Py_ssize_t i = 0; i <= nu; i++)
            if (errs[i]) {
                unlink(errs[i]);
                free(errs[i]);
            }
    if (srcs)
        for (Py_ssize_t i = 0; i < nu; i++)
            free(srcs[i]);
    if (argvs)
        for (Py_ssize_t i = 0; i < nu; i++)
            free(argvs[i]);
    if (result == NULL) {
        char tmp[4300];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", so, pid);
        unlink(tmp);
    }
    free(srcs);
    free(objs);
    free(errs);
    free(argvs);
    free(flagbuf);
    free(ccbuf);
    free(texts);
    free(lens);
    return result;
}
