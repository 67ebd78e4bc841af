/*
 * fw_fbcat.c — the failure-category rules of fb-report, as PCRE2 patterns
 * (caseless, multiline) and a walk over a trajectory's turns.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "fw_fbcat.h"

struct fw_fbcat {
	pcre2_code *re_refusal, *re_toolerr, *re_timeout, *re_testrun, *re_testfail, *re_correction;
	pcre2_match_data *md;
};


static pcre2_code *re(const char *pat)
{
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
				      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_MULTILINE |
					      PCRE2_CASELESS,
				      &ec, &eo, NULL);
	if (c)
		pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);
	return c;
}

static int matches(struct fw_fbcat *st, pcre2_code *c, const char *s, size_t n)
{
	return s && pcre2_match(c, (PCRE2_SPTR)s, n, 0, 0, st->md, NULL) >= 0;
}

static int str_of(struct fw_mpv m, const char *key, const char **s, size_t *n)
{
	struct fw_mpv v;
	if (fw_mp_get(m, key, &v) != 1 || fw_mp_str(v, s, n) < 0) {
		*s = NULL;
		*n = 0;
		return 0;
	}
	return 1;
}

static const char *rule_names[] = {
	"tool error", "failing tests", "refusal", "timeout", "loop/repetition",
	"user correction", "very long",
};

#define MAX_SEEN 512

unsigned fw_fbcat_classify(struct fw_fbcat *st, struct fw_mpv rec)
{
	unsigned bits = 0;
	struct fw_mpv turns, t, v, calls, call;
	struct fw_mp_iter it, ci;
	uint64_t seen[MAX_SEEN];
	uint8_t seen_n[MAX_SEEN];
	size_t nseen = 0, total = 0;
	const char *last_answer = NULL, *last_test = NULL;
	size_t last_answer_n = 0, last_test_n = 0;
	int answered = 0;
	if (fw_mp_get(rec, "turns", &turns) != 1 || fw_mp_iter_init(&it, turns) < 0)
		return 0;
	while (fw_mp_iter_next(&it, &t) == 1) {
		const char *role, *text;
		size_t rn, tn;
		int b = 0;
		str_of(t, "role", &role, &rn);
		str_of(t, "text", &text, &tn);
		total += tn;
		int is_user = role && rn == 4 && !memcmp(role, "user", 4);
		int is_asst = role && rn == 9 && !memcmp(role, "assistant", 9);
		int is_tool = role && rn == 4 && !memcmp(role, "tool", 4);
		if (fw_mp_get(t, "is_error", &v) == 1 && fw_mp_bool(v, &b) == 0 && b)
			bits |= 1u << FW_FBCAT_TOOL_ERROR;
		if (is_tool && text) {
			/* Logs without an error flag still show the error text. */
			if (matches(st, st->re_toolerr, text, tn))
				bits |= 1u << FW_FBCAT_TOOL_ERROR;
			if (matches(st, st->re_timeout, text, tn))
				bits |= 1u << FW_FBCAT_TIMEOUT;
			if (matches(st, st->re_testrun, text, tn)) {
				last_test = text;
				last_test_n = tn;
			}
		}
		if (is_user && answered && matches(st, st->re_correction, text, tn))
			bits |= 1u << FW_FBCAT_CORRECTION;
		if (!is_asst)
			continue;
		/* Repetition: the same call (name and arguments) or the same
		 * non-empty answer text again and again. */
		uint64_t keys[64];
		int nk = 0;
		if (tn)
			keys[nk++] = fw_hash64(text, tn) ^ 0x5bd1e995;
		if (fw_mp_get(t, "calls", &calls) == 1 && fw_mp_iter_init(&ci, calls) > 0) {
			while (fw_mp_iter_next(&ci, &call) == 1 && nk < 64) {
				const char *nm, *args;
				size_t nn, an;
				str_of(call, "name", &nm, &nn);
				if (!str_of(call, "args", &args, &an) && fw_mp_get(call, "args", &v) == 1)
					args = (const char *)v.p, an = v.n;
				uint64_t h = fw_hash64(nm ? nm : "", nn) * 31 + fw_hash64(args ? args : "", an);
				keys[nk++] = h;
				total += an;
			}
		}
		for (int k = 0; k < nk; k++) {
			size_t j;
			for (j = 0; j < nseen; j++)
				if (seen[j] == keys[k])
					break;
			if (j == nseen && nseen < MAX_SEEN) {
				seen[nseen] = keys[k];
				seen_n[nseen++] = 0;
			}
			if (j < nseen && ++seen_n[j] >= FW_FBCAT_LOOP_REPEATS)
				bits |= 1u << FW_FBCAT_LOOP;
		}
		/* The answer is the last assistant text; some harnesses (SWE-agent)
		 * attach a call to every assistant turn, so calls do not matter. */
		if (tn) {
			last_answer = text;
			last_answer_n = tn;
			answered = 1;
		}
	}
	if (last_answer && matches(st, st->re_refusal, last_answer, last_answer_n))
		bits |= 1u << FW_FBCAT_REFUSAL;
	if (last_test && matches(st, st->re_testfail, last_test, last_test_n))
		bits |= 1u << FW_FBCAT_FAILING;
	if (total > FW_FBCAT_LONG_TOTAL || last_answer_n > FW_FBCAT_LONG_ANSWER)
		bits |= 1u << FW_FBCAT_LONG;
	const char *stop;
	size_t sn;
	if (fw_mp_get(rec, "meta", &v) == 1 && str_of(v, "stop", &stop, &sn) &&
	    matches(st, st->re_timeout, stop, sn))
		bits |= 1u << FW_FBCAT_TIMEOUT;
	return bits;
}

