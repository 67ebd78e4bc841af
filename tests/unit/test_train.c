/*
 * test_train.c — training steps without PyTorch: the schedule, GRPO group
 * advantages, records into sequences, gradient accumulation over
 * micro-batches equal to one batch, and GRPO raising a synthetic reward.
 * (tests/train-step.bats checks the losses and the AdamW step against a
 * PyTorch reference, tests/ref/train_ref.py.)
 */
#include <stdint.h>

#include "fw_model.h"
#include "fw_mp.h"
#include "fw_train.h"
#include "test.h"

static char err[512];

static struct fw_model *tiny(uint64_t seed, float range)
{
	static char j[1024];
	struct fw_config c;

	snprintf(j, sizeof(j),
		 "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 37, "
		 "\"hidden_size\": 16, \"intermediate_size\": 24, "
		 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
		 "\"num_key_value_heads\": 2, \"max_position_embeddings\": 64, "
		 "\"rms_norm_eps\": 1e-6, \"initializer_range\": %g}", range);
	if (fw_config_parse(&c, j, strlen(j), "cfg", err, sizeof(err))) {
		printf("# %s\n", err);
		return NULL;
	}
	return fw_model_new(&c, seed, err, sizeof(err));
}

TEST(schedule_warms_up_then_follows_the_cosine_to_its_floor)
{
	struct fw_train_cfg c;

	fw_train_defaults(&c);
	c.adamw.lr = 1.0f;
	c.warmup = 10;
	c.decay_steps = 110;
	c.min_lr = 0.1;
	CHECK(fabs(fw_train_lr(&c, 1) - 0.1) < 1e-12);
	CHECK(fabs(fw_train_lr(&c, 10) - 1.0) < 1e-12);
	CHECK(fabs(fw_train_lr(&c, 60) - 0.55) < 1e-9);   /* halfway: (1 + 0.1) / 2 */
	CHECK(fabs(fw_train_lr(&c, 110) - 0.1) < 1e-9);
	CHECK(fabs(fw_train_lr(&c, 500) - 0.1) < 1e-9);
	c.sched = FW_SCHED_CONSTANT;
	CHECK(fabs(fw_train_lr(&c, 60) - 1.0) < 1e-12);
	c.decay_steps = 0;
	c.sched = FW_SCHED_COSINE;
	CHECK(fabs(fw_train_lr(&c, 1000) - 1.0) < 1e-12);
}

TEST(grpo_advantages_per_group_with_equal_and_lonely_groups_skipped)
{
	struct fw_batch *b = fw_batch_new();
	struct fw_group_stats st;
	int32_t t[3] = { 1, 2, 3 };
	double r[] = { 1, 0, 0, 1,  /* group 1: mean .5, sd .577 */
		       1, 1, 1,      /* group 2: all equal */
		       0.5,          /* group 3: alone */
		       NAN, 2, 0 };  /* group 4: one without reward */
	uint64_t g[] = { 1, 1, 1, 1, 2, 2, 2, 3, 4, 4, 4 };

	for (int i = 0; i < 11; i++)
		CHECK(fw_batch_add(b, t, NULL, NULL, NULL, 3, g[i], r[i]) == 0);
	fw_batch_advantages(b, 0, &st);
	CHECK(st.groups == 4);
	CHECK(st.skipped == 2);
	CHECK(st.no_reward == 1);
	double sd = sqrt(1.0 / 3.0);
	CHECK(fabs(b->seq[0].adv - 0.5 / (sd + 1e-4)) < 1e-5);
	CHECK(fabs(b->seq[1].adv + 0.5 / (sd + 1e-4)) < 1e-5);
	CHECK(!b->seq[0].skip && b->seq[4].skip && b->seq[7].skip && b->seq[8].skip);
	CHECK(fabs(b->seq[9].adv - 1.0 / (sqrt(2.0) + 1e-4)) < 1e-5);
	fw_batch_advantages(b, 1, &st);
	CHECK(fabs(b->seq[0].adv - 0.5) < 1e-6 && fabs(b->seq[9].adv - 1.0) < 1e-6);
	CHECK(fabs(st.reward_mean - 7.5 / 10) < 1e-12);
	fw_batch_free(b);
}

