#!/usr/bin/python3
"""gen.py -- agent episodes to judge, for `make judge` and tests/judge.bats.

    gen.py items [--n N] [--seed S] [--kinds ask,act[,skills]]
                                       rollout records (JSON lines)
    gen.py tasks [--seed S] [--eval F] < TASKS.jsonl
                                       task records (JSON lines): each
                                       task twice, as asked vaguely
                                       (expect "ask") and as written
                                       (expect "act")
    gen.py sft [--seed S] [--system FILE] < TASKS.jsonl
                                       chat records (JSON lines) that
                                       teach both first moves on every
                                       request: a clarifying question and
                                       a first command, one each

Each item is one short agent episode on a request that is either
ambiguous (task.expect "ask": the right first move is a clarifying
question) or clear (task.expect "act": asking is wrong).  The agent's
first reply is a question or a statement, whatever the request wanted
(so that the judge has both kinds of each), the patch is empty or a few
lines, and the last reply is short or long.  The requests name
functions and files drawn from a few word lists, so that a judge cannot
learn the items by heart.  With "skills" among the kinds, some requests
come with many instruction files (task.context, as history tasks carry
theirs) of which a few apply (task.applies); the agent reads some of them
(read_file calls), right or wrong.
"""

import hashlib
import json
import random
import sys

NOUNS = ["parser", "cache", "report", "importer", "formatter", "scheduler",
         "tokenizer", "exporter", "validator", "logger", "router", "mailer"]
KINDS = [("JSON", "CSV"), ("date", "amount"), ("fast", "safe"), ("old", "new"),
         ("client", "server"), ("daily", "weekly"), ("text", "binary")]
VERBS = ["trim", "parse", "round", "split", "merge", "count", "strip", "sort"]
FILES = ["textkit/strings.py", "billing/money.py", "tally/core.py", "feeds/rows.py",
         "report/table.py", "tools/cli.py"]
WHAT = ["tabs as well as spaces", "negative numbers", "an empty input",
        "a trailing newline", "grouped thousands", "unicode digits"]


def ambiguous(r):
    n = r.choice(NOUNS)
    a, b = r.choice(KINDS)
    forms = [
        f"Fix the {n}.",
        f"The {n} is wrong again, please fix it.",
        f"Make the {n} faster.",
        f"Can you clean up the {n}?",
        f"Update the {n} for the new format.",
    ]
    return r.choice(forms), n, (a, b)


def clear(r):
    v, f, w = r.choice(VERBS), r.choice(FILES), r.choice(WHAT)
    forms = [
        f"In {f}, make {v}() handle {w}.",
        f"{v}() in {f} fails on {w}; fix it and keep the other tests passing.",
        f"Change {v}() in {f} so that it accepts {w}.",
    ]
    return r.choice(forms), v, f


def question(r, n, pair):
    a, b = pair
    forms = [
        f"Which {n} do you mean, the {a} one or the {b} one?",
        f"Do you want the {a} {n} changed, or the {b} one?",
        f"Before I start: should this keep the {a} behaviour?",
        f"Is this about the {n} in the {a} path or the {b} path?",
    ]
    return r.choice(forms)


def statement(r, n):
    forms = [
        f"I changed the {n} and the tests pass.",
        f"Done: the {n} now does what you asked.",
        f"I will update the {n} now.",
        f"Here is the fix for the {n}.",
    ]
    return r.choice(forms)


def patch(r, f, v):
    k = r.randint(1, 9)
    return (f"--- a/{f}\n+++ b/{f}\n@@ -{k},2 +{k},2 @@\n def {v}(s):\n"
            f"-    return s.strip(' ')\n+    return s.strip()\n")


def last(r, n):
    short = ["Done.", "Fixed.", "Ok."]
    long = [f"I changed how the {n} reads its input; the new test covers the case you named.",
            f"The {n} now handles the case, and the old tests still pass; see the patch.",
            f"I kept the {n}'s interface and added one branch for the new input."]
    return r.choice(short if r.random() < 0.5 else long)


SKILLS = ["AGENTS.md", "docs/style-python.md", "docs/style-go.md", "docs/release.md",
          "docs/testing.md", "docs/security.md", "docs/migrations.md", "docs/i18n.md",
          "docs/logging.md", "docs/api-versioning.md"]


def skills_item(r, i, seed):
    v, f, w = r.choice(VERBS), r.choice(FILES), r.choice(WHAT)
    ctx = r.sample(SKILLS, r.randint(5, len(SKILLS)))
    applies = r.sample(ctx, r.randint(1, 3))
    read = [x for x in ctx if (x in applies and r.random() < 0.7) or (x not in applies and r.random() < 0.15)]
    calls = [{"name": "read_file", "args": json.dumps({"path": x})} for x in read]
    turns = [{"role": "user", "text": f"In {f}, make {v}() handle {w}."},
             {"role": "assistant", "text": "Reading the instructions first.", "calls": calls},
             {"role": "assistant", "text": last(r, v + "()")}]
    return {
        "kind": "rollout",
        "id": f"judge-{seed}-{i:04d}",
        "task_id": f"judge-task-{i:04d}",
        "task": {"prompt": turns[0]["text"], "expect": "skills",
                 "context": [{"path": x, "kind": "doc"} for x in ctx], "applies": applies},
        "turns": turns,
        "patch": patch(r, f, v),
    }


