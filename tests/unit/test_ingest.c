/*
 * test_ingest.c — the parts of fw_ingest.h that bats cannot reach one by
 * one: time normalisation, format detection on prefixes, content ids,
 * rating scales, Claude Code trees with broken or looping links, a
 * trajectory finished for output and the summary of a run.
 */
#include <unistd.h>

#include "fw_ingest.h"
#include "fw_mp.h"
#include "test.h"

static const char *tm_of(json_t *v)
{
	static char out[32];
	int rc = fw_ingest_time(v, out, sizeof out);
	json_decref(v);
	return rc ? "ERR" : out;
}

TEST(times_become_rfc3339_utc)
{
	CHECK_STR(tm_of(json_string("2026-11-02T08:00:00Z")), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("2026-11-02T09:00:00.123+01:00")), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("2026-11-02T06:30:00-0130")), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("2026-11-02 08:00:00")), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("2026-11-02")), "2026-11-02T00:00:00Z");
	CHECK_STR(tm_of(json_integer(1793606400)), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_integer(1793606400123LL)), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_real(1793606400.9)), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("1793606400")), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("1793606400123")), "2026-11-02T08:00:00Z");
	CHECK_STR(tm_of(json_string("2026110")), "ERR");
	CHECK_STR(tm_of(json_string("yesterday")), "ERR");
	CHECK_STR(tm_of(json_string("2026-13-01T00:00:00Z")), "ERR");
	CHECK_STR(tm_of(json_string("2026-11-02T25:00:00Z")), "ERR");
	CHECK_STR(tm_of(json_string("2026-11-02T08:00:00Zjunk")), "ERR");
	CHECK_STR(tm_of(json_integer(-5)), "ERR");
	CHECK_STR(tm_of(json_true()), "ERR");
}

static enum fw_fmt det(const char *s, char *why)
{
	static char tmp[256];
	return fw_ingest_detect(s, strlen(s), why ? why : tmp, 256);
}

TEST(detection_by_keys)
{
	CHECK_EQ_INT(det("{\"object\":\"chat.completion\",\"messages\":[]}\n", NULL), FW_FMT_OPENAI_CHAT);
	CHECK_EQ_INT(det("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n", NULL),
		     FW_FMT_OPENAI_CHAT);
	CHECK_EQ_INT(det("{\"system\":\"s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n", NULL),
		     FW_FMT_ANTHROPIC);
	CHECK_EQ_INT(det("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}\n",
			 NULL), FW_FMT_ANTHROPIC);
	CHECK_EQ_INT(det("{\"object\":\"response\",\"output\":[]}\n", NULL), FW_FMT_OPENAI_RESPONSES);
	CHECK_EQ_INT(det("{\"uuid\":\"u\",\"parentUuid\":null,\"type\":\"user\"}\n", NULL),
		     FW_FMT_CLAUDE_CODE);
	CHECK_EQ_INT(det("{\"type\":\"summary\",\"summary\":\"x\",\"leafUuid\":\"u\"}\n", NULL),
		     FW_FMT_CLAUDE_CODE);
	CHECK_EQ_INT(det("[{\"conversations\":[{\"from\":\"human\",\"value\":\"x\"}]}]", NULL),
		     FW_FMT_SHAREGPT);
	CHECK_EQ_INT(det("{\"trajectory\":[],\"history\":[],\"info\":{}}", NULL), FW_FMT_SWE_AGENT);
}

