/*
 * fw_judge.c — rubrics, judges, mixed rewards and agreement (see
 * fw_judge.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_grade.h"
#include "fw_json.h"
#include "fw_model.h"
#include "fw_judge.h"
#include "fw_stats.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_tok.h"

static const char *const yesno_labels[] = { "yes", "no" };
static const char *const likert_labels[] = { "1", "2", "3", "4", "5" };

/* ---- rubrics ------------------------------------------------------------- */

/* The JSON object of a msgpack value (jansson), or NULL with err filled. */
static json_t *to_json(struct fw_mpv v, char *err, size_t errlen)
{
	struct fw_buf b = { 0 };
	json_error_t je;
	json_t *j;

	if (fw_json_from_mp(&b, v, err, errlen) < 0) {
		fw_buf_free(&b);
		return NULL;
	}
	/* a sampled reply may hold NUL bytes */
	j = json_loadb((const char *)b.p, b.n, JSON_ALLOW_NUL, &je);
	/* an integer beyond int64 (an agent episode's uint64 seed) is more
	 * than jansson holds: the record again with its integers as reals,
	 * which the judge reads as well */
	if (!j)
		j = json_loadb((const char *)b.p, b.n, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
	fw_buf_free(&b);
	if (!j)
		fw_seterr(err, errlen, "%s", je.text);
	return j;
}

static char *dup_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s && *s ? strdup(s) : NULL;
}

static int name_ok(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return 0;
	return 1;
}

static int set_scale(struct fw_criterion *c, const char *scale)
{
	if (!strcmp(scale, "yes/no")) {
		c->nlabels = 2;
		for (int i = 0; i < 2; i++) {
			c->labels[i] = yesno_labels[i];
			c->values[i] = 1 - i;
		}
		return 0;
	}
	if (!strcmp(scale, "1-5")) {
		c->nlabels = 5;
		for (int i = 0; i < 5; i++) {
			c->labels[i] = likert_labels[i];
			c->values[i] = i + 1;
		}
		return 0;
	}
	return -1;
}

void fw_rubric_free(struct fw_rubric *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->n; i++) {
		free(r->c[i].name);
		free(r->c[i].question);
		free(r->c[i].instruction);
		free(r->c[i].reference);
		for (int e = 0; e < r->c[i].nexpect; e++)
			free(r->c[i].expect[e]);
	}
	free(r->c);
	free(r->id);
	free(r->name);
	free(r);
}

/* Reference answers: a string, or a list of strings, joined by newlines. */
static char *references(json_t *v)
{
	if (json_is_string(v))
		return json_string_length(v) ? strdup(json_string_value(v)) : NULL;
	if (!json_is_array(v) || !json_array_size(v))
		return NULL;
	struct fw_buf b = { 0 };
	size_t i;
	json_t *x;
	json_array_foreach(v, i, x)
	{
		const char *s = json_string_value(x);
		if (!s)
			continue;
		if ((b.n && fw_buf_puts(&b, "\n") < 0) || fw_buf_puts(&b, s) < 0) {
			fw_buf_free(&b);
			return NULL;
		}
	}
	if (!b.n || fw_buf_append(&b, "", 1) < 0) {
		fw_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

struct fw_rubric *fw_rubric_parse(struct fw_mpv rec, char *err, size_t errlen)
{
	json_t *j = to_json(rec, err, errlen), *cs;
	struct fw_rubric *r = NULL;
	size_t i;

	if (!j)
		return NULL;
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "kind")) ||
	    strcmp(json_string_value(json_object_get(j, "kind")), "rubric")) {
		fw_seterr(err, errlen, "not a rubric record (kind is not 'rubric')");
		goto fail;
	}
	cs = json_object_get(j, "criteria");
	if (!json_is_array(cs) || !json_array_size(cs)) {
		fw_seterr(err, errlen, "rubric has no criteria (want a non-empty list 'criteria')");
		goto fail;
	}
	if (!(r = calloc(1, sizeof *r)) || !(r->c = calloc(json_array_size(cs), sizeof *r->c))) {
		fw_seterr(err, errlen, "out of memory");
		goto fail;
	}
	r->id = dup_str(j, "id");
	r->name = dup_str(j, "name");
	for (i = 0; i < json_array_size(cs); i++) {
		json_t *c = json_array_get(cs, i);
		struct fw_criterion *k = &r->c[r->n];
		const char *scale = json_string_value(json_object_get(c, "scale"));

		if (!json_is_object(c)) {
			fw_seterr(err, errlen, "criterion %zu: not a map", i + 1);
			goto fail;
		}
		k->name = dup_str(c, "name");
		r->n++;
		if (!name_ok(k->name)) {
			fw_seterr(err, errlen, "criterion %zu: name '%s' is not [A-Za-z0-9_.-]+", i + 1,
			       k->name ? k->name : "");
			goto fail;
		}
		if (fw_rubric_find(r, k->name) != r->n - 1) {
			fw_seterr(err, errlen, "criterion %zu: name '%s' is used twice", i + 1, k->name);
			goto fail;
		}
		if (!(k->question = dup_str(c, "question"))) {
			fw_seterr(err, errlen, "criterion %zu ('%s'): no question", i + 1, k->name);
			goto fail;
		}
		if (!scale || set_scale(k, scale) < 0) {
			fw_seterr(err, errlen, "criterion %zu ('%s'): scale '%s' is not yes/no or 1-5",
			       i + 1, k->name, scale ? scale : "");
			goto fail;
		}
		k->instruction = dup_str(c, "instruction");
		k->reference = references(json_object_get(c, "reference"));
		json_t *ex = json_object_get(c, "expect"), *x;
		size_t xi;
		if (json_is_string(ex)) {
			if (!(k->expect[0] = strdup(json_string_value(ex))))
				goto oom;
			k->nexpect = 1;
		} else if (json_is_array(ex) && json_array_size(ex) > 0 &&
			   json_array_size(ex) <= FW_JUDGE_MAX_EXPECT) {
			json_array_foreach(ex, xi, x)
			{
				if (!json_is_string(x)) {
					fw_seterr(err, errlen, "criterion %zu ('%s'): expect %zu is not a string",
					       i + 1, k->name, xi + 1);
					goto fail;
				}
				if (!(k->expect[k->nexpect] = strdup(json_string_value(x))))
					goto oom;
				k->nexpect++;
			}
		} else if (ex) {
			fw_seterr(err, errlen, "criterion %zu ('%s'): expect is not a string or a list "
			       "of 1 to %d strings", i + 1, k->name, FW_JUDGE_MAX_EXPECT);
			goto fail;
		}
	}
	json_decref(j);
	return r;