/* Packs {"tokens": [...], "mask": [...], "logprobs": [...]?, "teach": {"adv": [...]}?} */
static struct fw_mpv rec_tokens(struct fw_buf *buf, const int *tok, const int *mask, int n,
				const double *lp, int nlp, const double *adv, int nadv)
{
	msgpack_packer pk;

	fw_buf_reset(buf);
	fw_buf_packer(&pk, buf);
	msgpack_pack_map(&pk, 2 + (lp != NULL) + (adv != NULL));
	msgpack_pack_str_with_body(&pk, "tokens", 6);
	msgpack_pack_array(&pk, n);
	for (int i = 0; i < n; i++)
		msgpack_pack_int(&pk, tok[i]);
	msgpack_pack_str_with_body(&pk, "mask", 4);
	msgpack_pack_array(&pk, n);
	for (int i = 0; i < n; i++)
		msgpack_pack_int(&pk, mask[i]);
	if (lp) {
		msgpack_pack_str_with_body(&pk, "logprobs", 8);
		msgpack_pack_array(&pk, nlp);
		for (int i = 0; i < nlp; i++)
			msgpack_pack_double(&pk, lp[i]);
	}
	if (adv) {
		msgpack_pack_str_with_body(&pk, "teach", 5);
		msgpack_pack_map(&pk, 1);
		msgpack_pack_str_with_body(&pk, "adv", 3);
		msgpack_pack_array(&pk, nadv);
		for (int i = 0; i < nadv; i++)
			msgpack_pack_double(&pk, adv[i]);
	}
	return (struct fw_mpv){ buf->p, buf->n };
}

TEST(records_become_sequences_with_mask_logprobs_and_teacher_advantages)
{
	struct fw_batch *b = fw_batch_new();
	struct fw_buf buf = { 0 };
	int tok[5] = { 1, 2, 3, 4, 5 }, mask[5] = { 1, 0, 1, 1, 0 };
	double lp[4] = { -1, -2, -3, -4 }, adv[2] = { 0.5, -0.5 }, nan_adv[2] = { 0.5, NAN };

	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, lp, 4, adv, 2), NULL,
				  37, 64, 0, err, sizeof(err)) == 0);
	CHECK(b->nseq == 1 && b->seq[0].ntrain == 2);
	/* token 0 is never trained, whatever the mask says */
	CHECK(b->mask[0] == 0 && b->mask[2] == 1 && b->mask[3] == 1 && b->mask[4] == 0);
	/* n-1 logprobs are those of tokens 1..n-1, as `ckpt score` writes them */
	CHECK(b->old[2] == -2.0f && b->old[3] == -3.0f && isnan(b->old[0]));
	CHECK(b->tadv[2] == 0.5f && b->tadv[3] == -0.5f && isnan(b->tadv[1]));
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, NULL, 0, adv, 1), NULL,
				  37, 64, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "'teach.adv' has 1 values for 2 trained tokens") != NULL);
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, NULL, 0, nan_adv, 2), NULL,
				  37, 64, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "not finite") != NULL);
	tok[1] = 37;
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, NULL, 0, NULL, 0), NULL,
				  37, 64, 0, err, sizeof(err)) == -1);
	tok[1] = 2;
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, NULL, 0, NULL, 0), NULL,
				  37, 4, 0, err, sizeof(err)) == -1);
	/* truncated: tokens 0..3, of which 2 and 3 trained */
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, NULL, 0, NULL, 0), NULL,
				  37, 4, 1, err, sizeof(err)) == 0);
	CHECK(b->nseq == 2 && b->seq[1].n == 4 && b->seq[1].ntrain == 2 && b->ntok == 9);
	b->nseq = 1;
	b->ntok = 5;
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, mask, 5, NULL, 0, NULL, 0), NULL,
				  37, 2, 1, err, sizeof(err)) == 1);
	CHECK(b->nseq == 1 && b->ntok == 5);
	int none[5] = { 0 };
	CHECK(fw_batch_add_record(b, rec_tokens(&buf, tok, none, 5, NULL, 0, NULL, 0), NULL,
				  37, 64, 0, err, sizeof(err)) == 1);
	CHECK(b->nseq == 1 && b->ntok == 5);
	fw_batch_free(b);
	fw_buf_free(&buf);
}

/* One step over the same sequences, in one micro-batch or in many, with
 * every objective on: the same update. */
