#!/usr/bin/env python3
"""gen.py -- the drills: many small documented functions a tiny model can learn.

    gen.py repo DIR        write the drills repository into DIR (not a git
                           repository yet: samples/repos/commit.sh makes it one)
    gen.py corpus          write the bootstrap corpus to standard output:
                           JSON lines {"prompt", "completion"}, the form
                           train-step reads

Every drill is a function of an integer x with a one-line docstring that says
what it returns ("Return x times 13.") and a one-line body; its test checks it
on up to six inputs around its constant (five for 2).  Ten operations, each
worded in four ways ("Return x times 13.", "Return the product of x and 13.",
"Return x multiplied by 13.", "Return x scaled by 13."), each wording with its
own spelling of the code, and the constants 2 to 33: 1,280 kinds of drill.
The repository holds 320 of them, drawn at random; the bootstrap corpus holds
the other 960, twice each, in other contexts (and once more after a note,
below).  So every drill of the
repository (and of its held-out split) is one the corpus never showed: to
pass, a model must read the operation from the wording and copy the constant.

The corpus is also imperfect the way scraped code is: about a third of its
bodies print the value instead of returning it ("print(x * 13)"), a bug the
repository's tests catch.  A model bootstrapped on it writes that bug about as
often; the inner loop's reward (the tests pass) is what teaches it not to, and
the held-out split measures whether the lesson carries over to drills it never
trained on.

The corpus also holds notes about earlier attempts, as a tiny model's
pretraining would hold code review: each bootstrap drill once more, its
prompt followed by a note in the form teach(1) puts a hint before a body
("Hint: test drills::NAME: fail: NAME(0) returned None, expected 26", the
message run_tests.py writes for an attempt that printed, used the wrong
constant or the wrong operation; on a share of them a second line, "a
correct solution looked like this:" and a correct body), and then the
corrected body.  So a model bootstrapped on it can read a hint: with one
before a body, it puts its probability on the body the note asks for.  The
notes speak only of the corpus's own drills.

Prompts are what `rollout --context 80` shows of a file before a body (the
files hold ten drills each), and so are the corpus's.  The repository's tests
run with run_tests.py, a runner that starts in tens of milliseconds and
writes JUnit XML where FW_REPORT says, so that grading one rollout stays
cheap.  Only the standard library is used; the output depends on nothing but
this file.
"""
import json
import os
import random
import sys

PER_FILE = 10   # drills per file
CONTEXT = 80    # bytes of a file before a body that a policy is shown
COPIES = 2      # each bootstrap drill this many times, in other contexts
CONSTS = range(2, 34)
NREPO = 320     # drills in the repository; the other kinds make the corpus
BUG = 0.35      # share of the corpus's bodies that print instead of return
NOTED = 1       # each bootstrap drill this many times more, after a note
DEMO = 0.5      # share of the notes that show a correct body as well

# the operations, each in four wordings, each with its spelling of the code:
# (wording, code, ...); {a} is the constant.  The fourth spelling is the
# first without spaces, so that no body is written twice in the repository,
# where it would give the answer away.
OPS = [
    ("Return x times {a}.", "x * {a}",
     "Return the product of x and {a}.", "{a} * x",
     "Return x multiplied by {a}.", "(x * {a})",
     "Return x scaled by {a}.", "x * {a}"),
    ("Return x plus {a}.", "x + {a}",
     "Return the sum of x and {a}.", "{a} + x",
     "Return x increased by {a}.", "(x + {a})",
     "Return x with {a} added.", "x + {a}"),
    ("Return x minus {a}.", "x - {a}",
     "Return x decreased by {a}.", "(x - {a})",
     "Return x less {a}.", "-{a} + x",
     "Return x with {a} taken away.", "x - {a}"),
    ("Return x modulo {a}.", "x % {a}",
     "Return the remainder of x divided by {a}.", "(x % {a})",
     "Return x mod {a}.", "x - x // {a} * {a}",
     "Return what is left when x is divided by {a}.", "x % {a}"),
    ("Return x divided by {a}, rounded down.", "x // {a}",
     "Return how many whole times {a} fits in x.", "(x // {a})",
     "Return the floor of x over {a}.", "int(x / {a})",
     "Return the whole part of x over {a}.", "x // {a}"),
    ("Return {a} minus x.", "{a} - x",
     "Return x subtracted from {a}.", "({a} - x)",
     "Return the difference of {a} and x.", "-x + {a}",
     "Return {a} take away x.", "{a} - x"),
    ("Return the larger of x and {a}.", "max(x, {a})",
     "Return x, but at least {a}.", "max({a}, x)",
     "Return the maximum of x and {a}.", "x if x > {a} else {a}",
     "Return x or {a}, whichever is larger.", "max(x, {a})"),
    ("Return the smaller of x and {a}.", "min(x, {a})",
     "Return x, but at most {a}.", "min({a}, x)",
     "Return the minimum of x and {a}.", "x if x < {a} else {a}",
     "Return x or {a}, whichever is smaller.", "min(x, {a})"),
    ("Return True if x is greater than {a}.", "x > {a}",
     "Return whether x exceeds {a}.", "{a} < x",
     "Return whether x is above {a}.", "(x > {a})",
     "Return whether x is more than {a}.", "x > {a}"),
    ("Return True if x is less than {a}.", "x < {a}",
     "Return whether x is below {a}.", "{a} > x",
     "Return whether x is under {a}.", "(x < {a})",
     "Return whether x is fewer than {a}.", "x < {a}"),
]


