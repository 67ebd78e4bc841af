/*
 * test_toolcall.c — tools rendered into Qwen's and Llama 3's prompts, and
 * tool calls parsed back out of replies (fw_toolcall.h).
 */
#include "test.h"

#include "fw_toolcall.h"

static const char tools[] =
	"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
	"\"Weather of a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
	"{\"type\":\"string\"}},\"required\":[\"city\"]}}}]";

static char *rendered(const struct fw_tok *t, const struct fw_tok_ids *b)
{
	size_t n;

	return fw_tok_decode(t, b->ids, b->n, 0, &n, NULL, 0);
}

#define T(role, text) { role, text, sizeof text - 1, NULL, 0, NULL, 0 }

TEST(qwen_tools_go_into_the_system_turn_one_json_line_each)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_chat_turn turns[] = { T("system", "Be brief."), T("user", "Paris?") };
	struct fw_tok_ids b = { 0 };
	char err[256] = "";

	CHECK_EQ_INT(fw_tools_render(t, FW_CHAT_CHATML, tools, sizeof tools - 1, turns, 2, &b, err,
				     sizeof err), 0);
	char *s = rendered(t, &b);
	CHECK_STR(s, "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more "
		     "functions to assist with the user query.\n\nYou are provided with function "
		     "signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", "
		     "\"function\": {\"name\": \"get_weather\", \"description\": \"Weather of a "
		     "city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
		     "{\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each "
		     "function call, return a json object with function name and arguments within "
		     "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
		     "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
		     "<|im_start|>user\nParis?<|im_end|>\n<|im_start|>assistant\n");
	free(s);
	/* no system turn: one is made of the tools alone */
	b.n = 0;
	CHECK_EQ_INT(fw_tools_render(t, FW_CHAT_CHATML, tools, sizeof tools - 1, turns + 1, 1, &b,
				     err, sizeof err), 0);
	s = rendered(t, &b);
	CHECK(!strncmp(s, "<|im_start|>system\n# Tools\n\n", 28));
	free(s);
	CHECK_EQ_INT(fw_tools_render(t, FW_CHAT_CHATML, "{\"a\":1}", 7, turns, 2, &b, err,
				     sizeof err), -1);
	CHECK(strstr(err, "not a JSON array") != NULL);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(llama3_tools_go_into_the_first_user_turn_and_the_system_says_ipython)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_chat_turn turns[] = { T("user", "Paris?"), T("assistant", "Sunny."),
					T("user", "Rome?") };
	struct fw_tok_ids b = { 0 };
	char err[256] = "";

	CHECK_EQ_INT(fw_tools_render(t, FW_CHAT_LLAMA3, tools, sizeof tools - 1, turns, 3, &b, err,
				     sizeof err), 0);
	char *s = rendered(t, &b);
	CHECK_STR(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
		     "Environment: ipython<|eot_id|>"
		     "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, "
		     "please respond with a JSON for a function call with its proper arguments "
		     "that best answers the given prompt.\n\nRespond in the format {\"name\": "
		     "function name, \"parameters\": dictionary of argument name and its value}."
		     "Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n"
		     "        \"name\": \"get_weather\",\n        \"description\": \"Weather of a "
		     "city\",\n        \"parameters\": {\n            \"type\": \"object\",\n"
		     "            \"properties\": {\n                \"city\": {\n"
		     "                    \"type\": \"string\"\n                }\n            },\n"
		     "            \"required\": [\n                \"city\"\n            ]\n"
		     "        }\n    }\n}\n\nParis?<|eot_id|>"
		     "<|start_header_id|>assistant<|end_header_id|>\n\nSunny.<|eot_id|>"
		     "<|start_header_id|>user<|end_header_id|>\n\nRome?<|eot_id|>"
		     "<|start_header_id|>assistant<|end_header_id|>\n\n");
	free(s);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(qwen_calls_are_the_tool_call_blocks_after_the_text)
{
	static const char r[] = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", "
				"\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
				"{\"name\": \"now\"}\n</tool_call>";
	struct fw_toolcalls c;

	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_CHATML, r, sizeof r - 1, &c), 2);
	CHECK_STR(c.v[0].name, "get_weather");
	CHECK_STR(c.v[0].args, "{\"city\":\"Paris\"}");
	CHECK_STR(c.v[1].name, "now");
	CHECK_STR(c.v[1].args, "{}");
	CHECK_EQ_INT((int)c.content_len, 13); /* "Let me look.\n" */
	fw_toolcalls_release(&c);
	/* a reply cut before its closing tag still made its call */
	static const char cut[] = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}\n";
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_CHATML, cut, sizeof cut - 1, &c), 1);
	CHECK_STR(c.v[0].args, "{\"x\":[1,2]}");
	CHECK_EQ_INT((int)c.content_len, 0);
	fw_toolcalls_release(&c);
	/* a block that is not a call: the reply is text */
	static const char bad[] = "Hi <tool_call>\n{\"name\": 3}\n</tool_call>";
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_CHATML, bad, sizeof bad - 1, &c), 0);
	CHECK_EQ_INT((int)c.content_len, (int)sizeof bad - 1);
	static const char junk[] = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\n</tool_call>";
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_CHATML, junk, sizeof junk - 1, &c), 0);
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_CHATML, "plain", 5, &c), 0);
	CHECK_EQ_INT((int)c.content_len, 5);
	fw_toolcalls_release(&c);
	fw_toolcalls_release(NULL);
}

TEST(llama3_calls_are_a_reply_that_is_one_json_object)
{
	static const char r[] = " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}\n";
	struct fw_toolcalls c;

	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_LLAMA3, r, sizeof r - 1, &c), 1);
	CHECK_STR(c.v[0].name, "get_weather");
	CHECK_STR(c.v[0].args, "{\"city\":\"Rome\"}");
	CHECK_EQ_INT((int)c.content_len, 0);
	fw_toolcalls_release(&c);
	static const char a[] = "{\"name\": \"f\", \"arguments\": {}}";
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_LLAMA3, a, sizeof a - 1, &c), 1);
	fw_toolcalls_release(&c);
	static const char txt[] = "It is {hot} today.";
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_LLAMA3, txt, sizeof txt - 1, &c), 0);
	CHECK_EQ_INT((int)c.content_len, (int)sizeof txt - 1);
	static const char obj[] = "{\"city\": \"Rome\"}";
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_LLAMA3, obj, sizeof obj - 1, &c), 0);
	fw_toolcalls_release(&c);
}

TEST(a_forced_call_starts_as_the_template_writes_one)
{
	char *p = fw_toolcall_prefix(FW_CHAT_CHATML, "get_weather");
	CHECK_STR(p, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
	free(p);
	p = fw_toolcall_prefix(FW_CHAT_LLAMA3, "a\"b");
	CHECK_STR(p, "{\"name\": \"a\\\"b\", \"parameters\": ");
	free(p);
	p = fw_toolcall_prefix(FW_CHAT_CHATML, NULL);
	CHECK_STR(p, "<tool_call>\n{\"name\": \"");
	free(p);
	CHECK_STR(fw_toolcall_marker(FW_CHAT_CHATML), "<tool_call>");
	CHECK(fw_toolcall_marker(FW_CHAT_LLAMA3) == NULL);
	/* a forced call and the model's rest parse as one call */
	static const char done[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
				   "{\"city\": \"Oslo\"}}\n</tool_call>";
	struct fw_toolcalls c;
	CHECK_EQ_INT(fw_toolcall_parse(FW_CHAT_CHATML, done, sizeof done - 1, &c), 1);
	fw_toolcalls_release(&c);
}

TEST_MAIN()
