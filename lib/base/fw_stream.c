/*
 * fw_stream.c — record stream reader and writer.  See fw_stream.h.
 *
 * The reader parses straight out of its input buffer for plain msgpack and
 * out of a decode buffer for zstd, so a record is never copied on the plain
 * path.  Switching happens only at record boundaries: a record (a map)
 * never starts with byte 0x28 nor with 0x50..0x5f, so the zstd magic and the
 * skippable-frame magics are unambiguous there.
 *
 * Two kinds of input that are not records are common enough to be handled
 * on their own: JSON (a record is a map, and no map starts with '{' or '[')
 * is refused at once with a hint, and after a value that is not a map the
 * reader drops bytes until a plausible record starts, so that text or a
 * damaged stretch costs one error, not one per byte.
 */
#include "fw_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define CHUNK (256u << 10)

enum { M_PLAIN, M_ZSTD };

struct fw_reader {
	int fd, own_fd;
	char *name;
	struct fw_reader_opts o;

	/* raw input: [in_pos, in_len) not yet consumed */
	const uint8_t *in;
	uint8_t *in_own;
	size_t in_pos, in_len, in_cap;
	int in_eof;
	uint64_t bytes_in;

	/* zstd decode buffer: [start, end) not yet consumed */
	ZSTD_DCtx *z;
	uint8_t *buf;
	size_t start, end, cap;
	int mode;
	int frame_open; /* inside a zstd frame (ZSTD_decompressStream != 0) */
	int zdone;      /* the zstd part of the input has ended */

	uint64_t index, offset;
	uint64_t eindex, eoffset; /* position of the last error */
	char errmsg[256];
	int recoverable, dead;

	/* Resynchronising after a value that is not a map: bytes are dropped
	 * until something that looks like a record starts (see plausible()). */
	int resync;
	enum fw_mp_type bad_type; /* type of the value that started it */
	uint64_t bad_len, skipped; /* its length; bytes dropped in all */
};

static int is_zstd_magic(const uint8_t *p)
{
	uint32_t m = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	return m == 0xFD2FB528u || (m & 0xFFFFFFF0u) == 0x184D2A50u;
}

static struct fw_reader *reader_new(const char *name, const struct fw_reader_opts *opts)
{
	struct fw_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->fd = -1;
	r->name = strdup(!name || strcmp(name, "-") == 0 ? "<stdin>" : name);
	if (!r->name) {
		free(r);
		return NULL;
	}
	if (opts)
		r->o = *opts;
	if (!r->o.max_record)
		r->o.max_record = FW_MAX_RECORD_DEFAULT;
	if (r->o.max_depth <= 0)
		r->o.max_depth = FW_MP_MAX_DEPTH;
	r->mode = M_PLAIN;
	return r;
}

struct fw_reader *fw_reader_fdopen(int fd, const char *name, const struct fw_reader_opts *opts)
{
	struct fw_reader *r = reader_new(name, opts);
	if (!r)
		return NULL;
	r->fd = fd;
	r->in_cap = CHUNK;
	r->in_own = malloc(r->in_cap);
	if (!r->in_own) {
		fw_reader_close(r);
		return NULL;
	}
	r->in = r->in_own;
	return r;
}

struct fw_reader *fw_reader_memopen(const void *p, size_t n, const char *name,
				    const struct fw_reader_opts *opts)
{
	struct fw_reader *r = reader_new(name ? name : "<memory>", opts);
	if (!r)
		return NULL;
	r->in = p;
	r->in_len = n;
	r->in_eof = 1;
	r->bytes_in = n;
	return r;
}

struct fw_reader *fw_reader_open(const char *path, const struct fw_reader_opts *opts,
				 char *err, size_t errlen)
{
	int fd = 0;
	if (path && strcmp(path, "-") != 0) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return NULL;
		}
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
			close(fd);
			errno = EISDIR;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return NULL;
		}
	}
	struct fw_reader *r = fw_reader_fdopen(fd, path, opts);
	if (!r) {
		int e = errno;
		if (fd > 0)
			close(fd);
		errno = e;
		snprintf(err, errlen, "%s: out of memory", path ? path : "<stdin>");
		return NULL;
	}
	r->own_fd = fd > 0;
	return r;
}

