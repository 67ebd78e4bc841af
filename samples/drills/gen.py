#!/usr/bin/env python3
"""gen.py -- the drills: many small documented functions a tiny model can learn.

    gen.py repo DIR        write the drills repository into DIR (not a git
                           repository yet: samples/repos/commit.sh makes it one)
    gen.py corpus [N]      write the bootstrap corpus to standard output:
                           JSON lines {"prompt", "completion"}, the form
                           train-step reads; each prompt is cut to its last
                           N bytes (default 95: what rollout keeps of a
                           prompt for a model of 128 positions and
                           --max-tokens 32)

Every function takes an integer x and has a one-line docstring that says what
it returns; its test checks five inputs.  The repository holds the two-step
drills (such as "Return x times 3, plus 5."); the bootstrap corpus holds only
one-step drills (such as "Return x times 3."), under other names, so that a
model bootstrapped on it has seen every word and operator but none of the
repository's functions, and must learn to combine them.

The repository's tests run with run_tests.py, a runner that starts in tens of
milliseconds and writes JUnit XML where FW_REPORT says, so that grading one
rollout stays cheap.  Only the standard library is used; the output depends on
nothing but this file.
"""
import json
import os
import random
import sys

INPUTS = (0, 1, 4, 7, 13, 30)
PER_FILE = 16
COPIES = 4     # each bootstrap drill this many times, in other contexts
CONSTS = range(2, 34)
SEEN = 0.4     # the share of kinds with constants below 18 in the corpus

# the kinds of drill: (docstring, expression); {a} is the constant
KINDS = [
    ("Return x times {a}.", "x * {a}"),
    ("Return x plus {a}.", "x + {a}"),
    ("Return x minus {a}.", "x - {a}"),
    ("Return x modulo {a}.", "x % {a}"),
    ("Return x divided by {a}, rounded down.", "x // {a}"),
    ("Return {a} minus x.", "{a} - x"),
    ("Return the larger of x and {a}.", "max(x, {a})"),
    ("Return the smaller of x and {a}.", "min(x, {a})"),
    ("Return True if x is greater than {a}.", "x > {a}"),
    ("Return True if x is less than {a}.", "x < {a}"),
]


def split_kinds():
    """(corpus, repository): every (docstring, expression) made concrete,
    the corpus a random share of those with small constants, the
    repository all the others."""
    rng = random.Random(5)
    corpus, repo = [], []
    for doc, expr in KINDS:
        for a in CONSTS:
            k = (doc.format(a=a), expr.format(a=a))
            (corpus if a < 18 and rng.random() < SEEN else repo).append(k)
    return corpus, repo


def source(name, doc, expr):
    return f'def {name}(x):\n    """{doc}"""\n    return {expr}\n'


def drills():
    """The repository's drills: (name, doc, expr), in a fixed shuffled order."""
    out = split_kinds()[1]
    random.Random(7).shuffle(out)
    return [(f"drill_{i:03d}", d, e) for i, (d, e) in enumerate(out)]


RUNNER = '''\
"""run_tests.py -- run the drills' tests; JUnit XML to $FW_REPORT (or argv[1]).

A test passes when its function returns the expected value for each input.
"""
import importlib
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
mod = importlib.import_module("tests.cases")
cases, failed, t0 = [], 0, time.time()
for name, inputs in mod.CASES:
    msg = None
    try:
        fn = getattr(importlib.import_module("drills." + mod.MODULE[name]), name)
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


def write_repo(d):
    os.makedirs(os.path.join(d, "drills"), exist_ok=True)
    os.makedirs(os.path.join(d, "tests"), exist_ok=True)
    items = drills()
    for i in range(0, len(items), PER_FILE):
        with open(os.path.join(d, "drills", "set_%02d.py" % (i // PER_FILE)), "w") as f:
            f.write('"""Drills %d to %d."""\n' % (i, min(i + PER_FILE, len(items)) - 1))
            for name, doc, expr in items[i:i + PER_FILE]:
                f.write("\n\n" + source(name, doc, expr))
    with open(os.path.join(d, "drills", "__init__.py"), "w") as f:
        f.write('"""Small documented functions of one integer."""\n')
    with open(os.path.join(d, "tests", "__init__.py"), "w") as f:
        f.write("")
    with open(os.path.join(d, "tests", "cases.py"), "w") as f:
        f.write('"""Expected values: (function, ((x, result), ...)) for each drill."""\n')
        f.write("CASES = [\n")
        for name, doc, expr in items:
            vals = tuple((x, eval(expr, {"x": x})) for x in INPUTS)
            f.write(f"    ({name!r}, {vals!r}),\n")
        f.write("]\n")
        f.write("MODULE = {\n")
        for i, (name, doc, expr) in enumerate(items):
            f.write(f"    {name!r}: 'set_{i // PER_FILE:02d}',\n")
        f.write("}\n")
    with open(os.path.join(d, "run_tests.py"), "w") as f:
        f.write(RUNNER)
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("# drills\n\n%d small functions of one integer, each with a one-line docstring\n"
                "that says what it returns, and a test of five inputs in tests/cases.py.\n\n"
                "    python3 run_tests.py [REPORT.xml]\n" % len(items))


def write_corpus(f, context):
    """One-step drills written as files of drills are, each prompt cut to its
    last `context` bytes, as a fill policy cuts a prompt too long for its
    model (keeping what is next to the completion)."""
    rng = random.Random(11)
    steps = split_kinds()[0] * COPIES
    rng.shuffle(steps)
    text = '"""Steps."""\n'
    for i, (doc, expr) in enumerate(steps):
        text += f'\n\ndef step_{i:03d}(x):\n    """{doc}"""\n'
        body = f"    return {expr}\n"
        f.write(json.dumps({"prompt": text[-context:], "completion": body}) + "\n")
        text += body


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "repo":
        write_repo(sys.argv[2])
    elif len(sys.argv) in (2, 3) and sys.argv[1] == "corpus":
        write_corpus(sys.stdout, int(sys.argv[2]) if len(sys.argv) == 3 else 95)
    else:
        sys.exit(__doc__)
