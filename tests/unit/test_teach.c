/*
 * test_teach.c — environment hints and the teach sub-map, on records
 * packed here; fw_teach_run without a teacher model: the --hints list, one
 * record taught with hints only, groups and their demo, the tallies.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_rec.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_teach.h"
#include "fw_teach_run.h"

static void ps(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

/* turns: user, assistant, tool (exit ex, text out), assistant; grade with
 * one test of status st. */
static struct fw_mpv make(struct fw_buf *b, int ex, const char *out, const char *st)
{
	msgpack_packer pk;

	b->n = 0;
	fw_buf_packer(&pk, b);
	msgpack_pack_map(&pk, 2);
	ps(&pk, "turns");
	msgpack_pack_array(&pk, 4);
	msgpack_pack_map(&pk, 2), ps(&pk, "role"), ps(&pk, "user"), ps(&pk, "text"), ps(&pk, "q");
	msgpack_pack_map(&pk, 2), ps(&pk, "role"), ps(&pk, "assistant"), ps(&pk, "text"), ps(&pk, "a");
	msgpack_pack_map(&pk, 3), ps(&pk, "role"), ps(&pk, "tool"), ps(&pk, "text"), ps(&pk, out);
	ps(&pk, "exit"), msgpack_pack_int(&pk, ex);
	msgpack_pack_map(&pk, 2), ps(&pk, "role"), ps(&pk, "assistant"), ps(&pk, "text"), ps(&pk, "b");
	ps(&pk, "grade");
	msgpack_pack_map(&pk, 2);
	ps(&pk, "reason"), ps(&pk, "why");
	ps(&pk, "tests");
	msgpack_pack_map(&pk, 1), ps(&pk, "t1"), ps(&pk, st);
	return (struct fw_mpv){ b->p, b->n };
}

TEST(env_hints_on_their_turns)
{
	struct fw_buf b = { 0 };
	struct fw_teach_hints hs = { 0 };
	char err[128];

	CHECK(fw_teach_env_hints(make(&b, 2, "boom", "fail"), 0, &hs, err, sizeof err) == 2);
	CHECK(hs.h[0].turn == 1 && !strcmp(hs.h[0].text, "the command failed (exit 2): boom"));
	CHECK(hs.h[1].turn == 3 && !strcmp(hs.h[1].text, "test t1: fail (why)"));
	CHECK(!strcmp(hs.h[1].source, "env"));
	fw_teach_hints_free(&hs);
	CHECK(fw_teach_env_hints(make(&b, 0, "fine", "pass"), 0, &hs, err, sizeof err) == 0);
	CHECK(hs.n == 0);
	fw_buf_free(&b);
}

TEST(env_hints_cut_to_max_chars)
{
	struct fw_buf b = { 0 };
	struct fw_teach_hints hs = { 0 };
	char err[128], big[2000];

	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	CHECK(fw_teach_env_hints(make(&b, 1, big, "pass"), 50, &hs, err, sizeof err) == 1);
	CHECK(strlen(hs.h[0].text) == 50);
	fw_teach_hints_free(&hs);
	CHECK(fw_teach_env_hints((struct fw_mpv){ (const uint8_t *)"\x01", 1 }, 0, &hs, err,
				 sizeof err) == -1);
	fw_buf_free(&b);
}

TEST(pack_teach_map)
{
	struct fw_buf b = { 0 }, o = { 0 };
	struct fw_teach_hints hs = { 0 };
	struct fw_mpv v, x;
	float adv[2] = { 0.5f, -1 };
	double d;
	char err[128];

	CHECK(fw_teach_env_hints(make(&b, 3, "e", "error"), 0, &hs, err, sizeof err) == 2);
	CHECK(fw_teach_pack(&o, &hs, adv, 2, NULL, NULL, NULL, NULL) == 0);
	v = (struct fw_mpv){ o.p, o.n };
	CHECK(fw_mp_get(v, "hints", &x) == 1 && fw_mp_type(x) == FW_MP_ARRAY);
	CHECK(fw_mp_get(v, "adv", &x) == 1);
	struct fw_mp_iter it;
	CHECK(fw_mp_iter_init(&it, x) == 2);
	CHECK(fw_mp_iter_next(&it, &x) == 1 && !fw_mp_double(x, &d) && d == 0.5);
	o.n = 0;
	CHECK(fw_teach_pack(&o, &hs, NULL, 0, NULL, "no tokens", "/ck", "down") == 0);
	v = (struct fw_mpv){ o.p, o.n };
	CHECK(fw_mp_get(v, "teacher", &x) == 1 && fw_mp_str_eq(x, "/ck", 3));
	CHECK(fw_mp_get(v, "hint_error", &x) == 1 && fw_mp_str_eq(x, "down", 4));
	CHECK(fw_mp_get(v, "adv", &x) == 0);
	CHECK(fw_mp_get(v, "adv_omitted", &x) == 1 && fw_mp_str_eq(x, "no tokens", 9));
	fw_teach_hints_free(&hs);
	fw_buf_free(&b);
	fw_buf_free(&o);
}