TEST(micro_batches_accumulate_to_the_same_update_as_one_batch)
{
	struct fw_model *m1 = tiny(3, 0.2f), *m2 = tiny(3, 0.2f), *ref = tiny(4, 0.2f);
	struct fw_opt *o1 = m1 ? fw_opt_new(m1) : NULL, *o2 = m2 ? fw_opt_new(m2) : NULL;
	struct fw_batch *b = fw_batch_new();
	struct fw_train_cfg c;
	struct fw_step_stats s1, s2;
	struct fw_group_stats gs;
	int idx[6] = { 0, 1, 2, 3, 4, 5 };
	uint64_t x = 99;

	CHECK(m1 && m2 && ref && o1 && o2 && b);
	if (!m1 || !m2 || !ref || !o1 || !o2 || !b)
		return;
	for (int s = 0; s < 6; s++) {
		int n = 5 + 3 * s;
		int32_t t[32];
		float old[32], adv[32];

		for (int i = 0; i < n; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			t[i] = (int32_t)((x >> 33) % 37);
			old[i] = -3.0f - 0.1f * (float)((x >> 40) % 10);
			adv[i] = 0.1f * (float)((int)((x >> 20) % 7) - 3);
		}
		CHECK(fw_batch_add(b, t, NULL, old, adv, n, s / 2, s % 3 == 0 ? 1.0 : 0.2 * s) == 0);
	}
	fw_batch_advantages(b, 0, &gs);
	fw_train_defaults(&c);
	c.w_sft = 0.5;
	c.w_pg = 1;
	c.w_distill = 0.3;
	c.kl_coef = 0.05;
	c.adamw.lr = 1e-2f;
	/* One batch and micro-batches of 16 tokens add the same float32 terms
	 * in another order: (N - 1) u at worst for N terms (u = 2^-24), here
	 * the 75 tokens and the 37 logits of each softmax, N = 112: 6.6e-6,
	 * so 1e-5 relative for the loss and the gradient norm.  With Adam's
	 * default eps (1e-8) a gradient within eps of zero could flip the sign
	 * of its step and move a weight by 2 lr; with eps 1e-3 the step
	 * m/(sqrt(v)+eps) moves by at most 1/eps per unit of gradient, so the
	 * weights' bound of 1e-5 admits gradient differences of 1e-6, (N - 1) u
	 * of terms summing to 0.15 in size.  Measured: at most 7e-8 relative
	 * for the loss and the gradient norm and 1.8e-7 for the weights with
	 * OpenBLAS's Haswell, SkylakeX, Zen, Sandybridge, Prescott and
	 * Cooperlake kernels and 1 to 3 threads. */
	c.adamw.eps = 1e-3f;
	ref->no_grad = 1;
	c.batch_tokens = 4096;
	CHECK(fw_train_step(m1, o1, ref, &c, b, idx, 6, &s1, err, sizeof(err)) == 0);
	c.batch_tokens = 16;
	CHECK(fw_train_step(m2, o2, ref, &c, b, idx, 6, &s2, err, sizeof(err)) == 0);
	CHECK(fabs(s1.loss - s2.loss) < 1e-5 * fabs(s1.loss) + 1e-7);
	CHECK(fabs(s1.grad_norm - s2.grad_norm) < 1e-5 * s1.grad_norm);
	CHECK(s1.tokens == s2.tokens && s1.grad_norm > 0 && s1.kl > 0);
	double worst = 0;
	for (long i = 0; i < m1->nw; i++)
		worst = fmax(worst, fabs(m1->w[i] - m2->w[i]));
	printf("# max |w1 - w2| = %g\n", worst);
	CHECK(worst < 1e-5);
	fw_batch_free(b);
	fw_opt_free(o1);
	fw_opt_free(o2);
	fw_model_free(m1);
	fw_model_free(m2);
	fw_model_free(ref);
}

