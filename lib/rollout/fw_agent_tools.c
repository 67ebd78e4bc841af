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

void fw_tool_cmd_release(struct fw_tool_cmd *c)
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

/* Writes n bytes of p to a fresh file under scratch, c's stdin.  Returns
 * 0, or -2 with err filled (-1 is out of memory for the caller). */
static int stdin_file(struct fw_tool_cmd *c, const char *scratch, const char *p, size_t n,
		      char *err, size_t errlen)
{
	char tmpl[4096];
	size_t off = 0;

	snprintf(tmpl, sizeof tmpl, "%s/stdin-XXXXXX", scratch);
	int fd = mkstemp(tmpl);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", tmpl, strerror(errno));
		return -2;
	}
	while (off < n) {
		ssize_t w = write(fd, p + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(err, errlen, "%s: %s", tmpl, strerror(errno));
			close(fd);
			unlink(tmpl);
			return -2;
		}
		off += (size_t)w;
	}
	close(fd);
	if (!(c->stdin_path = strdup(tmpl))) {
		unlink(tmpl);
		snprintf(err, errlen, "out of memory");
		return -2;
	}
	return 0;
}

/* A tool of a definitions file. */
struct def {
	char *name;
	char *program; /* or NULL */
	char *command; /* or NULL */
	json_t *params;
};

struct fw_toolset {
	struct def *v;
	size_t n;
	char *json; /* what the policy is sent */
};

static const char *const builtin_names[] = { "bash", "read_file", "write_file", "str_replace",
					     "submit", NULL };

void fw_toolset_free(struct fw_toolset *ts)
{
	if (!ts)
		return;
	for (size_t i = 0; i < ts->n; i++) {
		free(ts->v[i].name);
		free(ts->v[i].program);
		free(ts->v[i].command);
		json_decref(ts->v[i].params);
	}
	free(ts->v);
	free(ts->json);
	free(ts);
}

const char *fw_toolset_json(const struct fw_toolset *ts)
{
	return ts ? ts->json : fw_agent_tools_json;
}

static const struct def *find_def(const struct fw_toolset *ts, const char *name)
{
	for (size_t i = 0; ts && i < ts->n; i++)
		if (!strcmp(ts->v[i].name, name))
			return &ts->v[i];
	return NULL;
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 64)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

/* The JSON-schema type names a value of the arguments may have. */
static const char *const type_names[] = { "string", "number", "integer", "boolean", "object",
					  "array", "null", NULL };

static int is_type_name(const char *t)
{
	for (size_t i = 0; type_names[i]; i++)
		if (!strcmp(type_names[i], t))
			return 1;
	return 0;
}

