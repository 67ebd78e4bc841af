#!/usr/bin/python3
"""Generate the feedback samples of samples/feedback/ (deterministic).

    /usr/bin/python3 samples/feedback/gen.py [OUTDIR [KEYFILE]]

Writes coding-agent trajectories from three checkpoints (ckpt-a, ckpt-b,
ckpt-c) in six log formats, external and internal feedback on them, and
planted-secrets.tsv, the list of every secret planted in the logs (one per
line: rule, secret), which the tests use to prove none survives redaction.
KEYFILE (default tests/fixtures/ingest/sample-turns.jsonl) receives the
answer key: for each trajectory, the turns fb-ingest must produce, worked
out from the generated episode (kept out of OUTDIR so that a directory scan
for logs does not take it for one).

The data is built so that an A/B comparison has an answer: users prefer
ckpt-b over ckpt-a by a wide margin, ckpt-b and ckpt-c are close, and the
failure categories differ by model (ckpt-a loops and hits tool errors,
ckpt-b leaves tests failing or times out, ckpt-c refuses and rambles).
Every file has exactly one malformed line (swe-agent: one truncated file);
some feedback names trajectories that do not exist (orphans); some users
change their vote (the latest counts); some log lines are exact duplicates.
"""
import base64
import csv
import io
import json
import os
import random
import sys
import uuid as uuidlib
from datetime import datetime, timedelta, timezone

SEED = 20261102
R = random.Random(SEED)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
KEY = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    HERE, "..", "..", "tests", "fixtures", "ingest", "sample-turns.jsonl")
T0 = datetime(2026, 11, 2, 8, 0, 0, tzinfo=timezone.utc)

MODELS = ["ckpt-a", "ckpt-b", "ckpt-c"]
# Scenario mix per model: what goes wrong differs by checkpoint.
MIX = {
    "ckpt-a": {"success": 35, "loop": 20, "tool_error": 20, "failing_tests": 10,
               "correction": 10, "long": 5},
    "ckpt-b": {"success": 65, "failing_tests": 15, "timeout": 8, "correction": 7,
               "tool_error": 5},
    "ckpt-c": {"success": 66, "refusal": 14, "long": 11, "failing_tests": 4,
               "correction": 5},
}
P_UP = {"success": 0.88}  # everything else: 0.12

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def rs(n, alphabet=ALNUM):
    return "".join(R.choice(alphabet) for _ in range(n))


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


# ---------------------------------------------------------------- projects --

PROJECTS = [
    ("ledger", "ledger/money.py", "parse_amount", "tests/test_money.py",
     "parse_amount('1,234.50') returns 1.2345 instead of 1234.5"),
    ("tiny-http", "tinyhttp/headers.py", "parse_header", "tests/test_headers.py",
     "header values with a colon are cut at the second colon"),
    ("billing", "billing/invoice.py", "total_due", "tests/test_invoice.py",
     "total_due ignores the discount when the invoice has a credit note"),
    ("csvkit-lite", "csvlite/reader.py", "sniff_delimiter", "tests/test_reader.py",
     "sniff_delimiter picks ',' for semicolon files with quoted commas"),
    ("scheduler", "sched/cron.py", "next_run", "tests/test_cron.py",
     "next_run skips the last day of February in leap years"),
    ("textwrap2", "textwrap2/core.py", "wrap", "tests/test_wrap.py",
     "wrap() drops the last word when it is exactly as long as the width"),
    ("geo", "geo/distance.py", "haversine", "tests/test_distance.py",
     "haversine returns kilometres when miles=True is passed"),
    ("auth-svc", "auth/session.py", "refresh", "tests/test_session.py",
     "refresh() does not extend the expiry of a session that is about to expire"),
    ("inventory", "inventory/stock.py", "reserve", "tests/test_stock.py",
     "reserve() lets stock go negative under concurrent orders"),
    ("mdparse", "mdparse/inline.py", "emphasis", "tests/test_inline.py",
     "nested emphasis '***x***' renders as <em><em>x</em></em>"),
    ("rate-limit", "ratelimit/bucket.py", "allow", "tests/test_bucket.py",
     "allow() refills the bucket only once per second even with fractional rates"),
    ("semver", "semver/compare.py", "compare", "tests/test_compare.py",
     "compare('1.0.0-alpha', '1.0.0') returns 1 instead of -1"),
]
ASKS = [
    "Fix the bug: {bug}. The failing test is in {test}.",
    "{bug}. Can you find out why and fix it? Run the tests when you are done.",
    "There's a bug in {fn} ({src}): {bug}. Please fix it without changing the public API.",
    "CI is red on main. Looks like {bug}. Fix it and make sure {test} passes.",
    "Our users report that {bug}. Please investigate and patch {src}.",
]
# Items: one prompt each; the same item is asked of several checkpoints
# (pairs for a paired comparison).
ITEMS = []
for i in range(60):
    p = PROJECTS[i % len(PROJECTS)]
    ITEMS.append({"item": "item-%03d" % i, "project": p,
                  "ask": ASKS[(i * 7) % len(ASKS)].format(bug=p[4], test=p[3], fn=p[2], src=p[1])})