def split_kinds():
    """(corpus, repository) drills as (docstring, expression, constant):
    every kind, in a fixed shuffled order; the first NREPO make the
    repository, the others the corpus."""
    kinds = []
    for row in OPS:
        for a in CONSTS:
            for j, (doc, code) in enumerate(zip(row[::2], row[1::2])):
                if j == 3:
                    code = code.replace(" ", "")
                kinds.append((doc.format(a=a), code.format(a=a), a))
    random.Random(5).shuffle(kinds)
    return kinds[NREPO:], kinds[:NREPO]


def inputs(a):
    """What a drill with constant a is tested on: each side of a, and a."""
    return sorted({0, 1, a - 1, a, a + 1, 2 * a + 3})


def source(name, doc, expr):
    return f'def {name}(x):\n    """{doc}"""\n    return {expr}\n'


def drills():
    """The repository's drills: (name, doc, expr), in a fixed shuffled order."""
    out = split_kinds()[1]
    random.Random(7).shuffle(out)
    names = iter(NAMES)
    return [(next(names), d, e, a) for d, e, a in out]


def _names():
    """Distinct made-up names without digits (a digit in a name would be
    one more number next to the constant)."""
    rng, seen, out = random.Random(9), set(), []
    cons, vows = "bdfgklmnprstvz", "aeiou"
    while len(out) < 4000:
        n = "".join(rng.choice(cons) + rng.choice(vows) for _ in range(3))
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


NAMES = _names()


RUNNER = '''\
"""run_tests.py -- run the drills' tests; JUnit XML to $FW_REPORT (or argv[1]).

A test passes when its function returns the expected value for each input.
tests/cases.txt holds them, a line per drill: its name, its module, and
x=result pairs (a plain table that loads in well under a millisecond, where
the same table as Python source takes tens of milliseconds to compile: the
runner starts for every rollout graded).
"""
import os
import sys
import time


def quoteattr(s):
    return '"' + escape(s).replace('"', "&quot;") + '"'


def escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


sys.dont_write_bytecode = True
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
out = os.environ.get("FW_REPORT") or (sys.argv[1] if len(sys.argv) > 1 else None)
VALUES = {"True": True, "False": False}
table = []
with open(os.path.join(here, "tests", "cases.txt")) as f:
    for line in f:
        name, modname, *pairs = line.split()
        table.append((name, modname, [(int(x), VALUES[y] if y in VALUES else int(y))
                                      for x, y in (p.split("=") for p in pairs)]))
cases, failed, t0 = [], 0, time.time()
for name, modname, inputs in table:
    msg = None
    try:
        __import__("drills." + modname)
        fn = getattr(sys.modules["drills." + modname], name)
        for x, want in inputs:
            got = fn(x)
            if got != want:
                msg = f"{name}({x}) returned {got!r}, expected {want!r}"
                break
    except BaseException as e:  # a broken body fails its own test only
        msg = f"{type(e).__name__}: {e}"
    failed += msg is not None
    cases.append((name, msg))
    if msg:
        print("FAIL " + name + ": " + msg)
if out:
    with open(out, "w") as f:
        f.write('<?xml version="1.0"?>\\n<testsuite name="drills" tests="%d" failures="%d" time="%.3f">\\n'
                % (len(cases), failed, time.time() - t0))
        for name, msg in cases:
            f.write('<testcase classname="drills" name=%s>' % quoteattr(name))
            if msg:
                f.write('<failure message=%s>%s</failure>' % (quoteattr(msg), escape(msg)))
            f.write('</testcase>\\n')
        f.write('</testsuite>\\n')
print(f"{len(cases) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
'''


