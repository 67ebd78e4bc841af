/*
 * teach — hints for rollouts from their environment, and the per-token
 * credit a teacher gives the policy's tokens with the hint in context.
 * See teach(1).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_tok.h"

static const char usage_text[] =
	"usage: teach [--hints env,rules,demo] [--rules FILE] [--teacher builtin:DIR | none]\n"
	"             [--clip X] [--max-chars N] [-o OUT] [FILE...]\n"
	"             [-h | --help] [--version]\n";

struct teacher {
	char dir[4096];
	struct fw_model *m;
	struct fw_tok *t;
};

/* Loads DIR's model and tokenizer unless already loaded.  0 or -1 (err). */
static int teacher_load(struct teacher *T, const char *dir, char *err, size_t errlen)
{
	char p[4200];

	if (T->m && !strcmp(T->dir, dir))
		return 0;
	fw_model_free(T->m);
	fw_tok_free(T->t);
	T->m = NULL;
	T->t = NULL;
	snprintf(T->dir, sizeof T->dir, "%s", dir);
	if (!(T->m = fw_model_load(dir, err, errlen)))
		return -1;
	snprintf(p, sizeof p, "%s/tokenizer.json", dir);
	if (!(T->t = fw_tok_load(p, err, errlen))) {
		fw_model_free(T->m);
		T->m = NULL;
		return -1;
	}
	return 0;
}

/* What every record needs. */
struct ctx {
	int use_env, no_teacher;
	struct fw_teach_rules *rules;
	const char *teacher;
	double clip;
	size_t max_chars, demo_chars;
	struct teacher T;
	struct fw_buf tb, ob;
	struct fw_writer *w;
};

/* Hints and credit for one record, written out with its teach sub-map.
 * demo, when not NULL, is a successful rollout of its group.  Returns 0, or
 * -1 after a diagnostic. */
static int process(struct ctx *C, const char *file, uint64_t index, uint64_t offset,
		   struct fw_mpv v, const struct fw_mpv *demo)
{
	struct fw_teach_hints hs = { 0 };
	float *adv = NULL;
	long nadv = 0;
	const char *reason = NULL, *other = NULL;
	char why[512] = "", err[512];
	int rc = 0;

	if ((C->use_env && fw_teach_env_hints(v, C->max_chars, &hs, err, sizeof err) < 0) ||
	    (C->rules && fw_teach_rule_hints(C->rules, v, &hs, err, sizeof err) < 0) ||
	    (demo && fw_teach_demo_hint(v, *demo, C->demo_chars, &hs, err, sizeof err) < 0)) {
		fw_warn_rec(file, index, offset, "%s", err);
		fw_teach_hints_free(&hs);
		return -1;
	}
	if (!C->no_teacher) {
		struct fw_mpv pol, ck;
		const char *dir = C->teacher;
		char dbuf[4096];
		int cr, own = 0;

		if (fw_mp_get(v, "policy", &pol) == 1 && fw_mp_get(pol, "ckpt", &ck) == 1) {
			const char *s;
			size_t n;

			if (!fw_mp_str(ck, &s, &n) && n < sizeof dbuf) {
				memcpy(dbuf, s, n);
				dbuf[n] = 0;
				if (!dir)
					dir = dbuf;
				own = !strcmp(dir, dbuf);
			}
		}
		if (dir && !own)
			other = dir;
		if (!dir) {
			reason = "no teacher: no --teacher and no policy.ckpt";
		} else if (teacher_load(&C->T, dir, why, sizeof why)) {
			reason = why;
		} else if ((cr = (fw_mp_get(v, "tokens", &ck) == 1 ? fw_teach_credit_fill :
				  fw_teach_credit_agent)(C->T.m, C->T.t, v, &hs, C->clip, &adv,
							 &nadv, why, sizeof why)) != 0) {
			reason = why;
			if (cr < 0)
				fw_warn_rec(file, index, offset, "teacher: %s", why);
		}
	}
	fw_buf_reset(&C->tb);
	fw_buf_reset(&C->ob);
	if (fw_teach_pack(&C->tb, &hs, adv, nadv, reason, other)) {
		fw_warn_rec(file, index, offset, "out of memory");
		rc = -1;
	} else {
		struct fw_field f = { "teach", 5, { C->tb.p, C->tb.n } };

		if (fw_rec_set(&C->ob, v, &f, 1) || fw_writer_put(C->w, C->ob.p, C->ob.n)) {
			fw_warn("write error: %s", fw_writer_error(C->w));
			rc = -1;
		}
	}
	free(adv);
	fw_teach_hints_free(&hs);
	return rc;
}

/* Consecutive records of one group, copied. */
struct group {
	struct fw_buf data;
	struct { size_t off, n; uint64_t index, offset; } *r;
	size_t n, cap;
	int has;
	uint64_t key;
};

static int group_add(struct group *G, const struct fw_rec *rec, int has, uint64_t key)
{
	if (G->n == G->cap) {
		size_t nc = G->cap ? 2 * G->cap : 16;
		void *p = realloc(G->r, nc * sizeof *G->r);

		if (!p)
			return -1;
		G->r = p;
		G->cap = nc;
	}
	G->r[G->n].off = G->data.n;
	G->r[G->n].n = rec->v.n;
	G->r[G->n].index = rec->index;
	G->r[G->n].offset = rec->offset;
	if (fw_buf_append(&G->data, rec->v.p, rec->v.n))
		return -1;
	G->n++;
	G->has = has;
	G->key = key;
	return 0;
}

