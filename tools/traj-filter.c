/*
 * traj-filter — select, dedupe, sample, split and decontaminate record
 * streams.  See traj-filter(1).
 *
 * Each record goes through: --shard, the -e expressions (--invert),
 * --created-after/--created-before, --dedup, --decontam, then --sample, and
 * is written to -o or to its --split file.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_decontam.h"
#include "fw_expr.h"
#include "fw_history.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: traj-filter [-e EXPR]... [--invert] [--dedup[=PATH]] [--sample N] [--seed S]\n"
	"                   [--split NAME=FRAC,... -o PREFIX] [--decontam FILE] [--shard K/N]\n"
	"                   [--created-after DATE] [--created-before DATE]\n"
	"                   [-o OUT] [-z] [-q | -v] [--skip-bad] [--progress] [FILE...]\n";

static const struct fw_opt_doc options[] = {
	{ "-e EXPR", "keep the records for which EXPR is true (all of them, when repeated)" },
	{ "--invert", "keep the records the expressions do not keep" },
	{ "--dedup[=PATH]", "drop records whose id (or value at PATH) was seen before" },
	{ "--sample N", "keep N records (or a fraction 0..1) drawn at random" },
	{ "--seed S", "seed of --sample and --split" },
	{ "--split NAME=FRAC,...", "write each record to one of the splits PREFIX.NAME.msgpack" },
	{ "-o PREFIX", "with --split: the splits' file prefix" },
	{ "--decontam FILE", "drop records that share text with the eval items in FILE" },
	{ "--shard K/N", "keep the records whose id hashes to K modulo N" },
	{ "--created-after DATE", "keep the records created after DATE" },
	{ "--created-before DATE", "keep the records created before DATE" },
	{ "-o OUT", "write to OUT instead of standard output" },
	{ "-z", "compress the output with zstd" },
	{ "-q", "no summary lines on standard error" },
	{ "-v", "explain every record decontamination drops" },
	{ "--skip-bad", "skip top-level values that are not maps, and count them" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

#define MAX_EXPRS 64
#define MAX_SPLITS 32
#define MAX_DECONTAM 16
#define SHOW_DROPS 10 /* decontamination drops explained one by one */

struct split {
	char *name;
	double upto; /* cumulative fraction */
	struct fw_writer *w;
	uint64_t n;
};

/* A record kept by --sample N until the end of input. */
struct kept {
	uint64_t key, order;
	uint8_t *p;
	size_t n;
};

/* A set of 128-bit keys for --dedup (two independent 64-bit hashes). */
struct keyset {
	uint64_t (*k)[2];
	size_t cap, used;
};

struct state {
	struct fw_expr *ex[MAX_EXPRS];
	int nex, invert;
	int dedup;
	struct fw_path *dedup_path;
	struct keyset seen;
	uint64_t seed;
	int sample;         /* 0 none, 1 count, 2 fraction */
	uint64_t sample_n;
	double sample_frac;
	struct kept *heap;  /* max-heap on key of the sample_n smallest keys */
	uint64_t heap_n;
	struct split splits[MAX_SPLITS];
	int nsplits;
	const char *decontam_files[MAX_DECONTAM];
	int ndecontam;
	struct fw_decontam *dc;
	uint64_t shard_k, shard_n;
	int64_t after, before; /* --created-after/--created-before */
	int has_after, has_before;
	const char *out;
	int level, quiet, verbose, skip_bad, progress;
	struct fw_writer *w;
	struct fw_buf msg;
	/* counts */
	uint64_t nin, nexpr, ndup, ncontam, nout, order, nundated, nolder;
};

/* ---- hashing -------------------------------------------------------------- */

/* The hash sharding uses: of the id string, or of the whole record. */
static uint64_t id_hash(struct fw_mpv rec)
{
	struct fw_mpv v;
	const char *s;
	size_t n;
	if (fw_mp_get(rec, "id", &v) == 1 && fw_mp_str(v, &s, &n) == 0)
		return fw_hash64(s, n);
	return fw_hash64(rec.p, rec.n);
}

/* ---- dedup ------------------------------------------------------------------ */

