/*
 * test_expr.c — the expression language of traj-filter: parsing, column
 * of syntax errors, and evaluation on msgpack records; and the 13-gram
 * decontamination set.
 */
#include "test.h"
#include "fw_decontam.h"
#include "fw_expr.h"
#include "fw_json.h"
#include "fw_mp.h"

static struct fw_buf rec;

static struct fw_mpv mp(const char *json)
{
	size_t used;
	struct fw_json_err e;
	fw_buf_reset(&rec);
	if (fw_json_to_mp(&rec, json, strlen(json), 1, &used, &e) != 1) {
		printf("# bad test JSON: %s\n", e.msg);
		return (struct fw_mpv){NULL, 0};
	}
	return (struct fw_mpv){rec.p, rec.n};
}

static const char *TRAJ =
	"{\"kind\":\"traj\",\"id\":\"ab12\",\"model\":\"ckpt-b\",\"v\":1,"
	"\"turns\":[{\"role\":\"system\",\"text\":\"be brief\"},"
	"{\"role\":\"user\",\"text\":\"Fix the Bug in parse_amount\"},"
	"{\"role\":\"assistant\",\"text\":\"\",\"calls\":[{\"id\":\"c1\",\"name\":\"bash\",\"args\":\"{}\"}]},"
	"{\"role\":\"tool\",\"text\":\"2 failed, 3 passed\",\"is_error\":true},"
	"{\"role\":\"assistant\",\"text\":\"Done. \\u00e9t\\u00e9\"}],"
	"\"feedback\":[{\"rating\":1,\"user\":\"u1\",\"origin\":\"external\"},"
	"{\"rating\":-1,\"user\":\"u2\",\"origin\":\"internal\"}],"
	"\"tags\":[],\"meta\":{\"item\":\"item-004\",\"my key\":7,\"big\":9007199254740993},"
	"\"score\":0.25}";

/* Truth of src on the TRAJ record; -1 when it does not parse. */
static int t(const char *src)
{
	char err[256];
	struct fw_expr *e = fw_expr_parse(src, err, sizeof err, NULL);
	if (!e) {
		printf("# parse error in %s: %s\n", src, err);
		return -1;
	}
	int r = fw_expr_test(e, mp(TRAJ));
	fw_expr_free(e);
	return r;
}

TEST(paths_and_literals)
{
	CHECK_EQ_INT(t(".model == \"ckpt-b\""), 1);
	CHECK_EQ_INT(t(".model == 'ckpt-b'"), 1);
	CHECK_EQ_INT(t(".model != \"ckpt-a\""), 1);
	CHECK_EQ_INT(t(".turns[0].role == \"system\""), 1);
	CHECK_EQ_INT(t(".turns[-1].role == \"assistant\""), 1);
	CHECK_EQ_INT(t(".turns[-5].role == \"system\""), 1);
	CHECK_EQ_INT(t(".turns[9].role == null"), 1);
	CHECK_EQ_INT(t(".meta.\"my key\" == 7"), 1);
	CHECK_EQ_INT(t(".meta[\"my key\"] == 7"), 1);
	CHECK_EQ_INT(t(".meta.big == 9007199254740993"), 1);
	CHECK_EQ_INT(t(".meta.big == 9007199254740992"), 0);
	CHECK_EQ_INT(t(".score == 0.25 and .score < 1e0"), 1);
	CHECK_EQ_INT(t(".missing"), 0);
	CHECK_EQ_INT(t(".missing == null"), 1);
	CHECK_EQ_INT(t("."), 1);
	CHECK_EQ_INT(t("true and not false"), 1);
}

TEST(comparisons_of_mismatched_types_are_false)
{
	CHECK_EQ_INT(t(".model == 1"), 0);
	CHECK_EQ_INT(t(".model != 1"), 1);
	CHECK_EQ_INT(t(".model < 1"), 0);
	CHECK_EQ_INT(t(".model >= 1"), 0);
	CHECK_EQ_INT(t(".missing < 1"), 0);
	CHECK_EQ_INT(t("\"abc\" < \"abd\" and \"ab\" < \"abc\""), 1);
}

TEST(logic_precedence_and_arithmetic)
{
	CHECK_EQ_INT(t("1 + 2 * 3 == 7"), 1);
	CHECK_EQ_INT(t("(1 + 2) * 3 == 9"), 1);
	CHECK_EQ_INT(t("7 % 4 == 3 and 7 / 2 == 3.5 and -(2 - 5) == 3"), 1);
	CHECK_EQ_INT(t("1 / 0 == null"), 1);
	CHECK_EQ_INT(t("not .model == \"ckpt-a\""), 1);
	CHECK_EQ_INT(t("false or true and false"), 0);
	CHECK_EQ_INT(t("false || true && true"), 1);
	CHECK_EQ_INT(t("!(.score > 1)"), 1);
	CHECK_EQ_INT(t(".score * 4 == 1"), 1);
	CHECK_EQ_INT(t(".model + 1 == null"), 1);
}

