/*
 * test_rollout.c — fill sites (stub found, completion cut, body put back),
 * rollout seeds and ids, patches, head-and-tail truncation, UTF-8 repair.
 *
 * The stubs are made by fw_mutate_stub(), the strategy task-mutate uses,
 * so a fill site is checked against the mutation it has to undo: the
 * removed body, given as a completion, must give back the original file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "fw_json.h"
#include "fw_mutate.h"
#include "fw_rollout.h"
#include "fw_rollout_run.h"

static const char py_src[] =
	"import os\n"
	"\n"
	"\n"
	"def add(a, b):\n"
	"    \"\"\"Sum of a and b.\n"
	"\n"
	"    Both are numbers.\n"
	"    \"\"\"\n"
	"    total = a + b\n"
	"\n"
	"    return total\n"
	"\n"
	"\n"
	"class K:\n"
	"    def m(self, x):\n"
	"        \"\"\"Method.\"\"\"\n"
	"        if x:\n"
	"            return 1\n"
	"        return 2\n"
	"\n"
	"    def n(self):\n"
	"        return 3\n";

static const char c_src[] =
	"#include <stdlib.h>\n"
	"\n"
	"/* Largest of a and b. */\n"
	"int max2(int a, int b)\n"
	"{\n"
	"\tif (a > b) {\n"
	"\t\treturn a; /* } in a comment */\n"
	"\t}\n"
	"\treturn b == '}' ? b : b;\n"
	"}\n"
	"\n"
	"int other(void)\n"
	"{\n"
	"\treturn 0;\n"
	"}\n";

/* Stubs sym in src, finds the site in the stubbed text, and puts the
 * removed body back as a completion followed by more text. */
static void round_trip(const char *src, const char *path, enum fw_lang lang, int start, int end,
		       const char *lang_name, const char *more)
{
	struct fw_symbol sym = { (char *)path, "f", lang, start, end, 0 };
	struct fw_mutation m;
	struct fw_fill_site site;
	char err[256] = "";

	CHECK_EQ_INT(fw_mutate_stub(&sym, src, strlen(src), &m), 0);
	if (!m.data)
		return;
	CHECK_EQ_INT(fw_fill_locate(m.data, m.len, lang_name, start, &site, err, sizeof err), 0);
	CHECK(site.a < site.b && site.b <= m.len);
	/* the prompt ends where the body began */
	CHECK(strncmp(m.data, src, site.a) == 0);
	/* the body followed by what a model goes on to write is cut at the end */
	/* a brace body starts after the line of its '{', where the prompt ends */
	const char *rm = m.removed + (lang != FW_LANG_PYTHON && m.removed[0] == '\n');
	size_t rn = strlen(rm);
	char *c = malloc(rn + strlen(more) + 1);
	strcpy(c, rm);
	strcat(c, more);
	/* no end before the body is complete */
	for (size_t k = 1; k < rn / 2; k++)
		CHECK(fw_fill_cut(&site, c, k) < 0 || fw_fill_cut(&site, c, k) >= (long)k - 1);
	long keep = fw_fill_cut(&site, c, strlen(c));
	CHECK_EQ_INT(keep, (long)rn);
	size_t nl;
	char *back = fw_fill_apply(&site, m.data, m.len, c, keep > 0 ? (size_t)keep : 0, &nl);
	CHECK(back && nl == strlen(src));
	if (back && strcmp(back, src))
		printf("# got:\n%s# want:\n%s", back, src);
	CHECK(back && strcmp(back, src) == 0);
	free(back);
	free(c);
	fw_mutation_release(&m);
}

TEST(python_fill_puts_the_body_back_and_stops_at_the_next_def)
{
	round_trip(py_src, "a.py", FW_LANG_PYTHON, 4, 11, "python", "\ndef next_one():\n    pass\n");
	/* a method: the end is a line indented as the def, not the class */
	round_trip(py_src, "a.py", FW_LANG_PYTHON, 15, 19, "python", "\n    def n(self):\n");
}

TEST(python_cut_waits_for_the_indentation_and_skips_blank_lines)
{
	struct fw_fill_site s = { 0, 0, 0, 4 };

	CHECK_EQ_INT(fw_fill_cut(&s, "        x = 1\n", 14), -1);
	CHECK_EQ_INT(fw_fill_cut(&s, "        x = 1\n    ", 18), -1);
	CHECK_EQ_INT(fw_fill_cut(&s, "        x = 1\n\n    def", 22), 14);
	CHECK_EQ_INT(fw_fill_cut(&s, "        x = 1\n  \n        y\n", 27), -1);
	CHECK_EQ_INT(fw_fill_cut(&s, "x", 1), 0);
}