TEST(rules_parse_and_match)
{
	static const char txt[] = "# c\n\nmatch b+: saw b\nnever zz: use zz\nlonger 0: x\n";
	struct fw_buf b = { 0 };
	struct fw_teach_hints hs = { 0 };
	struct fw_teach_rules *r;
	char err[128];

	CHECK((r = fw_teach_rules_parse(txt, strlen(txt), "t", err, sizeof err)) == NULL);
	CHECK(strstr(err, "t:5: want a positive count") != NULL);
	r = fw_teach_rules_parse(txt, strlen(txt) - 12, "t", err, sizeof err);
	CHECK(r != NULL);
	CHECK(fw_teach_rule_hints(r, make(&b, 0, "o", "pass"), &hs, err, sizeof err) == 2);
	CHECK(hs.h[0].turn == 3 && !strcmp(hs.h[0].text, "saw b") && !strcmp(hs.h[0].source, "rules"));
	CHECK(hs.h[1].turn == 3 && !strcmp(hs.h[1].text, "use zz"));
	fw_teach_rules_free(r);
	fw_teach_hints_free(&hs);
	fw_buf_free(&b);
}

TEST(weak_turn)
{
	struct fw_buf b = { 0 };
	struct fw_teach_hints hs = { 0 };
	char err[128];

	/* the failed command's turn comes before the failing tests' */
	CHECK_EQ_INT(fw_teach_weak_turn(make(&b, 2, "boom", "fail"), &hs), 1);
	/* no failure at all: none */
	CHECK_EQ_INT(fw_teach_weak_turn(make(&b, 0, "ok", "pass"), &hs), -1);
	/* failing tests alone: the last reply; a hint of another source on
	 * an earlier turn wins */
	CHECK_EQ_INT(fw_teach_weak_turn(make(&b, 0, "ok", "fail"), &hs), 3);
	struct fw_teach_rules *r = fw_teach_rules_parse("match ^a$: x\n", 13, "t", err, sizeof err);
	CHECK(fw_teach_rule_hints(r, make(&b, 0, "ok", "fail"), &hs, err, sizeof err) == 1);
	CHECK_EQ_INT(fw_teach_weak_turn(make(&b, 0, "ok", "fail"), &hs), 1);
	fw_teach_rules_free(r);
	fw_teach_hints_free(&hs);
	/* not resolved, no other sign: the last assistant turn */
	CHECK_EQ_INT(fw_teach_weak_turn(test_rec(&b, "{\"turns\":[{\"role\":\"user\"},"
		"{\"role\":\"assistant\"},{\"role\":\"user\"},{\"role\":\"assistant\"}],"
		"\"grade\":{\"resolved\":false}}"), &hs), 3);
	CHECK_EQ_INT(fw_teach_weak_turn(test_rec(&b, "{\"turns\":[{\"role\":\"assistant\"}],"
		"\"grade\":{\"resolved\":true}}"), &hs), -1);
	fw_buf_free(&b);
}