TEST(truthiness)
{
	CHECK_EQ_INT(t("0"), 0);
	CHECK_EQ_INT(t("\"\""), 0);
	CHECK_EQ_INT(t(".tags"), 0);
	CHECK_EQ_INT(t(".turns"), 1);
	CHECK_EQ_INT(t(".turns[2].text"), 0);
	CHECK_EQ_INT(t("null"), 0);
	CHECK_EQ_INT(t("0.5"), 1);
}

TEST(regex)
{
	CHECK_EQ_INT(t(".turns[1].text =~ \"bug\""), 0);
	CHECK_EQ_INT(t(".turns[1].text =~ \"(?i)bug\""), 1);
	CHECK_EQ_INT(t(".turns[1].text =~ \"^Fix\\\\b\""), 1);
	CHECK_EQ_INT(t(".turns[1].text =~ \"^Fix\\b\""), 1); /* unknown escape kept */
	CHECK_EQ_INT(t(".turns[3].text =~ \"\\d+ failed\""), 1);
	CHECK_EQ_INT(t(".turns[1].text !~ \"refund\""), 1);
	CHECK_EQ_INT(t(".turns[-1].text =~ \"\\u00e9t\\u00e9$\""), 1);
	CHECK_EQ_INT(t(".turns[-1].text =~ \"^Done\\\\. .t.$\""), 1); /* UTF-8 aware */
	CHECK_EQ_INT(t(".missing =~ \"\""), 0);
}

TEST(functions)
{
	CHECK_EQ_INT(t("len(.turns) == 5"), 1);
	CHECK_EQ_INT(t("len(.turns[-1].text) == 9"), 1); /* code points */
	CHECK_EQ_INT(t("len(.tags) == 0 and len(.missing) == 0"), 1);
	CHECK_EQ_INT(t("len(.meta) == 3"), 1);
	CHECK_EQ_INT(t("has(.meta.item) and not has(.meta.nope)"), 1);
	CHECK_EQ_INT(t("has(.turns[4]) and not has(.turns[5])"), 1);
	CHECK_EQ_INT(t("any(.feedback, .rating < 0)"), 1);
	CHECK_EQ_INT(t("all(.feedback, .rating < 0)"), 0);
	CHECK_EQ_INT(t("all(.feedback, .user =~ \"^u\")"), 1);
	CHECK_EQ_INT(t("any(.feedback, .rating < 0 and .origin == \"external\")"), 0);
	CHECK_EQ_INT(t("all(.tags, false)"), 1); /* vacuous */
	CHECK_EQ_INT(t("any(.missing, true)"), 0);
	CHECK_EQ_INT(t("count(.turns, .role == \"assistant\") == 2"), 1);
	CHECK_EQ_INT(t("any(.turns, any(.calls, .name == \"bash\"))"), 1);
	CHECK_EQ_INT(t("any(.meta, . == 7)"), 1); /* map values */
	CHECK_EQ_INT(t("contains(.turns[1].text, \"Bug\") and startswith(.model, \"ckpt\")"), 1);
	CHECK_EQ_INT(t("endswith(.model, \"-b\") and not endswith(.model, \"ckpt-bb\")"), 1);
	CHECK_EQ_INT(t("lower(.turns[1].text) =~ \"the bug\""), 1);
	CHECK_EQ_INT(t("type(.turns) == \"array\" and type(.meta) == \"object\""), 1);
	CHECK_EQ_INT(t("type(.score) == \"number\" and type(.x) == \"null\""), 1);
}

/* The column reported for a syntax error in src. */
static size_t col_of(const char *src, char *err, size_t n)
{
	size_t col = 99;
	struct fw_expr *e = fw_expr_parse(src, err, n, &col);
	fw_expr_free(e);
	return e ? 0 : col;
}

TEST(syntax_errors_name_the_column)
{
	char err[256];
	CHECK_EQ_INT(col_of(".model == ", err, sizeof err), 11);
	CHECK_STR(err, "column 11: expected an operand, found end of expression");
	CHECK_EQ_INT(col_of("len(.turns) > 10 andd x", err, sizeof err), 18);
	CHECK_EQ_INT(col_of("any(.feedback .rating < 0)", err, sizeof err), 15);
	CHECK_STR(err, "column 15: expected ',', found '.rating'");
	CHECK_EQ_INT(col_of("nope(.a)", err, sizeof err), 1);
	CHECK_STR(err, "column 1: unknown function 'nope'");
	CHECK_EQ_INT(col_of(".a == \"x", err, sizeof err), 7);
	CHECK_EQ_INT(col_of(".a =~ \"(\"", err, sizeof err), 7);
	CHECK(strstr(err, "bad regex") != NULL);
	CHECK_EQ_INT(col_of(".a =~ .b", err, sizeof err), 7);
	CHECK_EQ_INT(col_of("(.a == 1", err, sizeof err), 9);
	CHECK_EQ_INT(col_of("1 < 2 < 3", err, sizeof err), 7);
	CHECK_EQ_INT(col_of("has(1)", err, sizeof err), 5);
	CHECK_EQ_INT(col_of("", err, sizeof err), 1);
	CHECK_EQ_INT(col_of(".a # b", err, sizeof err), 4);
	CHECK_EQ_INT(col_of(".turns[x]", err, sizeof err), 8);
	CHECK_EQ_INT(col_of("model", err, sizeof err), 1);
}