TEST(detection_of_agent_formats)
{
	/* mini-swe-agent: the document, and a bare list of messages */
	CHECK_EQ_INT(det("{\"info\":{\"mini_version\":\"1.0\"},\"messages\":[]}", NULL),
		     FW_FMT_MINI_SWE_AGENT);
	CHECK_EQ_INT(det("{\"messages\":[],\"trajectory_format\":\"mini-swe-agent-1\"}\n", NULL),
		     FW_FMT_MINI_SWE_AGENT);
	CHECK_EQ_INT(det("[\n  {\"role\": \"system\", \"content\": \"x\"},\n  {\"role\": \"user\"", NULL),
		     FW_FMT_MINI_SWE_AGENT);
	/* OpenHands: an event list, pretty or not, and evaluation output */
	CHECK_EQ_INT(det("[{\"id\":0,\"source\":\"user\",\"action\":\"message\",\"args\":{}}]\n", NULL),
		     FW_FMT_OPENHANDS);
	CHECK_EQ_INT(det("[\n {\"id\": 0, \"source\": \"agent\", \"action\": \"system\",", NULL),
		     FW_FMT_OPENHANDS);
	CHECK_EQ_INT(det("{\"instance_id\":\"i\",\"history\":[{\"id\":1,\"observation\":\"run\"}]}\n", NULL),
		     FW_FMT_OPENHANDS);
	/* Codex: any rollout line type, the first line or a later one */
	CHECK_EQ_INT(det("{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{\"id\":\"s\"}}\n", NULL),
		     FW_FMT_CODEX);
	CHECK_EQ_INT(det("{\"timestamp\":\"t\",\"type\":\"response_item\",\"payload\":{}}\n", NULL),
		     FW_FMT_CODEX);
	/* a type Codex does not write is not taken for a rollout */
	CHECK_EQ_INT(det("{\"timestamp\":\"t\",\"type\":\"other\",\"payload\":{}}\n", NULL), FW_FMT_UNKNOWN);
	/* OTLP JSON, also cut by the window */
	CHECK_EQ_INT(det("{\"resourceSpans\":[]}\n", NULL), FW_FMT_OTEL);
	CHECK_EQ_INT(det("{\n \"resourceSpans\": [\n  {\"resource\": {\"attributes\": [", NULL), FW_FMT_OTEL);
	/* Claude Code files may begin with a title */
	CHECK_EQ_INT(det("{\"type\":\"ai-title\",\"aiTitle\":\"t\",\"sessionId\":\"s\"}\n", NULL),
		     FW_FMT_CLAUDE_CODE);
	/* a request and its reply: the reply's shape decides */
	CHECK_EQ_INT(det("{\"request\":{\"model\":\"claude-x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]},"
			 "\"response\":{\"id\":\"msg_1\",\"content\":[{\"type\":\"text\",\"text\":\"yo\"}]}}\n", NULL),
		     FW_FMT_ANTHROPIC);
	CHECK_EQ_INT(det("{\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]},"
			 "\"response\":{\"choices\":[]}}\n", NULL), FW_FMT_OPENAI_CHAT);
}

TEST(detection_of_prefixes_binary_and_bad_first_lines)
{
	char why[256];

	/* a pretty-printed document cut by the detection window */
	CHECK_EQ_INT(det("{\n  \"environment\": \"swe_main\",\n  \"trajectory\": [\n    {\"action\": \"ls", NULL),
		     FW_FMT_SWE_AGENT);
	/* a malformed first line does not hide the format of the next */
	CHECK_EQ_INT(det("{\"conversations\": [\n{\"id\":\"a\",\"conversations\":[]}\n", NULL),
		     FW_FMT_SHAREGPT);
	CHECK_EQ_INT(fw_ingest_detect("\x81\xa4kind\xa4traj", 11, why, sizeof why), FW_FMT_FLYWHEEL);
	CHECK_EQ_INT(fw_ingest_detect("\x28\xb5\x2f\xfd\x00", 5, why, sizeof why), FW_FMT_FLYWHEEL);
	CHECK_EQ_INT(det("\xef\xbb\xbf{\"conversations\":[]}\n", NULL), FW_FMT_SHAREGPT);

	CHECK_EQ_INT(det("hello world\n", why), FW_FMT_UNKNOWN);
	CHECK_STR(why, "neither JSON nor msgpack (first byte 0x68)");
	CHECK_EQ_INT(det("{\"foo\": 1, \"bar\": 2}\n", why), FW_FMT_UNKNOWN);
	CHECK_STR(why, "a JSON object with keys 'foo', 'bar'");
	CHECK_EQ_INT(det("  \n", why), FW_FMT_UNKNOWN);
	CHECK_STR(why, "empty input");
	CHECK_EQ_INT(det("{\"a\": [1, 2", why), FW_FMT_UNKNOWN);
	CHECK(strncmp(why, "no JSON value parses", 20) == 0);
}

