/*
 * train-step — optimizer steps on a checkpoint from a stream of training
 * records (sft, pg, distill), a new checkpoint written atomically, and a
 * metrics record per step.  See train-step(1).
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_tok.h"
#include "fw_train.h"
#include "kernels.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: train-step --ckpt DIR --out DIR [--objective sft|pg|distill|topk[:W][,...]]\n"
	"                  [--lr X] [--steps N] [--batch-size N] [--batch-tokens N]\n"
	"                  [--warmup N] [--decay-steps N] [--min-lr F] [--schedule cosine|constant]\n"
	"                  [--clip-grad X] [--weight-decay X] [--beta1 X] [--beta2 X] [--eps X]\n"
	"                  [--clip-low X] [--clip-high X] [--no-std] [--norm token|seq]\n"
	"                  [--kl-coef X] [--ref DIR] [--distill-weight X] [--is-clip X] [--route]\n"
	"                  [--topk-first-miss]\n"
	"                  [--keep N] [--dtype f32|bf16|f16] [--seed S] [--skip-bad] [--truncate]\n"
	"                  [--private FILE] [--device cpu|cuda[:N]] [--shard K/N]\n"
	"                  [--progress] [-o OUT] [-z] [--threads N] [FILE...]\n"
	"                  [-h | --help] [--version]\n";

static const struct fw_opt_doc options[] = {
	{ "--ckpt DIR", "the checkpoint to start from" },
	{ "--out DIR", "where the new checkpoint goes" },
	{ "--objective sft|pg|distill|topk[:W][,...]", "the objectives and their weights (default sft)" },
	{ "--lr X", "peak learning rate" },
	{ "--steps N", "optimizer steps" },
	{ "--batch-size N", "sequences per step (all of them when 0, the default)" },
	{ "--batch-tokens N", "rows times padded length of a micro-batch at most (8192)" },
	{ "--warmup N", "steps of linear warmup" },
	{ "--decay-steps N", "steps over which the rate decays" },
	{ "--min-lr F", "the floor of the cosine, times --lr (default 0.1)" },
	{ "--schedule cosine|constant", "the shape of the learning rate" },
	{ "--clip-grad X", "clip the gradient to norm X" },
	{ "--weight-decay X", "AdamW weight decay" },
	{ "--beta1 X", "AdamW beta1" },
	{ "--beta2 X", "AdamW beta2" },
	{ "--eps X", "AdamW epsilon" },
	{ "--clip-low X", "pg: lower clip of the ratio" },
	{ "--clip-high X", "pg: upper clip of the ratio" },
	{ "--no-std", "pg: do not divide advantages by their spread" },
	{ "--norm token|seq", "pg: average the loss over tokens or over sequences" },
	{ "--kl-coef X", "pg: weight of the KL term to --ref" },
	{ "--ref DIR", "the reference checkpoint of the KL term" },
	{ "--distill-weight X", "the weight of the distill term" },
	{ "--is-clip X", "distill: bound of the importance weight" },
	{ "--route", "with distill: train a rollout a hint gave credit by distill" },
	{ "--topk-first-miss", "topk only up to a rollout's first token the teacher would not have chosen" },
	{ "--keep N", "remove all but the N newest step directories" },
	{ "--dtype f32|bf16|f16", "the precision of the model on a GPU" },
	{ "--seed S", "seed of the data order (default the checkpoint's)" },
	{ "--skip-bad", "skip records that cannot be trained on, and count them" },
	{ "--truncate", "cut a sequence longer than max_position_embeddings instead of refusing it" },
	{ "--private FILE", "task records whose ids are private: a record of one of them stops the run" },
	{ "--device cpu|cuda[:N]", "where the step runs" },
	{ "--shard K/N", "train on the records whose id hashes to K modulo N" },
	{ "--progress", "meters of the records read and the steps on standard error even when it is not a terminal" },
	{ "-o OUT", "write the metrics records, one per step, to OUT" },
	{ "-z", "compress the metrics with zstd" },
	{ "--threads N", "threads of the kernels (as FW_THREADS)" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

static char err[1024];

/* The options that take a number >= 0 come first: the loop parses them
 * before the switch. */
enum { O_LR = 256, O_MINLR, O_CLIPG, O_WD, O_B1, O_B2, O_EPS, O_CLOW, O_CHIGH, O_KL,
       O_DW, O_ISCLIP, O_CKPT, O_OUT, O_OBJ, O_STEPS, O_BSZ, O_BTOK, O_WARM, O_DECAY,
       O_SCHED, O_NOSTD, O_NORM, O_REF, O_KEEP, O_DTYPE, O_SEED, O_SKIPBAD, O_TRUNC,
       O_DEVICE, O_ROUTE, O_TOPK_FIRST, O_THREADS, O_VERSION, O_PROGRESS, O_PRIVATE, O_SHARD };

