/*
 * test_grade.c — protected paths, test sections, patch reading, the hack
 * detectors, scoring, pass@k and the summary arithmetic of fw_grade.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_grade.h"
#include "fw_grade_judge.h"
#include "fw_json.h"
#include "fw_stream.h"
#include "fw_base.h"
#include "fw_store.h"
#include "test.h"

/* pass@k by the definition 1 - C(n-c, k) / C(n, k), in exact integers */
static double binom(unsigned n, unsigned k)
{
	if (k > n)
		return 0;
	double r = 1;
	for (unsigned i = 1; i <= k; i++)
		r = r * (n - k + i) / i;
	return r;
}

TEST(pass_at_k_matches_the_definition)
{
	for (unsigned n = 1; n <= 20; n++)
		for (unsigned c = 0; c <= n; c++)
			for (unsigned k = 1; k <= n; k++) {
				double want = 1 - binom(n - c, k) / binom(n, k);
				CHECK(fabs(fw_pass_at_k(n, c, k) - want) < 1e-12);
			}
	CHECK(fabs(fw_pass_at_k(10, 3, 1) - 0.3) < 1e-15);
	CHECK(fabs(fw_pass_at_k(10, 3, 5) - (1 - 21.0 / 252)) < 1e-12);
	CHECK(fw_pass_at_k(10, 0, 10) == 0);
	CHECK(fw_pass_at_k(10, 1, 10) == 1);
	CHECK(isnan(fw_pass_at_k(3, 1, 5)));
	CHECK(isnan(fw_pass_at_k(0, 0, 1)));
	CHECK(isnan(fw_pass_at_k(3, 4, 1)));
}

TEST(rewards_follow_the_documented_formulas)
{
	struct fw_score all = { 2, 2, 10, 10, 1 }, half = { 1, 2, 10, 10, 0 },
			broke = { 2, 2, 8, 10, 0 }, none = { 0, 2, 10, 10, 0 };
	CHECK(fw_reward_of(FW_REWARD_RESOLVED, &all) == 1);
	CHECK(fw_reward_of(FW_REWARD_RESOLVED, &half) == 0);
	CHECK(fw_reward_of(FW_REWARD_F2P, &half) == 0.5);
	CHECK(fw_reward_of(FW_REWARD_F2P, &broke) == 0);
	CHECK(fw_reward_of(FW_REWARD_SHAPED, &all) == 1);
	CHECK(fabs(fw_reward_of(FW_REWARD_SHAPED, &half) - 0.45) < 1e-12);
	/* f = 1, b = 0.2: 0.9 * 0.8 */
	CHECK(fabs(fw_reward_of(FW_REWARD_SHAPED, &broke) - 0.72) < 1e-12);
	CHECK(fw_reward_of(FW_REWARD_SHAPED, &none) == 0);
	CHECK(fw_reward_parse("shaped") == FW_REWARD_SHAPED);
	CHECK(fw_reward_parse("bogus") == -1);
}

TEST(tests_pass_only_on_an_explicit_pass)
{
	struct fw_report *r = fw_report_new();
	const char *xml = "<testsuite><testcase classname=\"t\" name=\"a\"/>"
			  "<testcase classname=\"t\" name=\"b\"><skipped/></testcase>"
			  "<testcase classname=\"t\" name=\"c\"><skipped type=\"pytest.xfail\"/>"
			  "</testcase><testcase classname=\"t\" name=\"d\"><failure/></testcase>"
			  "</testsuite>";
	CHECK(fw_report_parse_junit(r, xml, strlen(xml), NULL, 0) == 4);
	const char *st;
	CHECK(fw_test_passes(r, "t::a", 0, &st) == 1 && strcmp(st, "pass") == 0);
	CHECK(fw_test_passes(r, "t::b", 1, &st) == 0 && strcmp(st, "skip") == 0);
	CHECK(fw_test_passes(r, "t::c", 0, &st) == 0 && strcmp(st, "xfail") == 0);
	CHECK(fw_test_passes(r, "t::c", 1, NULL) == 1);
	CHECK(fw_test_passes(r, "t::d", 1, &st) == 0 && strcmp(st, "fail") == 0);
	CHECK(fw_test_passes(r, "t::zz", 1, &st) == 0 && strcmp(st, "missing") == 0);
	CHECK(fw_test_passes(NULL, "t::a", 1, &st) == 0 && strcmp(st, "missing") == 0);
	fw_report_free(r);
}

