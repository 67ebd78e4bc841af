/*
 * fw_cli.c — shared command-line helpers.  See fw_cli.h.
 */
#include "fw_cli.h"
#include "fw_json.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *fw_prog = "flywheel";

void fw_cli_init(const char *prog)
{
	fw_prog = prog;
	signal(SIGPIPE, SIG_DFL);
}

void fw_warn(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "%s: ", fw_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void fw_warn_rec(const char *file, uint64_t index, uint64_t offset, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: %s: record %llu (byte %llu): ", fw_prog, file,
		(unsigned long long)index + 1, (unsigned long long)offset);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int fw_usage_error(const char *usage, const char *fmt, const char *arg)
{
	fflush(stdout);
	fprintf(stderr, "%s: ", fw_prog);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage, stderr);
	return FW_EXIT_USAGE;
}

static const char *usage_synopsis = "";
static const struct fw_opt_doc *usage_opts;

void fw_usage_init(const char *synopsis, const struct fw_opt_doc *opts)
{
	assert(synopsis);
	usage_synopsis = synopsis;
	usage_opts = opts;
}

void fw_usage(FILE *f)
{
	fputs(usage_synopsis, f);
}

void fw_help(void)
{
	int w = 0;

	fw_usage(stdout);
	if (!usage_opts || !usage_opts[0].opt)
		return;
	/* the column fits the options up to 24 wide; a longer one pushes
	 * its own text right rather than every other option's */
	for (const struct fw_opt_doc *o = usage_opts; o->opt; o++)
		if ((int)strlen(o->opt) > w && strlen(o->opt) <= 24)
			w = (int)strlen(o->opt);
	fputs("\noptions:\n", stdout);
	for (const struct fw_opt_doc *o = usage_opts; o->opt; o++)
		printf("  %-*s  %s\n", w, o->opt, o->doc);
}

int fw_help_exit(void)
{
	fw_help();
	return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
}

int fw_version_exit(void)
{
	fw_print_version();
	return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
}

int fw_usage_exit(void)
{
	fw_usage(stderr);
	return FW_EXIT_USAGE;
}

int fw_usage_fail(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_synopsis, fmt, arg);
}

void fw_operands_init(struct fw_operands *it, int argc, char **argv, int first)
{
	assert(first <= argc);
	it->argv = argv + first;
	it->n = argc - first;
	it->i = 0;
	it->stdin_only = it->n == 0;
}

const char *fw_operands_next(struct fw_operands *it)
{
	static char dash[] = "-";

	if (it->stdin_only) {
		it->stdin_only = 0;
		it->i = 1;
		return dash;
	}
	return it->i < it->n ? it->argv[it->i++] : NULL;
}

void fw_warn_reader(const struct fw_reader *r)
{
	char where[1024];
	fw_reader_fault(r, where, sizeof where);
	fprintf(stderr, "%s: %s\n", fw_prog, where);
}