TEST(format_names_round_trip)
{
	for (int f = 1; f < FW_FMT_N; f++)
		CHECK_EQ_INT(fw_fmt_from_name(fw_fmt_name((enum fw_fmt)f)), f);
	CHECK_EQ_INT(fw_fmt_from_name("yaml"), FW_FMT_UNKNOWN);
	CHECK_STR(fw_fmt_name(FW_FMT_N), "unknown");
}

static json_t *conv(enum fw_fmt f, const char *js)
{
	char err[256];
	json_error_t je;
	json_t *doc = json_loads(js, 0, &je);
	json_t *t = fw_ingest_convert(f, doc, NULL, err, sizeof err);
	if (!t)
		printf("# %s\n", err);
	json_decref(doc);
	return t;
}

TEST(content_ids_depend_on_model_and_turns_only)
{
	json_t *a = conv(FW_FMT_SHAREGPT,
			 "{\"id\":\"x1\",\"model\":\"m\",\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"}]}");
	json_t *b = conv(FW_FMT_SHAREGPT, "{\"id\":\"x2\",\"model\":\"m\",\"created\":5,\"metadata\":{\"k\":1},"
				  "\"conversations\":[{\"from\":\"user\",\"value\":\"hi\"}]}");
	json_t *c = conv(FW_FMT_SHAREGPT,
			 "{\"id\":\"x1\",\"model\":\"n\",\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"}]}");
	CHECK(a && b && c);
	if (!a || !b || !c)
		return;
	CHECK_EQ_INT(fw_ingest_set_id(a), 0);
	fw_ingest_set_id(b);
	fw_ingest_set_id(c);
	const char *ia = json_string_value(json_object_get(a, "id"));
	CHECK_EQ_INT(strlen(ia), 16);
	CHECK_STR(ia, json_string_value(json_object_get(b, "id")));
	CHECK(strcmp(ia, json_string_value(json_object_get(c, "id"))) != 0);
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

TEST(wrong_field_types_are_named)
{
	char err[256];
	json_error_t je;
	json_t *doc = json_loads("{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
				 "\"id\":\"t\",\"name\":\"n\",\"input\":\"str\"}]}]}", 0, &je);
	CHECK(fw_ingest_convert(FW_FMT_ANTHROPIC, doc, NULL, err, sizeof err) == NULL);
	CHECK_STR(err, "'messages[0].content[0].input' is string, not object");
	json_decref(doc);
	doc = json_loads("{\"conversations\":[{\"from\":\"narrator\",\"value\":\"x\"}]}", 0, &je);
	CHECK(fw_ingest_convert(FW_FMT_SHAREGPT, doc, NULL, err, sizeof err) == NULL);
	CHECK_STR(err, "'conversations[0].from' is 'narrator': not a known speaker");
	json_decref(doc);
}

