/* test_mutate.c — mutations on real ctags spans for Python, C, JavaScript,
 * TypeScript and Go; each mutated file is checked by the language's own
 * parser where one is installed (python3, cc, node). */
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "fw_mutate.h"
#include "fw_workspace.h"

static char dir[256];

static void put(const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	char *slash = strrchr(p, '/');
	*slash = '\0';
	mkdir(p, 0755);
	*slash = '/';
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
}

static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd);
}

static const char *py_src =
	"import re\n"
	"\n"
	"\n"
	"def _norm(s):\n"
	"    return s.strip().lower()\n"
	"\n"
	"\n"
	"@cache\n"
	"def greet(name,\n"
	"          punct=\"!\"):\n"
	"    \"\"\"Say hello to ``name``.\n"
	"\n"
	"    Returns a string.\n"
	"    \"\"\"\n"
	"    n = _norm(name)\n"
	"    return \"hello \" + n + punct\n"
	"\n"
	"\n"
	"def only_doc():\n"
	"    \"\"\"Nothing else.\"\"\"\n"
	"\n"
	"\n"
	"def one(x): return x\n"
	"\n"
	"\n"
	"class Box:\n"
	"    def size(self):\n"
	"        '''Size of the box.'''\n"
	"        return 3\n";

static const char *c_src =
	"#include <stdlib.h>\n"
	"\n"
	"static int\n"
	"twice(int x)\n"
	"{\n"
	"\treturn 2 * x;\n"
	"}\n"
	"\n"
	"/* Four times x, computed\n"
	" * with a helper. */\n"
	"int quad(int x)\n"
	"{\n"
	"\tconst char *s = \"}{\";\n"
	"\t(void)s;\n"
	"\treturn twice(twice(x));\n"
	"}\n";

static const char *js_src =
	"// Adds two numbers.\n"
	"export function add(a, b) {\n"
	"  return a + b;\n"
	"}\n"
	"\n"
	"function helper(s) {\n"
	"  return `${s}}`;\n"
	"}\n"
	"\n"
	"export function shout(s) {\n"
	"  return helper(s).toUpperCase();\n"
	"}\n";

static const char *ts_src =
	"export function area(w: number, h: number): number {\n"
	"    return w * h;\n"
	"}\n";

static const char *go_src =
	"package geo\n"
	"\n"
	"// Area of a w by h rectangle.\n"
	"func Area(w, h int) int {\n"
	"\treturn w * h\n"
	"}\n"
	"\n"
	"func half(x int) int {\n"
	"\treturn x / 2\n"
	"}\n"
	"\n"
	"func Mid(w int) int {\n"
	"\treturn half(w)\n"
	"}\n";

/* Go doc comments start with the function's own name. */
static const char *go_doc_src =
	"package text\n"
	"\n"
	"import \"strings\"\n"
	"\n"
	"// Norm is s trimmed and lower-cased.\n"
	"func Norm(s string) string {\n"
	"\treturn lower(trim(s))\n"
	"}\n"
	"\n"
	"// lower lower-cases s.\n"
	"func lower(s string) string {\n"
	"\treturn strings.ToLower(s)\n"
	"}\n"
	"\n"
	"// trim drops the blanks around s.\n"
	"func trim(s string) string {\n"
	"\treturn strings.TrimSpace(s)\n"
	"}\n";

static struct fw_symbols syms;

