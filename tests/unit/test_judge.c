/*
 * test_judge.c — rubrics, the judge prompt, exec judges, mixed rewards and
 * agreement statistics (fw_judge.h).
 */
#include <stdint.h>
#include <unistd.h>

#include "fw_json.h"
#include "fw_judge.h"
#include "test.h"

/* msgpack of a JSON text into b; returns the view. */
static struct fw_mpv mp(struct fw_buf *b, const char *json)
{
	size_t used;
	struct fw_json_err e;
	b->n = 0;
	if (fw_json_to_mp(b, json, strlen(json), 1, &used, &e) != 1)
		printf("# bad json in test: %s\n", e.msg);
	return fw_mp_view(b->p, b->p + b->n);
}

static const char rubric_json[] =
	"{\"kind\":\"rubric\",\"id\":\"r1\",\"criteria\":["
	"{\"name\":\"asks\",\"question\":\"Does the agent ask a clarifying question first?\","
	"\"scale\":\"yes/no\",\"instruction\":\"Read the first reply.\","
	"\"reference\":[\"Which file do you mean?\"]},"
	"{\"name\":\"style\",\"question\":\"How clear is the code?\",\"scale\":\"1-5\"}]}";

TEST(rubric_parses_both_scales)
{
	struct fw_buf b = { 0 };
	char err[200] = "";
	struct fw_rubric *r = fw_rubric_parse(mp(&b, rubric_json), err, sizeof err);
	CHECK(r != NULL);
	if (r) {
		CHECK_EQ_INT(r->n, 2);
		CHECK_STR(r->id, "r1");
		CHECK_EQ_INT(r->c[0].nlabels, 2);
		CHECK_STR(r->c[0].labels[0], "yes");
		CHECK(r->c[0].values[0] == 1 && r->c[0].values[1] == 0);
		CHECK_EQ_INT(r->c[1].nlabels, 5);
		CHECK(r->c[1].values[4] == 5);
		CHECK_EQ_INT(fw_rubric_find(r, "style"), 1);
		CHECK_EQ_INT(fw_rubric_find(r, "nope"), -1);
	}
	fw_rubric_free(r);
	fw_rubric_free(NULL);
	fw_buf_free(&b);
}

TEST(rubric_faults_are_named)
{
	struct fw_buf b = { 0 };
	char err[200] = "";
	struct fw_rubric *r;

	r = fw_rubric_parse(mp(&b, "{\"kind\":\"rubric\",\"criteria\":[{\"name\":\"t\","
				   "\"question\":\"q\",\"scale\":\"1-7\"}]}"), err, sizeof err);
	CHECK(r == NULL);
	CHECK(strstr(err, "criterion 1 ('t'): scale '1-7' is not yes/no or 1-5") != NULL);
	r = fw_rubric_parse(mp(&b, "{\"kind\":\"rubric\",\"criteria\":[{\"name\":\"t\","
				   "\"scale\":\"yes/no\"}]}"), err, sizeof err);
	CHECK(r == NULL && strstr(err, "no question"));
	r = fw_rubric_parse(mp(&b, "{\"kind\":\"rubric\",\"criteria\":[{\"name\":\"t\",\"question\":"
				   "\"q\",\"scale\":\"yes/no\"},{\"name\":\"t\",\"question\":\"q\","
				   "\"scale\":\"yes/no\"}]}"), err, sizeof err);
	CHECK(r == NULL && strstr(err, "used twice"));
	r = fw_rubric_parse(mp(&b, "{\"kind\":\"task\"}"), err, sizeof err);
	CHECK(r == NULL && strstr(err, "not a rubric"));
	r = fw_rubric_parse(mp(&b, "{\"kind\":\"rubric\",\"criteria\":[]}"), err, sizeof err);
	CHECK(r == NULL && strstr(err, "no criteria"));
	fw_buf_free(&b);
}

static const char rollout_json[] =
	"{\"kind\":\"rollout\",\"id\":\"x\",\"task\":{\"prompt\":\"Make the parser faster.\"},"
	"\"turns\":[{\"role\":\"user\",\"text\":\"Make the parser faster.\"},"
	"{\"role\":\"assistant\",\"text\":\"Which parser do you mean?\",\"calls\":"
	"[{\"id\":\"c1\",\"name\":\"bash\",\"args\":\"ls src\"}]}],\"patch\":\"\"}";

