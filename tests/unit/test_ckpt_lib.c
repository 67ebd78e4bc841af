/*
 * test_ckpt_lib.c — what ckpt and train-step ask of the library: a
 * checkpoint made, described and converted (fw_ckpt_init, fw_ckpt_describe,
 * fw_ckpt_convert), continuations sampled (fw_sample_seqs), records scored
 * whole by the teacher's scorer (fw_recscore) and a run of them on the
 * worker pool (fw_recscore_files), --objective lists and the
 * private tasks a run refuses (fw_train_parse_objective, fw_private_*).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "test_rec.h"
#include "fw_base.h"
#include "fw_cli.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_teach.h"
#include "fw_train.h"

static char err[512];

static const char cfg_json[] =
	"{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 264, "
	"\"hidden_size\": 16, \"intermediate_size\": 24, "
	"\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
	"\"num_key_value_heads\": 1, \"max_position_embeddings\": 32, "
	"\"rms_norm_eps\": 1e-6, \"initializer_range\": 0.3}";

/* A scratch directory with cfg_json in it as config.json's source. */
static char *scratch(char *dir, char *cfg)
{
	FILE *f;

	strcpy(dir, "/tmp/test_ckpt_lib.XXXXXX");
	if (!mkdtemp(dir))
		return NULL;
	snprintf(cfg, PATH_MAX, "%s/cfg.json", dir);
	if (!(f = fopen(cfg, "w")))
		return NULL;
	fputs(cfg_json, f);
	fclose(f);
	return dir;
}

TEST(a_checkpoint_made_described_and_converted)
{
	char dir[PATH_MAX], cfg[PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8];
	struct fw_buf d = { 0 };

	CHECK(scratch(dir, cfg) != NULL);
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	CHECK_EQ_INT(fw_ckpt_init(cfg, NULL, 7, FW_F32, a, err, sizeof err), 0);
	CHECK_EQ_INT(fw_ckpt_describe(a, &d, err, sizeof err), 0);
	fw_buf_append(&d, "", 1);
	/* a fresh checkpoint: no step, no parent; 264 x 16 embeddings and
	 * lm_head, three norms of 16, q and o 16 x 16, k and v 8 x 16, three
	 * MLP matrices 24 x 16 */
	CHECK(d.n && strstr((char *)d.p, "\nstep: 0\nparent: none\n"
					  "architecture: LlamaForCausalLM\nparameters: 10416\n"
					  "dtype: F32\nvocab_size: 264\n") != NULL);
	CHECK(strstr((char *)d.p, "\nhead_dim: 8\nmax_position_embeddings: 32\n") != NULL);
	CHECK(strstr((char *)d.p, "\nqk_norm: no\n") != NULL);
	CHECK_EQ_INT(fw_ckpt_convert(a, b, FW_BF16, err, sizeof err), 0);
	d.n = 0;
	CHECK_EQ_INT(fw_ckpt_describe(b, &d, err, sizeof err), 0);
	fw_buf_append(&d, "", 1);
	CHECK(strstr((char *)d.p, "\ndtype: BF16\n") != NULL);
	/* taken: nothing written, the reason said */
	CHECK_EQ_INT(fw_ckpt_init(cfg, NULL, 7, FW_F32, a, err, sizeof err), -1);
	CHECK(*err != 0);
	/* a tokenizer file that is not there */
	CHECK_EQ_INT(fw_ckpt_init(cfg, "/no/such/tokenizer.json", 7, FW_F32, b, err, sizeof err), -1);
	CHECK(strstr(err, "/no/such/tokenizer.json") != NULL);
	d.n = 0;
	CHECK_EQ_INT(fw_ckpt_describe(dir, &d, err, sizeof err), -1);
	fw_buf_release(&d);
	fw_rmtree(dir);
}

static struct fw_model *model(void)
{
	struct fw_config c;

	if (fw_config_parse(&c, cfg_json, strlen(cfg_json), "cfg", err, sizeof err)) {
		printf("# %s\n", err);
		return NULL;
	}
	return fw_model_new(&c, 5, err, sizeof err);
}

TEST(continuations_drawn_the_same_for_the_same_seed_and_ended_at_eos)
{
	struct fw_model *m = model();
	struct fw_sampler s = { 1.0f, 1.0f, 0 }, greedy = { 0, 1.0f, 0 };
	int32_t p[2] = { 256, 65 }, x[3 * 10], y[3 * 10];
	int nx[3], ny[3];

	CHECK(m != NULL);
	CHECK_EQ_INT(fw_sample_seqs(m, p, 2, 10, 3, &s, 9, -1, x, nx, err, sizeof err), 0);
	CHECK_EQ_INT(fw_sample_seqs(m, p, 2, 10, 3, &s, 9, -1, y, ny, err, sizeof err), 0);
	CHECK(nx[0] == 10 && nx[1] == 10 && nx[2] == 10);
	CHECK(memcmp(x, y, sizeof x) == 0);
	/* greedy: every continuation the same; one that stops at its first
	 * token when that is the end */
	CHECK_EQ_INT(fw_sample_seqs(m, p, 2, 10, 3, &greedy, 1, -1, x, nx, err, sizeof err), 0);
	CHECK(memcmp(x, x + 10, sizeof(int32_t) * 10) == 0 && memcmp(x, x + 20, sizeof(int32_t) * 10) == 0);
	CHECK_EQ_INT(fw_sample_seqs(m, p, 2, 10, 3, &greedy, 1, x[0], y, ny, err, sizeof err), 0);
	CHECK(ny[0] == 0 && ny[1] == 0 && ny[2] == 0);
	/* more than max_position_embeddings */
	CHECK_EQ_INT(fw_sample_seqs(m, p, 2, 31, 1, &s, 9, -1, x, nx, err, sizeof err), -1);
	fw_model_free(m);
}

