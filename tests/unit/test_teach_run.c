/*
 * test_teach_run.c — fw_teach_run without a teacher model: the --hints
 * list, one record taught with hints only (the teach field it gets, why
 * it has no credit), groups and their demo, and the tallies' lines.
 */
#include <stdint.h>

#include "test.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_teach.h"
#include "fw_teach_run.h"

static struct fw_mpv mp_of(struct fw_buf *b, const char *js)
{
	struct fw_json_err e;
	size_t used;
	fw_buf_reset(b);
	if (fw_json_to_mp(b, js, strlen(js), 1, &used, &e) != 1)
		return (struct fw_mpv){ NULL, 0 };
	return (struct fw_mpv){ b->p, b->n };
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
	fw_teach_one(&C, W, mp_of(&b, FAILED), (struct fw_mpv){ NULL, 0 }, &res);
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
	fw_teach_one(&C, W, mp_of(&b, FAILED), (struct fw_mpv){ NULL, 0 }, &res);
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
		struct fw_mpv v = mp_of(&b, recs[i]);
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
	CHECK(fw_teach_group_key(mp_of(&b, "{\"task\":{\"id\":\"u\"}}"), &k2) == 1 && k2 != key);
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