TEST(redaction_counts_land_in_meta)
{
	struct fw_redact_counts tot;
	char err[256];
	struct fw_redact *r = fw_redact_new(err, sizeof err);
	json_t *t = conv(FW_FMT_OPENAI_CHAT,
			 "{\"messages\":[{\"role\":\"user\",\"content\":\"mail a@b.io or c@d.io\"},"
			 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"1\",\"function\":"
			 "{\"name\":\"bash\",\"arguments\":\"{\\\"cmd\\\":\\\"export K=AKIAABCDEFGHIJKLMNOP\\\"}\"}}]}]}");
	CHECK(r && t);
	if (!r || !t)
		return;
	memset(&tot, 0, sizeof tot);
	CHECK_EQ_INT(fw_ingest_redact(t, r, &tot), 3);
	json_t *red = json_object_get(json_object_get(t, "meta"), "redactions");
	CHECK_EQ_INT(json_integer_value(json_object_get(red, "email")), 2);
	CHECK_EQ_INT(json_integer_value(json_object_get(red, "aws")), 1);
	CHECK_EQ_INT(tot.n[FW_RD_EMAIL], 2);
	json_t *call = json_array_get(json_object_get(json_array_get(json_object_get(t, "turns"), 1), "calls"), 0);
	CHECK_STR(json_string_value(json_object_get(call, "args")), "{\"cmd\":\"export K=<REDACTED:aws>\"}");
	/* metadata from the log is redacted, the source id is not */
	json_t *meta = json_object_get(t, "meta");
	json_object_set_new(meta, "source_id", json_string("id-x@y.io"));
	json_object_set_new(meta, "owner", json_pack("{s[ss]}", "mails", "e@f.io", "ok"));
	CHECK_EQ_INT(fw_ingest_redact(t, r, NULL), 1);
	CHECK_STR(json_string_value(json_object_get(meta, "source_id")), "id-x@y.io");
	CHECK_STR(json_string_value(json_array_get(json_object_get(json_object_get(meta, "owner"), "mails"), 0)),
		  "<REDACTED:email>");
	CHECK_EQ_INT(json_integer_value(json_object_get(red, "email")), 3);
	/* nothing left: a second pass finds nothing and leaves the counts */
	CHECK_EQ_INT(fw_ingest_redact(t, r, NULL), 0);
	CHECK_EQ_INT(json_integer_value(json_object_get(red, "email")), 3);
	json_decref(t);
	fw_redact_free(r);
}

/* Writes text to a temporary file; returns its path (static). */
static const char *tmpfile_with(const char *text, const char *suffix)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/test_ingest_XXXXXX%s", suffix);
	int fd = mkstemps(path, (int)strlen(suffix));
	if (fd < 0)
		return NULL;
	if (write(fd, text, strlen(text)) < 0)
		path[0] = 0;
	close(fd);
	return path;
}

static int count_bad(void *ctx, const char *file, long line, const char *why)
{
	(*(int *)ctx)++;
	return 0;
}

/* Rating that trace got after loading text as a feedback file. */
static long rating_after(const char *text, const char *trace)
{
	struct fw_feedback *fb = fw_feedback_new();
	char err[256];
	int bad = 0;
	const char *p = tmpfile_with(text, ".csv");
	long r = 99;

	if (!p || fw_feedback_load(fb, p, count_bad, &bad, err, sizeof err))
		goto out;
	json_t *t = json_pack("{s[]}", "feedback");
	if (fw_feedback_join(fb, trace, t) == 1)
		r = (long)json_integer_value(json_object_get(json_array_get(json_object_get(t, "feedback"), 0),
							     "rating"));
	json_decref(t);
out:
	if (p)
		unlink(p);
	fw_feedback_free(fb);
	return r;
}

TEST(rating_scale_is_decided_per_file)
{
	/* with a 5 in the file, 1 is one star */
	CHECK_EQ_INT(rating_after("id,rating\nt1,1\nt2,5\n", "t1"), -1);
	CHECK_EQ_INT(rating_after("id,rating\nt1,1\nt2,5\n", "t2"), 1);
	/* on a ±1 scale 1 is up and 0 is down */
	CHECK_EQ_INT(rating_after("id,rating\nt1,1\nt2,-1\n", "t1"), 1);
	CHECK_EQ_INT(rating_after("id,rating\nt1,0\nt2,1\n", "t1"), -1);
	/* a column called stars is a 1-5 scale even when only 1s are seen */
	CHECK_EQ_INT(rating_after("id,stars\nt1,1\n", "t1"), -1);
	CHECK_EQ_INT(rating_after("id,vote\nt1,\xf0\x9f\x91\x8d\n", "t1"), 1);
	CHECK_EQ_INT(rating_after("{\"trace_id\":\"t1\",\"rating\":\"Thumbs Down\"}\n", "t1"), -1);
	/* a 3 of 5 is neutral: not joined */
	CHECK_EQ_INT(rating_after("id,rating\nt1,3\nt2,5\n", "t1"), 99);
	/* signs and stars in one file: refused, nothing joined */
	CHECK_EQ_INT(rating_after("id,rating\nt1,1\nt2,-1\nt3,2\n", "t1"), 99);
	CHECK_EQ_INT(rating_after("id,stars\nt1,-1\n", "t1"), 99);
}