/* Inserts key; returns 1 when it was new, 0 when seen, -1 out of memory. */
static int keyset_add(struct keyset *s, uint64_t a, uint64_t b)
{
	if (a == 0 && b == 0)
		a = 1;
	if ((s->used + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		uint64_t(*nk)[2] = calloc(ncap, sizeof *nk);
		if (!nk)
			return -1;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->k[i][0] && !s->k[i][1])
				continue;
			size_t j = s->k[i][0] & (ncap - 1);
			while (nk[j][0] || nk[j][1])
				j = (j + 1) & (ncap - 1);
			nk[j][0] = s->k[i][0];
			nk[j][1] = s->k[i][1];
		}
		free(s->k);
		s->k = nk;
		s->cap = ncap;
	}
	size_t j = a & (s->cap - 1);
	while (s->k[j][0] || s->k[j][1]) {
		if (s->k[j][0] == a && s->k[j][1] == b)
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->k[j][0] = a;
	s->k[j][1] = b;
	s->used++;
	return 1;
}

/* Second hash of the dedup key, independent of FNV-1a. */
static uint64_t hash_b(const uint8_t *p, size_t n)
{
	uint64_t h = 0x6a09e667f3bcc909ULL ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = fw_mix64(h ^ w);
	}
	uint64_t w = 0;
	memcpy(&w, p + i, n - i);
	return fw_mix64(h ^ w ^ ((uint64_t)(n - i) << 56));
}

/* ---- sample ------------------------------------------------------------------ */

static int kept_less(const struct kept *a, const struct kept *b)
{
	return a->key < b->key || (a->key == b->key && a->order < b->order);
}