TEST(prompt_holds_request_transcript_question_and_labels)
{
	struct fw_buf b = { 0 }, rb = { 0 }, p = { 0 };
	char err[200];
	struct fw_rubric *r = fw_rubric_parse(mp(&rb, rubric_json), err, sizeof err);
	struct fw_mpv rec = mp(&b, rollout_json);

	CHECK(fw_judge_prompt(&p, r, 0, rec, 0) == 0);
	fw_buf_append(&p, "", 1);
	const char *s = (const char *)p.p;
	CHECK(strstr(s, "The request:\nMake the parser faster.") != NULL);
	CHECK(strstr(s, "[assistant] Which parser do you mean?") != NULL);
	CHECK(strstr(s, "[assistant calls bash] ls src") != NULL);
	CHECK(strstr(s, "Which file do you mean?") != NULL);
	CHECK(strstr(s, "Read the first reply.") != NULL);
	size_t L = strlen(s);
	CHECK(L > 20 && !strcmp(s + L - strlen("Answer with one of: yes no.\nAnswer:"),
				"Answer with one of: yes no.\nAnswer:"));
	/* cut to 200 bytes: the transcript gives way, the question stays */
	p.n = 0;
	CHECK(fw_judge_prompt(&p, r, 0, rec, 200) == 0);
	fw_buf_append(&p, "", 1);
	s = (const char *)p.p;
	CHECK(strstr(s, "transcript cut") != NULL);
	CHECK(strstr(s, "Question: Does the agent ask") != NULL);
	fw_rubric_free(r);
	fw_buf_free(&b);
	fw_buf_free(&rb);
	fw_buf_free(&p);
}

TEST(exec_judge_answers_are_checked_and_renormalised)
{
	struct fw_buf b = { 0 }, rb = { 0 };
	char err[300] = "";
	struct fw_rubric *r = fw_rubric_parse(mp(&rb, rubric_json), err, sizeof err);
	struct fw_mpv rec = mp(&b, rollout_json);
	struct fw_verdict v;
	struct fw_judge *j;

	/* the program sees the request: it answers yes only if the record came */
	j = fw_judge_open("exec:grep -q 'Which parser' && echo '{\"verdict\":\"yes\",\"p\":"
			  "{\"yes\":3,\"no\":1},\"rationale\":\"asks\"}'", NULL, 10, 0, err, sizeof err);
	CHECK(j != NULL);
	CHECK(fw_judge_score(j, r, 0, rec, &v, err, sizeof err) == 0);
	CHECK_EQ_INT(v.label, 0);
	CHECK(fabs(v.p[0] - 0.75) < 1e-12 && fabs(v.p[1] - 0.25) < 1e-12);
	CHECK(fabs(v.score - 0.75) < 1e-12);
	CHECK_STR(v.rationale, "asks");
	fw_judge_free(j);

	j = fw_judge_open("exec:cat >/dev/null; echo '{\"verdict\":\"4\"}'", NULL, 10, 0, err,
			  sizeof err);
	CHECK(fw_judge_score(j, r, 1, rec, &v, err, sizeof err) == 0);
	CHECK(v.label == 3 && v.p[3] == 1 && v.score == 4);
	CHECK(fw_judge_score(j, r, 0, rec, &v, err, sizeof err) == -1);
	CHECK(strstr(err, "verdict '4' for 'asks', not a label of its scale") != NULL);
	fw_judge_free(j);

	j = fw_judge_open("exec:cat >/dev/null; echo '{\"verdict\":\"no\",\"p\":{\"no\":-1}}'",
			  NULL, 10, 0, err, sizeof err);
	CHECK(fw_judge_score(j, r, 0, rec, &v, err, sizeof err) == -1);
	CHECK(strstr(err, "not a probability") != NULL);
	fw_judge_free(j);

	j = fw_judge_open("exec:exit 3", NULL, 10, 0, err, sizeof err);
	CHECK(fw_judge_score(j, r, 0, rec, &v, err, sizeof err) == -1);
	CHECK(strstr(err, "exit status 3") != NULL);
	fw_judge_free(j);

	CHECK(fw_judge_open("nope:x", NULL, 10, 0, err, sizeof err) == NULL);
	CHECK(strstr(err, "want builtin:DIR") != NULL);
	CHECK(fw_judge_open("http://h/v1", NULL, 10, 0, err, sizeof err) == NULL);
	fw_rubric_free(r);
	fw_buf_free(&b);
	fw_buf_free(&rb);
}

