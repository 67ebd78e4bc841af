/*
 * train-step — optimizer steps on a checkpoint from a stream of training
 * records (sft, pg, distill), a new checkpoint written atomically, and a
 * metrics record per step.  See train-step(1).
 */
#include <errno.h>
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
	"usage: train-step --ckpt DIR --out DIR [--objective sft|pg|distill[:W][,...]]\n"
	"                  [--lr X] [--steps N] [--batch-size N] [--batch-tokens N]\n"
	"                  [--warmup N] [--decay-steps N] [--min-lr F] [--schedule cosine|constant]\n"
	"                  [--clip-grad X] [--weight-decay X] [--beta1 X] [--beta2 X] [--eps X]\n"
	"                  [--clip-low X] [--clip-high X] [--no-std] [--norm token|seq]\n"
	"                  [--kl-coef X] [--ref DIR] [--distill-weight X] [--is-clip X] [--route]\n"
	"                  [--keep N] [--dtype f32|bf16|f16] [--seed S] [--skip-bad] [--truncate]\n"
	"                  [--device cpu|cuda[:N]]\n"
	"                  [--progress] [-o OUT] [-z] [-j THREADS] [FILE...]\n"
	"                  [-h | --help] [--version]\n";

static const struct fw_opt_doc options[] = {
	{ "--ckpt DIR", "the checkpoint to start from" },
	{ "--out DIR", "where the new checkpoint goes" },
	{ "--objective sft|pg|distill[:W][,...]", "the objectives and their weights (default sft)" },
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
	{ "--keep N", "remove all but the N newest step directories" },
	{ "--dtype f32|bf16|f16", "the precision of the model on a GPU" },
	{ "--seed S", "seed of the data order (default the checkpoint's)" },
	{ "--skip-bad", "skip records that cannot be trained on, and count them" },
	{ "--truncate", "cut a sequence longer than max_position_embeddings instead of refusing it" },
	{ "--device cpu|cuda[:N]", "where the step runs" },
	{ "--progress", "a progress meter of steps on standard error even when it is not a terminal" },
	{ "-o OUT", "write the metrics records, one per step, to OUT" },
	{ "-z", "compress the metrics with zstd" },
	{ "-j THREADS", "threads of the kernels (as FW_THREADS)" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

static char err[1024];

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
}

/* Parses "sft", "pg:0.5,distill" into the objective weights. */
static int parse_objective(const char *s, struct fw_train_cfg *c)
{
	char buf[256], *save = NULL, *tok;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	c->w_sft = c->w_pg = c->w_distill = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		double w = 1;

		if (colon) {
			*colon = 0;
			if (fw_parse_double(colon + 1, &w) || !(w > 0) || !isfinite(w))
				return -1;
		}
		if (!strcmp(tok, "sft"))
			c->w_sft = w;
		else if (!strcmp(tok, "pg"))
			c->w_pg = w;
		else if (!strcmp(tok, "distill"))
			c->w_distill = w;
		else
			return -1;
	}
	return c->w_sft + c->w_pg + c->w_distill > 0 ? 0 : -1;
}