TEST(records_scored_as_the_kv_scorer_scores_their_ids)
{
	struct fw_model *m = model();
	struct fw_recscore *rs = fw_recscore_new(m, NULL, err, sizeof err);
	struct fw_kvscore *ks = fw_kvscore_new(m, err, sizeof err);
	struct fw_buf in = { 0 }, out = { 0 };
	int32_t seq[5] = { 256, 1, 2, 3, 200 };
	float lp[5];
	double *got = NULL;
	struct fw_mpv v;
	const char *why;

	CHECK(rs && ks && m->no_grad);
	CHECK_EQ_INT(fw_recscore_run(rs, test_rec(&in, "{\"id\":\"a\",\"tokens\":[256,1,2,3,200],"
						      "\"keep\":true}"), &out, &why), 1);
	CHECK_EQ_INT(fw_kvscore_run(ks, seq, 5, 0, lp, err, sizeof err), 0);
	v = fw_mp_view(out.p, out.p + out.n);
	CHECK(fw_mp_get(v, "logprobs", &v) == 1 && fw_mp_doubles(v, &got) == 4);
	for (int i = 0; got && i < 4; i++)
		CHECK((float)got[i] == lp[i]);
	CHECK(fw_mp_get(fw_mp_view(out.p, out.p + out.n), "keep", &v) == 1);
	CHECK_EQ_INT(fw_recscore_run(rs, test_rec(&in, "{\"id\":\"b\",\"tokens\":[1,264]}"), &out,
				     &why), 0);
	CHECK_STR(why, "'tokens' holds an id outside the vocabulary");
	/* text needs a tokenizer */
	CHECK_EQ_INT(fw_recscore_run(rs, test_rec(&in, "{\"id\":\"c\",\"text\":\"hi\"}"), &out, &why),
		     0);
	CHECK(why != NULL);
	free(got);
	fw_buf_release(&in);
	fw_buf_release(&out);
	fw_kvscore_free(ks);
	fw_recscore_free(rs);
	fw_recscore_free(NULL);
	fw_model_free(m);
}

/* One scoring run of in on workers threads into out, its stderr into errf.
 * Returns fw_recscore_files()'s status. */
static int score_run(struct fw_model *m, int workers, char *in, const char *out,
		     const char *errf)
{
	struct fw_recscore_opts o = { .workers = workers, .out = out, .level = -1 };
	char *argv[] = { in, in };
	int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644), saved = dup(2), rc;

	fflush(stderr);
	dup2(fd, 2);
	close(fd);
	rc = fw_recscore_files(m, NULL, &o, 2, argv, 0);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	return rc;
}

TEST(records_scored_on_one_or_three_workers_give_the_same_bytes)
{
	struct fw_model *m = model();
	struct fw_buf in = { 0 }, r = { 0 };
	char dir[PATH_MAX], cfg[PATH_MAX], p[6][PATH_MAX + 16];
	char *a = NULL, *b = NULL, *ea = NULL, *eb = NULL, *e5 = NULL, *e12 = NULL;
	size_t na = 0, nb = 0, nea = 0, neb = 0;
	char js[256];
	FILE *f;

	CHECK(m != NULL && scratch(dir, cfg) != NULL);
	for (int i = 0; i < 6; i++)
		snprintf(p[i], sizeof p[i], "%s/%d", dir, i);
	/* twenty records of various lengths; the 5th names an id outside the
	 * vocabulary and the 12th a text, which needs a tokenizer */
	for (int i = 0; i < 20; i++) {
		int k = snprintf(js, sizeof js, "{\"id\":\"r%d\",\"tokens\":[256", i);

		for (int t = 0; t < 3 + i % 7; t++)
			k += snprintf(js + k, sizeof js - k, ",%d", (i * 31 + t * 7) % 256);
		snprintf(js + k, sizeof js - k, "%s]}", i == 4 ? ",999" : "");
		if (i == 11)
			snprintf(js, sizeof js, "{\"id\":\"r%d\",\"text\":\"hi\"}", i);
		test_rec(&r, js);
		fw_buf_append(&in, r.p, r.n);
	}
	CHECK((f = fopen(p[0], "w")) != NULL);
	fwrite(in.p, 1, in.n, f);
	fclose(f);
	/* the refused records make the status FW_EXIT_DATA; the rest are written */
	CHECK_EQ_INT(score_run(m, 1, p[0], p[1], p[2]), FW_EXIT_DATA);
	CHECK_EQ_INT(score_run(m, 3, p[0], p[3], p[4]), FW_EXIT_DATA);
	a = fw_read_file(p[1], 1 << 20, &na);
	b = fw_read_file(p[3], 1 << 20, &nb);
	ea = fw_read_file(p[2], 1 << 20, &nea);
	eb = fw_read_file(p[4], 1 << 20, &neb);
	CHECK(a && b && na > in.n && na == nb && memcmp(a, b, na) == 0);
	/* the same warnings in input order: two an operand, read twice */
	CHECK(ea && eb && nea == neb && memcmp(ea, eb, nea) == 0);
	CHECK(ea && (e5 = strstr(ea, ": record 5 (byte ")) &&
	      (e12 = strstr(ea, ": record 12 (byte ")));
	CHECK(e5 && e12 && e5 < e12 && strstr(e12 + 1, ": record 5 (byte ") != NULL);
	/* an output that cannot be opened: nothing scored, the reason said */
	snprintf(p[5], sizeof p[5], "%s/no/such/out", dir);
	CHECK_EQ_INT(score_run(m, 3, p[0], p[5], p[2]), FW_EXIT_DATA);
	CHECK(access(p[5], F_OK) != 0);
	free(a);
	free(b);
	free(ea);
	free(eb);
	fw_buf_release(&in);
	fw_buf_release(&r);
	fw_model_free(m);
	fw_rmtree(dir);
}