/* Whether v is of schema type t. */
static int has_type(const json_t *v, const char *t)
{
	if (!strcmp(t, "string"))
		return json_is_string(v);
	if (!strcmp(t, "number"))
		return json_is_number(v);
	if (!strcmp(t, "integer"))
		return json_is_integer(v) ||
		       (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
	if (!strcmp(t, "boolean"))
		return json_is_boolean(v);
	if (!strcmp(t, "object"))
		return json_is_object(v);
	if (!strcmp(t, "array"))
		return json_is_array(v);
	return json_is_null(v);
}

/* Checks the schema p of a definition: NULL, or a message. */
static const char *check_schema(const json_t *p)
{
	const json_t *props = json_object_get(p, "properties"), *req = json_object_get(p, "required");
	const char *k;
	json_t *v;
	size_t i;

	if (!json_is_object(p))
		return "'parameters' is not an object";
	if (!json_is_string(json_object_get(p, "type")) ||
	    strcmp(json_string_value(json_object_get(p, "type")), "object"))
		return "'parameters' is not of \"type\": \"object\"";
	if (props && !json_is_object(props))
		return "'parameters.properties' is not an object";
	json_object_foreach((json_t *)props, k, v)
	{
		json_t *t = json_object_get(v, "type");
		if (!json_is_object(v))
			return "a property of 'parameters.properties' is not a schema object";
		if (t && !(json_is_string(t) && is_type_name(json_string_value(t))))
			return "a property's 'type' is not a JSON-schema type name";
	}
	if (req && !json_is_array(req))
		return "'parameters.required' is not an array";
	json_array_foreach((json_t *)req, i, v)
	{
		if (!json_is_string(v))
			return "'parameters.required' holds a value that is not a string";
		if (!json_object_get(props, json_string_value(v)))
			return "'parameters.required' names a property it does not define";
	}
	return NULL;
}

/* Checks one definition d, index k from 0, into out; NULL or a message in m. */
static int load_def(const json_t *d, const struct fw_toolset *ts, struct def *out, char *m,
		    size_t ml)
{
	const char *k, *name = json_string_value(json_object_get(d, "name"));
	json_t *v;

	if (!json_is_object(d)) {
		snprintf(m, ml, "not an object");
		return -1;
	}
	json_object_foreach((json_t *)d, k, v)
	{
		if (strcmp(k, "name") && strcmp(k, "description") && strcmp(k, "parameters") &&
		    strcmp(k, "program") && strcmp(k, "command")) {
			snprintf(m, ml, "unknown key '%s' (name, description, parameters, program, "
					"command)", k);
			return -1;
		}
	}
	if (!name) {
		snprintf(m, ml, "no string 'name'");
		return -1;
	}
	if (!valid_name(name)) {
		snprintf(m, ml, "the name is not 1 to 64 of [A-Za-z0-9_-]");
		return -1;
	}
	for (size_t i = 0; builtin_names[i]; i++)
		if (!strcmp(builtin_names[i], name)) {
			snprintf(m, ml, "'%s' is a builtin tool", name);
			return -1;
		}
	if (find_def(ts, name)) {
		snprintf(m, ml, "'%s' is defined twice", name);
		return -1;
	}
	v = json_object_get(d, "description");
	if (v && !json_is_string(v)) {
		snprintf(m, ml, "'description' is not a string");
		return -1;
	}
	const char *prog = json_string_value(json_object_get(d, "program")),
		   *cmd = json_string_value(json_object_get(d, "command"));
	if ((json_object_get(d, "program") && !prog) || (json_object_get(d, "command") && !cmd)) {
		snprintf(m, ml, "'program' and 'command' are strings");
		return -1;
	}
	if (!prog == !cmd || (prog && !*prog) || (cmd && !*cmd)) {
		snprintf(m, ml, "not one of 'program' (a path) and 'command' (a shell command)");
		return -1;
	}
	json_t *p = json_object_get(d, "parameters");
	const char *why = p ? check_schema(p) : NULL;
	if (why) {
		snprintf(m, ml, "%s", why);
		return -1;
	}
	out->params = p ? json_deep_copy(p) : json_pack("{s:s,s:{}}", "type", "object", "properties");
	out->name = strdup(name);
	out->program = prog ? strdup(prog) : NULL;
	out->command = cmd ? strdup(cmd) : NULL;
	if (!out->params || !out->name || (prog && !out->program) || (cmd && !out->command)) {
		snprintf(m, ml, "out of memory");
		return -1;
	}
	return 0;
}

struct fw_toolset *fw_toolset_load(const char *path, char *err, size_t errlen)
{
	json_error_t je;
	json_t *a = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *d, *all = NULL;
	struct fw_toolset *ts = calloc(1, sizeof *ts);
	size_t k;
	char m[512];

	if (!ts) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (!a) {
		if (je.line > 0)
			snprintf(err, errlen, "line %d, column %d: %s", je.line, je.column, je.text);
		else
			snprintf(err, errlen, "%s", je.text);
		goto fail;
	}
	if (!json_is_array(a)) {
		snprintf(err, errlen, "not a JSON array of tool definitions");
		goto fail;
	}
	if (!(ts->v = calloc(json_array_size(a) + 1, sizeof *ts->v)))
		goto oom;
	json_array_foreach(a, k, d)
	{
		const char *name = json_string_value(json_object_get(d, "name"));
		if (load_def(d, ts, &ts->v[ts->n], m, sizeof m)) {
			/* the half-made entry is freed with the set */
			ts->n++;
			snprintf(err, errlen, "tool %zu%s%.64s%s: %s", k + 1, name ? " (" : "",
				 name ? name : "", name ? ")" : "", m);
			goto fail;
		}
		ts->n++;
	}
	/* the builtin tools, then these, in the API's shape */
	json_error_t je2;
	if (!(all = json_loads(fw_agent_tools_json, 0, &je2)))
		goto oom;
	json_array_foreach(a, k, d)
	{
		json_t *f = json_pack("{s:s,s:{s:s,s:s,s:O}}", "type", "function", "function", "name",
				      ts->v[k].name, "description",
				      json_string_value(json_object_get(d, "description")) ?: "",
				      "parameters", ts->v[k].params);
		if (!f || json_array_append_new(all, f))
			goto oom;
	}
	if (!(ts->json = json_dumps(all, JSON_COMPACT)))
		goto oom;
	json_decref(all);
	json_decref(a);
	return ts;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	json_decref(all);
	json_decref(a);
	fw_toolset_free(ts);
	return NULL;
}

/* A call of defined tool d with arguments a (an object): checked against
 * its schema, then its program with a on stdin.  Returns as fw_tool_cmd,
 * -1 out of memory, -2 err filled. */
static int def_cmd(const struct def *d, json_t *a, const char *scratch, struct fw_tool_cmd *c,
		   char *err, size_t errlen)
{
	const json_t *props = json_object_get(d->params, "properties"),
		     *req = json_object_get(d->params, "required"), *v;
	const char *k;
	size_t i;

	json_array_foreach((json_t *)req, i, v)
	{
		if (!json_object_get(a, json_string_value(v)))
			return refuse(c, "%s: no argument '%s'", d->name, json_string_value(v));
	}
	json_object_foreach(a, k, v)
	{
		const char *t = json_string_value(json_object_get(json_object_get(props, k), "type"));
		if (t && !has_type(v, t)) {
			char m[512];
			snprintf(m, sizeof m, "%s: argument '%s' is not of type %s", d->name, k, t);
			return (c->error = strdup(m)) ? 0 : -1;
		}
	}
	char *js = json_dumps(a, JSON_COMPACT);
	if (!js)
		return -1;
	int r = stdin_file(c, scratch, js, strlen(js), err, errlen);
	free(js);
	if (r)
		return r;
	c->program = 1;
	if (d->program)
		return set_argv(c, (const char *const[]){ d->program, NULL });
	return set_argv(c, (const char *const[]){ "bash", "-c", d->command, NULL });
}

int fw_tool_cmd(const struct fw_toolset *ts, const char *name, const char *args,
		const char *scratch, struct fw_tool_cmd *c, char *err, size_t errlen)
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
	const struct def *d = find_def(ts, name);
	if (d) {
		rc = def_cmd(d, a, scratch, c, err, errlen);
	} else if (!strcmp(name, "submit")) {
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
		if (stdin_file(c, scratch, json_string_value(ct), json_string_length(ct), err,
			       errlen)) {
			rc = -2;
			goto done;
		}
		rc = set_argv(c, (const char *const[]){ "sh", "-c", write_file_sh, "sh", path, NULL });
	}
	if (rc == -1)
		goto oom;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
	rc = -1;
done:
	json_decref(a);
	if (rc < 0) {
		fw_tool_cmd_release(c);
		rc = -1;
	}
	return rc;
}