TEST(brace_fill_puts_the_body_back_and_ignores_braces_in_comments_and_literals)
{
	round_trip(c_src, "a.c", FW_LANG_C, 4, 10, "c", "}\n\nint more(void) {}\n");
	struct fw_fill_site s = { 0, 0, 1, 0 };
	const char *js = "\tconst s = \"}\"; // }\n\treturn `}` + s;\n}\nfunction g() {}";
	CHECK_EQ_INT(fw_fill_cut(&s, js, strlen(js)), (long)(strchr(js, '\n') - js) + 18);
	CHECK_EQ_INT(fw_fill_cut(&s, "\tif (x) {\n", 10), -1);
	CHECK_EQ_INT(fw_fill_cut(&s, "\t/* } ", 6), -1);
}

TEST(a_file_without_a_stub_or_in_another_language_is_refused)
{
	struct fw_fill_site s;
	char err[256];

	CHECK_EQ_INT(fw_fill_locate(py_src, strlen(py_src), "python", 4, &s, err, sizeof err), -1);
	CHECK(strstr(err, "no not-implemented stub") != NULL);
	CHECK_EQ_INT(fw_fill_locate(py_src, strlen(py_src), "rust", 4, &s, err, sizeof err), -1);
	CHECK(strstr(err, "rust") != NULL);
	CHECK_EQ_INT(fw_fill_locate(py_src, strlen(py_src), "python", 400, &s, err, sizeof err), -1);
}

TEST(seeds_and_ids_depend_on_every_input_and_nothing_else)
{
	uint64_t a = fw_rollout_seed(1, "abc", 3, 0);

	CHECK(a == fw_rollout_seed(1, "abc", 3, 0));
	CHECK(a != fw_rollout_seed(2, "abc", 3, 0));
	CHECK(a != fw_rollout_seed(1, "abd", 3, 0));
	CHECK(a != fw_rollout_seed(1, "abc", 3, 1));
	CHECK(a != 0);
	char i1[17], i2[17], i3[17];
	fw_rollout_id(i1, "abc", 3, "builtin:x", 1, 0);
	fw_rollout_id(i2, "abc", 3, "builtin:x", 1, 0);
	fw_rollout_id(i3, "abc", 3, "builtin:y", 1, 0);
	CHECK_STR(i1, i2);
	CHECK(strcmp(i1, i3) != 0);
	CHECK_EQ_INT(strlen(i1), 16);
}

TEST(file_patch_is_a_git_diff_and_empty_for_no_change)
{
	char *p = NULL, err[256];

	CHECK_EQ_INT(fw_file_patch("d/a.py", "x\ny\n", 4, "x\nz\n", 4, &p, err, sizeof err), 0);
	CHECK(p && strncmp(p, "diff --git a/d/a.py b/d/a.py\n", 29) == 0);
	CHECK(p && strstr(p, "\n-y\n+z\n") != NULL);
	free(p);
	CHECK_EQ_INT(fw_file_patch("a", "x\n", 2, "x\n", 2, &p, err, sizeof err), 0);
	CHECK_STR(p, "");
	free(p);
}

TEST(file_patch_of_text_that_is_not_utf8_is_a_binary_patch_with_full_ids)
{
	char *p = NULL, err[256];

	CHECK_EQ_INT(fw_file_patch("a.txt", "caf\xe9\n", 5, "caf\xe9s\n", 6, &p, err, sizeof err),
		     0);
	CHECK(p && strstr(p, "\nGIT binary patch\n") != NULL);
	CHECK(p && fw_utf8_valid((const uint8_t *)p, strlen(p)));
	/* git apply needs the whole ids for a binary patch */
	CHECK(p && strstr(p, "\nindex ") && strcspn(strstr(p, "\nindex ") + 7, ".") == 40);
	free(p);
}

TEST(a_policy_sees_the_problem_not_the_host_nor_the_solution)
{
	struct fw_buf in = { 0 }, out = { 0 }, js = { 0 };
	struct fw_json_err je;
	size_t used;
	char err[256];
	const char *task =
		"{\"kind\":\"task\",\"id\":\"t1\",\"v\":1,\"repo\":\"/home/me/src\","
		"\"store\":\"/var/fw/st.git\",\"base\":\"b\",\"orig_tree\":\"o\",\"tree\":\"t\","
		"\"solution\":\"diff\",\"meta\":{\"host\":\"/x\"},\"prompt\":\"do it\","
		"\"targets\":[{\"path\":\"a.py\",\"symbol\":\"f\"}],\"test_cmd\":\"pytest\","
		"\"f2p\":[\"a\"],\"p2p\":[],\"split\":\"train\"}";

	CHECK_EQ_INT(fw_json_to_mp(&in, task, strlen(task), 1, &used, &je), 1);
	CHECK_EQ_INT(fw_task_for_policy(&out, (struct fw_mpv){ in.p, in.n }), 0);
	CHECK_EQ_INT(fw_json_from_mp(&js, (struct fw_mpv){ out.p, out.n }, err, sizeof err), 0);
	fw_buf_append(&js, "", 1);
	CHECK_STR((const char *)js.p,
		  "{\"kind\":\"task\",\"id\":\"t1\",\"v\":1,\"prompt\":\"do it\","
		  "\"targets\":[{\"path\":\"a.py\",\"symbol\":\"f\"}],\"test_cmd\":\"pytest\","
		  "\"f2p\":[\"a\"],\"p2p\":[],\"split\":\"train\"}");
	fw_buf_free(&in);
	fw_buf_free(&out);
	fw_buf_free(&js);
}

