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
	"usage: teach [--hints env,rules] [--rules FILE] [--teacher builtin:DIR | none]\n"
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
	int use_env = 1, use_rules = 0;
	struct fw_teach_rules *rules = NULL;
	double clip = 5;
	uint64_t max_chars = 400;
	int c, status = FW_EXIT_OK, no_teacher = 0;
	char err[512];
	struct teacher T = { 0 };

	fw_cli_init("teach");
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HINTS: {
			char *s = strdup(optarg), *save = NULL;

			use_env = use_rules = 0;
			for (char *w = strtok_r(s, ",", &save); w; w = strtok_r(NULL, ",", &save))
				if (!strcmp(w, "env")) {
					use_env = 1;
				} else if (!strcmp(w, "rules")) {
					use_rules = 1;
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
	struct fw_buf tb = { 0 }, ob = { 0 };

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
			struct fw_teach_hints hs = { 0 };
			float *adv = NULL;
			long nadv = 0;
			const char *reason = NULL;
			char why[512] = "";

			if ((use_env && fw_teach_env_hints(rec.v, max_chars, &hs, err, sizeof err) < 0) ||
			    (rules && fw_teach_rule_hints(rules, rec.v, &hs, err, sizeof err) < 0)) {
				fw_warn_rec(fw_reader_name(r), rec.index, rec.offset, "%s", err);
				status = FW_EXIT_DATA;
				fw_teach_hints_free(&hs);
				continue;
			}
			if (!no_teacher) {
				struct fw_mpv pol, ck;
				const char *dir = teacher;
				char dbuf[4096];

				if (!dir && fw_mp_get(rec.v, "policy", &pol) == 1 &&
				    fw_mp_get(pol, "ckpt", &ck) == 1) {
					const char *s;
					size_t n;

					if (!fw_mp_str(ck, &s, &n) && n < sizeof dbuf) {
						memcpy(dbuf, s, n);
						dbuf[n] = 0;
						dir = dbuf;
					}
				}
				int rc;

				if (!dir) {
					reason = "no teacher: no --teacher and no policy.ckpt";
				} else if (teacher_load(&T, dir, why, sizeof why)) {
					reason = why;
				} else if ((rc = fw_teach_credit_fill(T.m, T.t, rec.v, &hs, clip, &adv,
								      &nadv, why, sizeof why)) != 0) {
					reason = why;
					if (rc < 0)
						fw_warn_rec(fw_reader_name(r), rec.index, rec.offset,
							    "teacher: %s", why);
				}
			}
			fw_buf_reset(&tb);
			fw_buf_reset(&ob);
			struct fw_field f = { "teach", 5, { 0 } };

			if (fw_teach_pack(&tb, &hs, adv, nadv, reason) ||
			    (f.val = (struct fw_mpv){ tb.p, tb.n },
			     fw_rec_set(&ob, rec.v, &f, 1)) ||
			    fw_writer_put(w, ob.p, ob.n)) {
				fw_warn("%s", "write error or out of memory");
				status = FW_EXIT_DATA;
			}
			free(adv);
			fw_teach_hints_free(&hs);
		}
		if (got < 0) {
			fw_warn_reader(r);
			status = FW_EXIT_DATA;
		}
		fw_reader_close(r);
	}
	fw_buf_free(&tb);
	fw_buf_free(&ob);
	fw_model_free(T.m);
	fw_tok_free(T.t);
	fw_teach_rules_free(rules);
	if (fw_writer_close(w, err, sizeof err)) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	return status;
}