/* fw_run's step callback: the meter counts steps. */
static void tick_step(void *ctx, long done)
{
	fw_progress_tick(ctx, (uint64_t)done, 0);
}

/* What reading the records gathers. */
struct reading {
	struct fw_run *run;
	const struct fw_intern *private_ids;
	long skipped, nprivate;  /* records left out; of private tasks */
	int skip_bad, bad;       /* --skip-bad; a record was bad without it */
};

/*
 * fw_each_record's callback: a record of a private task stops the run
 * before any step, --skip-bad or not (skipping it would hide a pipeline
 * that feeds the private split to training); one that cannot be trained
 * on is left out, and without --skip-bad stops the run too.
 */
static int add_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct reading *rd = e->arg;
	const char *id;
	size_t idn;

	if (fw_private_task(rec->v, rd->private_ids, &id, &idn)) {
		fw_progress_pause(e->meter);
		fw_warn_rec(file, rec->index, rec->offset, "refusing to train on private task %.*s",
			    id ? (int)idn : 9, id ? id : "(no id)");
		rd->nprivate++;
	} else if (fw_run_add(rd->run, rec->v, err, sizeof(err))) {
		fw_progress_pause(e->meter);
		fw_warn_rec(file, rec->index, rec->offset, "%s", err);
		rd->skipped++;
		rd->bad |= !rd->skip_bad;
	}
	return 0;
}

static int num_opt(const char *name, const char *arg, double *out)
{
	if (fw_parse_double(arg, out) || !isfinite(*out) || *out < 0) {
		fw_warn("bad --%s '%s'", name, arg);
		fw_usage(stderr);
		return -1;
	}
	return 0;
}