TEST(hint_prompt_documented_form)
{
	struct fw_buf b = { 0 }, o = { 0 };
	char err[128];
	struct fw_mpv v = test_rec(&b, "{\"id\":\"x\",\"stop\":\"submit\","
		"\"task\":{\"prompt\":\"Fix double().\"},"
		"\"turns\":[{\"role\":\"system\",\"text\":\"sys\"},{\"role\":\"user\",\"text\":\"Fix it\"},"
		"{\"role\":\"assistant\",\"text\":\"ls\"},{\"role\":\"tool\",\"text\":\"a.py\",\"exit\":0},"
		"{\"role\":\"assistant\",\"text\":\"submit\"}],"
		"\"grade\":{\"resolved\":false,\"reason\":\"1 of 1 f2p fail\",\"tests\":{\"t1\":\"fail\",\"t2\":\"pass\"},"
		"\"hacks\":[{\"name\":\"skip-marker\",\"detail\":\"d\"}]}}");

	CHECK(fw_teach_hint_prompt(v, 4, 1536, &o, err, sizeof err) == 0);
	fw_buf_reserve(&o, 1);
	o.p[o.n] = 0;
	/* task.prompt is the task; every turn but the system one is earlier */
	CHECK_STR((char *)o.p, "Task:\nFix double().\n\n"
		"Outcome: not resolved (1 of 1 f2p fail); tests: t1 fail; hacks: skip-marker; stop: submit\n\n"
		"Earlier turns:\n[user] Fix it\n[assistant] ls\n[tool, exit 0] a.py\n\n"
		"Turn 4 (assistant):\nsubmit\n\n"
		"One short hint for turn 4, what to do differently:\nHint:");
	/* a turn followed by a tool turn: its result */
	o.n = 0;
	CHECK(fw_teach_hint_prompt(v, 2, 1536, &o, err, sizeof err) == 0);
	fw_buf_reserve(&o, 1);
	o.p[o.n] = 0;
	CHECK(strstr((char *)o.p, "Earlier turns:\n[user] Fix it\n\nTurn 2 (assistant):\nls\n\n"
			       "Its result:\n[tool, exit 0] a.py\n\nOne short hint for turn 2") != NULL);
	CHECK(fw_teach_hint_prompt(v, 9, 1536, &o, err, sizeof err) == -1);
	CHECK(fw_teach_hint_prompt(v, 4, 100, &o, err, sizeof err) == -1);
	CHECK(strstr(err, "too small") != NULL);
	fw_buf_free(&o);
	fw_buf_free(&b);
}

TEST(hint_prompt_bounded)
{
	struct fw_buf b = { 0 }, js = { 0 }, o = { 0 };
	char err[128];

	/* a long task, 40 long turns, a long weak turn */
	fw_buf_puts(&js, "{\"turns\":[{\"role\":\"user\",\"text\":\"");
	for (int i = 0; i < 3000; i++)
		fw_buf_puts(&js, i % 100 != 99 ? "t" : "\\n");
	fw_buf_puts(&js, "\"}");
	for (int k = 0; k < 40; k++) {
		fw_buf_printf(&js, ",{\"role\":\"%s\",\"text\":\"turn %d ", k % 2 ? "tool" : "assistant", k);
		for (int i = 0; i < 500; i++)
			fw_buf_puts(&js, "Ã©");
		fw_buf_puts(&js, "\"}");
	}
	fw_buf_puts(&js, ",{\"role\":\"assistant\",\"text\":\"");
	for (int i = 0; i < 2000; i++)
		fw_buf_puts(&js, "w");
	fw_buf_puts(&js, "\"}],\"grade\":{\"resolved\":false}}");
	fw_buf_reserve(&js, 1);
	js.p[js.n] = 0;
	struct fw_mpv v = test_rec(&b, (const char *)js.p);

	for (size_t budget = 256; budget <= 8192; budget *= 2) {
		o.n = 0;
		CHECK(fw_teach_hint_prompt(v, 41, budget, &o, err, sizeof err) == 0);
		CHECK(o.n <= budget);
		fw_buf_reserve(&o, 1);
		o.p[o.n] = 0;
		/* the frame is whole and the latest turn is there, cut in the middle */
		CHECK(!strncmp((char *)o.p, "Task:\nttt", 9));
		CHECK(strstr((char *)o.p, "earlier turns left out]") != NULL);
		CHECK(strstr((char *)o.p, "Turn 41 (assistant):\nwww") != NULL);
		CHECK(budget > 4096 || strstr((char *)o.p, "w\n[...]\nw") != NULL);
		CHECK(o.n > 7 && !strcmp((char *)o.p + o.n - 5, "Hint:"));
		if (budget >= 2048)
			CHECK(strstr((char *)o.p, "[tool] turn 39 ") != NULL);
		/* cut on UTF-8 boundaries */
		CHECK(fw_utf8_valid(o.p, o.n));
	}
	fw_buf_free(&o);
	fw_buf_free(&js);
	fw_buf_free(&b);
}