oom:
	fw_seterr(err, errlen, "out of memory");
fail:
	json_decref(j);
	fw_rubric_free(r);
	return NULL;
}

int fw_criterion_applies(const struct fw_criterion *c, struct fw_mpv rec)
{
	struct fw_mpv t, e;
	const char *s;
	size_t n;

	if (!c->nexpect)
		return 1;
	if (fw_mp_get(rec, "task", &t) != 1 || fw_mp_get(t, "expect", &e) != 1 ||
	    fw_mp_str(e, &s, &n) < 0)
		return 0;
	for (int i = 0; i < c->nexpect; i++)
		if (strlen(c->expect[i]) == n && !memcmp(c->expect[i], s, n))
			return 1;
	return 0;
}

struct fw_rubric *fw_rubric_load(const char *path, char *err, size_t errlen)
{
	struct fw_reader *rd = fw_reader_open(path, NULL, err, errlen);
	struct fw_rubric *r = NULL;
	struct fw_rec rec;
	int k;

	if (!rd)
		return NULL;
	while ((k = fw_reader_next(rd, &rec)) == 1) {
		struct fw_mpv kind;
		if (fw_mp_get(rec.v, "kind", &kind) == 1 && fw_mp_str_eq(kind, "rubric", 6)) {
			char e[200];
			if (!(r = fw_rubric_parse(rec.v, e, sizeof e)))
				fw_seterr(err, errlen, "%s: record %llu: %s", path,
				       (unsigned long long)rec.index + 1, e);
			break;
		}
	}
	if (k < 0)
		fw_seterr(err, errlen, "%s: record %llu: %s", path,
		       (unsigned long long)fw_reader_index(rd) + 1, fw_reader_error(rd));
	else if (k == 0)
		fw_seterr(err, errlen, "%s: no rubric record", path);
	fw_reader_close(rd);
	return r;
}

int fw_rubric_find(const struct fw_rubric *r, const char *name)
{
	for (int i = 0; i < r->n; i++)
		if (r->c[i].name && !strcmp(r->c[i].name, name))
			return i;
	return -1;
}

/* ---- the judge prompt ----------------------------------------------------- */

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* The transcript of a record's turns, one block per turn. */
static int transcript(struct fw_buf *b, json_t *turns)
{
	size_t i;
	json_t *t;

	json_array_foreach(turns, i, t)
	{
		const char *role = jstr(t, "role"), *text = jstr(t, "text");
		json_t *calls = json_object_get(t, "calls"), *c;
		size_t k;

		if (fw_buf_printf(b, "[%s] %s\n", *role ? role : "?", text) < 0)
			return -1;
		json_array_foreach(calls, k, c)
		{
			if (fw_buf_printf(b, "[%s calls %s] %s\n", role, jstr(c, "name"),
					  jstr(c, "args")) < 0)
				return -1;
		}
	}
	return 0;
}

int fw_judge_prompt(struct fw_buf *out, const struct fw_rubric *r, int ci, struct fw_mpv rec,
		    size_t max_chars)
{
	const struct fw_criterion *c = &r->c[ci];
	struct fw_buf head = { 0 }, body = { 0 }, tail = { 0 };
	char e[200];
	json_t *j = to_json(rec, e, sizeof e), *task;
	const char *request = "", *patch;
	int rc = -1;

	if (!j)
		return -1;
	task = json_object_get(j, "task");
	if (json_is_object(task))
		request = jstr(task, "prompt");
	patch = jstr(j, "patch");
	if (fw_buf_printf(&head, "You are a judge of a coding agent's work.%s%s\n\n",
			  c->instruction ? " " : "", c->instruction ? c->instruction : "") < 0 ||
	    (*request && fw_buf_printf(&head, "The request:\n%s\n\n", request) < 0) ||
	    fw_buf_puts(&body, "The transcript:\n") < 0 ||
	    transcript(&body, json_object_get(j, "turns")) < 0 ||
	    (*patch && fw_buf_printf(&body, "\nThe patch:\n%s\n", patch) < 0) ||
	    (c->reference && fw_buf_printf(&tail, "\nReference answers:\n%s\n", c->reference) < 0) ||
	    fw_buf_printf(&tail, "\nQuestion: %s\nAnswer with one of:", c->question) < 0)
		goto done;
	for (int i = 0; i < c->nlabels; i++)
		if (fw_buf_printf(&tail, " %s", c->labels[i]) < 0)
			goto done;
	if (fw_buf_puts(&tail, ".\nAnswer:") < 0)
		goto done;
	size_t skip = 0, fixed = head.n + tail.n;
	/* the transcript gives way from its start: the question, the
	 * request and the end of the work stay */
	if (max_chars && fixed + body.n > max_chars)
		skip = fixed >= max_chars ? body.n : body.n - (max_chars - fixed);
	if (fw_buf_append(out, head.p, head.n) < 0 ||
	    (skip && fw_buf_puts(out, "[… transcript cut …]\n") < 0) ||
	    fw_buf_append(out, body.p + skip, body.n - skip) < 0 ||
	    fw_buf_append(out, tail.p, tail.n) < 0)
		goto done;
	rc = 0;
done:
	fw_buf_free(&head);
	fw_buf_free(&body);
	fw_buf_free(&tail);
	json_decref(j);
	return rc;
}

