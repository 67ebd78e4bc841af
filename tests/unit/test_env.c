/* Unit tests for fw_env (task environments): ids, kinds, the env store,
 * how an environment joins a sandbox's options.  The ids are checked
 * against git itself in tests/fw-env.bats. */
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

#include "fw_env.h"
#include "fw_sandbox.h"
#include "fw_workspace.h"

static void put(const char *dir, const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void sub(const char *dir, const char *rel)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	mkdir(p, 0755);
}

TEST(ids_are_forty_lowercase_hex_digits)
{
	CHECK(fw_env_is_id("0123456789abcdef0123456789abcdef01234567"));
	CHECK(!fw_env_is_id("0123456789ABCDEF0123456789abcdef01234567"));
	CHECK(!fw_env_is_id("0123456789abcdef0123456789abcdef0123456"));
	CHECK(!fw_env_is_id("0123456789abcdef0123456789abcdef012345678"));
	CHECK(!fw_env_is_id("/tmp/venv"));
	CHECK(!fw_env_is_id(""));
}

TEST(the_kind_follows_from_the_files)
{
	char d[] = "/tmp/fw-test-env-XXXXXX";
	CHECK(mkdtemp(d) != NULL);
	sub(d, "bin");
	put(d, "bin/tool", "x");
	CHECK_EQ_INT(fw_env_kind_of(d), FW_ENV_PREFIX);
	/* etc/ and usr/ without a shell: still a prefix */
	sub(d, "etc");
	sub(d, "usr");
	sub(d, "usr/bin");
	CHECK_EQ_INT(fw_env_kind_of(d), FW_ENV_PREFIX);
	put(d, "usr/bin/sh", "x");
	CHECK_EQ_INT(fw_env_kind_of(d), FW_ENV_ROOTFS);
	put(d, "pyvenv.cfg", "home = /usr/bin\n");
	CHECK_EQ_INT(fw_env_kind_of(d), FW_ENV_VENV);
	CHECK_STR(fw_env_kind_name(FW_ENV_VENV), "venv");
	CHECK_STR(fw_env_kind_name(FW_ENV_PREFIX), "prefix");
	CHECK_STR(fw_env_kind_name(FW_ENV_ROOTFS), "rootfs");
	fw_rmtree(d);
}

TEST(the_id_is_the_content_not_the_times_or_the_empty_directories)
{
	char a[] = "/tmp/fw-test-env-XXXXXX", b[] = "/tmp/fw-test-env-XXXXXX";
	char ia[FW_ENV_ID_LEN], ib[FW_ENV_ID_LEN], err[256];
	CHECK(mkdtemp(a) && mkdtemp(b));
	put(a, "f", "one\n");
	put(b, "f", "one\n");
	sub(b, "empty");
	CHECK(fw_env_id(a, ia, err, sizeof err) == 0);
	CHECK(fw_env_id(b, ib, err, sizeof err) == 0);
	CHECK_STR(ia, ib);
	/* the tree of one blob "one\n" at f, as `git add f && git write-tree`
	 * names it */
	CHECK_STR(ia, "c953cbf72793bf7a7cd60d87a668185076b1698a");
	put(b, "f", "two\n");
	CHECK(fw_env_id(b, ib, err, sizeof err) == 0);
	CHECK(strcmp(ia, ib) != 0);
	/* a tree of nothing is no environment */
	char c[] = "/tmp/fw-test-env-XXXXXX";
	CHECK(mkdtemp(c) != NULL);
	sub(c, "only-empty");
	CHECK(fw_env_id(c, ia, err, sizeof err) == -1);
	CHECK(strstr(err, "holds no file") != NULL);
	fw_rmtree(a);
	fw_rmtree(b);
	fw_rmtree(c);
}