TEST(parse_prompt_scores)
{
	int32_t seq[3] = { 5, 7, 9 };
	float lp[3];
	char err[160];
	const char *serve = "{\"choices\":[{\"logprobs\":{\"tokens\":[\"a\",\"b\",\"c\"],"
		"\"token_logprobs\":[null,-1.5,-0.25]},\"token_ids\":[5,7,9]}]}";
	const char *vllm = "{\"choices\":[{\"text\":\"\",\"prompt_logprobs\":[null,"
		"{\"7\":{\"logprob\":-2.0,\"rank\":3},\"1\":{\"logprob\":-0.1,\"rank\":1}},"
		"{\"9\":{\"logprob\":-3.0,\"rank\":1}}]}]}";

	CHECK(fw_teacher_parse_scores(serve, strlen(serve), seq, 3, lp, err, sizeof err) == 0);
	CHECK(lp[0] == -1.5f && lp[1] == -0.25f && lp[2] == 0);
	CHECK(fw_teacher_parse_scores(vllm, strlen(vllm), seq, 3, lp, err, sizeof err) == 0);
	CHECK(lp[0] == -2.0f && lp[1] == -3.0f);
	/* other ids, another length, no log-probs, not JSON */
	seq[1] = 8;
	CHECK(fw_teacher_parse_scores(serve, strlen(serve), seq, 3, lp, err, sizeof err) == -1);
	CHECK(strstr(err, "other ids") != NULL);
	CHECK(fw_teacher_parse_scores(vllm, strlen(vllm), seq, 3, lp, err, sizeof err) == -1);
	CHECK(strstr(err, "no log-prob of id 8") != NULL);
	CHECK(fw_teacher_parse_scores(serve, strlen(serve), seq, 2, lp, err, sizeof err) == -1);
	CHECK(strstr(err, "scores 3 tokens, not 2") != NULL);
	const char *bare = "{\"choices\":[{\"text\":\"x\"}]}";

	CHECK(fw_teacher_parse_scores(bare, strlen(bare), seq, 3, lp, err, sizeof err) == -1);
	CHECK(strstr(err, "no prompt log-probs") != NULL);
	CHECK(fw_teacher_parse_scores("<html>", 6, seq, 3, lp, err, sizeof err) == -1);
	CHECK(strstr(err, "not JSON") != NULL);
}

TEST(teacher_specs)
{
	char err[160];

	CHECK(fw_teacher_open("bogus:x", 1, 0, err, sizeof err) == NULL);
	CHECK(strstr(err, "want builtin:DIR or http:URL") != NULL);
	CHECK(fw_teacher_open("builtin:/nonexistent", 1, 0, err, sizeof err) == NULL);
	CHECK(strstr(err, "/nonexistent") != NULL);
	/* a server that is not there: scoring fails with a reason */
	struct fw_teacher *T = fw_teacher_open("http:http://127.0.0.1:1/v1#m", 2, 0, err, sizeof err);
	int32_t seq[2] = { 1, 2 };
	float lp[2];

	CHECK(T != NULL);
	CHECK(fw_teacher_tok(T) == NULL && fw_teacher_max_pos(T) == 0);
	CHECK(fw_teacher_score(T, seq, 2, lp, err, sizeof err) == -1);
	CHECK(strstr(err, "http://127.0.0.1:1/v1/completions") != NULL);
	fw_teacher_free(T);
	fw_teacher_free(NULL);
}

