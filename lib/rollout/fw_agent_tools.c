/*
 * fw_agent_tools.c — the tools of function-calling agent episodes.  See
 * fw_agent_tools.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_agent_tools.h"

const char fw_agent_tools_json[] =
	"[{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"description\":"
	"\"Run a bash command in the repository (the current directory); its exit status "
	"and output come back.\",\"parameters\":{\"type\":\"object\",\"properties\":{"
	"\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":"
	"\"Read a file of the repository.\",\"parameters\":{\"type\":\"object\",\"properties\":{"
	"\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"description\":"
	"\"Write a whole file, making its directories.\",\"parameters\":{\"type\":\"object\","
	"\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}},"
	"\"required\":[\"path\",\"content\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"str_replace\",\"description\":"
	"\"Replace the one occurrence of old in a file by new.\",\"parameters\":{\"type\":"
	"\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"old\":{\"type\":\"string\"},"
	"\"new\":{\"type\":\"string\"}},\"required\":[\"path\",\"old\",\"new\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"submit\",\"description\":"
	"\"Say that the task is done; the episode ends.\",\"parameters\":{\"type\":\"object\","
	"\"properties\":{}}}}]";

const char fw_agent_system_tools[] =
	"You are working in a git repository, the current directory.  Use the tools to read "
	"and change it; each call's result comes back.  When the task is done, call submit.";

/* replaces the one occurrence; the file is read and written as bytes */
static const char str_replace_py[] =
	"import sys\n"
	"p, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()\n"
	"b = open(p, 'rb').read()\n"
	"n = b.count(old) if old else 0\n"
	"if n != 1:\n"
	"    sys.exit(f'str_replace: {p}: old occurs {n} times, not once')\n"
	"open(p, 'wb').write(b.replace(old, new, 1))\n";

static const char write_file_sh[] =
	"d=$(dirname -- \"$1\") && mkdir -p -- \"$d\" && cat > \"$1\"";

void fw_tool_cmd_clear(struct fw_tool_cmd *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < sizeof c->argv / sizeof c->argv[0]; i++)
		free(c->argv[i]);
	if (c->stdin_path)
		unlink(c->stdin_path);
	free(c->stdin_path);
	free(c->error);
	memset(c, 0, sizeof *c);
}

static int refuse(struct fw_tool_cmd *c, const char *fmt, const char *a, const char *b)
{
	char m[512];
	snprintf(m, sizeof m, fmt, a, b);
	return (c->error = strdup(m)) ? 0 : -1;
}

/* argv from NULL-terminated strings; returns 0 or -1 */
static int set_argv(struct fw_tool_cmd *c, const char *const *v)
{
	for (size_t i = 0; v[i]; i++)
		if (!(c->argv[i] = strdup(v[i])))
			return -1;
	return 0;
}

int fw_tool_cmd(const char *name, const char *args, const char *scratch, struct fw_tool_cmd *c,
		char *err, size_t errlen)
{
	json_error_t je;
	json_t *a = NULL;
	int rc = -1;

	memset(c, 0, sizeof *c);
	if (!args || !*args)
		args = "{}";
	a = json_loads(args, 0, &je);
	if (!json_is_object(a)) {
		rc = refuse(c, "%s: the arguments are not a JSON object: %.200s", name, args);
		goto done;
	}
	const char *path = json_string_value(json_object_get(a, "path"));
	if (!strcmp(name, "submit")) {
		c->submit = 1;
		rc = 0;
	} else if (!strcmp(name, "bash")) {
		const char *cmd = json_string_value(json_object_get(a, "command"));
		rc = cmd ? set_argv(c, (const char *const[]){ "bash", "-c", cmd, NULL })
			 : refuse(c, "%s: no string argument '%s'", name, "command");
	} else if (strcmp(name, "read_file") && strcmp(name, "write_file") &&
		   strcmp(name, "str_replace")) {
		rc = refuse(c, "unknown tool '%s'%s", name, "");
	} else if (!path) {
		rc = refuse(c, "%s: no string argument '%s'", name, "path");
	} else if (!strcmp(name, "read_file")) {
		rc = set_argv(c, (const char *const[]){ "cat", "--", path, NULL });
	} else if (!strcmp(name, "str_replace")) {
		const char *old = json_string_value(json_object_get(a, "old")),
			   *new = json_string_value(json_object_get(a, "new"));
		rc = !old || !new ? refuse(c, "%s: no string argument '%s'", name, old ? "new" : "old")
				  : set_argv(c, (const char *const[]){ "python3", "-c", str_replace_py,
								      path, old, new, NULL });
	} else {
		json_t *ct = json_object_get(a, "content");
		if (!json_is_string(ct)) {
			rc = refuse(c, "%s: no string argument '%s'", name, "content");
			goto done;
		}
		/* the content comes in on stdin, from a file the host writes */
		char tmpl[4096];
		snprintf(tmpl, sizeof tmpl, "%s/write-XXXXXX", scratch);
		int fd = mkstemp(tmpl);
		if (fd < 0) {
			snprintf(err, errlen, "%s: %s", tmpl, strerror(errno));
			goto done;
		}
		const char *p = json_string_value(ct);
		size_t n = json_string_length(ct), off = 0;
		while (off < n) {
			ssize_t w = write(fd, p + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				snprintf(err, errlen, "%s: %s", tmpl, strerror(errno));
				close(fd);
				unlink(tmpl);
				goto done;
			}
			off += (size_t)w;
		}
		close(fd);
		if (!(c->stdin_path = strdup(tmpl))) {
			unlink(tmpl);
			goto oom;
		}
		rc = set_argv(c, (const char *const[]){ "sh", "-c", write_file_sh, "sh", path, NULL });
	}
	if (rc < 0)
		goto oom;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
	rc = -1;
done:
	json_decref(a);
	if (rc < 0)
		fw_tool_cmd_clear(c);
	return rc;
}