/* ---- judges ----------------------------------------------------------------- */

struct fw_judge {
	struct fw_teacher *T;  /* builtin: or http: */
	struct fw_tok *tok;    /* http: the tokenizer loaded from tok_dir */
	char *prog;            /* exec: */
	int max_pos;           /* http: the positions of tok_dir's config.json, or 0 */
	double timeout_s;
};

struct fw_judge *fw_judge_open(const char *spec, const char *tok_dir, double timeout_s,
			       int retries, char *err, size_t errlen)
{
	struct fw_judge *j = calloc(1, sizeof *j);

	if (!j) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	j->timeout_s = timeout_s;
	if (!strncmp(spec, "exec:", 5)) {
		if (!spec[5] || !(j->prog = strdup(spec + 5))) {
			fw_seterr(err, errlen, "exec: needs a program");
			goto fail;
		}
		return j;
	}
	if (!strncmp(spec, "http:", 5)) {
		char path[4096];
		if (!tok_dir) {
			fw_seterr(err, errlen, "an http judge needs a tokenizer (--judge-tokenizer DIR)");
			goto fail;
		}
		snprintf(path, sizeof path, "%s/tokenizer.json", tok_dir);
		if (!(j->tok = fw_tok_load(path, err, errlen)))
			goto fail;
		/* the server's model is tok_dir's: its positions bound the prompt */
		struct fw_config cfg;
		snprintf(path, sizeof path, "%s/config.json", tok_dir);
		if (access(path, R_OK) == 0 && fw_config_load(&cfg, path, NULL, 0) == 0)
			j->max_pos = cfg.max_pos;
	} else if (strncmp(spec, "builtin:", 8)) {
		fw_seterr(err, errlen, "want builtin:DIR, http:URL[#MODEL] or exec:PROG, not '%s'",
		       spec);
		goto fail;
	}
	if (!(j->T = fw_teacher_open(spec, timeout_s, retries, err, errlen)))
		goto fail;
	return j;
fail:
	fw_judge_free(j);
	return NULL;
}

void fw_judge_free(struct fw_judge *j)
{
	if (!j)
		return;
	fw_teacher_free(j->T);
	fw_tok_free(j->tok);
	free(j->prog);
	free(j);
}

/* The verdict from probabilities p over the labels that sum to z > 0. */
static void finish_p(struct fw_verdict *v, const struct fw_criterion *c, const double *p, double z)
{
	v->label = 0;
	v->score = 0;
	for (int i = 0; i < c->nlabels; i++) {
		v->p[i] = p[i] / z;
		v->score += v->p[i] * c->values[i];
		if (v->p[i] > v->p[v->label])
			v->label = i;
	}
}

/* The verdict from the labels' log-probabilities (a softmax). */
static void finish(struct fw_verdict *v, const struct fw_criterion *c, const double *lp)
{
	double mx = -INFINITY, z = 0, p[FW_JUDGE_MAX_LABELS];

	for (int i = 0; i < c->nlabels; i++)
		if (lp[i] > mx)
			mx = lp[i];
	for (int i = 0; i < c->nlabels; i++)
		z += p[i] = exp(lp[i] - mx);
	finish_p(v, c, p, z);
}