TEST(head_tail_keeps_both_ends_and_says_how_much_was_cut)
{
	size_t n;
	char *s = fw_head_tail("0123456789", 10, 3, 2, &n);

	CHECK_STR(s, "012\n[... 5 bytes cut ...]\n89");
	CHECK_EQ_INT(n, strlen(s));
	free(s);
	s = fw_head_tail("01234", 5, 3, 2, &n);
	CHECK_STR(s, "01234");
	free(s);
}

TEST(utf8_fix_replaces_only_bad_bytes)
{
	size_t n;
	char *s = fw_utf8_fix("a\xc3\xa9" "b\xff" "c\xe2\x82", 8, &n);

	CHECK_STR(s, "a\xc3\xa9" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd");
	CHECK_EQ_INT(n, strlen(s));
	free(s);
}

TEST(policy_specs_name_a_backend_and_its_argument)
{
	struct fw_rollout_cfg c = { 0 };
	static const struct {
		const char *spec;
		int ok;
		enum fw_policy_backend b;
		const char *arg;
	} cases[] = {
		{ "builtin:ck", 1, FW_POLICY_BUILTIN, "ck" },
		{ "exec:./agent --x", 1, FW_POLICY_EXEC, "./agent --x" },
		{ "http:http://h:1/v1", 1, FW_POLICY_HTTP, "http://h:1/v1" },
		{ "builtin:", 0, 0, NULL },
		{ "exec", 0, 0, NULL },
		{ "ftp:x", 0, 0, NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		c.policy = cases[i].spec;
		c.arg = NULL;
		CHECK_EQ_INT(fw_rollout_cfg_policy(&c), cases[i].ok ? 0 : -1);
		if (cases[i].ok)
			CHECK(c.backend == cases[i].b && !strcmp(c.arg, cases[i].arg));
		else
			CHECK(c.arg == NULL);
	}
}

TEST(workers_that_cannot_load_say_why_in_every_later_worker)
{
	struct fw_rollout_cfg c = { .policy = "exec:true" };
	struct fw_rollout_worker ws[3];
	char err[512] = "";
	CHECK_EQ_INT(fw_rollout_cfg_policy(&c), 0);
	memset(ws, 0, sizeof ws);
	/* exec loads nothing */
	CHECK_EQ_INT(fw_rollout_workers_load(ws, 3, &c, err, sizeof err), 0);
	for (int i = 0; i < 3; i++)
		CHECK(ws[i].o == &c && !ws[i].b && !ws[i].h && !ws[i].load_err[0]);
	c.policy = "builtin:/nonexistent/fw-checkpoint";
	CHECK_EQ_INT(fw_rollout_cfg_policy(&c), 0);
	memset(ws, 0, sizeof ws);
	CHECK_EQ_INT(fw_rollout_workers_load(ws, 3, &c, err, sizeof err), -1);
	CHECK(err[0] != '\0');
	for (int i = 0; i < 3; i++) {
		CHECK(ws[i].o == &c && !ws[i].b);
		CHECK(!strcmp(ws[i].load_err, err));
		fw_rollout_worker_release(&ws[i]);
	}
}

TEST(a_record_that_is_not_a_task_is_written_as_it_came)
{
	const uint8_t rec[] = { 0x81, 0xa4, 'k', 'i', 'n', 'd', 0xa4, 't', 'r', 'a', 'j' };
	struct fw_mpv v = { rec, sizeof rec };
	struct fw_rollout_job *j = fw_rollout_job_new(v, fw_mp_kind_is(v, "task"), "in", 2, 9);
	struct fw_rollout_worker w = { 0 };
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(!j->is_task && !strcmp(j->file, "in") && j->index == 2 && j->offset == 9);
	fw_rollout_job_run(&w, j);
	CHECK(j->r.out.n == sizeof rec && memcmp(j->r.out.p, rec, sizeof rec) == 0);
	CHECK_EQ_INT(j->r.failed, 0);
	fw_rollout_job_free(j);
	fw_rollout_job_free(NULL);
}

TEST_MAIN()