void fw_reader_close(struct fw_reader *r)
{
	if (!r)
		return;
	if (r->own_fd)
		close(r->fd);
	ZSTD_freeDCtx(r->z);
	free(r->in_own);
	free(r->buf);
	free(r->name);
	free(r);
}

const char *fw_reader_error(const struct fw_reader *r) { return r->errmsg; }
int fw_reader_recoverable(const struct fw_reader *r) { return r->recoverable; }
uint64_t fw_reader_index(const struct fw_reader *r) { return r->errmsg[0] ? r->eindex : r->index; }
uint64_t fw_reader_offset(const struct fw_reader *r) { return r->errmsg[0] ? r->eoffset : r->offset; }
const char *fw_reader_name(const struct fw_reader *r) { return r->name; }
uint64_t fw_reader_bytes_in(const struct fw_reader *r) { return r->bytes_in; }

void fw_reader_fault(const struct fw_reader *r, char *buf, size_t n)
{
	if (n)
		snprintf(buf, n, "%s: record %llu (byte %llu): %s", fw_reader_name(r),
			 (unsigned long long)fw_reader_index(r) + 1,
			 (unsigned long long)fw_reader_offset(r), fw_reader_error(r));
}

static int fail(struct fw_reader *r, int recoverable, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct fw_reader *r, int recoverable, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof r->errmsg, fmt, ap);
	va_end(ap);
	if (!recoverable) {
		r->eindex = r->index;
		r->eoffset = r->offset;
	}
	r->recoverable = recoverable;
	if (!recoverable)
		r->dead = 1;
	return -1;
}

/*
 * Reads more raw input so that at least want bytes are unconsumed (or EOF).
 * Returns the number of unconsumed bytes afterwards, or -1 on a read error.
 */