TEST(hints_list_names_its_sources_and_refuses_others)
{
	struct fw_teach_conf C = { .use_env = 1 };
	int rules = 7, demo = 7;
	char ok[] = "rules,model:policy,demo";
	CHECK(fw_teach_parse_hints(ok, &C, &rules, &demo) == NULL);
	CHECK(!C.use_env && rules == 1 && demo == 1);
	CHECK_STR(C.hint_spec, "policy");
	char http[] = "env,model:http:u";
	CHECK(fw_teach_parse_hints(http, &C, &rules, &demo) == NULL);
	CHECK(C.use_env && !rules && !demo);
	CHECK_STR(C.hint_spec, "http:u");
	char bad[] = "env,model:ftp:x";
	CHECK_STR(fw_teach_parse_hints(bad, &C, &rules, &demo), "model:ftp:x");
	char empty[] = "env,model:builtin:";
	CHECK_STR(fw_teach_parse_hints(empty, &C, &rules, &demo), "model:builtin:");
	CHECK_EQ_INT(fw_teach_spec_ok("builtin:d"), 0);
	CHECK_EQ_INT(fw_teach_spec_ok("http:"), -1);
}

static const char FAILED[] =
	"{\"id\":\"r1\",\"turns\":[{\"role\":\"user\",\"text\":\"q\"},"
	"{\"role\":\"assistant\",\"text\":\"ls\"},{\"role\":\"tool\",\"text\":\"boom\",\"exit\":2},"
	"{\"role\":\"assistant\",\"text\":\"done\"}],"
	"\"grade\":{\"resolved\":false,\"reward\":0,\"reason\":\"1 of 1 fail\","
	"\"tests\":{\"t1\":\"fail\"},\"hacks\":[]}}";

TEST(one_record_gets_env_hints_and_says_why_it_has_no_credit)
{
	struct fw_teach_conf C = { .use_env = 1, .clip = 5, .timeout_s = 1, .max_chars = 400,
				   .demo_chars = 2000 };
	struct fw_teach_worker *W = fw_teach_worker_new();
	struct fw_teach_result res = { 0 };
	struct fw_buf b = { 0 }, js = { 0 };
	char err[256];

	CHECK(W != NULL);
	fw_teach_one(&C, W, test_rec(&b, FAILED), (struct fw_mpv){ NULL, 0 }, &res);
	CHECK_EQ_INT(res.bad, 0);
	CHECK_EQ_INT(res.diag.n, 0);
	CHECK(res.hinted && !res.credited && !res.split);
	/* digits of the reason count as N */
	CHECK_STR(res.omitted, "no teacher: no --teacher and no policy.ckpt");
	struct fw_mpv t, h, x;
	const char *s;
	size_t n;
	CHECK(fw_mp_get((struct fw_mpv){ res.out.p, res.out.n }, "teach", &t) == 1);
	CHECK(fw_mp_get(t, "hints", &h) == 1 && fw_mp_type(h) == FW_MP_ARRAY);
	CHECK(fw_mp_get(t, "adv_omitted", &x) == 1 && fw_mp_str(x, &s, &n) == 0);
	CHECK(fw_mp_get(t, "adv", &x) == 0);
	CHECK_EQ_INT(fw_json_from_mp(&js, h, err, sizeof err), 0);
	CHECK_EQ_INT(fw_buf_append(&js, "", 1), 0);
	CHECK(strstr((const char *)js.p, "\"test t1: fail") != NULL);
	CHECK(strstr((const char *)js.p, "\"turn\":1") != NULL);

	/* hints only: no credit asked, none omitted */
	C.no_teacher = 1;
	fw_teach_one(&C, W, test_rec(&b, FAILED), (struct fw_mpv){ NULL, 0 }, &res);
	CHECK(!res.hinted && !res.credited && res.out.n > 0);
	/* not a record: bad, and said why */
	uint8_t junk[1] = { 0x07 };
	fw_teach_one(&C, W, (struct fw_mpv){ junk, 1 }, (struct fw_mpv){ NULL, 0 }, &res);
	CHECK(res.bad && res.diag.n > 0 && res.out.n == 0);

	fw_teach_result_release(&res);
	fw_teach_worker_free(W);
	fw_teach_worker_free(NULL);
	fw_buf_release(&b);
	fw_buf_release(&js);
}