TEST(mixed_reward_weights_tests_and_scaled_scores)
{
	struct fw_buf rb = { 0 };
	char err[200];
	struct fw_rubric *r = fw_rubric_parse(mp(&rb, rubric_json), err, sizeof err);
	struct fw_mix m;
	struct fw_verdict v[2] = { { .score = 0.5 }, { .score = 4 } };

	CHECK(fw_mix_parse(&m, "mix:resolved=2,asks=1,style=1", err, sizeof err) == 0);
	/* (2*1 + 1*0.5 + 1*(4-1)/(5-1)) / 4 */
	CHECK(fabs(fw_mix_reward(&m, 1, r, v, err, sizeof err) - (2 + 0.5 + 0.75) / 4) < 1e-12);
	fw_mix_release(&m);
	CHECK(fw_mix_parse(&m, "mix:nope=1", err, sizeof err) == 0);
	CHECK(fw_mix_reward(&m, 1, r, v, err, sizeof err) == -1);
	fw_mix_release(&m);
	CHECK(fw_mix_parse(&m, "mix:resolved=0", err, sizeof err) == -1);
	CHECK(fw_mix_parse(&m, "mix:resolved=1,f2p=1", err, sizeof err) == -1);
	CHECK(fw_mix_parse(&m, "mix:asks=-1", err, sizeof err) == -1);
	CHECK(fw_mix_parse(&m, "resolved", err, sizeof err) == -1);
	fw_rubric_free(r);
	fw_buf_free(&rb);
}

TEST(kappa_is_one_for_agreement_and_zero_for_a_constant_judge)
{
	int h[8] = { 0, 1, 0, 1, 1, 0, 0, 1 }, c[8] = { 0 }, flip[8];
	struct fw_agree a;

	CHECK(fabs(fw_kappa(h, h, 8, 2) - 1) < 1e-12);
	CHECK(fabs(fw_kappa(h, c, 8, 2)) < 1e-12);
	for (int i = 0; i < 8; i++)
		flip[i] = 1 - h[i];
	CHECK(fabs(fw_kappa(h, flip, 8, 2) + 1) < 1e-12);
	/* a textbook case: p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa 0.4 */
	int hh[10] = { 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 }, jj[10] = { 1, 1, 1, 1, 0, 0, 0, 0, 1, 1 };
	CHECK(fabs(fw_kappa(hh, jj, 10, 2) - 0.4) < 1e-12);

	CHECK(fw_agree_compute(&a, h, c, 8, 2, 500, 7) == 0);
	CHECK(a.accuracy == 0.5 && fabs(a.kappa) < 1e-12 && a.chance == 1);
	CHECK_EQ_INT(a.confusion[1][0], 4);
	CHECK(fw_agree_compute(&a, h, h, 8, 2, 500, 7) == 0);
	CHECK(a.kappa == 1 && a.chance == 0 && a.lo > 0);
	CHECK(fw_agree_compute(&a, h, h, 0, 2, 500, 7) == -1);
	int bad[1] = { 5 };
	CHECK(fw_agree_compute(&a, bad, bad, 1, 2, 500, 7) == -1);
}

TEST(bootstrap_interval_is_reproducible_and_covers_kappa)
{
	int h[40], j[40];
	struct fw_agree a, b;
	for (int i = 0; i < 40; i++) {
		h[i] = i % 2;
		j[i] = (i % 5 == 0) ? 1 - h[i] : h[i];
	}
	CHECK(fw_agree_compute(&a, h, j, 40, 2, 1000, 3) == 0);
	CHECK(fw_agree_compute(&b, h, j, 40, 2, 1000, 3) == 0);
	CHECK(a.lo == b.lo && a.hi == b.hi);
	CHECK(a.lo <= a.kappa && a.kappa <= a.hi);
	CHECK(a.lo > 0 && a.chance == 0);
}

TEST_MAIN()