def module(i):
    """The file of the drill at index i (a multiple of PER_FILE)."""
    return "set_%02d.py" % (i // PER_FILE)


def last_lines(text, n):
    """What rollout --context n shows: the last n bytes of text, from the
    start of a line."""
    if len(text) <= n:
        return text
    cut = text[-n:]
    return cut[cut.index("\n") + 1:] if "\n" in cut else ""


def write_repo(d):
    os.makedirs(os.path.join(d, "drills"), exist_ok=True)
    os.makedirs(os.path.join(d, "tests"), exist_ok=True)
    items = drills()
    for i in range(0, len(items), PER_FILE):
        with open(os.path.join(d, "drills", module(i)), "w") as f:
            f.write('"""Drills."""\n')
            for name, doc, expr, _ in items[i:i + PER_FILE]:
                f.write("\n\n" + source(name, doc, expr))
    with open(os.path.join(d, "drills", "__init__.py"), "w") as f:
        f.write('"""Small documented functions of one integer."""\n')
    with open(os.path.join(d, "tests", "cases.txt"), "w") as f:
        for i, (name, doc, expr, a) in enumerate(items):
            pairs = " ".join(f"{x}={eval(expr, {'x': x})}" for x in inputs(a))
            f.write(f"{name} {module(i - i % PER_FILE)[:-3]} {pairs}\n")
    with open(os.path.join(d, "run_tests.py"), "w") as f:
        f.write(RUNNER)
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("# drills\n\n%d small functions of one integer, each with a one-line docstring\n"
                "that says what it returns, and a test of six inputs in tests/cases.txt.\n\n"
                "    python3 run_tests.py [REPORT.xml]\n" % len(items))


def failure(name, wrong, want, a):
    """The first line run_tests.py writes for body wrong (an expression, or
    None for one that prints) of a drill whose right expression is want,
    or None when wrong passes."""
    for x in inputs(a):
        exp = eval(want, {"x": x})
        got = None if wrong is None else eval(wrong, {"x": x})
        if got != exp:
            return f"{name}({x}) returned {got!r}, expected {exp!r}"
    return None


def wrong_attempt(rng, expr, a):
    """An earlier attempt at the drill of expression expr: printing it
    (None), or it with another constant, or another operation's."""
    r = rng.random()
    if r < 0.6:
        return None
    if r < 0.8:
        b = rng.choice([c for c in CONSTS if c != a])
        return expr.replace(str(a), str(b))
    row = rng.choice(OPS)
    return row[1].format(a=a)


def note(rng, name, expr, a):
    """A hint as teach(1) gives one for a failed attempt at a drill: the
    failing test's message, and on a share of them a correct body."""
    while True:
        msg = failure(name, wrong_attempt(rng, expr, a), expr, a)
        if msg:
            break
    text = f"test drills::{name}: fail: {msg}"
    if rng.random() < DEMO:
        text += f"\na correct solution looked like this:\n    return {expr}"
    return text


def write_corpus(f):
    """The bootstrap drills as fill examples, written as the repository's
    files are, each prompt what rollout --context CONTEXT shows of such a
    file before the body."""
    rng, bug, nrng = random.Random(11), random.Random(12), random.Random(13)
    steps = [(k, 0) for k in split_kinds()[0] * COPIES] + \
        [(k, 1) for k in split_kinds()[0] * NOTED]
    rng.shuffle(steps)
    names = iter(NAMES[len(drills()):])
    text = ""
    for i, ((doc, expr, a), noted) in enumerate(steps):
        if i % PER_FILE == 0:
            text = '"""Drills."""\n'
        name = next(names)
        text += f'\n\ndef {name}(x):\n    """{doc}"""\n'
        prompt = last_lines(text, CONTEXT)
        if noted:
            # a note after the prompt, as teach puts a hint; the body it
            # asks for after it
            prompt += "\nHint: " + note(nrng, name, expr, a) + "\n"
            body = f"    return {expr}\n"
        else:
            body = f"    print({expr})\n" if bug.random() < BUG else f"    return {expr}\n"
        f.write(json.dumps({"prompt": prompt, "completion": body}) + "\n")
        text += body


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "repo":
        write_repo(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "corpus":
        write_corpus(sys.stdout)
    else:
        sys.exit(__doc__)