TEST(the_store_is_the_option_then_the_variable_then_the_task_store)
{
	char out[256], err[256];
	setenv(FW_ENV_STORE_VAR, "/from/env", 1);
	CHECK(fw_env_store_path("/from/opt", "/tasks.git", out, sizeof out, err, sizeof err) == 0);
	CHECK_STR(out, "/from/opt");
	CHECK(fw_env_store_path(NULL, "/tasks.git", out, sizeof out, err, sizeof err) == 0);
	CHECK_STR(out, "/from/env");
	unsetenv(FW_ENV_STORE_VAR);
	CHECK(fw_env_store_path(NULL, "/tasks.git", out, sizeof out, err, sizeof err) == 0);
	CHECK_STR(out, "/tasks.git/envs");
	CHECK(fw_env_store_path(NULL, NULL, out, sizeof out, err, sizeof err) == -1);
	CHECK(strstr(err, "--env-store") != NULL);
}

TEST(add_stores_once_find_names_what_is_missing)
{
	char d[] = "/tmp/fw-test-env-XXXXXX", s[] = "/tmp/fw-test-envs-XXXXXX";
	char id[FW_ENV_ID_LEN], id2[FW_ENV_ID_LEN], path[512], err[512], p[600];
	struct stat st;
	CHECK(mkdtemp(d) && mkdtemp(s));
	sub(d, "bin");
	put(d, "bin/tool", "#!/bin/sh\n");
	chmod(strcat(strcpy(p, d), "/bin/tool"), 0755);
	CHECK(fw_env_add(s, d, id, err, sizeof err) == 0);
	CHECK(fw_env_find(s, id, path, sizeof path, err, sizeof err) == 0);
	/* stored without write bits, the owner's execute bit kept */
	snprintf(p, sizeof p, "%s/bin/tool", path);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0555);
	CHECK(fw_env_add(s, d, id2, err, sizeof err) == 0);
	CHECK_STR(id, id2);
	/* a store's own directory is its id */
	CHECK(fw_env_resolve(s, path, id2, err, sizeof err) == 0);
	CHECK_STR(id, id2);
	CHECK(fw_env_find(s, "0123456789abcdef0123456789abcdef01234567", path, sizeof path, err,
			  sizeof err) == -1);
	CHECK(strstr(err, "environment 0123456789abcdef0123456789abcdef01234567 is missing from "
			  "the env store") != NULL);
	fw_rmtree(d);
	fw_rmtree(s);
}

TEST(a_venv_joins_the_sandbox_options_after_the_callers_own)
{
	char d[] = "/tmp/fw-test-env-XXXXXX", err[256];
	struct fw_env e;
	CHECK(mkdtemp(d) != NULL);
	put(d, "pyvenv.cfg", "home = /usr/bin\n");
	CHECK(fw_env_open_arg(&e, NULL, d, err, sizeof err) == 0);
	CHECK_EQ_INT(e.kind, FW_ENV_VENV);
	struct fw_sandbox_opts o;
	fw_sandbox_opts_init(&o);
	const char *mine[] = { "/data:/data", NULL }, *vars[] = { "A=1", NULL };
	o.ro_binds = mine;
	o.env = vars;
	const char *b[4], *v[4 + FW_ENV_MAXVARS];
	CHECK(fw_env_apply(&e, &o, b, 4, v, 4 + FW_ENV_MAXVARS) == 0);
	CHECK_STR(o.ro_binds[0], "/data:/data");
	CHECK(strstr(o.ro_binds[1], ":/env") != NULL && o.ro_binds[2] == NULL);
	CHECK_STR(o.env[0], "A=1");
	int path = 0, venv = 0;
	for (int i = 1; o.env[i]; i++) {
		path |= strcmp(o.env[i], "PATH=/env/bin:" FW_SANDBOX_PATH) == 0;
		venv |= strcmp(o.env[i], "VIRTUAL_ENV=/env") == 0;
	}
	CHECK(path && venv);
	CHECK(o.root == NULL);
	/* too small an array is refused, not overrun */
	fw_sandbox_opts_init(&o);
	o.ro_binds = mine;
	CHECK(fw_env_apply(&e, &o, b, 2, v, 4 + FW_ENV_MAXVARS) == -1);
	/* no environment leaves the options alone */
	CHECK(fw_env_apply(NULL, &o, b, 4, v, 4) == 0 && o.ro_binds == mine);
	fw_rmtree(d);
}

TEST_MAIN()