TEST(objective_lists_name_weights_or_are_refused)
{
	struct fw_train_cfg c;
	char big[300];

	fw_train_defaults(&c);
	CHECK_EQ_INT(fw_train_parse_objective("pg:0.5,distill", &c), 0);
	CHECK(c.w_sft == 0 && c.w_pg == 0.5 && c.w_distill == 1);
	CHECK_EQ_INT(fw_train_parse_objective("sft", &c), 0);
	CHECK(c.w_sft == 1 && c.w_pg == 0 && c.w_distill == 0);
	const char *bad[] = { "", "sft,bogus", "pg:0", "pg:-1", "pg:inf", "pg:", ",", "sft:1x" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		CHECK_EQ_INT(fw_train_parse_objective(bad[i], &c), -1);
	memset(big, 's', sizeof big - 1);
	big[sizeof big - 1] = 0;
	CHECK_EQ_INT(fw_train_parse_objective(big, &c), -1);
}

TEST(private_tasks_by_split_or_by_the_ids_of_a_file)
{
	char dir[PATH_MAX], cfg[PATH_MAX], f[PATH_MAX + 16];
	struct fw_intern ids = { 0 };
	struct fw_buf b = { 0 };
	struct fw_writer *w;
	const char *id;
	size_t n;

	CHECK(scratch(dir, cfg) != NULL);
	snprintf(f, sizeof f, "%s/private.mp", dir);
	w = fw_writer_open(f, 0, err, sizeof err);
	test_rec(&b, "{\"kind\":\"task\",\"id\":\"t9\"}");
	CHECK(w && fw_writer_put(w, b.p, b.n) == 0 && fw_writer_close(w, err, sizeof err) == 0);
	CHECK_EQ_INT(fw_private_load(f, &ids, err, sizeof err), 0);
	CHECK(fw_private_task(test_rec(&b, "{\"task\":\"t9\",\"tokens\":[1]}"), &ids, &id, &n) == 1);
	CHECK(n == 2 && !memcmp(id, "t9", 2));
	CHECK(fw_private_task(test_rec(&b, "{\"task\":{\"id\":\"t9\"}}"), &ids, &id, &n) == 1);
	CHECK(fw_private_task(test_rec(&b, "{\"task\":{\"id\":\"t1\",\"split\":\"private\"}}"), &ids,
			      &id, &n) == 1);
	CHECK(fw_private_task(test_rec(&b, "{\"split\":\"private\"}"), &ids, &id, &n) == 1 && !id);
	CHECK(fw_private_task(test_rec(&b, "{\"task\":{\"id\":\"t1\",\"split\":\"train\"}}"), &ids,
			      &id, &n) == 0);
	CHECK(fw_private_task(test_rec(&b, "{\"id\":\"t9\"}"), &ids, &id, &n) == 1);
	CHECK(fw_private_task(test_rec(&b, "{\"task\":\"t1\"}"), &ids, &id, &n) == 0);
	/* a task record without an id */
	w = fw_writer_open(f, 0, err, sizeof err);
	test_rec(&b, "{\"kind\":\"task\"}");
	CHECK(w && fw_writer_put(w, b.p, b.n) == 0 && fw_writer_close(w, err, sizeof err) == 0);
	CHECK_EQ_INT(fw_private_load(f, &ids, err, sizeof err), -1);
	CHECK(strstr(err, "record 1 has no string 'id'") != NULL);
	fw_intern_release(&ids);
	fw_buf_release(&b);
	fw_rmtree(dir);
}

TEST_MAIN()