static int model_score(struct fw_judge *j, const struct fw_criterion *c, const char *prompt,
		       size_t plen, struct fw_verdict *v, char *err, size_t errlen)
{
	const struct fw_tok *t = j->tok ? j->tok : fw_teacher_tok(j->T);
	struct fw_tok_ids p = { 0 }, s = { 0 };
	int maxpos = j->tok ? j->max_pos : fw_teacher_max_pos(j->T), rc = -1;
	double lp[FW_JUDGE_MAX_LABELS];
	float *logp = NULL;

	if (fw_tok_encode(t, prompt, plen, FW_TOK_ADD_BOS, 0, &p) < 0)
		goto oom;
	for (int i = 0; i < c->nlabels; i++) {
		char lab[64];
		size_t keep, cut;

		snprintf(lab, sizeof lab, " %s", c->labels[i]);
		s.n = 0;
		if (fw_tok_encode(t, lab, strlen(lab), 0, 1, &s) < 0)
			goto oom;
		size_t L = s.n, P = p.n, start = 0;
		/* the prompt gives way from its start (after a BOS) so that it
		 * and the label fit the model's positions */
		keep = P;
		if (maxpos > 0 && P + L > (size_t)maxpos) {
			if (L + 2 > (size_t)maxpos) {
				fw_seterr(err, errlen, "the label '%s' does not fit %d positions",
				       c->labels[i], maxpos);
				goto done;
			}
			keep = (size_t)maxpos - L;
			start = P - keep;
		}
		long N = (long)(keep + L);
		int32_t *seq = malloc((size_t)N * sizeof *seq);
		float *lg = realloc(logp, (size_t)N * sizeof *logp);
		if (!seq || !lg) {
			free(seq);
			if (lg)
				logp = lg;
			goto oom;
		}
		logp = lg;
		cut = start && p.n && fw_tok_bos(t) >= 0 && p.ids[0] == fw_tok_bos(t);
		if (cut) {
			seq[0] = p.ids[0];
			memcpy(seq + 1, p.ids + start + 1, (keep - 1) * sizeof *seq);
		} else {
			memcpy(seq, p.ids + start, keep * sizeof *seq);
		}
		memcpy(seq + keep, s.ids, L * sizeof *seq);
		int k = fw_teacher_score(j->T, seq, N, logp, err, errlen);
		free(seq);
		if (k < 0)
			goto done;
		lp[i] = 0;
		for (size_t q = 0; q < L; q++)
			lp[i] += logp[keep - 1 + q];
	}
	finish(v, c, lp);
	snprintf(v->rationale, sizeof v->rationale, "p(%s) = %.3f from the judge's log-probs",
		 c->labels[v->label], v->p[v->label]);
	rc = 0;
	goto done;
oom:
	fw_seterr(err, errlen, "out of memory");
done:
	free(logp);
	fw_tok_ids_release(&p);
	fw_tok_ids_release(&s);
	return rc;
}

/* Runs prog with in on its stdin; its stdout (at most 1 MiB) into out.
 * Returns 0 when it exits 0 within timeout_s, else -1 with err filled. */
static int run_prog(const char *prog, const char *in, size_t inlen, double timeout_s,
		    struct fw_buf *out, char *err, size_t errlen)
{
	int pin[2], pout[2], status;
	pid_t pid;
	size_t off = 0;
	struct timespec t0, t1;