/* Rating of trace after loading text on scale s. */
static long rating_on(enum fw_rating_scale s, const char *text, const char *trace, char *why)
{
	struct fw_feedback *fb = fw_feedback_new();
	char err[256];
	int bad = 0;
	const char *p = tmpfile_with(text, ".csv");
	long r = 99;

	fw_feedback_set_scale(fb, s);
	if (!p || fw_feedback_load(fb, p, count_bad, &bad, err, sizeof err))
		goto out;
	fw_feedback_scale(fb, why, 160);
	json_t *t = json_pack("{s[]}", "feedback");
	if (fw_feedback_join(fb, trace, t) == 1)
		r = (long)json_integer_value(json_object_get(json_array_get(json_object_get(t, "feedback"), 0),
							     "rating"));
	json_decref(t);
out:
	if (p)
		unlink(p);
	fw_feedback_free(fb);
	return r;
}

TEST(rating_scales_set_by_name)
{
	char why[160] = "";
	const char *mixed = "id,rating\nt1,1\nt2,-1\nt3,2\nt4,0\n";

	CHECK_EQ_INT(rating_on(FW_SCALE_SCORE, mixed, "t1", why), 1);
	CHECK_STR(why, "as --rating-scale says");
	CHECK_EQ_INT(rating_on(FW_SCALE_SCORE, mixed, "t2", why), -1);
	CHECK_EQ_INT(rating_on(FW_SCALE_SCORE, mixed, "t3", why), 1);
	CHECK_EQ_INT(rating_on(FW_SCALE_SCORE, mixed, "t4", why), 99); /* 0 is neutral */
	CHECK_EQ_INT(rating_on(FW_SCALE_SCORE, "id,rating\nt1,-0.5\n", "t1", why), -1);
	/* thumbs: a 2 is no thumb; stars: a -1 is no star */
	CHECK_EQ_INT(rating_on(FW_SCALE_THUMBS, mixed, "t3", why), 99);
	CHECK_EQ_INT(rating_on(FW_SCALE_THUMBS, mixed, "t4", why), -1);
	CHECK_EQ_INT(rating_on(FW_SCALE_STARS, mixed, "t1", why), -1);
	CHECK_EQ_INT(rating_on(FW_SCALE_STARS, mixed, "t2", why), 99);
	/* decided: the reason names the evidence */
	CHECK_EQ_INT(rating_on(FW_SCALE_AUTO, "id,rating\nt1,1\nt2,4\n", "t1", why), -1);
	CHECK_STR(why, "a rating of 4 at line 3");
	CHECK_EQ_INT(rating_on(FW_SCALE_AUTO, "id,Stars\nt1,1\n", "t1", why), -1);
	CHECK_STR(why, "the rating column is called 'Stars'");
	CHECK_EQ_INT(rating_on(FW_SCALE_AUTO, "id,rating\nt1,1\n", "t1", why), 1);
	CHECK_STR(why, "no rating above 1");
	for (int i = FW_SCALE_THUMBS; i <= FW_SCALE_SCORE; i++)
		CHECK_EQ_INT(fw_rating_scale_from_name(fw_rating_scale_name((enum fw_rating_scale)i)), i);
	CHECK_EQ_INT(fw_rating_scale_from_name("auto"), FW_SCALE_AUTO);
}

