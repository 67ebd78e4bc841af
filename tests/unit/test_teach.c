/*
 * test_teach.c — environment hints and the teach sub-map, on records
 * packed here.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "fw_mp.h"
#include "fw_teach.h"

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
	CHECK(fw_teach_pack(&o, &hs, adv, 2, NULL, NULL) == 0);
	v = (struct fw_mpv){ o.p, o.n };
	CHECK(fw_mp_get(v, "hints", &x) == 1 && fw_mp_type(x) == FW_MP_ARRAY);
	CHECK(fw_mp_get(v, "adv", &x) == 1);
	struct fw_mp_iter it;
	CHECK(fw_mp_iter_init(&it, x) == 2);
	CHECK(fw_mp_iter_next(&it, &x) == 1 && !fw_mp_double(x, &d) && d == 0.5);
	o.n = 0;
	CHECK(fw_teach_pack(&o, &hs, NULL, 0, "no tokens", "/ck") == 0);
	v = (struct fw_mpv){ o.p, o.n };
	CHECK(fw_mp_get(v, "teacher", &x) == 1 && fw_mp_str_eq(x, "/ck", 3));
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

TEST_MAIN()
