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
 */
#ifndef FW_AGENT_TOOLS_H
#define FW_AGENT_TOOLS_H

#include <stddef.h>

/* The tools as a JSON array of {"type": "function", "function": {name,
 * description, parameters}}. */
extern const char fw_agent_tools_json[];

/* The system prompt of an episode with tools. */
extern const char fw_agent_system_tools[];

/* What a call comes to. */
struct fw_tool_cmd {
	char *argv[8];    /* the command to run in the workspace (owned) */
	char *stdin_path; /* a host file for its stdin, or NULL (owned; the
			   * caller unlinks it) */
	char *error;      /* the call is refused without a run: this is the
			   * tool's result (owned) */
	int submit;       /* the call is submit */
};

/*
 * Turns a call of tool name with arguments args (JSON text of an object;
 * NULL or "" is {}) into cmd; scratch is a host directory where a file for
 * stdin may be written.  A call with an unknown tool, arguments that are
 * not an object or that lack a string argument the tool needs sets
 * cmd->error.  Returns 0, or -1 when out of memory or scratch cannot be
 * written (err filled).  Release with fw_tool_cmd_clear().
 */
int fw_tool_cmd(const char *name, const char *args, const char *scratch, struct fw_tool_cmd *cmd,
		char *err, size_t errlen);

/* Frees what cmd holds (unlinking its stdin file) and zeroes it.  NULL
 * does nothing. */
void fw_tool_cmd_clear(struct fw_tool_cmd *cmd);

#endif