int fw_each_record(struct fw_each *e, int argc, char **argv, int first,
		   int (*fn)(struct fw_each *e, const struct fw_rec *rec, const char *file))
{
	struct fw_operands ops;
	struct fw_progress meter;
	uint64_t bytes_before = 0;
	int status = FW_EXIT_OK;

	e->records = e->skipped = 0;
	e->stopped = 0;
	e->meter = &meter;
	fw_progress_start(&meter, e->progress);
	fw_operands_init(&ops, argc, argv, first);
	for (const char *file; meter.on && (file = fw_operands_next(&ops));)
		fw_progress_expect(&meter, file);
	fw_operands_init(&ops, argc, argv, first);
	for (const char *file; !e->stopped && (file = fw_operands_next(&ops));) {
		char err[512];
		struct fw_reader *r = fw_reader_open(file, e->ropts, err, sizeof err);
		if (!r) {
			fw_progress_pause(&meter);
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		struct fw_rec rec;
		int rc;
		while ((rc = fw_reader_next(r, &rec)) != 0) {
			if (rc < 0) {
				if (fw_reader_recoverable(r) && e->skip_bad) {
					e->skipped++;
					continue;
				}
				fw_progress_pause(&meter);
				fw_warn_reader(r);
				status = FW_EXIT_DATA;
				if (e->go_on && fw_reader_recoverable(r))
					continue;
				break;
			}
			if (e->shard_n && !fw_shard_keep(rec.v, e->shard_k, e->shard_n))
				continue;
			e->records++;
			fw_progress_tick(&meter, e->records, bytes_before + fw_reader_bytes_in(r));
			int f = fn(e, &rec, fw_reader_name(r));
			if (f) {
				e->stopped = 1;
				if (f < 0)
					status = FW_EXIT_DATA;
				break;
			}
		}
		bytes_before += fw_reader_bytes_in(r);
		fw_reader_close(r);
	}
	fw_progress_tick(&meter, e->records, bytes_before);
	fw_progress_end(&meter);
	e->meter = NULL;
	if (e->skipped)
		fw_warn("skipped %llu bad record%s", (unsigned long long)e->skipped,
			e->skipped == 1 ? "" : "s");
	return status;
}

struct fw_writer *fw_out_open(const char *path, int level)
{
	char err[512];
	struct fw_writer *w = fw_writer_open(path, level, err, sizeof err);
	if (!w)
		fw_warn("%s", err);
	return w;
}

int fw_out_put(struct fw_writer *w, const void *p, size_t n)
{
	if (fw_writer_put(w, p, n) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", fw_writer_error(w));
		return -1;
	}
	return 0;
}

int fw_out_close(struct fw_writer *w, int status)
{
	char err[512];
	if (fw_writer_close(w, err, sizeof err) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	return status;
}

/* One operand of fw_json_records(): its values into w, *records counting
 * those written over every operand.  Returns FW_EXIT_OK or FW_EXIT_DATA. */
static int json_file(const char *path, struct fw_writer *w, size_t maxrec, int skip_bad,
		     struct fw_progress *meter, uint64_t *records)
{
	char err[512];
	struct fw_json_reader *jr = fw_json_reader_open(path, maxrec, err, sizeof err);
	struct fw_mpv v;
	uint64_t line, col, bytes_before = meter->bytes; /* the files before this one */
	int rc, status = FW_EXIT_OK;

	if (!jr) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	const char *name = fw_json_reader_name(jr);
	while ((rc = fw_json_reader_next(jr, &v)) == 1) {
		fw_json_reader_pos(jr, &line, &col);
		if (fw_mp_type(v) != FW_MP_MAP) {
			fw_warn("%s: line %llu, column %llu: value is %s, not an object", name,
				(unsigned long long)line, (unsigned long long)col,
				fw_mp_type_name(fw_mp_type(v)));
			if (!skip_bad) {
				status = FW_EXIT_DATA;
				break;
			}
			continue;
		}
		if (v.n > maxrec) {
			fw_warn("%s: line %llu: record of %zu bytes exceeds the limit of %zu bytes",
				name, (unsigned long long)line, v.n, maxrec);
			status = FW_EXIT_DATA;
			break;
		}
		if (fw_out_put(w, v.p, v.n) < 0) {
			status = FW_EXIT_DATA;
			break;
		}
		(*records)++;
		fw_progress_tick(meter, *records, bytes_before + fw_json_reader_offset(jr));
	}
	fw_progress_tick(meter, *records, bytes_before + fw_json_reader_offset(jr));
	if (rc < 0) {
		fw_warn("%s: %s", name, fw_json_reader_error(jr));
		status = FW_EXIT_DATA;
	}
	fw_json_reader_close(jr);
	return status;
}

int fw_json_records(struct fw_writer *w, int argc, char **argv, int first, size_t max_record,
		    int skip_bad, int progress)
{
	size_t maxrec = max_record ? max_record : FW_MAX_RECORD_DEFAULT;
	struct fw_operands ops;
	struct fw_progress meter;
	uint64_t records = 0;
	int status = FW_EXIT_OK;

	fw_progress_start(&meter, progress);
	fw_operands_init(&ops, argc, argv, first);
	for (const char *file; meter.on && (file = fw_operands_next(&ops));)
		fw_progress_expect(&meter, file);
	fw_operands_init(&ops, argc, argv, first);
	for (const char *file; (file = fw_operands_next(&ops));)
		if (json_file(file, w, maxrec, skip_bad, &meter, &records))
			status = FW_EXIT_DATA;
	fw_progress_end(&meter);
	return status;
}

void fw_print_version(void)
{
	printf("%s (flywheel) %s\n", fw_prog, FW_VERSION);
}

int fw_parse_u64(const char *s, uint64_t *out, int suffix_ok)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -1;
	if (suffix_ok && *end) {
		unsigned sh = 0;
		switch (*end) {
		case 'k': case 'K': sh = 10; break;
		case 'm': case 'M': sh = 20; break;
		case 'g': case 'G': sh = 30; break;
		default: return -1;
		}
		end++;
		if (v > (~0ULL >> sh))
			return -1;
		v <<= sh;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

int fw_parse_double(const char *s, double *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || isnan(v))
		return -1;
	*out = v;
	return 0;
}

int fw_parse_shard(const char *s, uint64_t *k, uint64_t *n)
{
	const char *slash = s ? strchr(s, '/') : NULL;
	char kbuf[32];
	if (!slash || (size_t)(slash - s) >= sizeof kbuf)
		return -1;
	memcpy(kbuf, s, (size_t)(slash - s));
	kbuf[slash - s] = 0;
	if (fw_parse_u64(kbuf, k, 0) < 0 || fw_parse_u64(slash + 1, n, 0) < 0)
		return -1;
	return *n > 0 && *k < *n ? 0 : -1;
}

uint64_t fw_shard_hash(struct fw_mpv rec)
{
	struct fw_mpv id;
	const char *s;
	size_t len;
	if (fw_mp_get(rec, "id", &id) == 1 && fw_mp_str(id, &s, &len) == 0)
		return fw_hash64(s, len);
	return fw_hash64(rec.p, rec.n);
}

int fw_shard_keep(struct fw_mpv rec, uint64_t k, uint64_t n)
{
	return fw_shard_hash(rec) % n == k;
}

double fw_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fw_progress_start(struct fw_progress *p, int force)
{
	memset(p, 0, sizeof *p);
	p->tty = isatty(2);
	p->on = force > 0 || (force == 0 && p->tty);
	p->t0 = p->last = fw_now();
}

void fw_progress_expect(struct fw_progress *p, const char *path)
{
	struct stat st;
	int rc = strcmp(path, "-") ? stat(path, &st) : fstat(0, &st);
	if (rc == 0 && S_ISREG(st.st_mode))
		p->total += (uint64_t)st.st_size;
	else
		p->unknown = 1;
}

static void human(char *out, size_t n, double v, const char *unit)
{
	const char *pre[] = {"", "k", "M", "G", "T"};
	int i = 0;
	while (v >= 1000 && i < 4) {
		v /= 1000;
		i++;
	}
	snprintf(out, n, "%.*f%s%s", i ? 1 : 0, v, pre[i], unit);
}

void fw_progress_steps(struct fw_progress *p, uint64_t n)
{
	p->steps = n;
}

static void draw(struct fw_progress *p, double t, int last)
{
	char r[48], b[32], rate[32], tail[64] = "";
	double el = t - p->t0 > 1e-9 ? t - p->t0 : 1e-9;
	human(r, sizeof r, (double)p->records, "");
	human(b, sizeof b, (double)p->bytes, "B");
	human(rate, sizeof rate, (double)p->records / el, "/s");
	if (p->steps) /* "30/100 steps": no bytes are read while stepping */
		snprintf(r + strlen(r), sizeof r - strlen(r), "/%llu", (unsigned long long)p->steps);
	uint64_t done = p->steps ? p->records : p->bytes;
	uint64_t total = p->steps ? p->steps : p->unknown ? 0 : p->total;
	if (total) {
		double f = done >= total ? 1 : (double)done / (double)total;
		if (last || f <= 0)
			snprintf(tail, sizeof tail, ", %.0f%%", f * 100);
		else
			snprintf(tail, sizeof tail, ", %.0f%%, ETA %.0fs", f * 100, el * (1 - f) / f);
	}
	char what[64] = "steps";
	if (!p->steps)
		snprintf(what, sizeof what, "records, %s", b);
	if (p->tty)
		fprintf(stderr, "\r%s: %s %s, %s, %.1fs%s\033[K", fw_prog, r, what, rate, el, tail);
	else
		fprintf(stderr, "%s: %s %s, %s, %.1fs%s\n", fw_prog, r, what, rate, el, tail);
}

void fw_progress_tick(struct fw_progress *p, uint64_t records, uint64_t bytes)
{
	p->records = records;
	p->bytes = bytes;
	if (!p->on)
		return;
	double t = fw_now();
	if (t - p->last < (p->tty ? 0.1 : 1.0))
		return;
	p->last = t;
	draw(p, t, 0);
}

void fw_progress_pause(struct fw_progress *p)
{
	if (p->on && p->tty)
		fprintf(stderr, "\r\033[K");
}

void fw_progress_end(struct fw_progress *p)
{
	if (!p->on)
		return;
	if (p->tty)
		fprintf(stderr, "\r\033[K");
	else
		draw(p, fw_now(), 1);
	p->on = 0;
}

int fw_close_stdout(void)
{
	int bad = fflush(stdout) != 0 || ferror(stdout);
	int e = errno;
	if (fclose(stdout) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad && e != EPIPE) {
		fw_warn("write error: %s", strerror(e));
		return -1;
	}
	return 0;
}