static ssize_t raw_more(struct fw_reader *r, size_t want)
{
	if (!r->in_own || r->in_eof)
		return (ssize_t)(r->in_len - r->in_pos);
	if (r->in_pos > 0) {
		memmove(r->in_own, r->in_own + r->in_pos, r->in_len - r->in_pos);
		r->in_len -= r->in_pos;
		r->in_pos = 0;
	}
	if (want > r->in_cap) {
		size_t cap = r->in_cap;
		while (cap < want)
			cap *= 2;
		uint8_t *p = realloc(r->in_own, cap);
		if (!p)
			return -1;
		r->in_own = p;
		r->in = p;
		r->in_cap = cap;
	}
	while (r->in_len < want || r->in_len == 0) {
		ssize_t k = read(r->fd, r->in_own + r->in_len, r->in_cap - r->in_len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (k == 0) {
			r->in_eof = 1;
			break;
		}
		r->in_len += (size_t)k;
		r->bytes_in += (uint64_t)k;
		/* Plain reads need only what the record needs; stop early on a
		 * short read when we already have enough. */
		if (r->in_len >= want)
			break;
	}
	return (ssize_t)(r->in_len - r->in_pos);
}

/*
 * Decodes more zstd output so that at least want bytes are unconsumed in
 * buf.  Returns the unconsumed count (which may be below want when the
 * zstd segment ended), or -1 with the error set.
 */
static ssize_t z_more(struct fw_reader *r, size_t want)
{
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	size_t cap = r->cap ? r->cap : CHUNK;
	while (cap < want + CHUNK / 4)
		cap *= 2;
	if (cap > r->cap) {
		uint8_t *p = realloc(r->buf, cap);
		if (!p)
			return fail(r, 0, "out of memory");
		r->buf = p;
		r->cap = cap;
	}
	while (r->end < want) {
		if (r->in_pos == r->in_len || (!r->frame_open && r->in_len - r->in_pos < 4)) {
			if (raw_more(r, r->in_len - r->in_pos + 4) < 0)
				return fail(r, 0, "read error: %s", strerror(errno));
		}
		if (!r->frame_open) {
			/* Between frames: another zstd frame, or the zstd part is over. */
			if (r->in_len - r->in_pos < 4 ||
			    !is_zstd_magic(r->in + r->in_pos)) {
				if (r->in_pos < r->in_len && r->in_len - r->in_pos < 4 && r->in_eof &&
				    r->in[r->in_pos] == 0x28)
					return fail(r, 0, "truncated zstd frame");
				r->zdone = 1;
				break;
			}
		}
		if (r->in_pos == r->in_len) {
			if (r->frame_open)
				return fail(r, 0, "truncated zstd frame");
			break;
		}
		ZSTD_inBuffer ib = {r->in, r->in_len, r->in_pos};
		ZSTD_outBuffer ob = {r->buf, r->cap, r->end};
		size_t ret = ZSTD_decompressStream(r->z, &ob, &ib);
		if (ZSTD_isError(ret))
			return fail(r, 0, "corrupt zstd frame: %s", ZSTD_getErrorName(ret));
		r->in_pos = ib.pos;
		r->end = ob.pos;
		r->frame_open = ret != 0;
		if (ob.pos == ob.size)
			break; /* buffer full; caller grows via want */
	}
	return (ssize_t)(r->end - r->start);
}

static int is_map_byte(uint8_t c) { return (c & 0xf0) == 0x80 || c == 0xde || c == 0xdf; }
static int is_json_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/*
 * 1 when the bytes at a record boundary look like JSON text rather than
 * msgpack.  At the start of the input a '{' or '[' after optional
 * whitespace (and a UTF-8 byte-order mark) is enough: no record stream
 * starts that way.  Later, as after `cat a.msgpack b.jsonl`, the byte after
 * the bracket must be one JSON allows there, since '{' and '[' are also the
 * msgpack integers 123 and 91.
 */
static int looks_json(const uint8_t *p, size_t avail, int at_start)
{
	size_t i = 0;
	if (at_start) {
		if (avail >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
			i = 3;
		while (i < avail && is_json_space(p[i]))
			i++;
		return i < avail && (p[i] == '{' || p[i] == '[');
	}
	if (avail < 2)
		return 0;
	if (p[0] == '{')
		return p[1] == '"' || p[1] == '}' || is_json_space(p[1]);
	if (p[0] == '[')
		return p[1] == '{' || p[1] == '[' || p[1] == ']' || p[1] == '"' || p[1] == '-' ||
		       (p[1] >= '0' && p[1] <= '9') || is_json_space(p[1]);
	return 0;
}

/*
 * Whether a record plausibly starts at p, for resynchronising: a non-empty
 * map, whole, no bigger than the limit, whose keys are all strings, and
 * followed by the end of the input, another map or a zstd frame.  Returns 1
 * yes, 0 no, or -1 when *need bytes must be available to tell.
 */
static int plausible(const struct fw_reader *r, const uint8_t *p, size_t avail, int eof,
		     uint64_t *need)
{
	if (avail == 0 || !is_map_byte(p[0]) || p[0] == 0x80)
		return 0;
	const char *why = NULL;
	uint64_t nd = 0;
	ssize_t n = fw_mp_scan(p, avail, r->o.max_depth, &nd, &why);
	if (n < 0 || (size_t)n > r->o.max_record)
		return 0;
	if (n == 0) {
		if (eof || nd > r->o.max_record)
			return 0;
		*need = nd + 1;
		return -1;
	}
	struct fw_mp_iter it;
	struct fw_mpv k, v;
	if (fw_mp_iter_init(&it, (struct fw_mpv){p, (size_t)n}) <= 0)
		return 0;
	while (fw_mp_iter_next(&it, &k) == 1) {
		if (fw_mp_type(k) != FW_MP_STR || fw_mp_iter_next(&it, &v) != 1)
			return 0;
	}
	if ((size_t)n == avail) {
		if (eof)
			return 1;
		*need = (uint64_t)n + 1;
		return -1;
	}
	return is_map_byte(p[n]) || p[n] == 0x28;
}

/* Ends a resynchronisation: the error for the value that started it. */
static int resync_done(struct fw_reader *r)
{
	r->resync = 0;
	if (r->skipped == r->bad_len)
		return fail(r, 1, "record is %s, not a map", fw_mp_type_name(r->bad_type));
	return fail(r, 1, "record is %s, not a map; %llu bytes that are not records skipped",
		    fw_mp_type_name(r->bad_type), (unsigned long long)r->skipped);
}

int fw_reader_next(struct fw_reader *r, struct fw_rec *rec)
{
	if (r->dead)
		return -1;
	r->recoverable = 0;
	r->errmsg[0] = 0;
	size_t want = 1;
	for (;;) {
		const uint8_t *p;
		size_t avail;
		int eof;
		if (r->mode == M_ZSTD) {
			p = r->buf ? r->buf + r->start : NULL;
			avail = r->end - r->start;
			eof = 0;
			if (avail < want && !r->zdone) {
				ssize_t k = z_more(r, want);
				if (k < 0)
					return -1;
				p = r->buf + r->start;
				avail = (size_t)k;
			}
			if (avail < want && r->zdone) {
				if (avail == 0) {
					/* The zstd part is used up: plain bytes may follow. */
					r->mode = M_PLAIN;
					want = 1;
					continue;
				}
				eof = 1; /* what is left is all the zstd part holds */
			}
		} else {
			avail = r->in_len - r->in_pos;
			if (avail < want && !r->in_eof) {
				if (raw_more(r, want) < 0)
					return fail(r, 0, "read error: %s", strerror(errno));
				avail = r->in_len - r->in_pos;
			}
			p = r->in + r->in_pos;
			eof = r->in_eof && avail < want;
			if (avail == 0)
				return r->resync ? resync_done(r) : 0;
			if (p[0] == 0x28 || (p[0] & 0xf0) == 0x50) {
				if (avail < 4 && !r->in_eof) {
					want = 4;
					continue;
				}
				if (avail >= 4 && is_zstd_magic(p)) {
					if (!r->z && !(r->z = ZSTD_createDCtx()))
						return fail(r, 0, "out of memory");
					ZSTD_DCtx_reset(r->z, ZSTD_reset_session_only);
					r->mode = M_ZSTD;
					r->zdone = 0;
					r->start = r->end = 0;
					r->frame_open = 1;
					want = 1;
					continue;
				}
			}
		}
		if (avail == 0 && eof)
			return r->resync ? resync_done(r) : 0;
		uint64_t need = 0;
		if (r->resync) {
			int k = plausible(r, p, avail, r->mode == M_PLAIN ? r->in_eof : eof, &need);
			if (k == 1)
				return resync_done(r);
			if (k < 0 && need > avail) {
				want = (size_t)need;
				continue;
			}
			/* Not a record here: drop one byte and look again. */
			if (r->mode == M_ZSTD)
				r->start++;
			else
				r->in_pos++;
			r->offset++;
			r->skipped++;
			want = 1;
			continue;
		}
		if (!r->o.any_value && looks_json(p, avail, r->offset == 0))
			return fail(r, 0, "this looks like JSON; convert it with `rec from-json`");
		const char *why = NULL;
		ssize_t n = fw_mp_scan(p, avail, r->o.max_depth, &need, &why);
		if (n < 0) {
			if (strcmp(why, "nesting too deep") == 0)
				return fail(r, 0, "nesting deeper than %d levels", r->o.max_depth);
			return fail(r, 0, "not msgpack: %s", why);
		}
		if (n == 0) {
			if (need > r->o.max_record)
				return fail(r, 0, "record of at least %llu bytes exceeds the limit of %zu bytes",
					    (unsigned long long)need, r->o.max_record);
			if (eof)
				return fail(r, 0, "truncated record (%zu bytes, at least %llu needed)",
					    avail, (unsigned long long)need);
			/* Ask for what the record needs, no more: on a pipe, waiting
			 * for bytes beyond this record could stall a live pipeline.
			 * (Buffers double, so a read still takes all that is there.) */
			want = (size_t)need;
			if (want > r->o.max_record)
				want = r->o.max_record;
			if (want <= avail)
				want = avail + 1;
			continue;
		}
		if ((size_t)n > r->o.max_record)
			return fail(r, 0, "record of %zd bytes exceeds the limit of %zu bytes", n,
				    r->o.max_record);
		rec->v.p = p;
		rec->v.n = (size_t)n;
		rec->index = r->index;
		rec->offset = r->offset;
		if (r->mode == M_ZSTD)
			r->start += (size_t)n;
		else
			r->in_pos += (size_t)n;
		r->index++;
		r->offset += (uint64_t)n;
		if (!r->o.any_value && fw_mp_type(rec->v) != FW_MP_MAP) {
			/* A whole value was read: drop what follows up to the next
			 * plausible record, and the caller may go on from there. */
			r->eindex = rec->index;
			r->eoffset = rec->offset;
			r->resync = 1;
			r->bad_type = fw_mp_type(rec->v);
			r->bad_len = r->skipped = (uint64_t)n;
			want = 1;
			continue;
		}
		return 1;
	}
}

/* ---- writer ---------------------------------------------------------------- */

struct fw_writer {
	int fd;
	double last;     /* when buffered bytes were last pushed out */
	double last_put; /* when the last record came */
	int own_fd; /* opened in place (not a temporary): close, never unlink */
	char *path, *tmp;
	int level;
	ZSTD_CCtx *z;
	uint8_t *buf, *zout;
	size_t n, cap, zcap;
	char err[256];
};

static double coarse_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The clock of held output, fw_writer_put()'s and fw_textout_flush()'s: a
 * slow producer (a rollout a minute) must not hold records back from the
 * next stage of a pipeline.  A record that comes after a pause is pushed
 * out at once (more work, and so another pause, is likely to follow), and
 * a steady stream at least every 200 ms; records that come back to back
 * are held.  *last is when held output last went out, *last_put when the
 * last record came; called as a record comes, returns 1 when what is held
 * is to go out now (and counts it gone).
 */
static int due(double *last, double *last_put)
{
	double t = coarse_now();
	int pause = t - *last_put > 0.05;
	*last_put = t;
	if (pause || t - *last > 0.2) {
		*last = t;
		return 1;
	}
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int wfail(struct fw_writer *w, const char *what)
{
	int e = errno;
	snprintf(w->err, sizeof w->err, "%s: %s: %s", w->path ? w->path : "<stdout>", what,
		 strerror(e));
	errno = e;
	return -1;
}

struct fw_writer *fw_writer_open(const char *path, int level, char *err, size_t errlen)
{
	struct fw_writer *w = calloc(1, sizeof *w);
	if (!w)
		goto oom;
	w->fd = 1;
	if (path && strcmp(path, "-") == 0)
		path = NULL;
	if (level < 0) {
		size_t l = path ? strlen(path) : 0;
		level = l > 4 && strcmp(path + l - 4, ".zst") == 0 ? 3 : 0;
	}
	if (level > 19)
		level = 19;
	w->level = level;
	w->last = w->last_put = coarse_now();
	w->cap = CHUNK;
	if (!(w->buf = malloc(w->cap)))
		goto oom;
	if (level > 0) {
		w->zcap = ZSTD_CStreamOutSize();
		if (!(w->zout = malloc(w->zcap)) || !(w->z = ZSTD_createCCtx()))
			goto oom;
		ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, level);
	}
	struct stat st;
	if (path && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* A device or a FIFO (-o /dev/null, -o /dev/stdout, a named
		 * pipe) is written in place: renaming over it would replace it. */
		w->fd = open(path, O_WRONLY | O_CLOEXEC);
		if (w->fd < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			fw_writer_abort(w);
			return NULL;
		}
		w->path = strdup(path);
		w->own_fd = 1;
		return w;
	}
	char *real = NULL;
	if (path) {
		/* Through a symbolic link, the file it names is replaced, not the
		 * link. */
		if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && (real = realpath(path, NULL)))
			path = real;
		w->path = strdup(path);
		free(real);
		if (!w->path)
			goto oom;
		path = w->path;
		size_t l = strlen(path);
		w->tmp = malloc(l + 16);
		if (!w->tmp)
			goto oom;
		snprintf(w->tmp, l + 16, "%s.tmp.XXXXXX", path);
		w->fd = mkstemp(w->tmp);
		if (w->fd < 0) {
			snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
			free(w->tmp);
			w->tmp = NULL;
			fw_writer_abort(w);
			return NULL;
		}
		mode_t um = umask(0);
		umask(um);
		fchmod(w->fd, 0666 & ~um);
	}
	return w;
oom:
	snprintf(err, errlen, "out of memory");
	fw_writer_abort(w);
	return NULL;
}

/* Compresses or writes the buffered bytes; mode is a ZSTD_EndDirective. */
static int drain(struct fw_writer *w, ZSTD_EndDirective mode)
{
	if (!w->z) {
		if (w->n && write_all(w->fd, w->buf, w->n) < 0)
			return wfail(w, "write error");
		w->n = 0;
		return 0;
	}
	ZSTD_inBuffer ib = {w->buf, w->n, 0};
	for (;;) {
		ZSTD_outBuffer ob = {w->zout, w->zcap, 0};
		size_t left = ZSTD_compressStream2(w->z, &ob, &ib, mode);
		if (ZSTD_isError(left)) {
			errno = EIO;
			snprintf(w->err, sizeof w->err, "zstd: %s", ZSTD_getErrorName(left));
			return -1;
		}
		if (ob.pos && write_all(w->fd, w->zout, ob.pos) < 0)
			return wfail(w, "write error");
		if (mode == ZSTD_e_continue ? ib.pos == ib.size : left == 0)
			break;
	}
	w->n = 0;
	return 0;
}

int fw_writer_put(struct fw_writer *w, const void *p, size_t n)
{
	if (w->n + n > w->cap) {
		if (drain(w, ZSTD_e_continue) < 0)
			return -1;
		if (n > w->cap) {
			if (!w->z) {
				if (write_all(w->fd, p, n) < 0)
					return wfail(w, "write error");
				return 0;
			}
			uint8_t *b = realloc(w->buf, n);
			if (!b)
				return wfail(w, "out of memory");
			w->buf = b;
			w->cap = n;
		}
	}
	memcpy(w->buf + w->n, p, n);
	w->n += n;
	return due(&w->last, &w->last_put) ? drain(w, ZSTD_e_flush) : 0;
}

int fw_writer_flush(struct fw_writer *w)
{
	return drain(w, ZSTD_e_flush);
}

const char *fw_writer_error(const struct fw_writer *w)
{
	return w->err;
}

int fw_writer_close(struct fw_writer *w, char *err, size_t errlen)
{
	if (!w)
		return 0;
	int rc = drain(w, ZSTD_e_end);
	if (w->own_fd) {
		if (close(w->fd) < 0 && rc == 0)
			rc = wfail(w, "close");
		w->fd = -1;
	}
	if (rc == 0 && w->tmp) {
		if (fsync(w->fd) < 0 && errno != EINVAL)
			rc = wfail(w, "fsync");
		if (close(w->fd) < 0 && rc == 0)
			rc = wfail(w, "close");
		w->fd = -1;
		if (rc == 0 && rename(w->tmp, w->path) < 0)
			rc = wfail(w, "rename");
		if (rc == 0) {
			free(w->tmp);
			w->tmp = NULL;
		}
	}
	if (rc < 0)
		snprintf(err, errlen, "%s", w->err);
	fw_writer_abort(w);
	return rc;
}

void fw_writer_abort(struct fw_writer *w)
{
	if (!w)
		return;
	if (w->tmp) {
		if (w->fd >= 0)
			close(w->fd);
		unlink(w->tmp);
	} else if (w->own_fd && w->fd >= 0) {
		close(w->fd);
	}
	ZSTD_freeCCtx(w->z);
	free(w->buf);
	free(w->zout);
	free(w->tmp);
	free(w->path);
	free(w);
}

/* ---- text on standard output ------------------------------------------------ */

int fw_textout_flush(struct fw_textout *t, int force)
{
	if (due(&t->last, &t->last_put))
		force = 1;
	if (t->buf.n >= FW_TEXTOUT_HOLD || (force && t->buf.n)) {
		if (fwrite(t->buf.p, 1, t->buf.n, stdout) != t->buf.n || fflush(stdout) != 0)
			return -1;
		t->buf.n = 0;
	}
	return 0;
}

void fw_textout_release(struct fw_textout *t)
{
	if (!t)
		return;
	fw_buf_release(&t->buf);
	memset(t, 0, sizeof *t);
}