	if (pipe2(pin, O_CLOEXEC) < 0) {
		fw_seterr(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(pout, O_CLOEXEC) < 0) {
		fw_seterr(err, errlen, "pipe: %s", strerror(errno));
		close(pin[0]);
		close(pin[1]);
		return -1;
	}
	if ((pid = fork()) < 0) {
		fw_seterr(err, errlen, "fork: %s", strerror(errno));
		close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		execl("/bin/sh", "sh", "-c", prog, (char *)NULL);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int wfd = pin[1], rfd = pout[0], rc = -1;
	if (!inlen) {
		close(wfd);
		wfd = -1;
	}
	while (rfd >= 0) {
		struct pollfd fds[2] = { { rfd, POLLIN, 0 }, { wfd, POLLOUT, 0 } };
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double left = timeout_s - ((double)(t1.tv_sec - t0.tv_sec) +
					   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		if (timeout_s > 0 && left <= 0) {
			fw_seterr(err, errlen, "'%s' took more than %g s", prog, timeout_s);
			kill(pid, SIGKILL);
			goto reap;
		}
		if (poll(fds, wfd >= 0 ? 2 : 1, timeout_s > 0 ? (int)(left * 1000) + 1 : -1) < 0) {
			if (errno == EINTR)
				continue;
			fw_seterr(err, errlen, "poll: %s", strerror(errno));
			kill(pid, SIGKILL);
			goto reap;
		}
		if (wfd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			/* a program that stops reading must not kill the caller:
			 * SIGPIPE is held for the write and a pending one taken */
			sigset_t pipe_set, old;
			sigemptyset(&pipe_set);
			sigaddset(&pipe_set, SIGPIPE);
			pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
			ssize_t w = write(wfd, in + off, inlen - off);
			if (w < 0 && errno == EPIPE) {
				struct timespec zero = { 0, 0 };
				sigtimedwait(&pipe_set, NULL, &zero);
			}
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			if (w > 0)
				off += (size_t)w;
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				off = inlen; /* the program stopped reading: let it answer */
			if (off == inlen) {
				close(wfd);
				wfd = -1;
			}
		}
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[8192];
			ssize_t n = read(rfd, buf, sizeof buf);
			if (n > 0) {
				if (out->n + (size_t)n > (1u << 20)) {
					fw_seterr(err, errlen, "'%s' answered more than 1 MiB", prog);
					kill(pid, SIGKILL);
					goto reap;
				}
				if (fw_buf_append(out, buf, (size_t)n) < 0) {
					fw_seterr(err, errlen, "out of memory");
					kill(pid, SIGKILL);
					goto reap;
				}
			} else if (n == 0 || errno != EINTR) {
				close(rfd);
				rfd = -1;
			}
		}
	}
	rc = 0;
reap:
	if (wfd >= 0)
		close(wfd);
	if (rfd >= 0)
		close(rfd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		fw_seterr(err, errlen, "'%s' failed (%s %d)", prog,
		       WIFEXITED(status) ? "exit status" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		rc = -1;
	}
	return rc;
}

static int exec_score(struct fw_judge *j, const struct fw_rubric *r, int ci, struct fw_mpv rec,
		      const char *prompt, struct fw_verdict *v, char *err, size_t errlen)
{
	const struct fw_criterion *c = &r->c[ci];
	json_t *req = json_object(), *crit = json_object(), *labels = json_array(), *ans = NULL;
	char *text = NULL;
	struct fw_buf out = { 0 };
	json_error_t je;
	int rc = -1;

	json_t *recj = to_json(rec, err, errlen);
	if (!recj)
		goto done;
	for (int i = 0; i < c->nlabels; i++)
		json_array_append_new(labels, json_string(c->labels[i]));
	json_object_set_new(crit, "name", json_string(c->name));
	json_object_set_new(crit, "question", json_string(c->question));
	json_object_set_new(crit, "instruction", c->instruction ? json_string(c->instruction)
							      : json_null());
	json_object_set_new(crit, "reference", c->reference ? json_string(c->reference)
							  : json_null());
	json_object_set_new(crit, "labels", labels);
	labels = NULL;
	json_object_set_new(req, "rubric", r->id ? json_string(r->id) : json_null());
	json_object_set_new(req, "criterion", crit);
	crit = NULL;
	json_object_set_new(req, "prompt", json_string(prompt));
	json_object_set_new(req, "record", recj);
	if (!(text = json_dumps(req, JSON_COMPACT))) {
		fw_seterr(err, errlen, "out of memory");
		goto done;
	}
	if (run_prog(j->prog, text, strlen(text), j->timeout_s, &out, err, errlen) < 0)
		goto done;
	if (!(ans = json_loadb((const char *)out.p, out.n, 0, &je)) || !json_is_object(ans)) {
		fw_seterr(err, errlen, "'%s' did not answer a JSON object%s%s", j->prog,
		       ans ? "" : ": ", ans ? "" : je.text);
		goto done;
	}
	const char *verdict = json_string_value(json_object_get(ans, "verdict"));
	int vi = -1;
	for (int i = 0; verdict && i < c->nlabels; i++)
		if (!strcmp(verdict, c->labels[i]))
			vi = i;
	if (vi < 0) {
		fw_seterr(err, errlen, "'%s' answered verdict '%s' for '%s', not a label of its scale",
		       j->prog, verdict ? verdict : "", c->name);
		goto done;
	}
	json_t *p = json_object_get(ans, "p");
	double lp[FW_JUDGE_MAX_LABELS], z = 0;
	for (int i = 0; i < c->nlabels; i++) {
		double x = i == vi;
		if (json_is_object(p)) {
			json_t *pv = json_object_get(p, c->labels[i]);
			x = pv ? json_number_value(pv) : 0;
			if (pv && !json_is_number(pv))
				x = -1;
		}
		if (!isfinite(x) || x < 0) {
			fw_seterr(err, errlen, "'%s' answered p['%s'] that is not a probability",
			       j->prog, c->labels[i]);
			goto done;
		}
		lp[i] = x;
		z += x;
	}
	if (z <= 0) {
		fw_seterr(err, errlen, "'%s' answered probabilities that sum to 0", j->prog);
		goto done;
	}
	finish_p(v, c, lp, z);
	/* the verdict is the program's own, even where p ties */
	v->label = vi;
	snprintf(v->rationale, sizeof v->rationale, "%s", jstr(ans, "rationale"));
	rc = 0;
done:
	json_decref(req);
	json_decref(crit);
	json_decref(labels);
	json_decref(ans);
	free(text);
	fw_buf_free(&out);
	return rc;
}

int fw_judge_prompt_fit(struct fw_buf *out, const struct fw_rubric *r, int c, struct fw_mpv rec,
			const struct fw_tok *t, int max_pos)
{
	const struct fw_criterion *cr = &r->c[c];
	struct fw_tok_ids ids = { 0 };
	size_t base = out->n, lmax = 0, max_chars = 0, prev = (size_t)-1;
	int rc = -1;

	for (int i = 0; i < cr->nlabels; i++) {
		char lab[64];
		snprintf(lab, sizeof lab, " %s", cr->labels[i]);
		ids.n = 0;
		if (fw_tok_encode(t, lab, strlen(lab), 0, 1, &ids) < 0)
			goto done;
		if (ids.n > lmax)
			lmax = ids.n;
	}
	/* each pass cuts at least one byte more from the transcript's
	 * start (a token holds one byte or more, so a prompt over by k
	 * tokens loses at least k bytes); it ends when the prompt fits, or
	 * when a pass leaves it as long as the last one: the transcript is
	 * gone */
	for (;;) {
		out->n = base;
		if (fw_judge_prompt(out, r, c, rec, max_chars) < 0)
			goto done;
		if (max_pos <= 0) {
			rc = 0;
			break;
		}
		ids.n = 0;
		if (fw_tok_encode(t, out->p + base, out->n - base, FW_TOK_ADD_BOS, 0, &ids) < 0)
			goto done;
		size_t len = out->n - base;
		if (ids.n + lmax <= (size_t)max_pos || len == prev || max_chars == 1) {
			rc = 0;
			break;
		}
		size_t over = ids.n + lmax - (size_t)max_pos, m = max_chars ? max_chars : len;
		prev = len;
		max_chars = m > over + 1 ? m - over : 1;
	}
done:
	fw_tok_ids_release(&ids);
	return rc;
}

int fw_judge_score(struct fw_judge *j, const struct fw_rubric *r, int c, struct fw_mpv rec,
		   struct fw_verdict *v, char *err, size_t errlen)
{
	struct fw_buf p = { 0 };
	int rc;

	memset(v, 0, sizeof *v);
	if (!fw_criterion_applies(&r->c[c], rec)) {
		v->skipped = 1;
		return 0;
	}
	/* a model judge reads the prompt fitted to its positions: the
	 * transcript gives way from its start, the instruction and the
	 * question stay */
	if ((j->prog ? fw_judge_prompt(&p, r, c, rec, 0)
		     : fw_judge_prompt_fit(&p, r, c, rec, j->tok ? j->tok : fw_teacher_tok(j->T),
					   j->tok ? j->max_pos : fw_teacher_max_pos(j->T))) < 0 ||
	    fw_buf_append(&p, "", 1) < 0) {
		fw_seterr(err, errlen, "out of memory or a record that is not valid UTF-8");
		fw_buf_free(&p);
		return -1;
	}
	rc = j->prog ? exec_score(j, r, c, rec, (const char *)p.p, v, err, errlen)
		     : model_score(j, &r->c[c], (const char *)p.p, p.n - 1, v, err, errlen);
	fw_buf_free(&p);
	return rc;
}

int fw_judge_pack(msgpack_packer *pk, const struct fw_rubric *r, const struct fw_verdict *v)
{
	size_t judged = 0;
	for (int i = 0; i < r->n; i++)
		judged += !v[i].skipped;
	int e = msgpack_pack_map(pk, judged);

	for (int i = 0; i < r->n; i++) {
		const struct fw_criterion *c = &r->c[i];
		if (v[i].skipped)
			continue;
		e |= fw_pack_cstr(pk, c->name);
		e |= msgpack_pack_map(pk, 4);
		e |= fw_pack_cstr(pk, "score");
		e |= msgpack_pack_double(pk, v[i].score);
		e |= fw_pack_cstr(pk, "verdict");
		e |= fw_pack_cstr(pk, c->labels[v[i].label]);
		e |= fw_pack_cstr(pk, "p");
		e |= msgpack_pack_map(pk, (size_t)c->nlabels);
		for (int k = 0; k < c->nlabels; k++) {
			e |= fw_pack_cstr(pk, c->labels[k]);
			e |= msgpack_pack_double(pk, v[i].p[k]);
		}
		e |= fw_pack_cstr(pk, "rationale");
		e |= fw_pack_cstr(pk, v[i].rationale);
	}
	return e;
}

/* ---- mixed rewards -------------------------------------------------------------- */

void fw_mix_release(struct fw_mix *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n; i++)
		free(m->crit[i]);
	memset(m, 0, sizeof *m);
}

int fw_mix_parse(struct fw_mix *m, const char *s, char *err, size_t errlen)
{
	char *copy, *save = NULL, *tok;
	int have_test = 0;
	double sum = 0;

	memset(m, 0, sizeof *m);
	if (strncmp(s, "mix:", 4) || !s[4]) {
		fw_seterr(err, errlen, "want mix:TEST=W,CRITERION=W,..., not '%s'", s);
		return -1;
	}
	if (!(copy = strdup(s + 4))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		double w;
		if (!eq || eq == tok) {
			fw_seterr(err, errlen, "'%s' is not NAME=WEIGHT", tok);
			goto fail;
		}
		*eq = 0;
		w = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !isfinite(w) || w < 0) {
			fw_seterr(err, errlen, "weight '%s' of '%s' is not a number >= 0", eq + 1, tok);
			goto fail;
		}
		int t = fw_reward_parse(tok);
		if (t >= 0) {
			if (have_test++) {
				fw_seterr(err, errlen, "more than one test reward in '%s'", s);
				goto fail;
			}
			m->test = t;
			m->w_test = w;
		} else {
			if (!name_ok(tok)) {
				fw_seterr(err, errlen, "'%s' is not a test reward or a criterion name", tok);
				goto fail;
			}
			if (m->n == 16) {
				fw_seterr(err, errlen, "more than 16 criteria in '%s'", s);
				goto fail;
			}
			if (!(m->crit[m->n] = strdup(tok))) {
				fw_seterr(err, errlen, "out of memory");
				goto fail;
			}
			m->w[m->n++] = w;
		}
		sum += w;
	}
	if (!have_test)
		m->test = FW_REWARD_RESOLVED;
	if (!(sum > 0)) {
		fw_seterr(err, errlen, "the weights of '%s' sum to 0", s);
		goto fail;
	}
	free(copy);
	return 0;
fail:
	free(copy);
	fw_mix_release(m);
	return -1;
}

double fw_mix_reward(const struct fw_mix *m, double T, const struct fw_rubric *r,
		     const struct fw_verdict *v, char *err, size_t errlen)
{
	double num = m->w_test * T, den = m->w_test;

	for (int i = 0; i < m->n; i++) {
		int k = fw_rubric_find(r, m->crit[i]);
		if (k < 0) {
			fw_seterr(err, errlen, "criterion '%s' is not in the rubric", m->crit[i]);
			return -1;
		}
		const struct fw_criterion *c = &r->c[k];
		/* a criterion that does not apply to the record weighs nothing */
		if (v[k].skipped)
			continue;
		double lo = c->values[0], hi = c->values[0];
		for (int q = 1; q < c->nlabels; q++) {
			lo = fmin(lo, c->values[q]);
			hi = fmax(hi, c->values[q]);
		}
		num += m->w[i] * (v[k].score - lo) / (hi - lo);
		den += m->w[i];
	}
	/* no weight left (the tests weigh 0, no named criterion applies):
	 * the tests' reward */
	return den > 0 ? num / den : T;
}

/* ---- agreement -------------------------------------------------------------------- */

double fw_kappa(const int *human, const int *judge, long n, int k)
{
	long rows[FW_JUDGE_MAX_LABELS] = { 0 }, cols[FW_JUDGE_MAX_LABELS] = { 0 }, same = 0;
	double po, pe = 0;

	if (n <= 0)
		return 0;
	for (long i = 0; i < n; i++) {
		rows[human[i]]++;
		cols[judge[i]]++;
		same += human[i] == judge[i];
	}
	po = (double)same / (double)n;
	for (int q = 0; q < k; q++)
		pe += ((double)rows[q] / (double)n) * ((double)cols[q] / (double)n);
	/* every pair in one label on both sides: agreement by construction,
	 * nothing beyond chance to measure */
	if (pe >= 1)
		return 0;
	return (po - pe) / (1 - pe);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double quantile(const double *s, unsigned n, double q)
{
	double h = q * (double)(n - 1);
	unsigned i = (unsigned)h;
	if (i + 1 >= n)
		return s[n - 1];
	return s[i] + (h - (double)i) * (s[i + 1] - s[i]);
}

int fw_agree_compute(struct fw_agree *a, const int *human, const int *judge, long n, int k,
		     unsigned resamples, uint64_t seed)
{
	int *h2 = NULL, *j2 = NULL;
	double *ks = NULL;
	long same = 0;

	memset(a, 0, sizeof *a);
	if (n <= 0 || k < 2 || k > FW_JUDGE_MAX_LABELS || !resamples)
		return -1;
	for (long i = 0; i < n; i++) {
		if (human[i] < 0 || human[i] >= k || judge[i] < 0 || judge[i] >= k)
			return -1;
		a->confusion[human[i]][judge[i]]++;
		same += human[i] == judge[i];
	}
	a->n = n;
	a->accuracy = (double)same / (double)n;
	a->kappa = fw_kappa(human, judge, n, k);
	h2 = malloc((size_t)n * sizeof *h2);
	j2 = malloc((size_t)n * sizeof *j2);
	ks = malloc(resamples * sizeof *ks);
	if (!h2 || !j2 || !ks) {
		free(h2), free(j2), free(ks);
		return -1;
	}
	uint64_t st = seed;
	for (unsigned b = 0; b < resamples; b++) {
		for (long i = 0; i < n; i++) {
			long q = (long)(fw_rand64(&st) % (uint64_t)n);
			h2[i] = human[q];
			j2[i] = judge[q];
		}
		ks[b] = fw_kappa(h2, j2, n, k);
	}
	qsort(ks, resamples, sizeof *ks, cmp_double);
	a->lo = quantile(ks, resamples, 0.025);
	a->hi = quantile(ks, resamples, 0.975);
	a->chance = a->lo <= 0;
	free(h2), free(j2), free(ks);
	return 0;
}

/* ---- agreement over a set of records ---------------------------------------- */

struct agree_item {
	char *id, *crit, *label;
};

struct agree_list {
	struct agree_item *v;
	size_t n, cap;
};

struct fw_agree_set {
	struct agree_list judged, human;
};

struct fw_agree_set *fw_agree_set_new(void)
{
	return calloc(1, sizeof(struct fw_agree_set));
}

static void list_free(struct agree_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].id);
		free(l->v[i].crit);
		free(l->v[i].label);
	}
	free(l->v);
}