/* Processes the group's records with its first resolved one as the demo
 * (a group of one, or without a key, has none); empties G.  0 or -1. */
static int flush(struct ctx *C, struct group *G, const char *file)
{
	struct fw_mpv demo = { 0 };
	int rc = 0, have = 0;

	for (size_t i = 0; G->has && i < G->n && !have; i++) {
		struct fw_mpv v = { G->data.p + G->r[i].off, G->r[i].n };

		if (fw_teach_resolved(v)) {
			demo = v;
			have = 1;
		}
	}
	for (size_t i = 0; i < G->n; i++) {
		struct fw_mpv v = { G->data.p + G->r[i].off, G->r[i].n };

		if (process(C, file, G->r[i].index, G->r[i].offset, v, have ? &demo : NULL))
			rc = -1;
	}
	G->n = 0;
	fw_buf_reset(&G->data);
	return rc;
}

int main(int argc, char **argv)
{
	enum { OPT_HINTS = 256, OPT_RULES, OPT_TEACHER, OPT_CLIP, OPT_MAX_CHARS, OPT_VERSION };
	static const struct option longopts[] = {
		{ "hints", required_argument, NULL, OPT_HINTS },
		{ "rules", required_argument, NULL, OPT_RULES },
		{ "teacher", required_argument, NULL, OPT_TEACHER },
		{ "clip", required_argument, NULL, OPT_CLIP },
		{ "max-chars", required_argument, NULL, OPT_MAX_CHARS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *teacher = NULL, *rules_path = NULL;
	int use_env = 1, use_rules = 0, use_demo = 0;
	struct fw_teach_rules *rules = NULL;
	double clip = 5;
	uint64_t max_chars = 400;
	int c, status = FW_EXIT_OK, no_teacher = 0;
	char err[512];

	fw_cli_init("teach");
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HINTS: {
			char *s = strdup(optarg), *save = NULL;

			use_env = use_rules = use_demo = 0;
			for (char *w = strtok_r(s, ",", &save); w; w = strtok_r(NULL, ",", &save))
				if (!strcmp(w, "env")) {
					use_env = 1;
				} else if (!strcmp(w, "rules")) {
					use_rules = 1;
				} else if (!strcmp(w, "demo")) {
					use_demo = 1;
				} else {
					fw_warn("--hints: unknown or unsupported source '%s'", w);
					free(s);
					fputs(usage_text, stderr);
					return FW_EXIT_USAGE;
				}
			free(s);
			break;
		}
		case OPT_RULES:
			rules_path = optarg;
			break;
		case OPT_TEACHER:
			if (!strcmp(optarg, "none")) {
				no_teacher = 1;
			} else if (!strncmp(optarg, "builtin:", 8) && optarg[8]) {
				teacher = optarg + 8;
			} else {
				fw_warn("--teacher: want builtin:DIR or none, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case OPT_CLIP:
			if (fw_parse_double(optarg, &clip) || !(clip > 0)) {
				fw_warn("--clip: want a positive number, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case OPT_MAX_CHARS:
			if (fw_parse_u64(optarg, &max_chars, 0) || !max_chars || max_chars > 1u << 20) {
				fw_warn("--max-chars: want 1 to 1048576, not '%s'", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		case 'o':
			out = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return FW_EXIT_OK;
		case OPT_VERSION:
			fw_print_version();
			return FW_EXIT_OK;
		default:
			fputs(usage_text, stderr);
			return FW_EXIT_USAGE;
		}
	}
	if (use_rules && !rules_path) {
		fw_warn("--hints rules needs --rules FILE");
		return FW_EXIT_USAGE;
	}
	if (use_rules && !(rules = fw_teach_rules_load(rules_path, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_USAGE;
	}
	struct fw_writer *w = fw_writer_open(out, -1, err, sizeof err);

	if (!w) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	int nfiles = argc - optind;
	struct ctx C = { .use_env = use_env, .no_teacher = no_teacher, .rules = rules,
			 .teacher = teacher, .clip = clip, .max_chars = max_chars,
			 .demo_chars = 5 * max_chars, .w = w };
	struct group G = { 0 };

	for (int fi = 0; fi < (nfiles ? nfiles : 1); fi++) {
		const char *path = nfiles ? argv[optind + fi] : "-";
		struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
		struct fw_rec rec;
		int got;

		if (!r) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		while ((got = fw_reader_next(r, &rec)) == 1) {
			uint64_t key;
			int has = use_demo && fw_teach_group_key(rec.v, &key);

			if (!use_demo) {
				if (process(&C, fw_reader_name(r), rec.index, rec.offset, rec.v, NULL))
					status = FW_EXIT_DATA;
				continue;
			}
			if (G.n && (!has || !G.has || key != G.key) && flush(&C, &G, fw_reader_name(r)))
				status = FW_EXIT_DATA;
			if (group_add(&G, &rec, has, key)) {
				fw_warn("out of memory");
				status = FW_EXIT_DATA;
				break;
			}
		}
		if (G.n && flush(&C, &G, fw_reader_name(r)))
			status = FW_EXIT_DATA;
		if (got < 0) {
			fw_warn_reader(r);
			status = FW_EXIT_DATA;
		}
		fw_reader_close(r);
	}
	fw_buf_free(&C.tb);
	fw_buf_free(&C.ob);
	fw_buf_free(&G.data);
	free(G.r);
	fw_model_free(C.T.m);
	fw_tok_free(C.T.t);
	fw_teach_rules_free(rules);
	if (fw_writer_close(w, err, sizeof err)) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	return status;
}