static void setup(void)
{
	if (dir[0])
		return;
	snprintf(dir, sizeof dir, "/tmp/fw-test-mutate-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	put("pkg/mod.py", py_src);
	put("src/quad.c", c_src);
	put("web/add.js", js_src);
	put("web/area.ts", ts_src);
	put("geo/geo.go", go_src);
	put("text/text.go", go_doc_src);
	put("tests/test_mod.py", "from pkg import mod\n\ndef test_greet():\n    assert mod.greet('x')\n");
	put("bin/tool", "#!/usr/bin/env python3\n\ndef run():\n    print('hi')\n    return 0\n");
	char err[256] = "";
	CHECK_EQ_INT(fw_ctags(dir, FW_LANG_UNKNOWN, &syms, err, sizeof err), 0);
	if (err[0])
		printf("# %s\n", err);
}

static const struct fw_symbol *sym(const char *path, const char *name)
{
	for (size_t i = 0; i < syms.n; i++)
		if (!strcmp(syms.v[i].path, path) && !strcmp(syms.v[i].name, name))
			return &syms.v[i];
	printf("# no symbol %s in %s\n", name, path);
	return NULL;
}

static size_t sym_index(const char *path, const char *name)
{
	const struct fw_symbol *s = sym(path, name);
	return s ? (size_t)(s - syms.v) : 0;
}

/* Writes text to NAME.new in the scratch dir and returns the path. */
static const char *save(const char *name, const char *text)
{
	static char p[512];
	snprintf(p, sizeof p, "%s/out/%s", dir, name);
	mkdir(strcat(strcpy((char[512]){0}, dir), "/out"), 0755);
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	return p;
}

TEST(ctags_spans_for_five_languages)
{
	setup();
	const struct fw_symbol *s = sym("pkg/mod.py", "greet");
	CHECK(s && s->start == 9 && s->end == 16 && s->lang == FW_LANG_PYTHON);
	s = sym("pkg/mod.py", "size");
	CHECK(s && s->method);
	s = sym("src/quad.c", "quad");
	CHECK(s && s->start == 11 && s->end == 16 && s->lang == FW_LANG_C);
	CHECK(sym("web/add.js", "shout") != NULL);
	CHECK(sym("web/area.ts", "area") != NULL);
	s = sym("geo/geo.go", "Area");
	CHECK(s && s->start == 4 && s->end == 6 && s->lang == FW_LANG_GO);
	/* no extension: the #! line says Python */
	s = sym("bin/tool", "run");
	CHECK(s && s->start == 3 && s->end == 5 && s->lang == FW_LANG_PYTHON);
	/* sorted by path then line */
	for (size_t i = 1; i < syms.n; i++)
		CHECK(strcmp(syms.v[i - 1].path, syms.v[i].path) <= 0);
}

TEST(python_stub_keeps_decorator_signature_and_docstring)
{
	setup();
	struct fw_mutation m;
	CHECK_EQ_INT(fw_mutate_stub(sym("pkg/mod.py", "greet"), py_src, strlen(py_src), &m), 0);
	CHECK(strstr(m.data, "@cache\ndef greet(name,\n          punct=\"!\"):\n"
			     "    \"\"\"Say hello to ``name``.\n\n    Returns a string.\n    \"\"\"\n"
			     "    raise NotImplementedError\n\n\ndef only_doc") != NULL);
	CHECK_STR(m.removed, "    n = _norm(name)\n    return \"hello \" + n + punct\n");
	CHECK_STR(m.signature, "def greet(name,\n          punct=\"!\"):");
	CHECK_STR(m.doc, "Say hello to ``name``.\n\nReturns a string.");
	CHECK_EQ_INT(m.ntargets, 1);
	CHECK_STR(m.targets[0].symbol, "greet");
	/* the result still parses */
	CHECK_EQ_INT(sh("/usr/bin/python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' %s",
			save("stub.py", m.data)), 0);
	char *p = fw_task_prompt(&m, (const char *[]){ "tests/test_mod.py::test_greet" }, 1);
	CHECK(p && strstr(p, "`greet` in `pkg/mod.py`") && strstr(p, "- tests/test_mod.py::test_greet"));
	CHECK(p && strstr(p, "Returns a string.") && !strstr(p, "_norm(name)"));
	free(p);
	fw_mutation_release(&m);
	fw_mutation_release(NULL);
}

TEST(python_stub_of_a_method_and_nothing_to_remove)
{
	setup();
	struct fw_mutation m;
	CHECK_EQ_INT(fw_mutate_stub(sym("pkg/mod.py", "size"), py_src, strlen(py_src), &m), 0);
	CHECK(strstr(m.data, "        '''Size of the box.'''\n        raise NotImplementedError\n"));
	fw_mutation_release(&m);
	CHECK_EQ_INT(fw_mutate_stub(sym("pkg/mod.py", "only_doc"), py_src, strlen(py_src), &m), 1);
	CHECK_EQ_INT(fw_mutate_stub(sym("pkg/mod.py", "one"), py_src, strlen(py_src), &m), 1);
}

TEST(python_delete_feature_takes_the_private_helper)
{
	setup();
	struct fw_text files[] = {
		{ "pkg/mod.py", py_src, strlen(py_src) },
		{ "tests/test_mod.py", "mod.greet('x')\n", 15 },
	};
	size_t h[4];
	size_t k = fw_private_helpers(&syms, sym_index("pkg/mod.py", "greet"), files, 2, h, 4);
	CHECK_EQ_INT(k, 1);
	CHECK(k == 1 && strcmp(syms.v[h[0]].name, "_norm") == 0);
	const struct fw_symbol *hp[] = { &syms.v[h[0]] };
	struct fw_mutation m;
	CHECK_EQ_INT(fw_mutate_delete(FW_DELETE_FEATURE, sym("pkg/mod.py", "greet"), hp, 1,
				      py_src, strlen(py_src), &m), 0);
	CHECK(!strstr(m.data, "_norm") && !strstr(m.data, "@cache") && !strstr(m.data, "greet"));
	CHECK(strstr(m.data, "import re\n\n\ndef only_doc():\n") != NULL);
	CHECK(strstr(m.removed, "def _norm(s):") && strstr(m.removed, "@cache\ndef greet"));
	CHECK_EQ_INT(m.ntargets, 2);
	CHECK_STR(m.signature, "def greet(name,\n          punct=\"!\"):");
	char *p = fw_task_prompt(&m, (const char *[]){ "t" }, 1);
	CHECK(p && strstr(p, "private helpers only it used (`_norm`)"));
	free(p);
	fw_mutation_release(&m);
	/* a helper the tests call too is not private to the feature */
	files[1].data = "mod._norm('x')\n";
	files[1].len = strlen(files[1].data);
	CHECK_EQ_INT(fw_private_helpers(&syms, sym_index("pkg/mod.py", "greet"), files, 2, h, 4), 0);
}

TEST(c_stub_and_delete_handle_return_type_lines_comments_and_strings)
{
	setup();
	struct fw_mutation m;
	CHECK_EQ_INT(fw_mutate_stub(sym("src/quad.c", "quad"), c_src, strlen(c_src), &m), 0);
	CHECK(strstr(m.data, "int quad(int x)\n{\n\tabort(); /* not implemented */\n}\n") != NULL);
	CHECK(strstr(m.removed, "return twice(twice(x));") != NULL);
	CHECK_STR(m.signature, "int quad(int x)");
	CHECK_STR(m.doc, "/* Four times x, computed\n * with a helper. */");
	CHECK_EQ_INT(sh("cc -fsyntax-only -Wall %s", save("stub.c", m.data)), 0);
	fw_mutation_release(&m);

	struct fw_text files[] = { { "src/quad.c", c_src, strlen(c_src) } };
	size_t h[4];
	CHECK_EQ_INT(fw_private_helpers(&syms, sym_index("src/quad.c", "quad"), files, 1, h, 4), 1);
	const struct fw_symbol *hp[] = { &syms.v[h[0]] };
	CHECK_EQ_INT(fw_mutate_delete(FW_DELETE_FEATURE, sym("src/quad.c", "quad"), hp, 1, c_src,
				      strlen(c_src), &m), 0);
	CHECK_STR(m.data, "#include <stdlib.h>\n\n");
	CHECK(strstr(m.removed, "static int\ntwice(int x)") != NULL);
	fw_mutation_release(&m);
}

TEST(javascript_and_typescript_stubs_throw)
{
	setup();
	struct fw_mutation m;
	CHECK_EQ_INT(fw_mutate_stub(sym("web/add.js", "add"), js_src, strlen(js_src), &m), 0);
	CHECK(strstr(m.data, "export function add(a, b) {\n  throw new Error(\"not implemented\");\n}\n"));
	CHECK_STR(m.doc, "// Adds two numbers.");
	CHECK_EQ_INT(sh("node --check %s", save("stub.mjs", m.data)), 0);
	fw_mutation_release(&m);
	/* a brace inside a template literal does not end the body */
	CHECK_EQ_INT(fw_mutate_stub(sym("web/add.js", "helper"), js_src, strlen(js_src), &m), 0);
	CHECK(strstr(m.data, "function helper(s) {\n  throw new Error(\"not implemented\");\n}\n\nexport"));
	fw_mutation_release(&m);
	CHECK_EQ_INT(fw_mutate_stub(sym("web/area.ts", "area"), ts_src, strlen(ts_src), &m), 0);
	CHECK_STR(m.data, "export function area(w: number, h: number): number {\n"
			  "    throw new Error(\"not implemented\");\n}\n");
	fw_mutation_release(&m);
	/* exported functions are not private helpers; helper() is */
	struct fw_text files[] = { { "web/add.js", js_src, strlen(js_src) } };
	size_t h[4];
	CHECK_EQ_INT(fw_private_helpers(&syms, sym_index("web/add.js", "shout"), files, 1, h, 4), 1);
}

TEST(go_stub_panics_and_delete_takes_the_doc_comment)
{
	setup();
	struct fw_mutation m;
	CHECK_EQ_INT(fw_mutate_stub(sym("geo/geo.go", "Area"), go_src, strlen(go_src), &m), 0);
	CHECK(strstr(m.data, "func Area(w, h int) int {\n\tpanic(\"not implemented\")\n}\n"));
	CHECK_STR(m.doc, "// Area of a w by h rectangle.");
	fw_mutation_release(&m);
	CHECK_EQ_INT(fw_mutate_delete(FW_DELETE_FUNCTION, sym("geo/geo.go", "Area"), NULL, 0,
				      go_src, strlen(go_src), &m), 0);
	CHECK(strncmp(m.data, "package geo\n\nfunc half(x int) int {", 34) == 0);
	fw_mutation_release(&m);
	struct fw_text files[] = { { "geo/geo.go", go_src, strlen(go_src) } };
	size_t h[4];
	CHECK_EQ_INT(fw_private_helpers(&syms, sym_index("geo/geo.go", "Mid"), files, 1, h, 4), 1);
	CHECK_EQ_INT(fw_private_helpers(&syms, sym_index("geo/geo.go", "Area"), files, 1, h, 4), 0);
}

TEST(go_helpers_named_by_their_own_doc_comment_are_still_private)
{
	setup();
	struct fw_text files[] = { { "text/text.go", go_doc_src, strlen(go_doc_src) },
				   { "text/text_test.go", "Norm(\" A \")\n", 12 } };
	size_t h[4] = { 0, 0, 0, 0 };
	size_t k = fw_private_helpers(&syms, sym_index("text/text.go", "Norm"), files, 2, h, 4);
	CHECK_EQ_INT(k, 2);
	if (k == 2) {
		struct fw_mutation m;
		const struct fw_symbol *hp[] = { &syms.v[h[0]], &syms.v[h[1]] };
		CHECK_EQ_INT(fw_mutate_delete(FW_DELETE_FEATURE, sym("text/text.go", "Norm"), hp,
					      2, go_doc_src, strlen(go_doc_src), &m), 0);
		CHECK_STR(m.data, "package text\n\nimport \"strings\"\n\n");
		fw_mutation_release(&m);
	}
	/* a mention outside the deleted spans, even in a comment, keeps it */
	files[1].data = "// trim is tested through Norm\n";
	files[1].len = strlen(files[1].data);
	k = fw_private_helpers(&syms, sym_index("text/text.go", "Norm"), files, 2, h, 4);
	CHECK_EQ_INT(k, 1);
	CHECK(k == 1 && strcmp(syms.v[h[0]].name, "lower") == 0);
}

TEST(delete_file_lists_what_the_file_defined)
{
	setup();
	struct fw_mutation m;
	const struct fw_symbol *s = sym("geo/geo.go", "Area");
	CHECK_EQ_INT(fw_mutate_delete_file("geo/geo.go", go_src, strlen(go_src), s, 3, &m), 0);
	CHECK(m.data == NULL);
	CHECK_STR(m.removed, go_src);
	CHECK_EQ_INT(m.ntargets, 4);
	CHECK_EQ_INT(m.targets[0].end, 14);
	char *p = fw_task_prompt(&m, (const char *[]){ "TestArea" }, 1);
	CHECK(p && strstr(p, "file `geo/geo.go` has been removed") && strstr(p, "`Area`, `half`, `Mid`"));
	free(p);
	fw_mutation_release(&m);
}

TEST(names_languages_and_test_paths)
{
	CHECK_EQ_INT(fw_lang_of_path("a/b.tsx"), FW_LANG_TYPESCRIPT);
	CHECK_EQ_INT(fw_lang_of_path("Makefile"), FW_LANG_UNKNOWN);
	CHECK_EQ_INT(fw_lang_parse("js"), FW_LANG_JAVASCRIPT);
	CHECK_EQ_INT(fw_strategy_parse("delete-feature"), FW_DELETE_FEATURE);
	CHECK_EQ_INT(fw_strategy_parse("delete"), -1);
	CHECK(fw_is_test_path("tests/test_x.py"));
	CHECK(fw_is_test_path("pkg/tests/helpers.py"));
	CHECK(fw_is_test_path("geo/geo_test.go"));
	CHECK(fw_is_test_path("web/add.test.js"));
	CHECK(fw_is_test_path("conftest.py"));
	CHECK(!fw_is_test_path("pkg/contest.py"));
	CHECK(!fw_is_test_path("src/attest.c"));
}

TEST(cleanup)
{
	fw_symbols_release(&syms);
	CHECK_EQ_INT(fw_rmtree(dir), 0);
}

TEST_MAIN()