void fw_agree_set_free(struct fw_agree_set *s)
{
	if (!s)
		return;
	list_free(&s->judged);
	list_free(&s->human);
	free(s);
}

static int list_add(struct agree_list *l, const char *id, size_t idn, const char *c, size_t cn,
		    const char *lab, size_t ln)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		struct agree_item *nv = realloc(l->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		l->v = nv;
		l->cap = nc;
	}
	struct agree_item *it = &l->v[l->n];
	it->id = strndup(id, idn);
	it->crit = strndup(c, cn);
	it->label = strndup(lab, ln);
	if (!it->id || !it->crit || !it->label) {
		free(it->id), free(it->crit), free(it->label);
		return -1;
	}
	l->n++;
	return 0;
}

int fw_agree_set_judged(struct fw_agree_set *s, struct fw_mpv rec, char *err, size_t errlen)
{
	struct fw_mpv idv, g, j, k, v, verdict;
	const char *id, *c, *lab;
	size_t idn, cn, ln;
	struct fw_mp_iter it;
	int added = 0;

	if (fw_mp_get(rec, "grade", &g) != 1 || fw_mp_get(g, "judge", &j) != 1)
		return 0;
	if (fw_mp_get(rec, "id", &idv) != 1 || fw_mp_str(idv, &id, &idn) < 0) {
		fw_seterr(err, errlen, "a judged record without a string id");
		return -1;
	}
	if (fw_mp_iter_init(&it, j) < 0) {
		fw_seterr(err, errlen, "grade.judge is not a map");
		return -1;
	}
	while (fw_mp_iter_next(&it, &k) == 1) {
		if (fw_mp_iter_next(&it, &v) != 1 || fw_mp_str(k, &c, &cn) < 0 ||
		    fw_mp_get(v, "verdict", &verdict) != 1 || fw_mp_str(verdict, &lab, &ln) < 0) {
			fw_seterr(err, errlen, "grade.judge: an entry without a string verdict");
			return -1;
		}
		if (list_add(&s->judged, id, idn, c, cn, lab, ln) < 0) {
			fw_seterr(err, errlen, "out of memory");
			return -1;
		}
		added++;
	}
	return added;
}