static int run(int argc, char **argv, struct fw_dp *dp)
{
	static const struct option lo[] = {
		{ "ckpt", required_argument, NULL, O_CKPT },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "out", required_argument, NULL, O_OUT },
		{ "objective", required_argument, NULL, O_OBJ },
		{ "lr", required_argument, NULL, O_LR },
		{ "steps", required_argument, NULL, O_STEPS },
		{ "batch-size", required_argument, NULL, O_BSZ },
		{ "batch-tokens", required_argument, NULL, O_BTOK },
		{ "warmup", required_argument, NULL, O_WARM },
		{ "decay-steps", required_argument, NULL, O_DECAY },
		{ "min-lr", required_argument, NULL, O_MINLR },
		{ "schedule", required_argument, NULL, O_SCHED },
		{ "clip-grad", required_argument, NULL, O_CLIPG },
		{ "weight-decay", required_argument, NULL, O_WD },
		{ "beta1", required_argument, NULL, O_B1 },
		{ "beta2", required_argument, NULL, O_B2 },
		{ "eps", required_argument, NULL, O_EPS },
		{ "clip-low", required_argument, NULL, O_CLOW },
		{ "clip-high", required_argument, NULL, O_CHIGH },
		{ "no-std", no_argument, NULL, O_NOSTD },
		{ "norm", required_argument, NULL, O_NORM },
		{ "kl-coef", required_argument, NULL, O_KL },
		{ "ref", required_argument, NULL, O_REF },
		{ "distill-weight", required_argument, NULL, O_DW },
		{ "is-clip", required_argument, NULL, O_ISCLIP },
		{ "route", no_argument, NULL, O_ROUTE },
		{ "topk-first-miss", no_argument, NULL, O_TOPK_FIRST },
		{ "keep", required_argument, NULL, O_KEEP },
		{ "dtype", required_argument, NULL, O_DTYPE },
		{ "seed", required_argument, NULL, O_SEED },
		{ "skip-bad", no_argument, NULL, O_SKIPBAD },
		{ "truncate", no_argument, NULL, O_TRUNC },
		{ "private", required_argument, NULL, O_PRIVATE },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct fw_run_opts ro;
	struct fw_train_cfg *cfg = &ro.cfg;
	struct fw_run *run = NULL;
	struct reading rd = { 0 };
	int progress = 0;
	uint64_t shard_k = 0, shard_n = 0;
	const char *mout = NULL, *device = NULL;
	int level = -1, rc = FW_EXIT_OK, c, li = 0;
	int rank = fw_dp_rank(dp), size = fw_dp_size(dp);
	uint64_t u;
	double d, dw = -1;
	struct fw_intern private_ids = { 0 };
	const char *privf[16];
	size_t nprivf = 0;

	fw_run_opts_defaults(&ro);
	if (size > 1) {
		cfg->allreduce = fw_dp_sum_d;
		cfg->allreduce_f = fw_dp_sum_f;
		cfg->ctx = dp;
	}
	while ((c = getopt_long(argc, argv, "ho:zj:", lo, &li)) != -1) {
		if (c >= O_LR && c <= O_ISCLIP && num_opt(lo[li].name, optarg, &d))
			return FW_EXIT_USAGE;
		switch (c) {
		case O_LR: cfg->adamw.lr = (float)d; ro.have_lr = 1; break;
		case O_MINLR: cfg->min_lr = d; ro.have_min_lr = 1; break;
		case O_CLIPG: cfg->adamw.clip = (float)d; break;
		case O_WD: cfg->adamw.wd = (float)d; break;
		case O_B1:
			if (d >= 1)
				return FW_EXIT_USAGE;
			cfg->adamw.b1 = (float)d;
			break;
		case O_B2:
			if (d >= 1)
				return FW_EXIT_USAGE;
			cfg->adamw.b2 = (float)d;
			break;
		case O_EPS: cfg->adamw.eps = (float)d; break;
		case O_CLOW: cfg->clip_low = d; break;
		case O_CHIGH: cfg->clip_high = d; break;
		case O_KL: cfg->kl_coef = d; break;
		case O_DW: dw = d; break;
		case O_ISCLIP:
			if (!(d > 0))
				return FW_EXIT_USAGE;
			cfg->is_clip = d;
			break;
		case O_CKPT: ro.ckpt = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_OUT: ro.out = optarg; break;
		case O_OBJ:
			if (fw_train_parse_objective(optarg, cfg))
				return fw_usage_fail("bad --objective '%s'", optarg);
			break;
		case O_STEPS:
			if (fw_parse_u64(optarg, &ro.steps, 0) || ro.steps < 1 || ro.steps > 1 << 24)
				return fw_usage_fail("bad --steps '%s'", optarg);
			break;
		case O_BSZ:
			if (fw_parse_u64(optarg, &ro.batch_size, 0) || ro.batch_size > INT_MAX)
				return fw_usage_fail("bad --batch-size '%s'", optarg);
			break;
		case O_BTOK:
			if (fw_parse_u64(optarg, &u, 1) || u < 1 || u > (1ull << 32))
				return fw_usage_fail("bad --batch-tokens '%s'", optarg);
			cfg->batch_tokens = (long)u;
			break;
		case O_WARM:
			if (fw_parse_u64(optarg, &u, 0) || u > 1ull << 40)
				return fw_usage_fail("bad --warmup '%s'", optarg);
			cfg->warmup = (long)u;
			ro.have_warmup = 1;
			break;
		case O_DECAY:
			if (fw_parse_u64(optarg, &u, 0) || u > 1ull << 40)
				return fw_usage_fail("bad --decay-steps '%s'", optarg);
			cfg->decay_steps = (long)u;
			ro.have_decay = 1;
			break;
		case O_SCHED:
			if (!strcmp(optarg, "cosine"))
				cfg->sched = FW_SCHED_COSINE;
			else if (!strcmp(optarg, "constant"))
				cfg->sched = FW_SCHED_CONSTANT;
			else
				return fw_usage_fail("bad --schedule '%s'", optarg);
			ro.have_sched = 1;
			break;
		case O_NOSTD: ro.no_std = 1; break;
		case O_ROUTE: cfg->route = 1; break;
		case O_TOPK_FIRST: cfg->topk_first_miss = 1; break;
		case O_NORM:
			if (!strcmp(optarg, "token"))
				cfg->norm_seq = 0;
			else if (!strcmp(optarg, "seq"))
				cfg->norm_seq = 1;
			else
				return fw_usage_fail("bad --norm '%s' (token, seq)", optarg);
			break;
		case O_REF: ro.ref = optarg; break;
		case O_KEEP:
			if (fw_parse_u64(optarg, &u, 0) || u > INT_MAX)
				return fw_usage_fail("bad --keep '%s'", optarg);
			ro.keep = (int)u;
			break;
		case O_DTYPE:
			if (fw_dtype_parse(optarg, &ro.dtype))
				return fw_usage_fail("bad --dtype '%s' (f32, bf16, f16)", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &ro.seed, 0))
				return fw_usage_fail("bad --seed '%s'", optarg);
			ro.have_seed = 1;
			break;
		case O_SKIPBAD: rd.skip_bad = 1; break;
		case O_TRUNC: ro.truncate = 1; break;
		case O_PRIVATE:
			if (nprivf == sizeof(privf) / sizeof(*privf))
				return fw_usage_fail("%s", "too many --private files");
			privf[nprivf++] = optarg;
			break;
		case O_PROGRESS: progress = 1; break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &shard_k, &shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case 'o': mout = optarg; break;
		case 'z': level = 3; break;
		case 'j':
			/* -j N is N parallel workers in every tool; train-step
			 * has none, and a thread count must not pass for one */
			return fw_usage_fail("%s", "-j counts parallel workers and train-step runs "
					     "none; use --threads N for the kernels' threads");
		case O_THREADS:
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 1024)
				return fw_usage_fail("bad --threads '%s'", optarg);
			fw_kernels_set_threads((int)u);
			break;
		case 'h':
			fw_help();
			return FW_EXIT_OK;
		case O_VERSION:
			fw_print_version();
			return FW_EXIT_OK;
		default:
			return fw_usage_exit();
		}
	}
	if (!ro.ckpt || !ro.out)
		return fw_usage_fail("%s", "--ckpt and --out are required");
	if (dw >= 0) {
		if (cfg->w_distill == 0)
			return fw_usage_fail("%s", "--distill-weight needs the distill objective");
		cfg->w_distill = dw;
	}
	if (cfg->kl_coef > 0 && !ro.ref)
		return fw_usage_fail("%s", "--kl-coef needs --ref DIR");
	for (size_t i = 0; i < nprivf; i++)
		if (fw_private_load(privf[i], &private_ids, err, sizeof(err)))
			goto fail;

	/* The device (--device, $FW_DEVICE, else a GPU when there is one);
	 * data-parallel ranks on GPUs sum their gradients with NCCL. */
	if (fw_dev_select(device, err, sizeof(err)) < 0)
		goto fail;
	if (size > 1 && fw_dev_current() == FW_DEV_CUDA) {
		if (fw_dev_comm_init(rank, size, fw_dp_bcast_bytes, dp, err, sizeof(err)))
			goto fail;
		cfg->allreduce_dev = fw_dev_comm_sum;
	}
	/* The checkpoint, its optimizer state and where training stands. */
	if (!(run = fw_run_open(&ro, err, sizeof(err))))
		goto fail;

	/* The records, every bad one reported before the run stops. */
	rd.run = run;
	rd.private_ids = &private_ids;
	struct fw_each e = { .go_on = 1, .progress = rank == 0 ? progress : -1,
			     .shard_k = shard_k, .shard_n = shard_n, .arg = &rd };
	if (fw_each_record(&e, argc, argv, optind, add_one) != FW_EXIT_OK || rd.bad)
		rc = FW_EXIT_DATA;
	if (rd.nprivate) {
		fw_warn("no step taken: %ld record(s) of private tasks in the training input",
			rd.nprivate);
		rc = FW_EXIT_DATA;
		goto out;
	}
	if (rc != FW_EXIT_OK) {
		fw_warn("no step taken: bad input (--skip-bad trains on the rest)");
		goto out;
	}

	/* The steps, then the new checkpoint and what each step measured:
	 * rank 0 writes. */
	if (fw_run_prepare(run, err, sizeof(err)))
		goto fail;
	if (run->gs.no_reward)
		fw_warn("%d records without a finite 'grade.reward' are left out of pg",
			run->gs.no_reward);
	struct fw_progress meter;
	fw_progress_start(&meter, rank == 0 ? progress : -1);
	fw_progress_steps(&meter, run->o->steps);
	run->on_step = tick_step;
	run->on_step_ctx = &meter;
	int failed = fw_run_steps(run, rank, size, err, sizeof(err));
	if (failed) {
		fw_progress_pause(&meter);
		fw_warn("step %ld: %s; no checkpoint written", run->failed_step, err);
		rc = FW_EXIT_DATA;
		goto out;
	}
	fw_progress_end(&meter);
	if (rank == 0 && (fw_run_save(run, err, sizeof(err)) ||
			  fw_run_write_metrics(run, mout, level, rd.skipped, err, sizeof(err))))
		goto fail;
	goto out;
fail:
	fw_warn("%s", err);
	rc = FW_EXIT_DATA;
out:
	fw_run_free(run);
	fw_dev_comm_free();
	fw_intern_release(&private_ids);
	return rc;
}

int main(int argc, char **argv)
{
	struct fw_dp *dp;
	int rc;

	fw_cli_init("train-step");
	fw_usage_init(usage_text, options);
	if (!(dp = fw_dp_init(&argc, &argv, err, sizeof(err)))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	rc = run(argc, argv, dp);
	fw_dp_free(dp);
	if (fw_close_stdout() && rc == FW_EXIT_OK)
		rc = FW_EXIT_DATA;
	return rc;
}