TEST(the_latest_vote_of_a_user_wins_whatever_the_order)
{
	const char *text = "id,rating,user,time\n"
			   "t1,up,u1,2026-11-02T10:00:00Z\n"
			   "t1,down,u1,2026-11-02T09:00:00Z\n"
			   "t1,down,u2,2026-11-02T09:00:00Z\n"
			   "t1,up,u2,2026-11-02T11:00:00Z\n";
	struct fw_feedback *fb = fw_feedback_new();
	struct fw_feedback_stats st;
	char err[256];
	const char *p = tmpfile_with(text, ".csv");
	json_t *t = json_pack("{s[]}", "feedback");

	CHECK(p && fw_feedback_load(fb, p, NULL, NULL, err, sizeof err) == 0);
	CHECK_EQ_INT(fw_feedback_join(fb, "t1", t), 2);
	json_t *f = json_object_get(t, "feedback");
	CHECK_EQ_INT(json_array_size(f), 2);
	for (size_t i = 0; i < json_array_size(f); i++)
		CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(f, i), "rating")), 1);
	fw_feedback_stats(fb, &st);
	CHECK_EQ_INT(st.events, 4);
	CHECK_EQ_INT(st.superseded, 2);
	CHECK_EQ_INT(st.joined, 2);
	/* joined events are not orphans */
	CHECK_EQ_INT(fw_feedback_orphans(fb, NULL, NULL), 0);
	json_decref(t);
	fw_feedback_free(fb);
	if (p)
		unlink(p);
}

static json_t *session(const char *js)
{
	char err[256];
	json_error_t je;
	json_t *ev = json_loads(js, 0, &je);
	json_t *t = fw_ingest_claude_session(ev, err, sizeof err);
	if (!t)
		printf("# %s\n", err);
	json_decref(ev);
	return t;
}

TEST(claude_code_broken_and_looping_links_end_the_walk)
{
	json_t *t = session("[{\"uuid\":\"b\",\"parentUuid\":\"gone\",\"type\":\"user\",\"sessionId\":\"s\","
			    "\"message\":{\"role\":\"user\",\"content\":\"hi\"}}]");
	CHECK(t != NULL);
	CHECK(json_is_true(json_object_get(json_object_get(t, "meta"), "broken_chain")));
	CHECK_EQ_INT(json_array_size(json_object_get(t, "turns")), 1);
	json_decref(t);

	/* a cycle a -> b -> a must not hang */
	t = session("[{\"uuid\":\"a\",\"parentUuid\":\"b\",\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"x\"}},"
		    "{\"uuid\":\"b\",\"parentUuid\":\"a\",\"type\":\"assistant\",\"message\":{\"role\":\"assistant\","
		    "\"content\":[{\"type\":\"text\",\"text\":\"y\"}]}}]");
	CHECK(t != NULL);
	CHECK(json_array_size(json_object_get(t, "turns")) <= 3);
	json_decref(t);

	/* a compaction boundary (system event, no parent) links back logically */
	t = session("[{\"uuid\":\"a\",\"parentUuid\":null,\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"x\"}},"
		    "{\"uuid\":\"c\",\"parentUuid\":null,\"logicalParentUuid\":\"a\",\"type\":\"system\",\"subtype\":\"compact_boundary\"},"
		    "{\"uuid\":\"b\",\"parentUuid\":\"c\",\"type\":\"assistant\",\"message\":{\"role\":\"assistant\","
		    "\"content\":[{\"type\":\"text\",\"text\":\"y\"}]}}]");
	CHECK(t != NULL);
	CHECK_EQ_INT(json_array_size(json_object_get(t, "turns")), 2);
	json_decref(t);

	/* only side-chain events: nothing to rebuild */
	char err[256];
	json_error_t je;
	json_t *ev = json_loads("[{\"uuid\":\"a\",\"isSidechain\":true,\"type\":\"user\",\"message\":{\"role\":\"user\","
				"\"content\":\"x\"}}]", 0, &je);
	CHECK(fw_ingest_claude_session(ev, err, sizeof err) == NULL);
	CHECK_STR(err, "no user or assistant event outside side chains");
	json_decref(ev);
}