SYSTEM = ("You are a coding agent working in a git repository at /workspace. "
          "Use the tools to inspect files, edit them and run commands. "
          "Keep changes minimal and run the tests before you finish.")

# ----------------------------------------------------------------- secrets --

PLANTED = []  # (rule, secret)
RULES = ["aws", "github", "openai", "anthropic", "slack", "private-key", "jwt",
         "bearer", "url-password", "kv-secret", "email"]
_plant_i = [0]


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def make_secret(rule):
    """Returns (text to plant, secret string to check for)."""
    if rule == "aws":
        s = "AKIA" + rs(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        return "export AWS_ACCESS_KEY_ID=" + s, s
    if rule == "github":
        s = "ghp_" + rs(36)
        return "git remote set-url origin https://x-access-token:%s@github.com/acme/repo.git" % s \
            if R.random() < 0.3 else "GITHUB_TOKEN=" + s, s
    if rule == "openai":
        s = "sk-proj-" + rs(48, ALNUM + "_-")
        return "OPENAI_API_KEY=" + s, s
    if rule == "anthropic":
        s = "sk-ant-api03-" + rs(93, ALNUM + "_-") + "AA"
        return "client = Anthropic(api_key=\"%s\")" % s, s
    if rule == "slack":
        s = "xoxb-%d-%d-%s" % (R.randrange(10**11, 10**12), R.randrange(10**12, 10**13), rs(24))
        return "SLACK_BOT_TOKEN=" + s, s
    if rule == "private-key":
        body = [rs(64, ALNUM + "+/") for _ in range(6)]
        pem = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----"
        return pem, body[2]
    if rule == "jwt":
        h = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        p = b64url(json.dumps({"sub": "user-%d" % R.randrange(10**6), "exp": 1893456000}).encode())
        s = h + "." + p + "." + b64url(bytes(R.randrange(256) for _ in range(32)))
        return "session cookie: " + s, s
    if rule == "bearer":
        s = rs(40, ALNUM + "._-")
        return "curl -s -H \"Authorization: Bearer %s\" https://api.internal.example/v1/jobs" % s, s
    if rule == "url-password":
        s = rs(18)
        return "DATABASE_URL=postgres://app:%s@db.internal.example:5432/ledger" % s, s
    if rule == "kv-secret":
        s = rs(28, ALNUM + "!#%^*")
        key = R.choice(["DB_PASSWORD", "client_secret", "api_key", "STRIPE_SECRET", "auth_token"])
        return "%s=%s" % (key, s), s
    if rule == "email":
        s = "%s.%s@%s" % (R.choice(["dana", "li", "omar", "sofia", "jan", "priya"]),
                          R.choice(["moreau", "chen", "haddad", "rossi", "novak", "iyer"]),
                          R.choice(["acme-corp.com", "example.org", "mail.example.net"]))
        return "Author: %s <%s>" % (s.split("@")[0].replace(".", " ").title(), s), s
    raise ValueError(rule)


def plant():
    rule = RULES[_plant_i[0] % len(RULES)]
    _plant_i[0] += 1
    text, secret = make_secret(rule)
    PLANTED.append((rule, secret))
    return text


# --------------------------------------------------------------- episodes --
# An episode is a list of abstract steps:
#   ("system", text) ("user", text)
#   ("assistant", text, [call...], thinking)   call = (kind, args dict)
#   ("tool", output, is_error)                 answers calls in order


def pytest_out(test, npass, fails, secs):
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0",
             "rootdir: /workspace", "collected %d items" % (npass + len(fails)), ""]
    dots = "." * npass + "F" * len(fails)
    lines.append("%s %s [100%%]" % (test, dots))
    if fails:
        lines += ["", "=================================== FAILURES ==================================="]
        for f in fails:
            lines += ["____________________________ %s ____________________________" % f, "",
                      "    def %s():" % f, ">       assert result == expected",
                      "E       AssertionError: assert 1.2345 == 1234.5", "",
                      "%s:%d: AssertionError" % (test, R.randrange(10, 90))]
        lines.append("=========================== short test summary info ============================")
        for f in fails:
            lines.append("FAILED %s::%s - AssertionError" % (test, f))
        lines.append("========================= %d failed, %d passed in %.2fs =========================" %
                     (len(fails), npass, secs))
    else:
        lines.append("============================== %d passed in %.2fs ===============================" %
                     (npass, secs))
    return "\n".join(lines)