const char *fw_fbcat_name(int r)
{
	return r >= 0 && r < FW_FBCAT_NRULES ? rule_names[r] : NULL;
}

void fw_fbcat_free(struct fw_fbcat *c)
{
	if (!c)
		return;
	pcre2_code_free(c->re_refusal);
	pcre2_code_free(c->re_toolerr);
	pcre2_code_free(c->re_timeout);
	pcre2_code_free(c->re_testrun);
	pcre2_code_free(c->re_testfail);
	pcre2_code_free(c->re_correction);
	pcre2_match_data_free(c->md);
	free(c);
}

struct fw_fbcat *fw_fbcat_new(char *err, size_t errlen)
{
	struct fw_fbcat *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->re_refusal = re("\\b(I'?m sorry|I am sorry|I (can'?t|cannot|won'?t|will not) "
			   "(help|assist|do that|comply)|I'?m (not able|unable) to|I am (not able|unable) to)");
	c->re_toolerr = re("^(error|fatal)\\b:?|: command not found|no such file or directory|"
			   "permission denied|^\\w*(Error|Exception): ");
	c->re_timeout = re("\\btimed out\\b|\\btime ?out\\b|deadline exceeded|wall[- ]clock limit");
	c->re_testrun = re("\\b\\d+ (passed|failed)\\b|^(ok|not ok) \\d+|^FAILED |^Ran \\d+ tests?|"
			   "^(PASS|FAIL)\\b|\\btests? (passed|failed)\\b");
	c->re_testfail = re("\\b[1-9]\\d* (failed|errors?)\\b|^FAILED\\b|^not ok \\d+|^FAIL\\b|"
			    "\\btests? failed\\b");
	c->re_correction = re("^\\s*(no|nope|wrong|actually)\\b|that'?s (not|wrong)|not what I "
			      "(asked|wanted)|(didn'?t|did not) ask|\\b(undo|revert)\\b|\\bbroke|\\bbreaks\\b");
	if (!c->re_refusal || !c->re_toolerr || !c->re_timeout || !c->re_testrun ||
	    !c->re_testfail || !c->re_correction || !(c->md = pcre2_match_data_create(8, NULL))) {
		snprintf(err, errlen, "cannot compile the category rules");
		fw_fbcat_free(c);
		return NULL;
	}
	return c;
}
