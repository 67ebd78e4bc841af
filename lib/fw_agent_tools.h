/*
 * fw_agent_tools.h — the tools of a function-calling agent episode
 * (fw_agent_opts.tools): declared to the policy as JSON schemas in the
 * shape of the OpenAI API's "tools", and each call turned into a command
 * that runs in the clean room, so that a tool can reach no more of the
 * host than a bash block can.
 *
 *   bash        {"command"}            bash -c COMMAND in the workspace
 *   read_file   {"path"}               the file's bytes
 *   write_file  {"path", "content"}    the file written whole (its
 *                                      directories made)
 *   str_replace {"path", "old", "new"} one occurrence of old replaced;
 *                                      none or several is an error
 *   submit      {}                     the work is done: the episode ends
 *
 * A tool set (struct fw_toolset) adds to these the tools a definitions
 * file names: a JSON array of objects
 *
 *   {"name": N, "description": D, "parameters": SCHEMA,
 *    "program": PATH | "command": SH}
 *
 * N of [A-Za-z0-9_-]{1,64}, neither builtin nor defined twice; SCHEMA a
 * JSON schema of "type": "object" (absent: no arguments).  A call runs
 * PATH (with a slash: a file of the workspace when relative, of the
 * sandbox's root, the system or the environment, when absolute; else found
 * in PATH) or bash -c SH in the workspace with the call's arguments as
 * JSON on stdin; its stdout is the result, and a status other than 0 makes
 * the call an error.  Arguments that lack a property the schema requires,
 * or whose top-level properties are not of the type it names, are
 * answered with an error without a run.
 */
#ifndef FW_AGENT_TOOLS_H
#define FW_AGENT_TOOLS_H

#include <stddef.h>

/* The tools as a JSON array of {"type": "function", "function": {name,
 * description, parameters}}. */
extern const char fw_agent_tools_json[];

/* The system prompt of an episode with tools. */
extern const char fw_agent_system_tools[];

/* The builtin tools and those of a definitions file. */
struct fw_toolset;

/*
 * Reads the definitions file at path into a set that holds the builtin
 * tools, then those.  Returns the set (fw_toolset_free), or NULL with err
 * saying where the file is wrong: "line L, column C: ..." for JSON that
 * does not parse, "tool K (NAME): ..." (K from 1) for a definition that
 * is not valid.
 */
struct fw_toolset *fw_toolset_load(const char *path, char *err, size_t errlen);

/* Frees ts.  NULL does nothing. */
void fw_toolset_free(struct fw_toolset *ts);

/* The tools of ts as sent to the policy (fw_agent_tools_json's shape);
 * ts NULL: the builtin ones.  Owned by ts.  Cannot fail. */
const char *fw_toolset_json(const struct fw_toolset *ts);

/* What a call comes to. */
struct fw_tool_cmd {
	char *argv[8];    /* the command to run in the workspace (owned) */
	char *stdin_path; /* a host file for its stdin, or NULL (owned; the
			   * caller unlinks it) */
	char *error;      /* the call is refused without a run: this is the
			   * tool's result (owned) */
	int submit;       /* the call is submit */
	int program;      /* a defined tool: its stdout alone is the result */
};

/*
 * Turns a call of tool name of set ts (NULL: the builtin tools) with
 * arguments args (JSON text of an object; NULL or "" is {}) into cmd; scratch is a host directory where a file for
 * stdin may be written.  A call with an unknown tool, arguments that are
 * not an object or that lack a string argument the tool needs sets
 * cmd->error.  Returns 0, or -1 when out of memory or scratch cannot be
 * written (err filled).  Release with fw_tool_cmd_release().
 */
int fw_tool_cmd(const struct fw_toolset *ts, const char *name, const char *args,
		const char *scratch, struct fw_tool_cmd *cmd, char *err, size_t errlen);

/* Frees what cmd holds (unlinking its stdin file) and zeroes it.  NULL
 * does nothing. */
void fw_tool_cmd_release(struct fw_tool_cmd *cmd);

#endif