TEST(a_group_ends_at_a_new_key_and_its_demo_is_the_first_resolved)
{
	struct fw_teach_group G = { 0 };
	struct fw_buf b = { 0 };
	const char *recs[] = {
		"{\"id\":\"0\",\"task\":{\"id\":\"t\"},\"grade\":{\"resolved\":false}}",
		"{\"id\":\"1\",\"task\":{\"id\":\"t\"},\"grade\":{\"resolved\":true}}",
		"{\"id\":\"2\",\"task\":{\"id\":\"t\"},\"grade\":{\"resolved\":true}}",
	};
	uint64_t key = 0, k2;

	for (int i = 0; i < 3; i++) {
		struct fw_mpv v = test_rec(&b, recs[i]);
		CHECK_EQ_INT(fw_teach_group_key(v, &key), 1);
		CHECK_EQ_INT(fw_teach_group_ends(&G, 1, key), 0);
		CHECK_EQ_INT(fw_teach_group_add(&G, v, (uint64_t)i, 10 * (uint64_t)i, 1, key), 0);
	}
	CHECK_EQ_INT(G.n, 3);
	struct fw_mpv d = fw_teach_group_demo(&G), id;
	const char *s;
	size_t n;
	CHECK(fw_mp_get(d, "id", &id) == 1 && fw_mp_str(id, &s, &n) == 0 && n == 1 && *s == '1');
	CHECK(fw_mp_get(fw_teach_group_rec(&G, 2), "id", &id) == 1 &&
	      fw_mp_str(id, &s, &n) == 0 && *s == '2');
	CHECK_EQ_INT(G.r[2].offset, 20);
	CHECK(fw_teach_group_key(test_rec(&b, "{\"task\":{\"id\":\"u\"}}"), &k2) == 1 && k2 != key);
	CHECK_EQ_INT(fw_teach_group_ends(&G, 1, k2), 1);
	CHECK_EQ_INT(fw_teach_group_ends(&G, 0, key), 1);
	/* without a key the records have no demo */
	G.has = 0;
	CHECK_EQ_INT(fw_teach_group_demo(&G).n, 0);
	fw_teach_group_reset(&G);
	CHECK_EQ_INT(G.n, 0);
	CHECK_EQ_INT(fw_teach_group_ends(&G, 0, 0), 0);
	fw_teach_group_release(&G);
	fw_teach_group_release(NULL);
	fw_buf_release(&b);
}

TEST(tallies_count_credit_reasons_and_the_split)
{
	struct fw_teach_tally t = { 0 };
	struct fw_teach_result r = { 0 };
	struct fw_buf out = { 0 };

	CHECK_EQ_INT(fw_teach_tally_text(&t, "teach", &out), 0);
	CHECK_EQ_INT(out.n, 0);
	r.hinted = 1;
	r.credited = 1;
	r.split = 1;
	r.sum_diff = -3;
	r.n_diff = 2;
	r.sum_rest = 1;
	r.n_rest = 4;
	fw_teach_tally_add(&t, &r);
	r.credited = 0;
	r.split = 0;
	for (int i = 0; i < 12; i++) {
		snprintf(r.omitted, sizeof r.omitted, "reason %d", i < 2 ? 0 : i);
		fw_teach_tally_add(&t, &r);
	}
	CHECK_EQ_INT(t.nomit, FW_TEACH_NOMIT);
	CHECK_EQ_INT(t.omit[0].n, 2);
	CHECK_STR(t.omit[FW_TEACH_NOMIT - 1].why, "other reasons");
	CHECK_EQ_INT(t.omit[FW_TEACH_NOMIT - 1].n, 12 - 2 - (FW_TEACH_NOMIT - 2));
	CHECK_EQ_INT(fw_teach_tally_text(&t, "teach", &out), 0);
	CHECK_EQ_INT(fw_buf_append(&out, "", 1), 0);
	const char *s = (const char *)out.p;
	CHECK(!strncmp(s, "teach: credit for 1 of 13 failing rollouts (7.7%)\n"
			  "teach: omitted for 2: reason 0\n", 81));
	CHECK(strstr(s, "teach: credit beside a correct solution (1 rollouts): mean -1.500 on "
			"the 2 tokens that differ, 0.250 on the 4 others\n"));
	fw_buf_release(&out);
}

TEST_MAIN()