long fw_agree_set_labels(struct fw_agree_set *s, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long n = 0, lineno = 0;

	if (!f) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t1 || !t2 || t1 == line || t2 == t1 + 1 || !t2[1] || strchr(t2 + 1, '\t')) {
			fw_seterr(err, errlen, "%s: line %ld: want ID<TAB>CRITERION<TAB>LABEL", path,
			       lineno);
			n = -1;
			break;
		}
		if (list_add(&s->human, line, (size_t)(t1 - line), t1 + 1, (size_t)(t2 - t1 - 1),
			     t2 + 1, strlen(t2 + 1)) < 0) {
			fw_seterr(err, errlen, "out of memory");
			n = -1;
			break;
		}
		n++;
	}
	free(line);
	fclose(f);
	return n;
}

static int cmp_item(const void *a, const void *b)
{
	const struct agree_item *x = a, *y = b;
	int c = strcmp(x->crit, y->crit);
	return c ? c : strcmp(x->id, y->id);
}

/* Index of label in the criterion's label list, added if new; -1 when full. */
static int label_index(const char **labels, int *n, const char *label)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(labels[i], label))
			return i;
	if (*n == FW_JUDGE_MAX_LABELS)
		return -1;
	labels[*n] = label;
	return (*n)++;
}

/* Puts the labels in their scale's order when they are all of one scale. */
static void order_labels(const char **labels, int n, int *map)
{
	const char *const *scale = NULL;
	int m = 0, all = 1;

	for (int pass = 0; pass < 2 && !scale; pass++) {
		const char *const *sc = pass ? likert_labels : yesno_labels;
		int sn = pass ? 5 : 2;
		all = 1;
		for (int i = 0; i < n && all; i++) {
			int found = 0;
			for (int q = 0; q < sn; q++)
				found |= !strcmp(labels[i], sc[q]);
			all = found;
		}
		if (all) {
			scale = sc;
			m = sn;
		}
	}
	for (int i = 0; i < n; i++)
		map[i] = i;
	if (!scale)
		return;
	/* rank of each label within the scale */
	for (int i = 0; i < n; i++) {
		int r = 0;
		for (int q = 0; q < m; q++)
			if (!strcmp(labels[i], scale[q]))
				r = q;
		int rank = 0;
		for (int k = 0; k < n; k++)
			for (int q = 0; q < r; q++)
				if (!strcmp(labels[k], scale[q]))
					rank++;
		map[i] = rank;
	}
}