def source_text(fn, buggy=True):
    body = ["def %s(value, *args, **kwargs):" % fn,
            "    \"\"\"See the module docs.\"\"\"",
            "    if value is None:",
            "        raise ValueError(\"value is required\")"]
    body.append("    return _impl(value.replace(',', ''), *args)" if not buggy
                else "    return _impl(value.replace(',', '.'), *args)")
    head = ["import logging", "", "log = logging.getLogger(__name__)", "", ""]
    return "\n".join("%4d\t%s" % (i + 1, l) for i, l in enumerate(head + body))


def episode(model, item, scenario):
    name, src, fn, test, bug = item["project"]
    steps = [("system", SYSTEM), ("user", item["ask"])]
    secret_where = None
    if R.random() < 0.16:
        secret_where = R.choice(["user", "args", "output"])
    if secret_where == "user":
        steps[1] = ("user", item["ask"] + "\n\nIn case you need it for the staging check: " + plant())

    def A(text, calls=(), thinking=None):
        steps.append(("assistant", text, list(calls), thinking))

    def T(out, err=False):
        steps.append(("tool", out, err))

    think = "The bug is probably in %s; read it first, then run %s." % (fn, test) \
        if R.random() < 0.4 else None
    A(R.choice(["Let me look at %s first." % src, "I'll start by reading the code.", ""]),
      [("read", {"path": src})], think)
    T(source_text(fn))
    if secret_where == "output":
        A("Let me check the environment configuration.", [("bash", {"command": "cat .env"})])
        T("# local settings\nDEBUG=1\n" + plant() + "\nLOG_LEVEL=info")
    if secret_where == "args":
        A("I'll reproduce it against staging.", [("bash", {"command": plant()})])
        T("", False)

    fix = ("value.replace(',', '.')", "value.replace(',', '')")
    if scenario == "refusal":
        A(R.choice([
            "I'm sorry, but I can't help with modifying code that handles %s, as it may be used "
            "to bypass security controls." % name,
            "I can't assist with that request. Changing %s could have unintended consequences "
            "and I'm not able to verify it is safe." % fn,
            "I'm not able to make changes to this repository. Please ask a maintainer to fix %s." % fn]))
        return steps, scenario
    if scenario == "loop":
        A("Let me run the tests to see the failure.", [("bash", {"command": "python -m pytest %s -x -q" % test})])
        out = pytest_out(test, 3, ["test_%s_edge" % fn], 0.41)
        T(out)
        for _ in range(R.randrange(4, 7)):
            A("Let me run the tests again.", [("bash", {"command": "python -m pytest %s -x -q" % test})])
            T(out)
        A("The tests still fail. I was not able to fix the issue.")
        return steps, scenario
    if scenario == "tool_error":
        bad = R.choice([("bash", {"command": "pytets %s" % test}, "bash: line 1: pytets: command not found"),
                        ("read", {"path": src.replace(".py", "_utils.py")},
                         "Error: file not found: %s" % src.replace(".py", "_utils.py")),
                        ("edit", {"path": src, "old_str": "value.replace(',', ',')", "new_str": fix[1]},
                         "Error: old_str not found in %s" % src)])
        A("Let me try this.", [(bad[0], bad[1])])
        T(bad[2], True)
        A("That did not work, trying once more.", [(bad[0], bad[1])])
        T(bad[2], True)
        A("I ran into errors with the tools and could not complete the fix.")
        return steps, scenario
    A("The bug is on line 9: the thousands separator is replaced by a decimal point.",
      [("edit", {"path": src, "old_str": fix[0], "new_str": fix[1]})])
    T("The file %s has been edited." % src)
    if scenario == "timeout":
        A("Now the full test suite.", [("bash", {"command": "python -m pytest -q"})])
        T("Command timed out after 120 seconds\n" + "\n".join(
            "tests/test_integration.py::test_sync_%d PASSED" % i for i in range(12)), True)
        A("The test suite timed out; the change is probably fine but I could not confirm it.")
        return steps, scenario
    if scenario == "failing_tests":
        A("Running the tests.", [("bash", {"command": "python -m pytest %s -q" % test})])
        T(pytest_out(test, 5, ["test_%s_negative" % fn, "test_%s_locale" % fn], 0.52))
        A("I fixed the main bug. Two tests still fail (test_%s_negative and test_%s_locale) "
          "but they look unrelated to this change." % (fn, fn))
        return steps, scenario
    long = scenario == "long"
    A("Running the tests.", [("bash", {"command": "python -m pytest %s -v" % test if long else
                                         "python -m pytest %s -q" % test})])
    if long:
        T("\n".join("%s::test_%s_case_%03d PASSED%s[%3d%%]" % (test, fn, i, " " * 20, i * 100 // 240)
                    for i in range(240)) + "\n\n240 passed in 3.91s")
    else:
        T(pytest_out(test, R.randrange(4, 12), [], R.uniform(0.2, 1.5)))
    if long:
        A("\n\n".join([
            "## Summary of the change",
            "I changed `%s` in `%s` so that the thousands separator is removed instead of being "
            "turned into a decimal point. " % (fn, src) * 3,
            "## Background\n" + ("The function is called from several places, and each of them passes "
                                 "user input that may or may not contain separators. " * 12),
            "## Tests\nAll 240 tests pass. " + ("I also considered adding more tests for locales, "
                                               "negative values, and very large amounts. " * 8),
            "## Follow-ups\n" + "\n".join("- consider refactoring helper %d" % i for i in range(15))]))
    else:
        A(R.choice(["Fixed: %s now strips the thousands separator. All tests pass." % fn,
                    "Done. The bug was in %s (line 9); the tests in %s pass now." % (src, test),
                    "I fixed the separator handling in `%s` and ran `%s`: all green." % (fn, test)]))
    if scenario == "correction":
        steps.append(("user", R.choice([
            "No, that's wrong: amounts like '1.234,50' (European format) are broken now. I asked you "
            "not to change the behaviour for other locales.",
            "That's not what I asked. You changed the public API; revert that and fix only %s." % fn,
            "Actually no, this breaks the importer. Please undo and try again."])))
        A("You're right, sorry. I'll restrict the change to the default locale.",
          [("edit", {"path": src, "old_str": fix[1], "new_str": "_strip_sep(value, locale)"})])
        T("The file %s has been edited." % src)
        A("Updated: separators are now removed according to the locale.")
    return steps, scenario


# ------------------------------------------------------------ renderers --

def args_for(kind, args, family):
    if family == "claude-code":
        if kind == "bash":
            return "Bash", {"command": args["command"], "description": "Run a shell command"}
        if kind == "read":
            return "Read", {"file_path": "/workspace/" + args["path"]}
        return "Edit", {"file_path": "/workspace/" + args["path"], "old_string": args["old_str"],
                        "new_string": args["new_str"]}
    return {"bash": "bash", "read": "read_file", "edit": "str_replace"}[kind], args


def call_id(prefix, n):
    return prefix + rs(n)


def render_openai_chat(ep, meta):
    msgs = []
    pending = []
    for s in ep:
        if s[0] in ("system", "user"):
            msgs.append({"role": s[0], "content": s[1]})
        elif s[0] == "assistant":
            m = {"role": "assistant", "content": s[1] or None}
            if s[2]:
                m["tool_calls"] = []
                for kind, a in s[2]:
                    name, a = args_for(kind, a, "openai")
                    cid = call_id("call_", 24)
                    pending.append(cid)
                    m["tool_calls"].append({"id": cid, "type": "function",
                                            "function": {"name": name, "arguments": json.dumps(a)}})
            msgs.append(m)
        else:
            msgs.append({"role": "tool", "tool_call_id": pending.pop(0), "content": s[1]})
    rid = "chatcmpl-" + rs(29)
    ntok = sum(len(json.dumps(m)) for m in msgs) // 4
    last = msgs.pop()
    return rid, {"id": rid, "object": "chat.completion", "created": int(meta["t"].timestamp()),
                 "model": meta["model"], "metadata": {"item": meta["item"]},
                 "request": {"messages": msgs, "tools": [{"type": "function", "function": {"name": n}}
                                                         for n in ("bash", "read_file", "str_replace")]},
                 "choices": [{"index": 0, "message": last, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": ntok, "completion_tokens": len(json.dumps(last)) // 4,
                           "total_tokens": ntok + len(json.dumps(last)) // 4}}


def render_openai_responses(ep, meta):
    items = []
    pending = []
    for s in ep:
        if s[0] == "system":
            continue
        if s[0] == "user":
            items.append({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": s[1]}]})
        elif s[0] == "assistant":
            if s[3]:
                items.append({"type": "reasoning", "id": "rs_" + rs(20),
                              "summary": [{"type": "summary_text", "text": s[3]}]})
            if s[1]:
                items.append({"type": "message", "id": "msg_" + rs(20), "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "text": s[1], "annotations": []}]})
            for kind, a in s[2]:
                name, a = args_for(kind, a, "openai")
                cid = call_id("call_", 24)
                pending.append(cid)
                items.append({"type": "function_call", "id": "fc_" + rs(20), "call_id": cid,
                              "name": name, "arguments": json.dumps(a), "status": "completed"})
        else:
            items.append({"type": "function_call_output", "call_id": pending.pop(0), "output": s[1]})
    # the last model turn is the response's output, the rest its input
    k = len(items)
    while k > 0 and items[k - 1]["type"] != "function_call_output" and \
            not (items[k - 1]["type"] == "message" and items[k - 1]["role"] == "user"):
        k -= 1
    rid = "resp_" + rs(48, "0123456789abcdef")
    return rid, {"id": rid, "object": "response", "created_at": int(meta["t"].timestamp()),
                 "model": meta["model"], "instructions": SYSTEM, "metadata": {"item": meta["item"]},
                 "input": items[:k], "output": items[k:], "status": "completed",
                 "usage": {"input_tokens": R.randrange(800, 9000), "output_tokens": R.randrange(40, 900)}}


def anthropic_messages(ep, family, err_flag=True):
    """Anthropic content-block messages for the non-system steps."""
    msgs = []
    pending = []
    for s in ep:
        if s[0] == "system":
            continue
        if s[0] == "user":
            if msgs and msgs[-1]["role"] == "user" and isinstance(msgs[-1]["content"], list):
                msgs[-1]["content"].append({"type": "text", "text": s[1]})
            else:
                msgs.append({"role": "user", "content": s[1]})
        elif s[0] == "assistant":
            blocks = []
            if s[3]:
                blocks.append({"type": "thinking", "thinking": s[3], "signature": rs(40)})
            if s[1]:
                blocks.append({"type": "text", "text": s[1]})
            for kind, a in s[2]:
                name, a = args_for(kind, a, family)
                cid = call_id("toolu_01", 22)
                pending.append(cid)
                blocks.append({"type": "tool_use", "id": cid, "name": name, "input": a})
            msgs.append({"role": "assistant", "content": blocks})
        else:
            b = {"type": "tool_result", "tool_use_id": pending.pop(0), "content": s[1]}
            if s[2] and err_flag:
                b["is_error"] = True
            if msgs[-1]["role"] == "user":
                msgs[-1]["content"].append(b)
            else:
                msgs.append({"role": "user", "content": [b]})
    return msgs


def render_anthropic(ep, meta):
    msgs = anthropic_messages(ep, "anthropic")
    rid = "msg_01" + rs(22)
    last = msgs.pop()
    return rid, {"id": rid, "type": "message", "model": meta["model"], "created_at": iso(meta["t"]),
                 "metadata": {"item": meta["item"]},
                 "request": {"system": SYSTEM, "max_tokens": 8192, "messages": msgs},
                 "role": "assistant", "content": last["content"], "stop_reason": "end_turn",
                 "usage": {"input_tokens": R.randrange(800, 9000), "output_tokens": R.randrange(40, 900),
                           "cache_read_input_tokens": R.randrange(0, 4000)}}


def render_sharegpt(ep, meta):
    conv = []
    for s in ep:
        if s[0] == "system":
            conv.append({"from": "system", "value": s[1]})
        elif s[0] == "user":
            conv.append({"from": "human", "value": s[1]})
        elif s[0] == "assistant":
            if s[1] or not s[2]:
                conv.append({"from": "gpt", "value": s[1]})
            for kind, a in s[2]:
                name, a = args_for(kind, a, "sharegpt")
                conv.append({"from": "function_call", "value": json.dumps({"name": name, "arguments": a})})
        else:
            conv.append({"from": "observation", "value": s[1]})
    rid = "sg-" + rs(10, "0123456789abcdef")
    return rid, {"id": rid, "model": meta["model"], "conversations": conv,
                 "tools": json.dumps([{"name": n} for n in ("bash", "read_file", "str_replace")])}


def render_claude_code(ep, meta, sidechain=False, fork=False):
    sid = str(uuidlib.UUID(int=R.getrandbits(128), version=4))
    t = meta["t"]
    events = []
    parent = None
    msgs = anthropic_messages(ep, "claude-code")
    base = {"cwd": "/home/dev/src/" + meta["project"], "sessionId": sid, "version": "2.0.14",
            "gitBranch": "main", "userType": "external"}

    def ev(typ, message, side=False, extra=None):
        nonlocal parent, t
        t += timedelta(seconds=R.randrange(1, 40), milliseconds=R.randrange(1000))
        u = str(uuidlib.UUID(int=R.getrandbits(128), version=4))
        e = {"parentUuid": parent, "isSidechain": side, "type": typ, "message": message,
             "uuid": u, "timestamp": iso_ms(t)}
        e.update(base)
        if extra:
            e.update(extra)
        events.append(e)
        parent = u
        return u

    for i, m in enumerate(msgs):
        if m["role"] == "user":
            if fork and i == 0:
                # the user sent a first version, then edited it: a dead branch
                root = parent
                ev("user", {"role": "user", "content": m["content"] + " (draft)"})
                ev("assistant", {"id": "msg_01" + rs(22), "type": "message", "role": "assistant",
                                 "model": meta["model"], "content": [{"type": "text", "text": "Looking."}],
                                 "usage": {"input_tokens": 10, "output_tokens": 3}})
                parent = root
            ev("user", {"role": "user", "content": m["content"]})
        else:
            # Claude Code writes one event per content block, same message id
            mid = "msg_01" + rs(22)
            for b in m["content"]:
                ev("assistant", {"id": mid, "type": "message", "role": "assistant", "model": meta["model"],
                                 "content": [b], "stop_reason": None,
                                 "usage": {"input_tokens": R.randrange(5, 3000), "output_tokens": R.randrange(5, 300)}},
                   extra={"requestId": "req_011" + rs(21)})
            if sidechain and i == 1:
                # a subagent explores in a side chain hanging off this point
                keep = parent
                ev("user", {"role": "user", "content": "Find every caller of the function and report them."}, True)
                ev("assistant", {"id": "msg_01" + rs(22), "type": "message", "role": "assistant",
                                 "model": meta["model"], "content": [{"type": "tool_use", "id": "toolu_01" + rs(22),
                                 "name": "Grep", "input": {"pattern": "parse", "path": "/workspace"}}],
                                 "usage": {"input_tokens": 50, "output_tokens": 20}}, True)
                ev("assistant", {"id": "msg_01" + rs(22), "type": "message", "role": "assistant",
                                 "model": meta["model"], "content": [{"type": "text", "text": "Found 3 callers."}],
                                 "usage": {"input_tokens": 60, "output_tokens": 5}}, True)
                parent = keep
    lines = [json.dumps({"type": "summary", "summary": "Fix %s" % meta["project"],
                         "leafUuid": events[-1]["uuid"]})]
    lines += [json.dumps(e) for e in events]
    return sid, lines


def render_swe_agent(ep, meta, inst):
    hist = []
    traj = []
    acts = []
    for s in ep:
        if s[0] == "system":
            hist.append({"role": "system", "content": s[1], "agent": "main", "message_type": "system_prompt"})
        elif s[0] == "user":
            hist.append({"role": "user", "content": "<issue>\n%s\n</issue>" % s[1], "agent": "main",
                         "message_type": "observation"})
        elif s[0] == "assistant":
            calls = s[2] or [("bash", {"command": "submit"})]
            for j, (kind, a) in enumerate(calls):
                if kind == "bash":
                    action = a["command"]
                elif kind == "read":
                    action = "open " + a["path"]
                else:
                    action = "edit 9:9\n    return _impl(%s, *args)\nend_of_edit" % a["new_str"]
                thought = s[1] if j == 0 else ""
                hist.append({"role": "assistant", "content": "%s\n\n```\n%s\n```" % (thought, action),
                             "thought": thought, "action": action, "agent": "main", "message_type": "action"})
                acts.append((thought, action))
            if not s[2]:
                hist.append({"role": "user", "content": "", "agent": "main", "message_type": "observation"})
                traj.append({"action": "submit", "observation": "", "response": s[1], "thought": s[1],
                             "state": "{}", "execution_time": 0.1})
        else:
            hist.append({"role": "user", "content": s[1], "agent": "main", "message_type": "observation"})
            th, ac = acts.pop(0)
            traj.append({"action": ac, "observation": s[1], "response": "%s\n```\n%s\n```" % (th, ac),
                         "thought": th, "state": "{\"open_file\": \"n/a\"}",
                         "execution_time": round(R.uniform(0.05, 4.0), 3)})
    doc = {"environment": "swe_main", "trajectory": traj, "history": hist,
           "info": {"exit_status": "submitted", "submission": "diff --git a/x b/x\n",
                    "model_stats": {"instance_cost": round(R.uniform(0.1, 2.0), 4),
                                    "tokens_sent": R.randrange(5000, 90000),
                                    "tokens_received": R.randrange(300, 5000), "api_calls": len(traj)}},
           "replay_config": json.dumps({"agent": {"model": {"name": meta["model"]}},
                                        "problem_statement": {"id": inst}})}
    return inst, doc


# ---------------------------------------------------------- answer key --

def swe_action(kind, a):
    if kind == "bash":
        return a["command"]
    if kind == "read":
        return "open " + a["path"]
    return "edit 9:9\n    return _impl(%s, *args)\nend_of_edit" % a["new_str"]


def signature(fmt, ep):
    """The turns fb-ingest must produce for episode ep logged as fmt, one
    string per turn: role|text length|thinking length|call names|argument
    lengths|error flag.  Lengths count code points of the unredacted text;
    arguments are compact JSON.  Worked out from the episode, not from any
    log file, so it checks the converters independently."""
    def jlen(a):
        return len(json.dumps(a, separators=(",", ":"), ensure_ascii=False))

    def sig(role, text="", thinking="", calls=(), err=None):
        return "|".join([role, str(len(text)), str(len(thinking or "")),
                         ",".join(n for n, _ in calls), ",".join(str(jlen(a)) for _, a in calls),
                         "" if err is None else ("1" if err else "0")])

    family = "claude-code" if fmt == "claude-code" else "openai"
    think = fmt in ("openai-responses", "anthropic", "claude-code")
    errs = fmt in ("anthropic", "claude-code")
    out = []
    for s in ep:
        if s[0] == "system":
            if fmt != "claude-code":
                out.append(sig("system", s[1]))
        elif s[0] == "user":
            out.append(sig("user", "<issue>\n%s\n</issue>" % s[1] if fmt == "swe-agent" else s[1]))
        elif s[0] == "assistant" and fmt == "swe-agent":
            for j, (kind, a) in enumerate(s[2] or [("bash", {"command": "submit"})]):
                act = swe_action(kind, a)
                out.append(sig("assistant", s[1] if j == 0 else "", "",
                               [(act.split(" ")[0].split("\n")[0], {"command": act})]))
            if not s[2]:
                out.append(sig("tool", "", err=False))
        elif s[0] == "assistant":
            out.append(sig("assistant", s[1], s[3] if think else "",
                           [args_for(kind, a, family) for kind, a in s[2]]))
        else:
            out.append(sig("tool", s[1], err=bool(s[2]) and errs))
    return out


# ------------------------------------------------------------------ main --

FORMATS = [("openai-chat", 90), ("openai-responses", 60), ("anthropic", 80),
           ("claude-code", 42), ("sharegpt", 50), ("swe-agent", 30)]


def pick(weights):
    tot = sum(weights.values())
    x = R.uniform(0, tot)
    for k, w in weights.items():
        x -= w
        if x <= 0:
            return k
    return k


def malformed(line):
    return line[: len(line) // 2]


def main():
    os.makedirs(OUT, exist_ok=True)
    trajs = []  # (fmt, source id, model, scenario, created time, item)
    keys = []  # turn signatures, one JSON line per trajectory
    n = 0
    for fmt, count in FORMATS:
        lines = []
        cc_files = {}
        for i in range(count):
            model = MODELS[(n + i) % 3] if R.random() < 0.8 else R.choice(MODELS)
            item = ITEMS[R.randrange(len(ITEMS))]
            scen = pick(MIX[model])
            t = T0 + timedelta(minutes=R.randrange(0, 60 * 24 * 14))
            ep, scen = episode(model, item, scen)
            meta = {"model": model, "item": item["item"], "t": t, "project": item["project"][0]}
            if fmt == "openai-chat":
                rid, doc = render_openai_chat(ep, meta)
                lines.append(json.dumps(doc))
            elif fmt == "openai-responses":
                rid, doc = render_openai_responses(ep, meta)
                lines.append(json.dumps(doc))
            elif fmt == "anthropic":
                rid, doc = render_anthropic(ep, meta)
                lines.append(json.dumps(doc))
            elif fmt == "sharegpt":
                rid, doc = render_sharegpt(ep, meta)
                lines.append(json.dumps(doc))
            elif fmt == "claude-code":
                rid, ls = render_claude_code(ep, meta, sidechain=(i % 5 == 1), fork=(i % 7 == 3))
                cc_files.setdefault(("ledger", "billing", "tiny-http", "scheduler")[i % 4], []).extend(ls)
            else:
                inst = "%s__%s-%d" % (item["project"][0], item["project"][0], 1000 + n + i)
                rid, doc = render_swe_agent(ep, meta, inst)
                os.makedirs(os.path.join(OUT, "swe-agent"), exist_ok=True)
                with open(os.path.join(OUT, "swe-agent", inst + ".traj"), "w") as f:
                    f.write(json.dumps(doc, indent=2) + "\n")
            trajs.append((fmt, rid, model, scen, t, item["item"]))
            keys.append(json.dumps({"source_id": rid, "format": fmt, "model": model,
                                    "scenario": scen, "turns": signature(fmt, ep)}))
        n += count
        if fmt in ("openai-chat", "openai-responses", "anthropic", "sharegpt"):
            # exact duplicates (a retried log write) and one malformed line
            for j in (5, 17):
                lines.insert(j + 20, lines[j])
            lines.insert(len(lines) // 3, malformed(lines[len(lines) // 3]))
            with open(os.path.join(OUT, fmt + ".jsonl"), "w") as f:
                f.write("\n".join(lines) + "\n")
        elif fmt == "claude-code":
            d = os.path.join(OUT, "claude-code")
            os.makedirs(d, exist_ok=True)
            for proj, ls in sorted(cc_files.items()):
                bad = json.dumps({"type": "file-history-snapshot", "messageId": str(uuidlib.UUID(
                    int=R.getrandbits(128))), "snapshot": {"trackedFileBackups": {}}})
                ls.insert(len(ls) // 2, malformed(bad))
                with open(os.path.join(d, proj + ".jsonl"), "w") as f:
                    f.write("\n".join(ls) + "\n")
        elif fmt == "swe-agent":
            # one run crashed while its trajectory was being written
            last = sorted(os.listdir(os.path.join(OUT, "swe-agent")))[-1]
            p = os.path.join(OUT, "swe-agent", last)
            s = open(p).read()
            open(p, "w").write(s[: len(s) * 2 // 3])
            trajs = [x for x in trajs if not (x[0] == "swe-agent" and x[1] + ".traj" == last)]
            keys = [k for k in keys if json.loads(k)["source_id"] + ".traj" != last]

    # --------------------------------------------------------- feedback --
    ext_users = ["u-%04d" % R.randrange(10000) for _ in range(70)]
    int_users = ["dogfood-" + n for n in ("ana", "ben", "chiara", "dev", "eitan", "fatou", "gus",
                                          "hana", "ivo", "jun", "kemal", "lea")]
    bias = {u: R.gauss(0, 0.6) for u in ext_users + int_users}
    ext, internal = [], []
    stats = {m: [0, 0] for m in MODELS}
    for fmt, rid, model, scen, t, item in trajs:
        internal_fmt = fmt in ("claude-code", "swe-agent")
        nvotes = R.choice([0, 1, 1, 1, 2, 2, 3]) if not internal_fmt else R.choice([1, 1, 2])
        users = R.sample(int_users if internal_fmt or R.random() < 0.2 else ext_users, nvotes)
        for u in users:
            p = P_UP.get(scen, 0.12)
            lo = min(0.97, max(0.03, p + bias[u] * 0.1))
            up = R.random() < lo
            at = t + timedelta(minutes=R.randrange(2, 600))
            comment = ""
            if not up and R.random() < 0.5:
                comment = {"loop": "it kept running the same command over and over",
                           "tool_error": "the tool calls kept failing",
                           "failing_tests": "tests still fail after its change",
                           "timeout": "it timed out",
                           "refusal": "refused a perfectly normal request",
                           "long": "way too long, I just wanted the fix",
                           "correction": "it changed things I did not ask for",
                           "success": "fix was ok but not what I wanted"}[scen]
            elif up and R.random() < 0.3:
                comment = R.choice(["great, thanks", "worked first time", "nice and minimal", "👍 perfect"])
            if R.random() < 0.03:
                comment += " " + plant()
            ev = {"trace": rid, "up": up, "comment": comment, "user": u, "at": at, "model": model}
            stats[model][0 if up else 1] += 1
            # a few users first voted the other way, then changed their mind
            if R.random() < 0.07:
                ev0 = dict(ev, up=not up, comment="", at=at - timedelta(minutes=R.randrange(1, 30)))
                (internal if u.startswith("dogfood") else ext).append(ev0)
            (internal if u.startswith("dogfood") else ext).append(ev)
    for i in range(9):  # feedback on trajectories that were never logged
        ext.append({"trace": "chatcmpl-" + rs(29), "up": R.random() < 0.5, "comment": "", "user": R.choice(ext_users),
                    "at": T0 + timedelta(days=R.randrange(14)), "model": None})
    for i in range(4):
        internal.append({"trace": str(uuidlib.UUID(int=R.getrandbits(128), version=4)), "up": False,
                         "comment": "session crashed", "user": R.choice(int_users),
                         "at": T0 + timedelta(days=R.randrange(14)), "model": None})
    R.shuffle(ext)
    R.shuffle(internal)

    out = []
    for i, e in enumerate(ext):
        style = i % 3
        rating = ("up" if e["up"] else "down", 1 if e["up"] else -1, e["up"])[style]
        d = {"trace_id": e["trace"], "rating": rating, "user_id": e["user"],
             "timestamp": iso(e["at"]) if i % 4 else int(e["at"].timestamp())}
        if e["comment"]:
            d["comment"] = e["comment"]
        if i % 5 == 0:
            d["origin"] = "external"
        out.append(json.dumps(d, ensure_ascii=False))
    out.insert(len(out) // 2, '{"trace_id": "chatcmpl-x", "rating": "up", "user_id": ')
    with open(os.path.join(OUT, "feedback-external.jsonl"), "w") as f:
        f.write("\n".join(out) + "\n")

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["trajectory_id", "rating", "comment", "user", "origin", "time"])
    for i, e in enumerate(internal):
        stars = R.choice([4, 5, 5]) if e["up"] else R.choice([1, 1, 2])
        w.writerow([e["trace"], stars, e["comment"], e["user"], "internal", iso(e["at"])])
    # a neutral rating (3 of 5) is neither up nor down
    w.writerow([trajs[3][1], 3, "meh", int_users[0], "internal", iso(T0)])
    text = buf.getvalue().split("\n")
    text.insert(len(text) // 2, '%s,"unterminated quote,dogfood-ana,internal' % trajs[5][1])
    with open(os.path.join(OUT, "feedback-internal.csv"), "w") as f:
        f.write("\n".join(text))

    with open(KEY, "w") as f:
        f.write("\n".join(keys) + "\n")
    with open(os.path.join(OUT, "planted-secrets.tsv"), "w") as f:
        f.write("# rule\tsecret (each must be absent from redacted fb-ingest output)\n")
        for rule, s in PLANTED:
            f.write("%s\t%s\n" % (rule, s))
    sys.stderr.write("gen: %d trajectories, %d external and %d internal feedback events, "
                     "%d planted secrets\n" % (len(trajs), len(ext), len(internal), len(PLANTED)))
    for m in MODELS:
        up, down = stats[m]
        sys.stderr.write("gen: %s: %d up, %d down (%.2f)\n" % (m, up, down, up / max(1, up + down)))


if __name__ == "__main__":
    main()