TEST(a_trajectory_finished_with_its_place_meta_model_and_content_id)
{
	json_t *meta = json_pack("{s:s, s:s}", "team", "a", "file", "not-this");
	json_t *t = conv(FW_FMT_SHAREGPT,
			 "{\"id\":\"x1\",\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"}]}");
	json_t *u = json_deep_copy(t);

	CHECK(meta && t && u);
	if (!meta || !t || !u)
		return;
	json_object_set_new(json_object_get(t, "meta"), "team", json_string("kept"));
	CHECK_EQ_INT(fw_ingest_finish(t, "log.jsonl", 7, NULL, meta), 0);
	json_t *m = json_object_get(t, "meta");
	CHECK_STR(json_string_value(json_object_get(m, "file")), "log.jsonl");
	CHECK(json_integer_value(json_object_get(m, "line")) == 7);
	CHECK_STR(json_string_value(json_object_get(m, "team")), "kept");
	CHECK_EQ_INT(strlen(json_string_value(json_object_get(t, "id"))), 16);
	/* --model: a record naming none gets it, and the id it implies */
	CHECK_EQ_INT(fw_ingest_finish(u, "log.jsonl", 7, "ckpt-z", NULL), 0);
	CHECK_STR(json_string_value(json_object_get(u, "model")), "ckpt-z");
	CHECK(json_object_get(json_object_get(u, "meta"), "team") == NULL);
	json_t *v = json_deep_copy(u);
	json_object_set_new(v, "id", json_string(""));
	fw_ingest_set_id(v);
	CHECK_STR(json_string_value(json_object_get(u, "id")),
		  json_string_value(json_object_get(v, "id")));
	CHECK(strcmp(json_string_value(json_object_get(u, "id")),
		     json_string_value(json_object_get(t, "id"))) != 0);
	json_decref(meta);
	json_decref(t);
	json_decref(u);
	json_decref(v);
}

TEST(the_summary_of_a_run_line_by_line)
{
	struct fw_ingest_tally n = { 0 };
	struct fw_feedback *fb = fw_feedback_new();
	json_t *scales = json_pack("[s]", "fb.csv: stars scale (a rating of 2 at line 2)");
	struct fw_buf b = { 0 };

	n.recs[FW_FMT_SHAREGPT] = 1;
	n.files[FW_FMT_SHAREGPT] = 1;
	n.recs[FW_FMT_CODEX] = 3;
	n.files[FW_FMT_CODEX] = 2;
	n.dups[FW_FMT_CODEX] = 1;
	n.bad[FW_FMT_OTEL] = 2; /* a format seen only in bad lines is still named */
	n.fb_bad = 4;
	n.red.n[0] = 2;
	n.red.n[FW_RD_NRULES - 1] = 1;
	CHECK_EQ_INT(fw_ingest_summary(&b, "fb-ingest", &n, fb, scales, 5, 1), 0);
	fw_buf_append(&b, "", 1);
	char want[1024];
	snprintf(want, sizeof want,
		 "fb-ingest: sharegpt: 1 trajectory from 1 file, 0 duplicates dropped, 0 skipped\n"
		 "fb-ingest: codex: 3 trajectories from 2 files, 1 duplicates dropped, 0 skipped\n"
		 "fb-ingest: otel: 0 trajectories from 0 files, 0 duplicates dropped, 2 skipped\n"
		 "fb-ingest: feedback: fb.csv: stars scale (a rating of 2 at line 2)\n"
		 "fb-ingest: feedback: 0 events, 0 joined, 5 orphaned, 0 superseded, 0 neutral, "
		 "4 skipped\n"
		 "fb-ingest: redactions: 3 (%s 2, %s 1)\n",
		 fw_redact_rule_name(0), fw_redact_rule_name(FW_RD_NRULES - 1));
	CHECK_STR((char *)b.p, want);
	b.n = 0;
	CHECK_EQ_INT(fw_ingest_summary(&b, "x", &(struct fw_ingest_tally){ 0 }, fb, NULL, 0, 0), 0);
	fw_buf_append(&b, "", 1);
	CHECK_STR((char *)b.p, "x: feedback: 0 events, 0 joined, 0 orphaned, 0 superseded, "
			       "0 neutral, 0 skipped\nx: redaction off\n");
	fw_buf_release(&b);
	json_decref(scales);
	fw_feedback_free(fb);
}

TEST_MAIN()