int fw_agree_set_report(struct fw_agree_set *s, unsigned resamples, uint64_t seed,
			struct fw_buf *out, int *flagged, char *err, size_t errlen)
{
	struct agree_list *J = &s->judged, *H = &s->human;
	int *hv = NULL, *jv = NULL, reported = 0;
	size_t i = 0, h = 0;

	*flagged = 0;
	qsort(J->v, J->n, sizeof *J->v, cmp_item);
	qsort(H->v, H->n, sizeof *H->v, cmp_item);
	if (!(hv = malloc((J->n + 1) * sizeof *hv)) || !(jv = malloc((J->n + 1) * sizeof *jv)))
		goto oom;
	while (i < J->n) {
		const char *crit = J->v[i].crit;
		const char *labels[FW_JUDGE_MAX_LABELS];
		int nl = 0, map[FW_JUDGE_MAX_LABELS];
		long n = 0;

		for (; i < J->n && !strcmp(J->v[i].crit, crit); i++) {
			while (h < H->n && cmp_item(&H->v[h], &J->v[i]) < 0)
				h++;
			if (h == H->n || cmp_item(&H->v[h], &J->v[i]))
				continue;
			int a = label_index(labels, &nl, H->v[h].label);
			int b = label_index(labels, &nl, J->v[i].label);
			if (a < 0 || b < 0) {
				fw_seterr(err, errlen, "criterion '%s' has more than %d labels", crit,
				       FW_JUDGE_MAX_LABELS);
				free(hv), free(jv);
				return -1;
			}
			hv[n] = a;
			jv[n] = b;
			n++;
		}
		if (!n)
			continue;
		if (nl < 2)
			labels[nl] = labels[0][0] == 'y' ? "no" : labels[0][0] == 'n' ? "yes" : "-",
			nl = 2;
		order_labels(labels, nl, map);
		for (long q = 0; q < n; q++) {
			hv[q] = map[hv[q]];
			jv[q] = map[jv[q]];
		}
		const char *sorted[FW_JUDGE_MAX_LABELS];
		for (int q = 0; q < nl; q++)
			sorted[map[q]] = labels[q];
		struct fw_agree a;
		if (fw_agree_compute(&a, hv, jv, n, nl, resamples, seed) < 0)
			goto oom;
		if (fw_buf_printf(out, "%s\tn %ld\taccuracy %.3f\tkappa %.3f [%.3f, %.3f]%s\n", crit,
				  n, a.accuracy, a.kappa, a.lo, a.hi,
				  a.chance ? "\tno better than chance" : "") < 0 ||
		    fw_buf_puts(out, "  human\\judge") < 0)
			goto oom;
		for (int q = 0; q < nl; q++)
			if (fw_buf_printf(out, "\t%s", sorted[q]) < 0)
				goto oom;
		for (int r = 0; r < nl; r++) {
			if (fw_buf_printf(out, "\n  %s", sorted[r]) < 0)
				goto oom;
			for (int q = 0; q < nl; q++)
				if (fw_buf_printf(out, "\t%ld", a.confusion[r][q]) < 0)
					goto oom;
		}
		if (fw_buf_puts(out, "\n") < 0)
			goto oom;
		*flagged += a.chance;
		reported++;
	}
	free(hv);
	free(jv);
	return reported;
oom:
	fw_seterr(err, errlen, "out of memory");
	free(hv);
	free(jv);
	return -1;
}