def items(n, seed, kinds=("ask", "act")):
    r = random.Random(seed)
    for i in range(n):
        # two kinds: one draw, as before there were more
        expect = (("ask" if r.random() < 0.5 else "act") if kinds == ("ask", "act")
                  else r.choice(kinds))
        if expect == "skills":
            yield skills_item(r, i, seed)
            continue
        if expect == "ask":
            req, noun, pair = ambiguous(r)
            f, v = r.choice(FILES), r.choice(VERBS)
        else:
            req, v, f = clear(r)
            noun, pair = v + "()", r.choice(KINDS)
        # the agent asks on most ambiguous requests, and on some clear ones
        asks = r.random() < (0.7 if expect == "ask" else 0.3)
        first = question(r, noun, pair) if asks else statement(r, noun)
        turns = [{"role": "user", "text": req}, {"role": "assistant", "text": first}]
        acted = r.random() < (0.3 if asks else 0.8)
        if asks:
            turns.append({"role": "user", "text": r.choice(["The first one.", "Yes.", "The " + pair[0] + " one."])})
        if acted or asks:
            turns.append({"role": "assistant", "text": last(r, noun)})
        yield {
            "kind": "rollout",
            "id": f"judge-{seed}-{i:04d}",
            "task_id": f"judge-task-{i:04d}",
            "task": {"prompt": req, "expect": expect},
            "turns": turns,
            "patch": patch(r, f, v) if acted else "",
        }


# The vague ways of asking for a task's fix, by the module it is in: none
# names the function, so the right first move is to ask which one.
VAGUE = ["Fix the {m} code.", "The {m} module is broken, please fix it.",
         "Something in {m} is wrong again; sort it out.", "Can you make {m} work?",
         "{m} fails for me. Fix it."]
# The two first moves bootstrap teaches on every request.
QUESTIONS = ["Which function in {f} do you mean?", "Which part of {m} is broken?",
             "What should {m} do instead?"]
COMMANDS = ["```bash\nls {d}\n```", "```bash\ngrep -n 'def ' {f}\n```",
            "```bash\ncat {f}\n```"]


def task_id(orig, expect):
    return hashlib.sha256(f"{orig}:{expect}".encode()).hexdigest()[:16]


def where(task):
    """The file a task's target is in, and its module's name."""
    t = (task.get("targets") or [{}])[0]
    f = t.get("path") or "the code"
    m = f.rsplit("/", 1)[-1].split(".")[0]
    return f, m


def tasks(lines, seed, frac_eval):
    """Each task as written (expect act) and asked vaguely (expect ask);
    a share frac_eval of the tasks, both variants, is held out (split
    eval), drawn by seed."""
    base = [json.loads(x) for x in lines if x.strip()]
    r = random.Random(seed)
    order = sorted(range(len(base)), key=lambda i: base[i]["id"])
    r.shuffle(order)
    held = set(order[:round(frac_eval * len(base))])
    for i, t in enumerate(base):
        f, m = where(t)
        split = "eval" if i in held else "train"
        act = dict(t, id=task_id(t["id"], "act"), expect="act", split=split)
        ask = dict(t, id=task_id(t["id"], "ask"), expect="ask", split=split,
                   prompt=r.choice(VAGUE).format(m=m))
        yield ask
        yield act


def sft(lines, seed, system):
    """Chat records that teach a question and a command on every request,
    whatever it wants: a policy that does each about half the time, for
    a reward to choose between."""
    r = random.Random(seed)
    for x in lines:
        if not x.strip():
            continue
        t = json.loads(x)
        f, m = where(t)
        d = f.rsplit("/", 1)[0] if "/" in f else "."
        for kind, forms in (("question", QUESTIONS), ("command", COMMANDS)):
            reply = r.choice(forms).format(f=f, m=m, d=d)
            yield {"kind": "traj", "id": task_id(t["id"], "sft-" + kind),
                   "task_id": t["id"], "meta": {"first_move": kind},
                   "turns": [{"role": "system", "text": system},
                             {"role": "user", "text": t["prompt"]},
                             {"role": "assistant", "text": reply}]}


def main(argv):
    if not argv or argv[0] not in ("items", "tasks", "sft"):
        sys.exit(__doc__)
    if argv[0] in ("tasks", "sft"):
        seed, frac, system, a = 1, 0.4, "", argv[1:]
        while a:
            if a[0] == "--seed" and len(a) > 1:
                seed = int(a[1]); a = a[2:]
            elif a[0] == "--eval" and len(a) > 1 and argv[0] == "tasks":
                frac = float(a[1]); a = a[2:]
                if not 0 <= frac <= 1:
                    sys.exit(f"gen.py: --eval takes a share in [0, 1], not {frac}")
            elif a[0] == "--system" and len(a) > 1 and argv[0] == "sft":
                system = open(a[1], encoding="utf-8").read(); a = a[2:]
            else:
                sys.exit(f"gen.py: unknown argument {a[0]!r}\n{__doc__}")
        lines = sys.stdin.readlines()
        out = tasks(lines, seed, frac) if argv[0] == "tasks" else sft(lines, seed, system)
        for rec in out:
            print(json.dumps(rec, ensure_ascii=False))
        return
    n, seed, kinds = 200, 1, ("ask", "act")
    a = argv[1:]
    while a:
        if a[0] == "--n" and len(a) > 1:
            n = int(a[1]); a = a[2:]
        elif a[0] == "--seed" and len(a) > 1:
            seed = int(a[1]); a = a[2:]
        elif a[0] == "--kinds" and len(a) > 1:
            kinds = tuple(a[1].split(","))
            if not kinds or any(k not in ("ask", "act", "skills") for k in kinds):
                sys.exit(f"gen.py: --kinds takes ask, act and skills, not {a[1]!r}")
            a = a[2:]
        else:
            sys.exit(f"gen.py: unknown argument {a[0]!r}\n{__doc__}")
    for it in items(n, seed, kinds):
        print(json.dumps(it, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