TEST(nesting_is_limited)
{
	char src[2000], err[256];
	size_t k = 0;
	for (int i = 0; i < 500; i++)
		src[k++] = '(';
	src[k++] = '1';
	for (int i = 0; i < 500; i++)
		src[k++] = ')';
	src[k] = 0;
	CHECK(col_of(src, err, sizeof err) > 0);
	CHECK(strstr(err, "nested too deeply") != NULL);
	memset(src, 0, sizeof src);
	for (k = 0; k < 600; k += 2)
		src[k] = '-', src[k + 1] = ' ';
	src[k] = '1';
	CHECK(col_of(src, err, sizeof err) > 0);
}

TEST(eval_to_msgpack)
{
	char err[256];
	struct fw_buf out = {0}, js = {0};
	struct fw_expr *e = fw_expr_parse("len(.turns) * 2", err, sizeof err, NULL);
	CHECK(e != NULL);
	CHECK_EQ_INT(fw_expr_eval_mp(e, mp(TRAJ), &out), 0);
	CHECK_EQ_INT(fw_json_from_mp(&js, (struct fw_mpv){out.p, out.n}, err, sizeof err), 0);
	fw_buf_append(&js, "", 1);
	CHECK_STR((char *)js.p, "10");
	fw_expr_free(e);
	fw_buf_free(&out);
	fw_buf_free(&js);
}

/* ---- decontamination ---------------------------------------------------------- */

static const char *EVAL =
	"CI is red on main. Looks like next_run skips the last day of February in leap years.";

TEST(decontam_matches_a_shared_13_gram_after_normalization)
{
	struct fw_decontam *d = fw_decontam_new(13);
	CHECK_EQ_INT(fw_decontam_add(d, EVAL, strlen(EVAL), 5), 6); /* 18 words */
	struct fw_decontam_hit h;
	const char *same = "please: ci IS red on main -- looks like NEXT-RUN skips the last day!";
	CHECK_EQ_INT(fw_decontam_check(d, same, strlen(same), &h), 1);
	CHECK_EQ_INT(h.src, 5);
	struct fw_buf w = {0};
	fw_decontam_words(&w, h.text + h.start, h.end - h.start);
	fw_buf_append(&w, "", 1);
	CHECK_STR((char *)w.p, "ci is red on main looks like next run skips the last day");
	const char *twelve = "ci is red on main looks like next run skips the last";
	CHECK_EQ_INT(fw_decontam_check(d, twelve, strlen(twelve), &h), 0);
	const char *other = "CI is red on main. Looks like next_run skips the first day of March";
	CHECK_EQ_INT(fw_decontam_check(d, other, strlen(other), &h), 0);
	CHECK_EQ_INT(fw_decontam_add(d, "too short", 9, 6), 0);
	CHECK_EQ_INT(fw_decontam_size(d), 6);
	fw_buf_free(&w);
	fw_decontam_free(d);
}

TEST(decontam_takes_user_text_of_reference_records)
{
	struct fw_decontam *d = fw_decontam_new(13);
	/* From a traj record only the user's words count: the system prompt
	 * shared by every trajectory must not contaminate everything. */
	char json[1024];
	snprintf(json, sizeof json,
		 "{\"turns\":[{\"role\":\"system\",\"text\":\"%s\"},{\"role\":\"user\",\"text\":"
		 "\"one two three four five six seven eight nine ten eleven twelve thirteen\"}]}",
		 EVAL);
	CHECK_EQ_INT(fw_decontam_add_record(d, mp(json), 1), 1);
	CHECK_EQ_INT(fw_decontam_check_record(d, mp(TRAJ), NULL), 0);
	struct fw_decontam_hit h;
	CHECK_EQ_INT(fw_decontam_check_record(
			     d, mp("{\"a\":[{\"b\":\"x One two three four five six seven eight nine "
				   "ten eleven twelve thirteen\"}]}"),
			     &h),
		     1);
	CHECK_EQ_INT(h.src, 1);
	/* A task record: its prompt. */
	snprintf(json, sizeof json, "{\"kind\":\"task\",\"prompt\":\"%s\"}", EVAL);
	CHECK_EQ_INT(fw_decontam_add_record(d, mp(json), 2), 6);
	/* A record with none of the known fields: all of its strings. */
	CHECK_EQ_INT(fw_decontam_add_record(
			     d, mp("{\"q\":\"a b c d e f g h i j k l m n\",\"n\":1}"), 3),
		     2);
	fw_decontam_free(d);
}

TEST_MAIN()