static int put_metrics(struct fw_writer *w, struct fw_buf *b, long step,
		       const char *ckpt, const char *dir, const struct fw_step_stats *st,
		       const struct fw_group_stats *gs, int pg, long skipped_records,
		       double load_s, double save_s)
{
	msgpack_packer pk;
	char id[17], key[64];
	int n = 21 + (pg ? 8 : 0);

	snprintf(key, sizeof(key), "%s/%ld", ckpt, step);
	snprintf(id, sizeof(id), "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
	fw_buf_reset(b);
	fw_buf_packer(&pk, b);
	msgpack_pack_map(&pk, n);
#define KEY(k) msgpack_pack_str_with_body(&pk, k, strlen(k))
#define STR(k, v) (KEY(k), msgpack_pack_str_with_body(&pk, v, strlen(v)))
#define NUM(k, v) (KEY(k), msgpack_pack_double(&pk, v))
#define INT(k, v) (KEY(k), msgpack_pack_int64(&pk, v))
	STR("kind", "metrics");
	STR("id", id);
	INT("v", 1);
	INT("step", step);
	STR("ckpt", ckpt);
	STR("ckpt_dir", dir);
	NUM("lr", st->lr);
	NUM("loss", st->loss);
	NUM("loss_sft", st->loss_sft);
	NUM("loss_pg", st->loss_pg);
	NUM("loss_distill", st->loss_distill);
	NUM("kl", st->kl);
	NUM("grad_norm", st->grad_norm);
	INT("tokens", st->tokens);
	INT("seqs", st->seqs);
	NUM("tok_per_s", st->seconds > 0 ? st->tokens / st->seconds : 0);
	NUM("clip_frac", st->clip_frac);
	NUM("is_clip_frac", st->is_clip_frac);
	INT("skipped_records", skipped_records);
	NUM("load_s", load_s);
	NUM("save_s", save_s);
	if (pg) {
		NUM("reward_mean", gs->reward_mean);
		NUM("reward_std", gs->reward_std);
		NUM("adv_mean", gs->adv_mean);
		NUM("adv_std", gs->adv_std);
		NUM("adv_min", gs->adv_min);
		NUM("adv_max", gs->adv_max);
		INT("groups", gs->groups);
		INT("skipped_groups", gs->skipped);
	}
#undef KEY
#undef STR
#undef NUM
#undef INT
	return fw_writer_put(w, b->p, b->n);
}

enum { O_CKPT = 256, O_OUT, O_OBJ, O_LR, O_STEPS, O_BSZ, O_BTOK, O_WARM,
       O_DECAY, O_MINLR, O_SCHED, O_CLIPG, O_WD, O_B1, O_B2, O_EPS, O_CLOW,
       O_CHIGH, O_NOSTD, O_NORM, O_KL, O_REF, O_DW, O_ISCLIP, O_KEEP,
       O_DTYPE, O_SEED, O_SKIPBAD, O_TRUNC, O_DEVICE, O_ROUTE, O_VERSION, O_PROGRESS };

static int num_opt(const char *name, const char *arg, double lo, double *out)
{
	if (fw_parse_double(arg, out) || !isfinite(*out) || *out < lo) {
		fprintf(stderr, "%s: bad --%s '%s'\n", fw_prog, name, arg);
		usage(stderr);
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
		{ "keep", required_argument, NULL, O_KEEP },
		{ "dtype", required_argument, NULL, O_DTYPE },
		{ "seed", required_argument, NULL, O_SEED },
		{ "skip-bad", no_argument, NULL, O_SKIPBAD },
		{ "truncate", no_argument, NULL, O_TRUNC },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	static char *stdin_only[] = { "-" };
	struct fw_train_cfg cfg;
	struct fw_train_state state;
	struct fw_group_stats gs = { 0 };
	const char *ckpt_arg = NULL, *out_dir = NULL, *ref_dir = NULL, *mout = NULL;
	const char *device = NULL;
	char ckdir[PATH_MAX], path[PATH_MAX + 32], newdir[PATH_MAX], parent[17];
	int have_lr = 0, have_warm = 0, have_decay = 0, have_min = 0, have_sched = 0;
	int progress = 0, level = -1, no_std = 0, skip_bad = 0, truncate = 0, keep = 0, have_seed = 0, rc = FW_EXIT_OK;
	enum fw_dtype dtype = FW_F32;
	uint64_t steps = 1, bsz = 0, u, seed = 0;
	double d, dw = -1;
	long skipped = 0;
	double t_load = 0, t_save = 0;
	struct fw_model *m = NULL, *ref = NULL;
	struct fw_opt *opt = NULL;
	struct fw_tok *tok = NULL;
	struct fw_batch *b = NULL;
	struct fw_step_stats *sts = NULL;
	struct fw_writer *w = NULL;
	struct fw_buf mb = { 0 };
	int *order = NULL, *idx = NULL, c, rank = fw_dp_rank(dp), size = fw_dp_size(dp);
	char **files;
	int nfiles;

	fw_train_defaults(&cfg);
	if (size > 1) {
		cfg.allreduce = fw_dp_sum_d;
		cfg.allreduce_f = fw_dp_sum_f;
		cfg.ctx = dp;
	}
	while ((c = getopt_long(argc, argv, "ho:zj:", lo, NULL)) != -1) {
		switch (c) {
		case O_CKPT: ckpt_arg = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_OUT: out_dir = optarg; break;
		case O_OBJ:
			if (parse_objective(optarg, &cfg))
				return usage_error("bad --objective '%s'", optarg);
			break;
		case O_LR:
			if (num_opt("lr", optarg, 0, &d))
				return FW_EXIT_USAGE;
			cfg.adamw.lr = (float)d;
			have_lr = 1;
			break;
		case O_STEPS:
			if (fw_parse_u64(optarg, &steps, 0) || steps < 1 || steps > 1 << 24)
				return usage_error("bad --steps '%s'", optarg);
			break;
		case O_BSZ:
			if (fw_parse_u64(optarg, &bsz, 0) || bsz > INT_MAX)
				return usage_error("bad --batch-size '%s'", optarg);
			break;
		case O_BTOK:
			if (fw_parse_u64(optarg, &u, 1) || u < 1 || u > (1ull << 32))
				return usage_error("bad --batch-tokens '%s'", optarg);
			cfg.batch_tokens = (long)u;
			break;
		case O_WARM:
			if (fw_parse_u64(optarg, &u, 0) || u > 1ull << 40)
				return usage_error("bad --warmup '%s'", optarg);
			cfg.warmup = (long)u;
			have_warm = 1;
			break;
		case O_DECAY:
			if (fw_parse_u64(optarg, &u, 0) || u > 1ull << 40)
				return usage_error("bad --decay-steps '%s'", optarg);
			cfg.decay_steps = (long)u;
			have_decay = 1;
			break;
		case O_MINLR:
			if (num_opt("min-lr", optarg, 0, &cfg.min_lr))
				return FW_EXIT_USAGE;
			have_min = 1;
			break;
		case O_SCHED:
			if (!strcmp(optarg, "cosine"))
				cfg.sched = FW_SCHED_COSINE;
			else if (!strcmp(optarg, "constant"))
				cfg.sched = FW_SCHED_CONSTANT;
			else
				return usage_error("bad --schedule '%s'", optarg);
			have_sched = 1;
			break;
		case O_CLIPG:
			if (num_opt("clip-grad", optarg, 0, &d))
				return FW_EXIT_USAGE;
			cfg.adamw.clip = (float)d;
			break;
		case O_WD:
			if (num_opt("weight-decay", optarg, 0, &d))
				return FW_EXIT_USAGE;
			cfg.adamw.wd = (float)d;
			break;
		case O_B1:
			if (num_opt("beta1", optarg, 0, &d) || d >= 1)
				return FW_EXIT_USAGE;
			cfg.adamw.b1 = (float)d;
			break;
		case O_B2:
			if (num_opt("beta2", optarg, 0, &d) || d >= 1)
				return FW_EXIT_USAGE;
			cfg.adamw.b2 = (float)d;
			break;
		case O_EPS:
			if (num_opt("eps", optarg, 0, &d))
				return FW_EXIT_USAGE;
			cfg.adamw.eps = (float)d;
			break;
		case O_CLOW:
			if (num_opt("clip-low", optarg, 0, &cfg.clip_low))
				return FW_EXIT_USAGE;
			break;
		case O_CHIGH:
			if (num_opt("clip-high", optarg, 0, &cfg.clip_high))
				return FW_EXIT_USAGE;
			break;
		case O_NOSTD: no_std = 1; break;
		case O_ROUTE: cfg.route = 1; break;
		case O_NORM:
			if (!strcmp(optarg, "token"))
				cfg.norm_seq = 0;
			else if (!strcmp(optarg, "seq"))
				cfg.norm_seq = 1;
			else
				return usage_error("bad --norm '%s' (token, seq)", optarg);
			break;
		case O_KL:
			if (num_opt("kl-coef", optarg, 0, &cfg.kl_coef))
				return FW_EXIT_USAGE;
			break;
		case O_REF: ref_dir = optarg; break;
		case O_DW:
			if (num_opt("distill-weight", optarg, 0, &dw))
				return FW_EXIT_USAGE;
			break;
		case O_ISCLIP:
			if (num_opt("is-clip", optarg, 0, &cfg.is_clip) || !(cfg.is_clip > 0))
				return FW_EXIT_USAGE;
			break;
		case O_KEEP:
			if (fw_parse_u64(optarg, &u, 0) || u > INT_MAX)
				return usage_error("bad --keep '%s'", optarg);
			keep = (int)u;
			break;
		case O_DTYPE:
			if (fw_dtype_parse(optarg, &dtype))
				return usage_error("bad --dtype '%s' (f32, bf16, f16)", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &seed, 0))
				return usage_error("bad --seed '%s'", optarg);
			have_seed = 1;
			break;
		case O_SKIPBAD: skip_bad = 1; break;
		case O_TRUNC: truncate = 1; break;
		case O_PROGRESS: progress = 1; break;
		case 'o': mout = optarg; break;
		case 'z': level = 3; break;
		case 'j':
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 1024)
				return usage_error("bad -j '%s'", optarg);
			fw_kernels_set_threads((int)u);
			break;
		case 'h':
			fw_help();
			return FW_EXIT_OK;
		case O_VERSION:
			fw_print_version();
			return FW_EXIT_OK;
		default:
			usage(stderr);
			return FW_EXIT_USAGE;
		}
	}
	if (!ckpt_arg || !out_dir)
		return usage_error("%s", "--ckpt and --out are required");
	if (dw >= 0) {
		if (cfg.w_distill == 0)
			return usage_error("%s", "--distill-weight needs the distill objective");
		cfg.w_distill = dw;
	}
	if (cfg.kl_coef > 0 && !ref_dir)
		return usage_error("%s", "--kl-coef needs --ref DIR");
	files = optind < argc ? argv + optind : stdin_only;
	nfiles = optind < argc ? argc - optind : 1;

	/* The device (--device, $FW_DEVICE, else a GPU when there is one);
	 * data-parallel ranks on GPUs sum their gradients with NCCL. */
	if (fw_dev_select(device, err, sizeof(err)) < 0)
		goto fail;
	if (size > 1 && fw_dev_current() == FW_DEV_CUDA) {
		if (fw_dev_comm_init(rank, size, fw_dp_bcast_bytes, dp, err, sizeof(err)))
			goto fail;
		cfg.allreduce_dev = fw_dev_comm_sum;
	}
	/* The checkpoint, its optimizer state and where training stands. */
	t_load = fw_now();
	if (fw_ckpt_resolve(ckpt_arg, ckdir, sizeof(ckdir), err, sizeof(err)) ||
	    !(m = fw_model_load(ckdir, err, sizeof(err))) ||
	    fw_train_state_load(&state, ckdir, err, sizeof(err)))
		goto fail;
	if (!(opt = fw_opt_new(m)) || fw_model_grads(m)) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/optimizer.safetensors", ckdir);
	if (!access(path, F_OK) && fw_opt_load(opt, m, path, err, sizeof(err)))
		goto fail;
	if (state.step != opt->step && !access(path, F_OK)) {
		snprintf(err, sizeof(err), "%.900s: step %ld, but trainer_state.json says %ld",
			 path, opt->step, state.step);
		goto fail;
	}
	opt->step = state.step;
	t_load = fw_now() - t_load;
	/* The schedule continues as the checkpoint has it unless told. */
	if (state.have_sched) {
		if (!have_lr)
			cfg.adamw.lr = (float)state.lr;
		if (!have_warm)
			cfg.warmup = state.warmup;
		if (!have_decay)
			cfg.decay_steps = state.decay_steps;
		if (!have_min)
			cfg.min_lr = state.min_lr;
		if (!have_sched)
			cfg.sched = state.sched;
	}
	if (ref_dir) {
		char rd[PATH_MAX];

		if (fw_ckpt_resolve(ref_dir, rd, sizeof(rd), err, sizeof(err)) ||
		    !(ref = fw_model_load(rd, err, sizeof(err))))
			goto fail;
		if (ref->cfg.vocab != m->cfg.vocab) {
			snprintf(err, sizeof(err), "%.900s: vocabulary of %d ids, the policy has %d",
				 rd, ref->cfg.vocab, m->cfg.vocab);
			goto fail;
		}
		ref->no_grad = 1;
	}
	snprintf(path, sizeof(path), "%s/tokenizer.json", ckdir);
	if (!access(path, F_OK) && !(tok = fw_tok_load(path, err, sizeof(err))))
		goto fail;

	/* The records. */
	if (!(b = fw_batch_new()))
		goto oom;
	for (int f = 0; f < nfiles; f++) {
		struct fw_reader *r = fw_reader_open(files[f], NULL, err, sizeof(err));
		struct fw_rec rec;
		int got;

		if (!r) {
			fw_warn("%s", err);
			rc = FW_EXIT_DATA;
			continue;
		}
		while ((got = fw_reader_next(r, &rec)) != 0) {
			if (got < 0) {
				fw_warn_reader(r);
				rc = FW_EXIT_DATA;
				if (!fw_reader_recoverable(r))
					break;
				continue;
			}
			got = fw_batch_add_record(b, rec.v, tok, m->cfg.vocab, m->cfg.max_pos, truncate,
						  err, sizeof(err));
			if (got) {
				fw_warn_rec(fw_reader_name(r), rec.index, rec.offset, "%s", err);
				skipped++;
				if (!skip_bad)
					rc = FW_EXIT_DATA;
			}
		}
		fw_reader_close(r);
	}
	if (rc != FW_EXIT_OK) {
		fw_warn("no step taken: bad input (--skip-bad trains on the rest)");
		goto out;
	}
	if (b->nseq == 0) {
		snprintf(err, sizeof(err), "no trainable records");
		goto fail;
	}
	if (cfg.w_pg > 0) {
		fw_batch_advantages(b, no_std, &gs);
		if (gs.no_reward)
			fw_warn("%d records without a finite 'grade.reward' are left out of pg",
				gs.no_reward);
	}

	/* The steps: --batch-size sequences each, cycling through the input
	 * from the position the checkpoint reached. */
	if (!(order = malloc(sizeof(int) * b->nseq)) ||
	    !(idx = malloc(sizeof(int) * (bsz ? bsz : (uint64_t)b->nseq))) ||
	    !(sts = calloc(steps, sizeof(*sts))))
		goto oom;
	for (int i = 0; i < b->nseq; i++)
		order[i] = i;
	/* The order continues as the checkpoint drew it unless told. */
	if (!have_seed && state.have_seed) {
		seed = state.seed;
		have_seed = 1;
	}
	state.seed = seed;
	state.have_seed = have_seed;
	if (have_seed) {
		uint64_t x = seed;

		for (int i = b->nseq - 1; i > 0; i--) {
			int j = (int)(fw_rand64(&x) % (uint64_t)(i + 1)), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
	}
	if (!bsz || bsz > (uint64_t)b->nseq)
		bsz = b->nseq;
	{
		/* The data position carries over only to the same input. */
		char did[17];
		uint64_t h = fw_hash64(b->tok, sizeof(int32_t) * b->ntok) ^
			     fw_hash64(b->mask, b->ntok) * 31 ^ (uint64_t)b->nseq;

		snprintf(did, sizeof(did), "%016llx", (unsigned long long)h);
		if (strcmp(did, state.data_id) || state.data_pos >= b->nseq)
			state.data_pos = 0;
		memcpy(state.data_id, did, sizeof(did));
	}
	snprintf(parent, sizeof(parent), "%s", state.id);
	if (!parent[0])
		fw_ckpt_id(m, parent);
	struct fw_progress meter;
	fw_progress_start(&meter, progress);
	meter.on = meter.on && rank == 0;
	fw_progress_steps(&meter, steps);
	for (uint64_t s = 0; s < steps; s++) {
		int nl = 0;

		/* Rank r of N takes every Nth sequence of the step's batch. */
		for (uint64_t k = rank; k < bsz; k += size)
			idx[nl++] = order[(state.data_pos + k) % b->nseq];
		if (fw_train_step(m, opt, ref, &cfg, b, idx, nl, &sts[s], err, sizeof(err))) {
			fw_progress_pause(&meter);
			fw_warn("step %ld: %s; no checkpoint written", opt->step + 1, err);
			rc = FW_EXIT_DATA;
			goto out;
		}
		state.data_pos = (long)((state.data_pos + bsz) % b->nseq);
		state.tokens_seen += sts[s].tokens;
		fw_progress_tick(&meter, s + 1, 0);
	}
	fw_progress_end(&meter);

	/* The new checkpoint, then what each step measured: rank 0 writes. */
	if (rank != 0)
		goto out;
	t_save = fw_now();
	state.step = opt->step;
	snprintf(state.parent, sizeof(state.parent), "%s", parent);
	fw_ckpt_id(m, state.id);
	state.lr = cfg.adamw.lr;
	state.min_lr = cfg.min_lr;
	state.warmup = cfg.warmup;
	state.decay_steps = cfg.decay_steps;
	state.sched = cfg.sched;
	snprintf(path, sizeof(path), "%s/tokenizer.json", ckdir);
	if (fw_ckpt_write(out_dir, m, opt, &state, path, dtype, keep, newdir,
			  sizeof(newdir), err, sizeof(err)))
		goto fail;
	t_save = fw_now() - t_save;
	if (!(w = fw_writer_open(mout, level, err, sizeof(err))))
		goto fail;
	for (uint64_t s = 0; s < steps; s++)
		if (put_metrics(w, &mb, state.step - (long)steps + 1 + (long)s, state.id, newdir,
				&sts[s], &gs, cfg.w_pg > 0, skipped, t_load, t_save)) {
			fw_warn("%s", fw_writer_error(w));
			rc = FW_EXIT_DATA;
			goto out;
		}
	if (fw_writer_close(w, err, sizeof(err))) {
		w = NULL;
		goto fail;
	}
	w = NULL;
	goto out;
oom:
	snprintf(err, sizeof(err), "out of memory");
fail:
	fw_warn("%s", err);
	rc = FW_EXIT_DATA;
out:
	fw_writer_abort(w);
	fw_buf_free(&mb);
	free(order);
	free(idx);
	free(sts);
	fw_batch_free(b);
	fw_tok_free(tok);
	fw_opt_free(opt);
	fw_model_free(ref);
	fw_model_free(m);
	fw_dev_comm_free();
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