TEST(a_loss_that_is_not_finite_leaves_the_weights_as_they_were)
{
	struct fw_model *m = tiny(5, 0.02f);
	struct fw_opt *o = m ? fw_opt_new(m) : NULL;
	struct fw_batch *b = fw_batch_new();
	struct fw_train_cfg c;
	struct fw_step_stats st;
	int32_t t[4] = { 1, 2, 3, 4 };
	float old[4] = { 0, 0, 0, 0 };
	int idx[2] = { 0, 1 };

	CHECK(m && o && b);
	if (!m || !o || !b)
		return;
	fw_batch_add(b, t, NULL, old, NULL, 4, 1, 0);
	fw_batch_add(b, t, NULL, old, NULL, 4, 1, 1);
	fw_train_defaults(&c);
	c.w_sft = 0;
	c.w_pg = 1;
	c.clip_high = 1e300; /* no clipping: the ratio itself reaches the loss */
	struct fw_group_stats gs;
	fw_batch_advantages(b, 1, &gs);
	b->seq[1].adv = INFINITY;
	float w0 = m->w[0];
	CHECK(fw_train_step(m, o, NULL, &c, b, idx, 2, &st, err, sizeof(err)) == -1);
	CHECK(strstr(err, "not finite") != NULL);
	CHECK(m->w[0] == w0 && o->step == 0);
	fw_batch_free(b);
	fw_opt_free(o);
	fw_model_free(m);
}

/* Reward: the share of sampled tokens below 8 (under half at the start).
 * GRPO over groups of samples from a few prompts raises it. */
TEST(grpo_raises_a_synthetic_reward)
{
	enum { G = 4, K = 8, P = 3, L = 8, ITERS = 30 };
	struct fw_model *m = tiny(11, 0.1f);
	struct fw_opt *o = m ? fw_opt_new(m) : NULL;
	struct fw_gen *gen = m ? fw_gen_new(m, K, P + L, err, sizeof(err)) : NULL;
	struct fw_train_cfg c;
	struct fw_sampler samp = { 1.0f, 1.0f, 0 };
	uint64_t rng = 5;
	float scratch[2 * 37];
	double first = 0, last = 0;
	int idx[G * K];

	CHECK(m && o && gen);
	if (!m || !o || !gen)
		return;
	fw_train_defaults(&c);
	c.w_sft = 0;
	c.w_pg = 1;
	c.adamw.lr = 2e-2f;
	c.adamw.wd = 0;
	for (int i = 0; i < G * K; i++)
		idx[i] = i;
	for (int it = 0; it < ITERS; it++) {
		struct fw_batch *b = fw_batch_new();
		struct fw_group_stats gs;
		struct fw_step_stats st;
		double mean = 0;

		for (int g = 0; g < G; g++) {
			int32_t prompt[P] = { 30, (int32_t)(20 + g), 31 }, seq[K][P + L], next[K];
			float old[K][P + L];

			CHECK(fw_gen_prefill(gen, prompt, P, err, sizeof(err)) == 0);
			for (int k = 0; k < K; k++) {
				memcpy(seq[k], prompt, sizeof(prompt));
				for (int i = 0; i < P; i++)
					old[k][i] = NAN;
			}
			for (int t = 0; t < L; t++) {
				for (int k = 0; k < K; k++) {
					next[k] = fw_sample(fw_gen_logits(gen) + k * 37, 37, &samp, &rng,
							    scratch, &old[k][P + t]);
					seq[k][P + t] = next[k];
				}
				if (t + 1 < L)
					CHECK(fw_gen_step(gen, next, err, sizeof(err)) == 0);
			}
			for (int k = 0; k < K; k++) {
				uint8_t mask[P + L] = { 0 };
				int hits = 0;

				for (int t = 0; t < L; t++) {
					mask[P + t] = 1;
					hits += seq[k][P + t] < 8;
				}
				mean += (double)hits / L / (G * K);
				fw_batch_add(b, seq[k], mask, old[k], NULL, P + L, (uint64_t)g,
					     (double)hits / L);
			}
		}
		fw_batch_advantages(b, 0, &gs);
		CHECK(fw_train_step(m, o, NULL, &c, b, idx, G * K, &st, err, sizeof(err)) == 0);
		if (it < 5)
			first += mean / 5;
		if (it >= ITERS - 5)
			last += mean / 5;
		fw_batch_free(b);
	}
	printf("# mean reward: first 5 iterations %.3f, last 5 %.3f\n", first, last);
	CHECK(last > first + 0.3);
	fw_gen_free(gen);
	fw_opt_free(o);
	fw_model_free(m);
}

TEST_MAIN()