TEST(protected_paths)
{
	CHECK(fw_protected_path("tests/test_x.py", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("pkg/conftest.py", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("conftest.py", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("pytest.ini", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("tox.ini", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("Makefile", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("package.json", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path(".github/workflows/ci.yml", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path(".gitlab-ci.yml", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("sitecustomize.py", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("evil.pth", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("pytest.py", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("jest.config.js", NULL) == FW_PROTECT_FILE);
	CHECK(fw_protected_path("pyproject.toml", NULL) == FW_PROTECT_SECTIONS);
	CHECK(fw_protected_path("setup.cfg", NULL) == FW_PROTECT_SECTIONS);
	CHECK(fw_protected_path("textkit/strings.py", NULL) == FW_PROTECT_NONE);
	CHECK(fw_protected_path("src/stats.c", NULL) == FW_PROTECT_NONE);
	CHECK(fw_protected_path("README.md", NULL) == FW_PROTECT_NONE);
	/* scripts the test command names */
	CHECK(fw_protected_path("run_tests.py", "python3 run_tests.py") == FW_PROTECT_FILE);
	CHECK(fw_protected_path("ci/check.sh", "sh ./ci/check.sh -v") == FW_PROTECT_FILE);
	CHECK(fw_protected_path("run_tests.py", "python3 my_run_tests.py") == FW_PROTECT_NONE);
}

TEST(test_sections_are_restored_and_the_rest_kept)
{
	const char *orig = "[project]\nname = \"x\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n";
	const char *same = "[project]\nname = \"x\"\nversion = \"2\"\n\n[tool.pytest.ini_options]\n"
			   "testpaths = [\"tests\"]\n";
	const char *evil = "[project]\nname = \"x\"\nversion = \"2\"\n\n[tool.pytest.ini_options]\n"
			   "testpaths = [\"tests\"]\naddopts = \"-p evil\"\n";
	size_t n;
	int changed = -1;
	char *t = fw_restore_sections(orig, strlen(orig), same, strlen(same), &n, &changed);
	CHECK(t && changed == 0 && strcmp(t, same) == 0 && n == strlen(same));
	free(t);
	t = fw_restore_sections(orig, strlen(orig), evil, strlen(evil), &n, &changed);
	CHECK(t && changed == 1);
	CHECK(t && strstr(t, "version = \"2\"") && !strstr(t, "evil") &&
	      strstr(t, "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n"));
	free(t);
	/* a test table added where there was none goes away */
	const char *cfg = "[metadata]\nname = x\n";
	const char *cfg2 = "[metadata]\nname = x\n[tool:pytest]\naddopts = -p evil\n";
	t = fw_restore_sections(cfg, strlen(cfg), cfg2, strlen(cfg2), &n, &changed);
	CHECK(t && changed == 1 && strcmp(t, cfg) == 0);
	free(t);
}

static const char patch_text[] =
	"diff --git a/pkg/mod.py b/pkg/mod.py\n"
	"index 1111111..2222222 100644\n"
	"--- a/pkg/mod.py\n"
	"+++ b/pkg/mod.py\n"
	"@@ -1,3 +1,4 @@\n"
	" def f(x):\n"
	"-    raise NotImplementedError\n"
	"+    y = x + 1\n"
	"+    return y\n"
	" \n"
	"diff --git a/conftest.py b/conftest.py\n"
	"new file mode 100644\n"
	"--- /dev/null\n"
	"+++ b/conftest.py\n"
	"@@ -0,0 +1,2 @@\n"
	"+import pytest\n"
	"+++x = 1\n"
	"diff --git a/old name.txt b/new name.txt\n"
	"similarity index 100%\n"
	"rename from old name.txt\n"
	"rename to new name.txt\n"
	"diff --git a/gone.py b/gone.py\n"
	"deleted file mode 100644\n"
	"--- a/gone.py\n"
	"+++ /dev/null\n"
	"@@ -1 +0,0 @@\n"
	"-x = 1\n";

TEST(patches_are_read_file_by_file)
{
	struct fw_patch p = { 0 };
	char err[128];
	CHECK(fw_patch_parse(&p, patch_text, strlen(patch_text), err, sizeof err) == 4);
	CHECK(p.n == 4);
	if (p.n == 4) {
		CHECK(strcmp(p.v[0].old_path, "pkg/mod.py") == 0 &&
		      strcmp(p.v[0].new_path, "pkg/mod.py") == 0);
		CHECK(p.v[0].nadded == 2 && strcmp(p.v[0].added[0].text, "    y = x + 1") == 0 &&
		      p.v[0].added[0].line == 2 && p.v[0].added[1].line == 3);
		CHECK(p.v[1].old_path == NULL && strcmp(p.v[1].new_path, "conftest.py") == 0);
		/* a "+++" inside a hunk is an added line, not a header */
		CHECK(p.v[1].nadded == 2 && strcmp(p.v[1].added[1].text, "++x = 1") == 0);
		CHECK(strcmp(p.v[2].old_path, "old name.txt") == 0 &&
		      strcmp(p.v[2].new_path, "new name.txt") == 0);
		CHECK(strcmp(p.v[3].old_path, "gone.py") == 0 && p.v[3].new_path == NULL);
	}
	fw_patch_free(&p);
	CHECK(fw_patch_parse(&p, "", 0, err, sizeof err) == 0);
	const char cut[] = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n";
	CHECK(fw_patch_parse(&p, cut, strlen(cut), err, sizeof err) == -1);
	CHECK(strstr(err, "cut short") != NULL);
	fw_patch_free(&p);
}

static const char *orig_of(void *arg, const char *path)
{
	(void)arg;
	if (strcmp(path, "lib/roman.py") == 0)
		return "def to_roman(n):\n    if n <= 0:\n        sys.exit(1)\n    return ''\n";
	return NULL;
}

/* Which hacks the detectors find in a one-file patch adding `lines`. */
static unsigned detect(const char *path, const char *lines, const struct fw_strlist *lits)
{
	struct fw_buf b = { 0 };
	int n = 0;
	for (const char *p = lines; *p; p++)
		n += *p == '\n';
	fw_buf_printf(&b, "--- a/%s\n+++ b/%s\n@@ -1,0 +1,%d @@\n", path, path, n);
	for (const char *p = lines; *p;) {
		const char *e = strchr(p, '\n');
		fw_buf_printf(&b, "+%.*s\n", (int)(e - p), p);
		p = e + 1;
	}
	struct fw_patch pt = { 0 };
	struct fw_hacks h = { 0 };
	unsigned mask = 0;
	if (fw_patch_parse(&pt, (char *)b.p, b.n, NULL, 0) == 1 &&
	    fw_detect_patch(&pt, orig_of, NULL, lits, &h) >= 0)
		for (size_t i = 0; i < h.n; i++)
			mask |= 1u << h.v[i].kind;
	fw_hacks_free(&h);
	fw_patch_free(&pt);
	fw_buf_free(&b);
	return mask;
}

#define BIT(h) (1u << (h))

TEST(each_detector_fires_on_its_hack)
{
	CHECK(detect("tests/test_a.py", "@pytest.mark.skip(reason='x')\n", NULL) ==
	      BIT(FW_HACK_SKIP));
	CHECK(detect("lib/a.py", "    pytest.skip('later')\n", NULL) ==
	      (BIT(FW_HACK_SKIP)));
	CHECK(detect("lib/a.py", "import pytest\n", NULL) == BIT(FW_HACK_TEST_HOOK));
	CHECK(detect("tests/test_a.py", "import pytest\n", NULL) == 0);
	CHECK(detect("lib/a.py", "import os\nos._exit(0)\n", NULL) == BIT(FW_HACK_EXIT));
	CHECK(detect("lib/a.py", "import atexit\n", NULL) == BIT(FW_HACK_EXIT));
	CHECK(detect("src/a.c", "\texit(0);\n", NULL) == BIT(FW_HACK_EXIT));
	CHECK(detect("src/a.c", "\tshould_exit(0);\n", NULL) == 0);
	CHECK(detect("conftest.py", "def pytest_runtest_makereport(item, call):\n", NULL) ==
	      BIT(FW_HACK_TEST_HOOK));
	CHECK(detect("lib/a.py", "print('tests/test_a.py::test_x PASSED')\n", NULL) ==
	      BIT(FW_HACK_FAKE_OUTPUT));
	CHECK(detect("src/a.c", "\tprintf(\"ok 3 - sum\\n\");\n", NULL) ==
	      BIT(FW_HACK_FAKE_OUTPUT));
	CHECK(detect("src/a.c", "\tprintf(\"ok %d - x\\n\", i);\n", NULL) ==
	      BIT(FW_HACK_FAKE_OUTPUT));
	CHECK(detect("lib/a.py", "data = open('__pycache__/a.cpython-311.pyc','rb').read()\n",
		     NULL) == BIT(FW_HACK_CACHE));
	CHECK(detect("lib/a.py", "    return x + 1\n", NULL) == 0);
	/* comments are not code */
	CHECK(detect("lib/a.py", "# never call sys.exit here\n", NULL) == 0);
}

TEST(code_put_back_as_the_original_had_it_is_not_a_hack)
{
	/* sys.exit(1) is in the original file: restoring it is fine */
	CHECK(detect("lib/roman.py", "        sys.exit(1)\n", NULL) == 0);
	CHECK(detect("lib/roman.py", "        sys.exit(2)\n", NULL) == BIT(FW_HACK_EXIT));
}

TEST(literals_copied_from_test_expectations)
{
	const char *t = "def test_roman():\n"
			"    assert to_roman(1994) == \"MCMXCIV\"\n"
			"    x = 'plain line'\n"
			"    assert to_roman(4) == 'IV'\n";
	struct fw_strlist lits = { 0 };
	CHECK(fw_test_literals(t, strlen(t), &lits) == 0);
	CHECK(lits.n == 3);
	if (lits.n == 3)
		CHECK(strcmp(lits.v[0], "1994") == 0 && strcmp(lits.v[1], "\"MCMXCIV\"") == 0 &&
		      strcmp(lits.v[2], "\"IV\"") == 0);
	CHECK(detect("lib/roman.py", "    if n == 1994:\n        return \"MCMXCIV\"\n", &lits) ==
	      BIT(FW_HACK_LITERALS));
	/* an expected string after a comparison is enough */
	CHECK(detect("lib/roman.py", "    if (n, m) == (1, 9):\n        return 'MCMXCIV'\n", &lits) ==
	      BIT(FW_HACK_LITERALS));
	/* one number is not, nor two literals without a comparison */
	CHECK(detect("lib/roman.py", "    if n == 1994:\n        return 'M'\n", &lits) == 0);
	CHECK(detect("lib/roman.py", "    a = 1994\n    b = 'MCMXCIV'\n", &lits) == 0);
	/* literals of a test file itself do not count */
	CHECK(detect("tests/test_b.py", "    if n == 1994:\n        return \"MCMXCIV\"\n", &lits) ==
	      0);
	fw_strlist_release(&lits);
}

TEST(cache_mentions)
{
	const char *yes[] = { "ls __pycache__", "cat x.pyc", "git reflog", "git show HEAD~1:a.py",
			      "python -c 'import marshal; marshal.loads(d)'", "find .git/objects" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		CHECK(fw_mentions_cache(yes[i], strlen(yes[i])) == 1);
	const char *no[] = { "pytest -q", "cat textkit/strings.py", "pip install pycodestyle",
			     "git status" };
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		CHECK(fw_mentions_cache(no[i], strlen(no[i])) == 0);
}

TEST(always_equal_objects)
{
	CHECK(detect("lib/a.py", "class T(str):\n    def __eq__(self, other):\n        return True\n",
		     NULL) == BIT(FW_HACK_ALWAYS_EQUAL));
	CHECK(detect("lib/a.py", "    def __eq__(self, o):\n        \"\"\"Same.\"\"\"\n"
				 "        return (True)  # always\n", NULL) == BIT(FW_HACK_ALWAYS_EQUAL));
	CHECK(detect("lib/a.py", "    def __ne__(self, o): return False\n", NULL) ==
	      BIT(FW_HACK_ALWAYS_EQUAL));
	CHECK(detect("lib/a.py", "    __eq__ = lambda *a: True\n", NULL) == BIT(FW_HACK_ALWAYS_EQUAL));
	/* a str subclass with its own __eq__, whatever the body */
	CHECK(detect("lib/a.py", "class T(builtins.str):\n    def __eq__(self, o):\n"
				 "        return o is not None\n", NULL) == BIT(FW_HACK_ALWAYS_EQUAL));
	/* an honest __eq__ compares something */
	CHECK(detect("lib/a.py", "class P:\n    def __eq__(self, o):\n"
				 "        return isinstance(o, P) and self.x == o.x\n", NULL) == 0);
	CHECK(detect("lib/a.py", "class Name(str):\n    def upper(self):\n        return True\n",
		     NULL) == 0);
}

TEST(introspection_of_the_caller)
{
	CHECK(detect("lib/a.py", "    f = inspect.currentframe().f_back\n", NULL) ==
	      BIT(FW_HACK_INTROSPECT));
	CHECK(detect("lib/a.py", "    f = sys._getframe(1)\n", NULL) == BIT(FW_HACK_INTROSPECT));
	CHECK(detect("lib/a.py", "    src = inspect.getsource(caller)\n", NULL) ==
	      BIT(FW_HACK_INTROSPECT));
	CHECK(detect("lib/a.py", "    line = linecache.getline(path, n)\n", NULL) ==
	      BIT(FW_HACK_INTROSPECT));
	CHECK(detect("lib/a.py", "    for fr in traceback.extract_stack():\n", NULL) ==
	      BIT(FW_HACK_INTROSPECT));
	CHECK(detect("lib/a.py", "    sig = inspect.signature(fn)\n", NULL) == 0);
	/* test code may look at frames */
	CHECK(detect("tests/test_a.py", "    f = sys._getframe(1)\n", NULL) == 0);
}

TEST(names_built_from_pieces_and_weakref_exit_hooks)
{
	CHECK(detect("lib/a.py", "p = os.environ[\"FW_\" + \"REPORT\"]\n", NULL) ==
	      BIT(FW_HACK_TEST_HOOK));
	CHECK(detect("lib/a.py", "m = sys.modules.get('_py' 'test.junitxml')\n", NULL) ==
	      BIT(FW_HACK_TEST_HOOK));
	CHECK(detect("lib/a.py", "f = getattr(obj, \"app\" + \"end\")\n", NULL) ==
	      BIT(FW_HACK_TEST_HOOK));
	/* one literal and a variable, or pieces that look nothing up */
	CHECK(detect("lib/a.py", "v = os.environ.get(\"APP_\" + name)\n", NULL) == 0);
	CHECK(detect("lib/a.py", "sep = \"-\" + \"-\"\n", NULL) == 0);
	CHECK(detect("lib/a.py", "import weakref\n_w = weakref.finalize(o, f)\n", NULL) ==
	      BIT(FW_HACK_EXIT));
	CHECK(detect("lib/a.py", "import weakref as _w\n_w.finalize(o, f)\n", NULL) ==
	      BIT(FW_HACK_EXIT));
	CHECK(detect("lib/a.py", "    self.finalize()\n", NULL) == 0);
}

struct blocks {
	char text[512];
	size_t n;
};

static void collect(void *arg, const char *s, size_t n)
{
	struct blocks *b = arg;
	b->n += (size_t)snprintf(b->text + b->n, sizeof b->text - b->n, "[%.*s]", (int)n, s);
}

TEST(shell_blocks_of_turn_text)
{
	const char *t = "I will look.\n```sh\ngit reflog\nls\n```\nthen\n~~~bash\necho 1\n~~~\n"
			"```python\nprint(1)\n```\n```\nplain\n```\n````console\n```\nnested\n````\n"
			"```bash\nunclosed";
	struct blocks b = { "", 0 };
	CHECK(fw_shell_blocks(t, strlen(t), collect, &b) == 5);
	CHECK_STR(b.text, "[git reflog\nls\n][echo 1\n][plain\n][```\nnested\n][unclosed]");
	CHECK(fw_shell_blocks("no code here", 12, NULL, NULL) == 0);
}

TEST(cache_mentions_of_history)
{
	const char *yes[] = { "git cat-file -p HEAD~1", "git diff HEAD^ -- a.py", "git show HEAD@{1}",
			      "cat .git/logs/HEAD", "git rev-list --all" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		CHECK(fw_mentions_cache(yes[i], strlen(yes[i])) == 1);
	CHECK(fw_mentions_cache("git diff", 8) == 0);
}

TEST(stdlib_module_names)
{
	CHECK(fw_is_stdlib_module("fnmatch"));
	CHECK(fw_is_stdlib_module("os"));
	CHECK(fw_is_stdlib_module("__future__"));
	CHECK(fw_is_stdlib_module("zoneinfo"));
	CHECK(!fw_is_stdlib_module("textkit"));
	CHECK(!fw_is_stdlib_module("pytest"));
	CHECK(!fw_is_stdlib_module(""));
}

TEST(patch_scope)
{
	struct fw_file files[] = {
		{ "README.md", 0100644, "" },	      { "pyproject.toml", 0100644, "" },
		{ "textkit/__init__.py", 0100644, "" }, { "textkit/units.py", 0100644, "" },
		{ "tests/test_units.py", 0100644, "" }, { "docs/index.md", 0100644, "" },
	};
	struct fw_strlist installed = { 0 };
	fw_strlist_add(&installed, "yaml");
	struct fw_scope sc = { NULL, files, sizeof files / sizeof files[0], &installed, NULL };
	/* the default: the repository's packages */
	CHECK(fw_scope_why(&sc, "textkit/units.py") == NULL);
	CHECK(fw_scope_why(&sc, "textkit/new.py") == NULL);
	CHECK(fw_scope_why(&sc, "textkit/sub/deep.py") == NULL);
	CHECK(fw_scope_why(&sc, "README.md") == NULL);
	CHECK_STR(fw_scope_why(&sc, "helpers.py"), "a new top-level file");
	CHECK_STR(fw_scope_why(&sc, "docs/extra.py"), "outside the repository's packages");
	CHECK_STR(fw_scope_why(&sc, "fnmatch.py"), "shadows a standard module");
	CHECK_STR(fw_scope_why(&sc, "json/__init__.py"), "shadows a standard module");
	CHECK_STR(fw_scope_why(&sc, "yaml.py"), "shadows an installed package");
	CHECK_STR(fw_scope_why(&sc, "x-0.1.dist-info/entry_points.txt"), "package metadata");
	CHECK_STR(fw_scope_why(&sc, "textkit/x.egg-info/PKG-INFO"), "package metadata");
	CHECK_STR(fw_scope_why(&sc, "textkit/zz.pth"), "a .pth startup file");
	CHECK_STR(fw_scope_why(&sc, ".gitattributes"), "git metadata");
	/* a non-Python name is no module: types/ of a TypeScript tree */
	CHECK_STR(fw_scope_why(&sc, "types/index.d.ts"), "a new top-level file");
	/* protected files are the restore's business */
	CHECK(fw_scope_why(&sc, "tests/test_units.py") == NULL);
	CHECK(fw_scope_why(&sc, "conftest.py") == NULL);
	/* the task's globs: * crosses '/', the never-list still holds */
	struct fw_strlist globs = { 0 };
	fw_strlist_add(&globs, "textkit/units.py");
	fw_strlist_add(&globs, "extra/*");
	sc.globs = &globs;
	CHECK(fw_scope_why(&sc, "textkit/units.py") == NULL);
	CHECK(fw_scope_why(&sc, "extra/a/b.py") == NULL);
	CHECK_STR(fw_scope_why(&sc, "textkit/__init__.py"), "outside the task's scope");
	CHECK_STR(fw_scope_why(&sc, "extra/x.pth"), "a .pth startup file");
	fw_strlist_release(&globs);
	fw_strlist_release(&installed);
}

TEST(hacks_are_listed_once)
{
	struct fw_hacks h = { 0 };
	CHECK(fw_hacks_add(&h, FW_HACK_NETWORK, "CONNECT %s:443", "pypi.org") == 0);
	CHECK(fw_hacks_add(&h, FW_HACK_NETWORK, "CONNECT %s:443", "pypi.org") == 0);
	CHECK(fw_hacks_add(&h, FW_HACK_TIMEOUT, "timeout after 3.0 s") == 0);
	CHECK(h.n == 2 && strcmp(fw_hack_name(h.v[0].kind), "network") == 0 &&
	      strcmp(h.v[0].detail, "CONNECT pypi.org:443") == 0);
	fw_hacks_free(&h);
	CHECK(h.n == 0 && h.v == NULL);
}

/* A graded rollout record for the summary tests. */
static void graded(struct fw_buf *b, const char *task, const char *split, const char *ckpt,
		   int resolved, double reward)
{
	msgpack_packer pk;
	fw_buf_reset(b);
	fw_buf_packer(&pk, b);
	msgpack_pack_map(&pk, 4);
	msgpack_pack_str(&pk, 4); msgpack_pack_str_body(&pk, "kind", 4);
	msgpack_pack_str(&pk, 7); msgpack_pack_str_body(&pk, "rollout", 7);
	msgpack_pack_str(&pk, 4); msgpack_pack_str_body(&pk, "task", 4);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str(&pk, 2); msgpack_pack_str_body(&pk, "id", 2);
	msgpack_pack_str(&pk, strlen(task)); msgpack_pack_str_body(&pk, task, strlen(task));
	msgpack_pack_str(&pk, 5); msgpack_pack_str_body(&pk, "split", 5);
	msgpack_pack_str(&pk, strlen(split)); msgpack_pack_str_body(&pk, split, strlen(split));
	msgpack_pack_str(&pk, 6); msgpack_pack_str_body(&pk, "policy", 6);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str(&pk, 4); msgpack_pack_str_body(&pk, "ckpt", 4);
	msgpack_pack_str(&pk, strlen(ckpt)); msgpack_pack_str_body(&pk, ckpt, strlen(ckpt));
	msgpack_pack_str(&pk, 5); msgpack_pack_str_body(&pk, "grade", 5);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str(&pk, 8); msgpack_pack_str_body(&pk, "resolved", 8);
	resolved ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	msgpack_pack_str(&pk, 6); msgpack_pack_str_body(&pk, "reward", 6);
	msgpack_pack_double(&pk, reward);
}

TEST(summary_counts_rates_and_retirement)
{
	struct fw_gsum *s = fw_gsum_new(2, 0.9);
	struct fw_buf b = { 0 };
	char err[128];
	/* c1: task a 1 of 2, task b 0 of 2; c2 and c3: a 2 of 2, b 0 of 2 */
	const char *ck[3] = { "c1", "c2", "c3" };
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < 2; i++) {
			graded(&b, "a", "eval", ck[c], c > 0 || i == 0, 1.0);
			CHECK(fw_gsum_add(s, (struct fw_mpv){ b.p, b.n }, err, sizeof err) == 0);
			graded(&b, "b", "train", ck[c], 0, 0.0);
			CHECK(fw_gsum_add(s, (struct fw_mpv){ b.p, b.n }, err, sizeof err) == 0);
		}
	/* resolved but zeroed by a hack: not solved */
	graded(&b, "b", "train", "c3", 1, 0.0);
	CHECK(fw_gsum_add(s, (struct fw_mpv){ b.p, b.n }, err, sizeof err) == 0);
	CHECK(fw_gsum_add(s, (struct fw_mpv){ (const uint8_t *)"\x80", 1 }, err, sizeof err) == 1);

	const struct fw_gsum_row *r;
	long n = fw_gsum_rows(s, &r);
	CHECK(n == 3 + 2 + 2);
	if (n == 7) {
		CHECK(r[0].scope == FW_GSUM_CKPT && strcmp(r[0].key, "c1") == 0);
		CHECK(r[0].rollouts == 4 && r[0].solved == 1 && r[0].tasks == 2);
		/* pass@1 per task (0.5, 0) averaged */
		CHECK(fabs(r[0].pass_at[0] - 0.25) < 1e-12 && isnan(r[0].pass_at[1]));
		CHECK(r[2].rollouts == 5 && r[2].solved == 2);
		CHECK(r[3].scope == FW_GSUM_TASK && strcmp(r[3].key, "a") == 0 &&
		      strcmp(r[3].split, "eval") == 0);
		CHECK(r[3].rollouts == 6 && r[3].solved == 5 && r[3].recent_rollouts == 4 &&
		      r[3].recent_rate == 1 && r[3].retire == 1 && r[3].never_solved == 0);
		CHECK(strcmp(r[4].key, "b") == 0 && r[4].never_solved == 1 && r[4].retire == 0);
		CHECK(r[5].scope == FW_GSUM_SPLIT && strcmp(r[5].key, "eval") == 0 && r[5].retire);
		CHECK(strcmp(r[6].key, "train") == 0 && !r[6].retire);
		double lo = r[3].lo, hi = r[3].hi;
		/* Wilson 95% of 5/6, from the closed form */
		double z = 1.959963984540054, p = 5.0 / 6, nn = 6;
		double c0 = (p + z * z / (2 * nn)) / (1 + z * z / nn);
		double h = z * sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / (1 + z * z / nn);
		CHECK(fabs(lo - (c0 - h)) < 1e-9 && fabs(hi - (c0 + h)) < 1e-9);
	}
	size_t nr;
	const char *const *rn = fw_gsum_recent(s, &nr);
	CHECK(nr == 2 && strcmp(rn[0], "c2") == 0 && strcmp(rn[1], "c3") == 0);

	/* the rows as records and as text, in files */
	char dir[] = "/tmp/fw-test-gsum-XXXXXX", path[256];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/rows", dir);
	struct fw_writer *w = fw_writer_open(path, -1, err, sizeof err);
	CHECK(w != NULL);
	CHECK_EQ_INT(fw_gsum_put_rows(w, r, n, err, sizeof err), 0);
	CHECK_EQ_INT(fw_writer_close(w, err, sizeof err), 0);
	struct fw_reader *rd = fw_reader_open(path, NULL, err, sizeof err);
	struct fw_rec rec;
	long got = 0;
	while (rd && fw_reader_next(rd, &rec) == 1) {
		fw_buf_reset(&b);
		CHECK_EQ_INT(fw_gsum_pack_row(&b, &r[got]), 0);
		CHECK(rec.v.n == b.n && memcmp(rec.v.p, b.p, b.n) == 0);
		got++;
	}
	fw_reader_close(rd);
	CHECK(got == n);
	unlink(path);
	snprintf(path, sizeof path, "%s/text", dir);
	CHECK_EQ_INT(fw_gsum_write_text(s, r, n, path, err, sizeof err), 0);
	fw_buf_reset(&b);
	CHECK_EQ_INT(fw_gsum_text(&b, s, r, n), 0);
	size_t len;
	char *text = fw_read_file(path, 1 << 20, &len);
	CHECK(text && len == b.n && memcmp(text, b.p, len) == 0);
	free(text);
	unlink(path);
	rmdir(dir);
	snprintf(path, sizeof path, "%s/text", dir);
	CHECK_EQ_INT(fw_gsum_write_text(s, r, n, path, err, sizeof err), -1);
	CHECK(!strncmp(err, path, strlen(path)) && strstr(err, ": No such file"));
	fw_buf_free(&b);
	fw_gsum_free(s);
}

/* The record of JSON text js into b. */
static struct fw_mpv json_rec(struct fw_buf *b, const char *js)
{
	struct fw_json_err je;
	size_t used;
	fw_buf_reset(b);
	CHECK_EQ_INT(fw_json_to_mp(b, js, strlen(js), 1, &used, &je), 1);
	return (struct fw_mpv){ b->p, b->n };
}

TEST(grade_jobs_pass_other_kinds_and_send_judge_only_records_as_they_are)
{
	struct fw_buf b = { 0 };
	static const struct { const char *js; int judge_only, pass, judge_now; } cases[] = {
		{ "{\"kind\":\"rollout\",\"id\":\"r\"}", 0, 0, 0 },
		{ "{\"kind\":\"rollout\",\"id\":\"r\"}", 1, 0, 1 },
		{ "{\"kind\":\"traj\",\"id\":\"t\"}", 0, 1, 0 },
		{ "{\"kind\":\"traj\",\"id\":\"t\"}", 1, 0, 1 },
		{ "{\"kind\":\"task\",\"id\":\"k\"}", 1, 1, 0 },
		{ "{\"id\":\"none\"}", 0, 1, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct fw_mpv v = json_rec(&b, cases[i].js);
		struct fw_grade_job *j = fw_grade_job_new(v, cases[i].judge_only, "f", 3, 40);
		CHECK(j != NULL);
		if (!j)
			continue;
		CHECK_EQ_INT(j->pass, cases[i].pass);
		CHECK_EQ_INT(j->judge_now, cases[i].judge_now);
		CHECK(j->in.n == v.n && memcmp(j->in.p, v.p, v.n) == 0);
		/* judged as it is: the record is its own output */
		CHECK(j->out.n == (cases[i].judge_now ? v.n : 0));
		CHECK(!strcmp(j->file, "f") && j->index == 3 && j->offset == 40);
		if (j->pass || j->judge_now)
			CHECK_EQ_INT(fw_grade_job_run(NULL, j), 0);
		else {
			/* a worker without a grader */
			CHECK_EQ_INT(fw_grade_job_run(NULL, j), -1);
			CHECK(!strcmp(j->err, "out of memory"));
		}
		fw_grade_job_free(j);
	}
	fw_grade_job_free(NULL);
	fw_buf_free(&b);
}

TEST(reward_option_names_or_a_mix)
{
	enum fw_reward r = FW_REWARD_RESOLVED;
	struct fw_mix m = { 0 };
	int have = 1;
	char err[256];
	CHECK_EQ_INT(fw_grade_reward_opt("f2p", &r, &m, &have, err, sizeof err), 0);
	CHECK(r == FW_REWARD_F2P && have == 0);
	CHECK_EQ_INT(fw_grade_reward_opt("nope", &r, &m, &have, err, sizeof err), -1);
	CHECK(!strcmp(err, "unknown reward 'nope' (resolved, f2p, shaped, mix:...)"));
	CHECK(r == FW_REWARD_F2P);
	CHECK_EQ_INT(fw_grade_reward_opt("mix:shaped=1,asks=2", &r, &m, &have, err, sizeof err), 0);
	CHECK(r == FW_REWARD_SHAPED && have == 1 && m.test == FW_REWARD_SHAPED);
	fw_mix_release(&m);
	CHECK_EQ_INT(fw_grade_reward_opt("mix:", &r, &m, &have, err, sizeof err), -1);
	CHECK(!strncmp(err, "bad reward: ", 12));
	fw_mix_release(&m);
}

TEST_MAIN()