static void heap_down(struct kept *h, uint64_t n, uint64_t i)
{
	for (;;) {
		uint64_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && kept_less(&h[m], &h[l]))
			m = l;
		if (r < n && kept_less(&h[m], &h[r]))
			m = r;
		if (m == i)
			return;
		struct kept t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void heap_up(struct kept *h, uint64_t i)
{
	while (i > 0) {
		uint64_t pa = (i - 1) / 2;
		if (!kept_less(&h[pa], &h[i]))
			return;
		struct kept t = h[i];
		h[i] = h[pa];
		h[pa] = t;
		i = pa;
	}
}

/* Offers a record to the bottom-k sample.  Returns 0 or -1 (memory). */
static int sample_offer(struct state *st, uint64_t key, struct fw_mpv v)
{
	struct kept k = {key, st->order++, NULL, v.n};
	if (st->heap_n == st->sample_n && !kept_less(&k, &st->heap[0]))
		return 0;
	if (!(k.p = malloc(v.n ? v.n : 1)))
		return -1;
	memcpy(k.p, v.p, v.n);
	if (st->heap_n < st->sample_n) {
		st->heap[st->heap_n] = k;
		heap_up(st->heap, st->heap_n++);
	} else {
		free(st->heap[0].p);
		st->heap[0] = k;
		heap_down(st->heap, st->heap_n, 0);
	}
	return 0;
}

static int by_order(const void *x, const void *y)
{
	const struct kept *a = x, *b = y;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* ---- output ------------------------------------------------------------------- */

static int emit(struct state *st, const uint8_t *p, size_t n)
{
	struct fw_writer *w = st->w;
	if (st->nsplits) {
		struct fw_mpv v = {p, n};
		/* The top 53 bits of the id hash: independent of the low bits
		 * that --shard uses. */
		double u = (double)(id_hash(v) >> 11) / 9007199254740992.0;
		int i = 0;
		while (i < st->nsplits - 1 && u >= st->splits[i].upto)
			i++;
		w = st->splits[i].w;
		st->splits[i].n++;
	}
	st->nout++;
	if (fw_writer_put(w, p, n) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", fw_writer_error(w));
		return -1;
	}
	return 0;
}

/* ---- per record ------------------------------------------------------------ */

/* The record's created date (a task's, or a rollout's task's): ISO 8601
 * text or seconds since the epoch.  Returns 0, or -1 when it has none. */
static int created_of(struct fw_mpv v, int64_t *t)
{
	struct fw_mpv c, task;
	const char *s;
	size_t n;
	if (fw_mp_get(v, "created", &c) != 1 &&
	    (fw_mp_get(v, "task", &task) != 1 || fw_mp_get(task, "created", &c) != 1))
		return -1;
	if (fw_mp_str(c, &s, &n) == 0)
		return fw_time_parse(s, n, t);
	return fw_mp_int(c, t);
}

/* 1 when the record passes --created-after and --created-before. */
static int created_keep(struct state *st, struct fw_mpv v)
{
	int64_t t;
	if (!st->has_after && !st->has_before)
		return 1;
	if (created_of(v, &t) < 0) {
		st->nundated++;
		return 0;
	}
	if ((st->has_after && t <= st->after) || (st->has_before && t >= st->before)) {
		st->nolder++;
		return 0;
	}
	return 1;
}

static int one(struct state *st, struct fw_mpv v, const char *file, uint64_t index,
	       uint64_t offset)
{
	st->nin++;
	int ok = 1;
	for (int i = 0; i < st->nex && ok; i++)
		ok = fw_expr_test(st->ex[i], v);
	if (ok == st->invert || !created_keep(st, v))
		return 0;
	st->nexpr++;
	if (st->dedup) {
		struct fw_mpv key = v;
		if (!st->dedup_path || fw_path_get(st->dedup_path, v, &key)) {
			int r = keyset_add(&st->seen, fw_hash64(key.p, key.n), hash_b(key.p, key.n));
			if (r < 0) {
				fw_warn("out of memory");
				return -1;
			}
			if (r == 0) {
				st->ndup++;
				return 0;
			}
		}
	}
	if (st->dc) {
		struct fw_decontam_hit hit;
		if (fw_decontam_check_record(st->dc, v, &hit)) {
			st->ncontam++;
			if (!st->quiet && (st->verbose || st->ncontam <= SHOW_DROPS)) {
				const char *s;
				size_t n;
				struct fw_mpv idv;
				fw_buf_reset(&st->msg);
				fw_decontam_words(&st->msg, hit.text + hit.start, hit.end - hit.start);
				fw_buf_append(&st->msg, "", 1);
				if (fw_mp_get(v, "id", &idv) != 1 || fw_mp_str(idv, &s, &n) < 0)
					s = "?", n = 1;
				const char *df = st->decontam_files[hit.src >> 40];
				unsigned long long di = (hit.src & ((1ULL << 40) - 1));
				if (di)
					fw_warn_rec(file, index, offset,
						    "id %.*s: dropped: shares \"%s\" with %s record %llu",
						    (int)n, s, st->msg.p ? (char *)st->msg.p : "", df, di);
				else
					fw_warn_rec(file, index, offset,
						    "id %.*s: dropped: shares \"%s\" with %s",
						    (int)n, s, st->msg.p ? (char *)st->msg.p : "", df);
			}
			return 0;
		}
	}
	if (st->sample == 1) {
		uint64_t key = fw_mix64(id_hash(v) ^ fw_mix64(st->seed));
		if (sample_offer(st, key, v) < 0) {
			fw_warn("out of memory");
			return -1;
		}
		return 0;
	}
	if (st->sample == 2) {
		uint64_t key = fw_mix64(id_hash(v) ^ fw_mix64(st->seed));
		if ((double)(key >> 11) / 9007199254740992.0 >= st->sample_frac)
			return 0;
	}
	return emit(st, v.p, v.n);
}

/* ---- decontamination sources ------------------------------------------------ */

static int read_all(const char *path, struct fw_buf *b)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		if (fw_buf_reserve(b, 1 << 16) < 0) {
			close(fd);
			errno = ENOMEM;
			return -1;
		}
		ssize_t k = read(fd, b->p + b->n, b->cap - b->n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (k == 0)
			break;
		b->n += (size_t)k;
	}
	close(fd);
	return 0;
}

/*
 * Loads one --decontam FILE: a record stream (msgpack, zstd), JSON Lines of
 * objects, or plain text.  Record r of file f is remembered as
 * f << 40 | (r + 1); plain text as f << 40.  Returns 0 or -1 (reported).
 */
static int load_decontam(struct state *st, int f, const char *path)
{
	struct fw_buf b = {0};
	uint64_t texts = 0, grams = 0, shorts = 0, before = fw_decontam_size(st->dc);
	int rc = -1;
	if (read_all(path, &b) < 0) {
		fw_warn("%s: %s", path, strerror(errno));
		return -1;
	}
	const uint8_t *p = b.p;
	size_t n = b.n, i = 0;
	int is_mp = n >= 4 && ((p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd) ||
			       (p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf);
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	uint64_t base = (uint64_t)f << 40;
	if (is_mp) {
		struct fw_reader *r = fw_reader_memopen(p, n, path, NULL);
		struct fw_rec rec;
		int k;
		if (!r) {
			fw_warn("out of memory");
			goto out;
		}
		while ((k = fw_reader_next(r, &rec)) == 1) {
			int64_t g = fw_decontam_add_record(st->dc, rec.v, base | (rec.index + 1));
			if (g < 0) {
				fw_warn("out of memory");
				fw_reader_close(r);
				goto out;
			}
			texts++;
			shorts += g == 0;
			grams += (uint64_t)g;
		}
		if (k < 0) {
			fw_warn_reader(r);
			fw_reader_close(r);
			goto out;
		}
		fw_reader_close(r);
	} else if (i < n && p[i] == '{') {
		struct fw_buf mp = {0};
		uint64_t line = 1;
		size_t pos = 0;
		for (;;) {
			size_t used;
			struct fw_json_err e;
			fw_buf_reset(&mp);
			int k = fw_json_to_mp(&mp, (const char *)p + pos, n - pos, 1, &used, &e);
			if (k == 0)
				break;
			if (k != 1) {
				for (size_t j = pos; j < pos + e.at && j < n; j++)
					line += p[j] == '\n';
				fw_warn("%s: line %llu: %s", path, (unsigned long long)line, e.msg);
				fw_buf_release(&mp);
				goto out;
			}
			for (size_t j = pos; j < pos + used; j++)
				line += p[j] == '\n';
			pos += used;
			int64_t g = fw_decontam_add_record(st->dc, (struct fw_mpv){mp.p, mp.n},
							   base | (texts + 1));
			if (g < 0) {
				fw_warn("out of memory");
				fw_buf_release(&mp);
				goto out;
			}
			texts++;
			shorts += g == 0;
			grams += (uint64_t)g;
		}
		fw_buf_release(&mp);
	} else {
		int64_t g = fw_decontam_add(st->dc, (const char *)p, n, base);
		if (g < 0) {
			fw_warn("out of memory");
			goto out;
		}
		texts = 1;
		shorts = g == 0;
		grams = (uint64_t)g;
	}
	if (!st->quiet) {
		fw_warn("decontam: %s: %llu text%s, %llu %u-grams (%llu new)", path,
			(unsigned long long)texts, texts == 1 ? "" : "s", (unsigned long long)grams,
			FW_DECONTAM_N, (unsigned long long)(fw_decontam_size(st->dc) - before));
		/* A short item cannot be matched: say so rather than let it pass
		 * for clean. */
		if (shorts)
			fw_warn("decontam: %s: %llu text%s shorter than %u words, not checked", path,
				(unsigned long long)shorts, shorts == 1 ? "" : "s", FW_DECONTAM_N);
	}
	rc = 0;
out:
	fw_buf_release(&b);
	return rc;
}

/* ---- options ------------------------------------------------------------------ */

static int parse_splits(struct state *st, char *spec)
{
	double total = 0;
	char *save = NULL;
	for (char *tok = strtok_r(spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		double f;
		if (!eq || eq == tok || fw_parse_double(eq + 1, &f) < 0 || !(f > 0) || f > 1)
			return -1;
		*eq = 0;
		for (const char *c = tok; *c; c++)
			if (*c == '/' || *c == ' ')
				return -1;
		for (int i = 0; i < st->nsplits; i++)
			if (!strcmp(st->splits[i].name, tok))
				return -1;
		if (st->nsplits == MAX_SPLITS)
			return -1;
		total += f;
		st->splits[st->nsplits].name = tok;
		st->splits[st->nsplits].upto = total;
		st->nsplits++;
	}
	if (st->nsplits == 0 || total < 0.999999 || total > 1.000001)
		return -1;
	st->splits[st->nsplits - 1].upto = 1.0;
	return 0;
}

enum {
	OPT_INVERT = 256, OPT_DEDUP, OPT_SAMPLE, OPT_SEED, OPT_SPLIT, OPT_DECONTAM, OPT_SHARD,
	OPT_SKIP_BAD, OPT_PROGRESS, OPT_VERSION, OPT_AFTER, OPT_BEFORE,
};

/* The record loop's call: one() with the record's place; > 0 never. */
static int each_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	return one(e->arg, rec->v, file, rec->index, rec->offset) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	fw_cli_init("traj-filter");
	fw_usage_init(usage_text, options);
	static const struct option longopts[] = {
		{"expr", required_argument, NULL, 'e'},
		{"invert", no_argument, NULL, OPT_INVERT},
		{"dedup", optional_argument, NULL, OPT_DEDUP},
		{"sample", required_argument, NULL, OPT_SAMPLE},
		{"seed", required_argument, NULL, OPT_SEED},
		{"split", required_argument, NULL, OPT_SPLIT},
		{"decontam", required_argument, NULL, OPT_DECONTAM},
		{"shard", required_argument, NULL, OPT_SHARD},
		{"created-after", required_argument, NULL, OPT_AFTER},
		{"created-before", required_argument, NULL, OPT_BEFORE},
		{"output", required_argument, NULL, 'o'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
		{"progress", no_argument, NULL, OPT_PROGRESS},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	static struct state st;
	st.level = -1;
	const char *exprs[MAX_EXPRS];
	char *split_spec = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "e:o:zqvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (st.nex == MAX_EXPRS)
				return fw_usage_fail("too many expressions (at most %s)", "64");
			exprs[st.nex++] = optarg;
			break;
		case OPT_INVERT: st.invert = 1; break;
		case OPT_DEDUP:
		{
			char err[256];
			st.dedup = 1;
			fw_path_free(st.dedup_path);
			if (!(st.dedup_path = fw_path_parse(optarg ? optarg : ".id", err, sizeof err)))
				return fw_usage_fail("--dedup: %s", err);
			break;
		}
		case OPT_SAMPLE:
			if (strchr(optarg, '.')) {
				if (fw_parse_double(optarg, &st.sample_frac) < 0 ||
				    !(st.sample_frac >= 0 && st.sample_frac <= 1))
					return fw_usage_fail("bad sample '%s' (a count, or a fraction 0..1)",
							   optarg);
				st.sample = 2;
			} else {
				if (fw_parse_u64(optarg, &st.sample_n, 1) < 0 ||
				    st.sample_n > (1ULL << 32))
					return fw_usage_fail("bad sample '%s' (a count, or a fraction 0..1)",
							   optarg);
				st.sample = 1;
			}
			break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &st.seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case OPT_SPLIT: split_spec = optarg; break;
		case OPT_DECONTAM:
			if (st.ndecontam == MAX_DECONTAM)
				return fw_usage_fail("too many --decontam files (at most %s)", "16");
			st.decontam_files[st.ndecontam++] = optarg;
			break;
		case OPT_SHARD:
			if (fw_parse_shard(optarg, &st.shard_k, &st.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case OPT_AFTER:
		case OPT_BEFORE:
			if (fw_time_parse(optarg, strlen(optarg), c == OPT_AFTER ? &st.after : &st.before))
				return fw_usage_fail("bad date '%s' (want ISO 8601: 2024-03-01 or "
						   "2024-03-01T12:00:00Z)", optarg);
			*(c == OPT_AFTER ? &st.has_after : &st.has_before) = 1;
			break;
		case 'o': st.out = optarg; break;
		case 'z': st.level = 3; break;
		case 'q': st.quiet = 1; break;
		case 'v': st.verbose = 1; break;
		case OPT_SKIP_BAD: st.skip_bad = 1; break;
		case OPT_PROGRESS: st.progress = 1; break;
		case 'h': return fw_help_exit();
		case OPT_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	for (int i = 0; i < st.nex; i++) {
		char err[512];
		size_t col;
		if (!(st.ex[i] = fw_expr_parse(exprs[i], err, sizeof err, &col))) {
			fw_warn("-e '%s': %s", exprs[i], err);
			if (col) {
				/* Point at the column under the expression. */
				fprintf(stderr, "  %s\n  %*s^\n", exprs[i], (int)col - 1, "");
			}
			return FW_EXIT_USAGE;
		}
	}
	if (split_spec) {
		if (!st.out)
			return fw_usage_fail("--split needs -o PREFIX%s", "");
		char *copy = strdup(split_spec);
		if (!copy || parse_splits(&st, copy) < 0)
			return fw_usage_fail("bad split '%s' (want NAME=FRAC,... with fractions adding up to 1)",
					   split_spec);
	}
	if (st.sample == 1 && !(st.heap = calloc(st.sample_n ? st.sample_n : 1, sizeof *st.heap))) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	if (st.ndecontam) {
		if (!(st.dc = fw_decontam_new(FW_DECONTAM_N))) {
			fw_warn("out of memory");
			return FW_EXIT_DATA;
		}
		for (int i = 0; i < st.ndecontam; i++)
			if (load_decontam(&st, i, st.decontam_files[i]) < 0)
				return FW_EXIT_DATA;
	}

	/* Open the outputs. */
	char err[512];
	int status = 0;
	if (st.nsplits) {
		for (int i = 0; i < st.nsplits; i++) {
			char name[4096];
			snprintf(name, sizeof name, "%s.%s.msgpack%s", st.out, st.splits[i].name,
				 st.level > 0 ? ".zst" : "");
			if (!(st.splits[i].w = fw_writer_open(name, st.level > 0 ? st.level : 0, err,
							      sizeof err))) {
				fw_warn("%s", err);
				status = FW_EXIT_DATA;
				/* No split file appears unless all of them can. */
				for (int k = 0; k < i; k++) {
					fw_writer_abort(st.splits[k].w);
					st.splits[k].w = NULL;
				}
				goto done;
			}
		}
	} else if (!(st.w = fw_writer_open(st.out, st.level, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}

	struct fw_each e = {
		.skip_bad = st.skip_bad, .progress = st.progress,
		.shard_k = st.shard_k, .shard_n = st.shard_n, .arg = &st,
	};
	if (fw_each_record(&e, argc, argv, optind, each_one) != FW_EXIT_OK)
		status = FW_EXIT_DATA;
	int stop = e.stopped;
	if (st.sample == 1 && !stop) {
		qsort(st.heap, st.heap_n, sizeof *st.heap, by_order);
		for (uint64_t i = 0; i < st.heap_n; i++) {
			if (emit(&st, st.heap[i].p, st.heap[i].n) < 0) {
				status = FW_EXIT_DATA;
				break;
			}
		}
	}
	if (st.ndecontam && !st.quiet) {
		fw_warn("decontam: dropped %llu of %llu record%s sharing a %u-gram with %s%s",
			(unsigned long long)st.ncontam, (unsigned long long)(st.nexpr - st.ndup),
			st.nexpr - st.ndup == 1 ? "" : "s", FW_DECONTAM_N, st.decontam_files[0],
			st.ndecontam > 1 ? " and others" : "");
		if (!st.verbose && st.ncontam > SHOW_DROPS)
			fw_warn("decontam: %llu more drops not shown",
				(unsigned long long)(st.ncontam - SHOW_DROPS));
	}
	if ((st.has_after || st.has_before) && !st.quiet && (st.nolder || st.nundated))
		fw_warn("created: dropped %llu record%s outside the dates, %llu without a created date",
			(unsigned long long)st.nolder, st.nolder == 1 ? "" : "s",
			(unsigned long long)st.nundated);
	if (st.dedup && !st.quiet && st.ndup)
		fw_warn("dedup: dropped %llu duplicate%s", (unsigned long long)st.ndup,
			st.ndup == 1 ? "" : "s");
done:
	if (st.nsplits) {
		for (int i = 0; i < st.nsplits; i++) {
			if (!st.splits[i].w)
				continue;
			if (fw_writer_close(st.splits[i].w, err, sizeof err) < 0) {
				fw_warn("%s", err);
				status = FW_EXIT_DATA;
			}
		}
		if (!status && !st.quiet) {
			for (int i = 0; i < st.nsplits; i++)
				fw_warn("split: %s: %llu record%s", st.splits[i].name,
					(unsigned long long)st.splits[i].n, st.splits[i].n == 1 ? "" : "s");
		}
	} else if (st.w && fw_writer_close(st.w, err, sizeof err) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	for (uint64_t i = 0; i < st.heap_n; i++)
		free(st.heap[i].p);
	free(st.heap);
	for (int i = 0; i < st.nex; i++)
		fw_expr_free(st.ex[i]);
	fw_path_free(st.dedup_path);
	free(st.seen.k);
	fw_decontam_free(st.dc);
	fw_buf_release(&st.msg);
	if (fw_close_stdout() < 0 && !status)
		status = FW_EXIT_DATA;
	return status;
}
