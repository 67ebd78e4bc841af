#!/usr/bin/env bats
# rollout: task records in, rollout records out.
#
# setup_file makes stub-body tasks from a small Python package with a fast
# TAP runner, and a tiny random checkpoint; each test runs rollout on them.

bats_require_minimum_version 1.5.0

MINI='python3 run_tests.py'

# commit DIR: make DIR a git repository with one reproducible commit
commit() { "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$1"; }

setup_file() {
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  export TMPDIR="$F/tmp"
  mkdir -p "$TMPDIR" "$F/mini/mini" "$F/mini/tests"
  cat > "$F/mini/mini/__init__.py" <<'EOF'
"""A mini package."""
EOF
  cat > "$F/mini/mini/core.py" <<'EOF'
"""Core helpers of the mini package."""


def double(x):
    """Twice x."""
    result = x * 2
    return result


def clamp(x, lo, hi):
    """Limit x to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def greet(name):
    """A greeting for name."""
    text = "hello, " + name
    return text
EOF
  : > "$F/mini/tests/__init__.py"
  cat > "$F/mini/tests/test_core.py" <<'EOF'
from mini import core


def test_double():
    assert core.double(2) == 4


def test_clamp():
    assert core.clamp(5, 0, 3) == 3
    assert core.clamp(-1, 0, 3) == 0


def test_greet():
    assert core.greet("ann") == "hello, ann"
EOF
  cat > "$F/mini/run_tests.py" <<'EOF'
"""Runs tests/test_*.py in one process and prints TAP."""
import importlib
import pathlib
import sys

sys.path.insert(0, ".")
results = []
for path in sorted(pathlib.Path("tests").glob("test_*.py")):
    mod = importlib.import_module("tests." + path.stem)
    for name in sorted(n for n in dir(mod) if n.startswith("test_")):
        try:
            getattr(mod, name)()
            ok = True
        except Exception:
            ok = False
        results.append((ok, path.stem + "::" + name))
print("1..%d" % len(results))
for i, (ok, name) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
EOF
  commit "$F/mini"
  task-mutate --test-cmd "$MINI" --report tap --store "$F/st.git" --strategy stub-body \
    -o "$F/tasks.mp" "$F/mini" 2>/dev/null
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" "$F/ck" --seed 1
  # a checkpoint whose model has too short a context for these prompts
  jq '.max_position_embeddings = 64' "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" \
    > "$F/short.json"
  ckpt init "$F/short.json" "$F/short" --seed 1
  # a checkpoint taught one agent episode on the first task: a command
  # that takes 2 s, then submit
  jq '.max_position_embeddings = 4096' "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" \
    > "$F/long.json"
  ckpt init "$F/long.json" "$F/agent-ck" --seed 1
  rec head -n 1 "$F/tasks.mp" > "$F/task1.mp"
  rollout --policy "builtin:$F/agent-ck" --mode agent --max-tokens 1 "$F/task1.mp" |
    rec json > "$F/a0.jsonl"
  jq -j '.turns[0].text' "$F/a0.jsonl" > "$F/system.txt"
  jq -j '.turns[1].text' "$F/a0.jsonl" > "$F/prompt.txt"
  /usr/bin/python3 "$BATS_TEST_DIRNAME/fixtures/rollout-agent-ckpt.py" "$F/agent-ck" \
    "$F/prompt.txt" "$F/system.txt" 'sleep 2; echo hi > note.txt; ls mini' \
    'exit: 0\n__init__.py\ncore.py\n' > /dev/null
  mkdir -p "$F/agent"
  # the agent of the exec tests: pokes at the walls, then writes each
  # function's body and a trajectory
  cat > "$F/agent/fix" <<'EOF'
#!/bin/sh
cat > /dev/null
echo "commits: $(git log --all --oneline 2>/dev/null | wc -l)"
echo "remotes: $(git remote | wc -l)"
ls /root 2>&1 | head -1
python3 -c 'import socket; s = socket.socket(); s.settimeout(2); s.connect(("1.1.1.1", 80))' 2>&1 | tail -1
exec python3 - <<'PY'
import json, os
task = json.loads(os.environ["FW_TASK"])
assert task == json.load(open(os.environ["FW_TASK_FILE"]))
t = task["targets"][0]
body = {"double": "    return x * 2\n",
        "clamp": "    return max(lo, min(x, hi))\n",
        "greet": "    return 'hello, ' + name\n"}[t["symbol"]]
src = open(t["path"]).read().replace("    raise NotImplementedError\n", body, 1)
open(t["path"], "w").write(src)
with open(os.environ["FW_TRAJ"], "w") as f:
    json.dump({"messages": [{"role": "user", "content": task["prompt"]},
                            {"role": "assistant", "content": "fixed " + t["symbol"]}]}, f)
    f.write("\n")
PY
EOF
  chmod +x "$F/agent/fix"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  T="$BATS_TEST_TMPDIR"
  export TMPDIR="$T/tmp"
  mkdir -p "$TMPDIR"
}

json() { rec json "$@"; }

teardown() {
  if [ -f "$T/serve.pid" ]; then kill "$(cat "$T/serve.pid")" 2>/dev/null || true; fi
}

# start_serve ARGS...: serve on a free loopback port; $URL is its address
start_serve() {
  serve --port 0 "$@" > "$T/serve.url" 2> "$T/serve.err" &
  echo $! > "$T/serve.pid"
  for _ in $(seq 100); do [ -s "$T/serve.url" ] && break; sleep 0.05; done
  URL=$(cat "$T/serve.url")
  [ -n "$URL" ]
}

@test "--help prints the usage on stdout and exits 0" {
  run --separate-stderr rollout --help
  assert_success
  [ -z "$stderr" ]
  # word for word the SYNOPSIS of rollout(1)
  load usage
  usage_is_synopsis rollout
}

@test "a missing or unknown policy and bad options are usage errors (exit 2)" {
  run -2 --separate-stderr rollout "$F/tasks.mp"
  [[ "$stderr" == *"--policy is required"* ]]
  run -2 --separate-stderr rollout --policy gpt:x "$F/tasks.mp"
  [[ "$stderr" == *"unknown policy 'gpt:x'"* ]]
  run -2 --separate-stderr rollout --policy builtin:x --mode chat
  [[ "$stderr" == *"unknown mode 'chat'"* ]]
  run -2 --separate-stderr rollout --policy builtin:x --samples 0
  run -2 --separate-stderr rollout --policy builtin:x --top-p 0
  run -2 --separate-stderr rollout --policy builtin:x --shard 2/2
  [ -z "$output" ]
}

@test "fill rollouts carry every field, one per sample, and never the solution" {
  [ "$(rec count "$F/tasks.mp")" = 3 ]
  run --separate-stderr rollout --policy "builtin:$F/ck" --samples 2 --seed 3 --max-tokens 40 \
    -o "$T/r.mp" "$F/tasks.mp"
  assert_success
  [ -z "$output" ]
  json "$T/r.mp" > "$T/r.jsonl"
  [ "$(wc -l < "$T/r.jsonl")" = 6 ]
  run jq -e -s --arg ck "$F/ck" 'all(.[]; .kind == "rollout" and .v == 1
      and (.id | test("^[0-9a-f]{16}$")) and .mode == "fill" and (.sample | IN(0, 1))
      and (.seed | type) == "number" and .policy == {backend: "builtin", ckpt: $ck, seed: 3,
        temp: 1, top_p: 1, top_k: 0}
      and .task.kind == "task" and (.task | has("solution") | not) and (.task.f2p | length) > 0
      and .turns[0].role == "user" and .turns[1].role == "assistant"
      and (.turns[1].tokens | length) > 0
      and (.turns[1].tokens | length) == (.turns[1].logprobs | length)
      and all(.turns[1].logprobs[]; . <= 0)
      and .tokens == .turns[0].tokens + .turns[1].tokens
      and (.mask | add) == (.turns[1].tokens | length)
      and (.patch | startswith("diff --git a/mini/core.py b/mini/core.py"))
      and (.stop | IN("stop", "eos", "max-tokens")) and .events == [] and (.time >= 0)
      and (has("error") | not))' "$T/r.jsonl"
  assert_success
  # the ids are distinct, and no solution reaches the output
  [ "$(jq -r .id "$T/r.jsonl" | sort -u | wc -l)" = 6 ]
  [ -z "$(jq -c '[paths | last | select(. == "solution")]' "$T/r.jsonl" | grep -v '^\[\]$')" ]
  # no line the solution of a task adds is in any string of its rollouts
  json "$F/tasks.mp" | jq -c '{(.id): [.solution | split("\n")[] | select(test("^\\+[^+]")) | .[1:]]}' |
    jq -s add > "$T/sol.json"
  [ "$(jq '[.[][]] | length' "$T/sol.json")" -ge 6 ]
  run jq -e -s --slurpfile sol "$T/sol.json" 'all(.[]; $sol[0][.task.id] as $lines
      | [.. | strings] as $s | all($lines[]; . as $l | all($s[]; contains($l) | not)))' "$T/r.jsonl"
  assert_success
}

@test "the prompt is the file up to the stub and the patch replaces only the stub" {
  rollout --policy "builtin:$F/ck" --seed 1 --max-tokens 30 --no-time "$F/tasks.mp" |
    json > "$T/r.jsonl"
  json "$F/tasks.mp" > "$T/t.jsonl"
  while read -r line; do
    tree=$(jq -r .task.tree <<<"$line")
    rm -rf "$T/w" && mkdir "$T/w"
    git -C "$F/st.git" archive "$tree" | tar -x -C "$T/w"
    # the prompt is what precedes the stub, ending with the docstring
    jq -j .turns[0].text <<<"$line" > "$T/prompt"
    sed '/raise NotImplementedError/,$d' "$T/w/mini/core.py" > "$T/before"
    cmp "$T/prompt" "$T/before"
    # the patch applies, and takes out the stub line and nothing else
    jq -r .patch <<<"$line" > "$T/p.diff"
    (cd "$T/w" && git init -q && git apply --check "$T/p.diff")
    [ "$(grep -c '^-[^-]' "$T/p.diff")" = 1 ]
    grep -q '^-    raise NotImplementedError$' "$T/p.diff"
  done < "$T/r.jsonl"
}

@test "--context shows the last bytes before the stub from a line start; the patch is the same" {
  rollout --policy "builtin:$F/ck" --seed 1 --max-tokens 30 --no-time "$F/tasks.mp" | json > "$T/full.jsonl"
  rollout --policy "builtin:$F/ck" --seed 1 --max-tokens 30 --no-time --context 60 "$F/tasks.mp" |
    json > "$T/ctx.jsonl"
  paste -d '\n' "$T/full.jsonl" "$T/ctx.jsonl" | while read -r full && read -r ctx; do
    jq -j .turns[0].text <<<"$full" > "$T/pf"
    jq -j .turns[0].text <<<"$ctx" > "$T/pc"
    n=$(wc -c < "$T/pc")
    [ "$n" -le 60 ]
    # the full prompt ends with it, and it starts a line
    [ "$(tail -c "$n" "$T/pf" | cmp - "$T/pc" && echo same)" = same ]
    full_n=$(wc -c < "$T/pf")
    if [ "$full_n" -gt "$n" ]; then
      [ "$(tail -c "$((n + 1))" "$T/pf" | head -c 1 | od -An -c | tr -d ' ')" = '\n' ]
    fi
    # the patch still replaces the stub in the whole file
    jq -r .patch <<<"$ctx" | grep -q '^-    raise NotImplementedError$'
  done
  run rollout --policy "builtin:$F/ck" --context 0 "$F/tasks.mp"
  assert_failure 2
  assert_output --partial "bad --context '0'"
}

@test "the recorded log-probs are those of a full forward pass over the same tokens" {
  rollout --policy "builtin:$F/ck" --samples 2 --temp 0.8 --top-k 50 --max-tokens 40 \
    "$F/tasks.mp" > "$T/r.mp"
  # ckpt score rescored the whole sequence without the key-value cache
  run jq -e -s 'all(.[]; (.turns[1].logprobs | length) as $n
      | [.turns[1].logprobs, .logprobs[-$n:]] | transpose | all(.[]; (.[0] - .[1]) | fabs < 1e-4))' \
    <(ckpt score "$F/ck" "$T/r.mp" | json)
  assert_success
}

@test "the same seed gives the same records whatever -j and --samples, another seed others" {
  rollout --policy "builtin:$F/ck" --samples 3 --seed 5 --max-tokens 30 --no-time \
    "$F/tasks.mp" > "$T/a.mp"
  rollout --policy "builtin:$F/ck" --samples 3 --seed 5 --max-tokens 30 --no-time -j 3 \
    "$F/tasks.mp" > "$T/b.mp"
  cmp "$T/a.mp" "$T/b.mp"
  # sample i of a task does not depend on how many share the prefill
  rollout --policy "builtin:$F/ck" --samples 1 --seed 5 --max-tokens 30 --no-time \
    "$F/tasks.mp" > "$T/c.mp"
  diff <(json "$T/a.mp" | jq -c 'select(.sample == 0)') <(json "$T/c.mp" | jq -c .)
  rollout --policy "builtin:$F/ck" --samples 3 --seed 6 --max-tokens 30 --no-time \
    "$F/tasks.mp" > "$T/d.mp"
  ! cmp -s "$T/a.mp" "$T/d.mp"
  # the samples of one task differ from each other
  [ "$(json "$T/a.mp" | jq -c '.turns[1].tokens' | sort -u | wc -l)" -gt 3 ]
}

@test "--shard K/N splits the tasks into disjoint parts that cover them all" {
  for k in 0 1; do
    rollout --policy "builtin:$F/ck" --max-tokens 8 --no-time --shard $k/2 "$F/tasks.mp" |
      json | jq -r .task.id > "$T/s$k"
  done
  [ "$(cat "$T/s0" "$T/s1" | sort | tr '\n' ' ')" = \
    "$(json "$F/tasks.mp" | jq -r .id | sort | tr '\n' ' ')" ]
  [ -z "$(comm -12 <(sort "$T/s0") <(sort "$T/s1"))" ]
}

@test "rollouts grade: an exec agent's fix resolves its task, a random model's does not" {
  command -v grade || skip "grade is not built"
  rollout --policy "exec:$F/agent/fix" --timeout 60 "$F/tasks.mp" > "$T/e.mp"
  rollout --policy "builtin:$F/ck" --max-tokens 20 "$F/tasks.mp" > "$T/b.mp"
  run --separate-stderr grade --no-time -o "$T/g.mp" "$T/e.mp" "$T/b.mp"
  assert_success
  run jq -r -c '[.policy.backend, .grade.resolved]' <(json "$T/g.mp")
  assert_output - <<'EOF'
["exec",true]
["exec",true]
["exec",true]
["builtin",false]
["builtin",false]
["builtin",false]
EOF
}

@test "an exec agent finds no history, no remote, no host home and no network, and says so" {
  rollout --policy "exec:$F/agent/fix" --timeout 60 "$F/tasks.mp" | json > "$T/e.jsonl"
  run jq -e -s 'all(.[]; .stop == "exit" and .mode == "exec" and .output.exit == 0
      and (.output.stdout | contains("commits: 1\nremotes: 0\n"))
      and (.output.stdout | test("/root.*No such file"))
      and (.output.stdout | test("Network is unreachable"))
      and .turns[1] == {role: "assistant", text: ("fixed " + .task.targets[0].symbol)}
      and (.task | has("solution") | not) and (has("error") | not))' "$T/e.jsonl"
  assert_success
}

@test "a request to a host not allowed is refused and recorded as an event" {
  cat > "$T/net" <<'EOF'
#!/bin/sh
python3 -c 'import urllib.request; urllib.request.urlopen("http://denied.example/x", timeout=5)' 2>&1 | tail -1
EOF
  chmod +x "$T/net"
  rec head -n 1 "$F/tasks.mp" > "$T/t1.mp"
  run --separate-stderr rollout --policy "exec:$T/net" --allow allowed.example --timeout 30 \
    -o "$T/n.mp" "$T/t1.mp"
  assert_success
  run jq -c '[.events[] | {kind, detail}], (.output.stdout | contains("403"))' <(json "$T/n.mp")
  assert_output - <<'EOF'
[{"kind":"net-denied","detail":"GET http://denied.example:80/x"}]
true
EOF
}

@test "an agent's new, deleted, executable, linked and binary files are in the patch, which git apply takes" {
  rec head -n 1 "$F/tasks.mp" > "$T/t1.mp"
  cat > "$T/edit" <<'EOF'
#!/bin/sh
mkdir -p mini/sub
printf 'new\n' > mini/sub/new.txt
rm tests/__init__.py
chmod +x run_tests.py
ln -s core.py mini/link.py
printf 'a\000b' > mini/blob.bin
# an ignored file stays out, as git leaves it out
printf '*.log\n' > .gitignore
echo log > mini/x.log
EOF
  chmod +x "$T/edit"
  rollout --policy "exec:$T/edit" --timeout 60 "$T/t1.mp" | rec json | jq -r .patch > "$T/p"
  run grep '^diff --git' "$T/p"
  assert_output - <<'EOF'
diff --git a/.gitignore b/.gitignore
diff --git a/mini/blob.bin b/mini/blob.bin
diff --git a/mini/link.py b/mini/link.py
diff --git a/mini/sub/new.txt b/mini/sub/new.txt
diff --git a/run_tests.py b/run_tests.py
diff --git a/tests/__init__.py b/tests/__init__.py
EOF
  mkdir "$T/tree"
  git --git-dir="$F/st.git" archive "$(rec json "$T/t1.mp" | jq -r .tree)" | tar -x -C "$T/tree"
  git -C "$T/tree" init -q
  git -C "$T/tree" apply "$T/p"
  [ "$(cat "$T/tree/mini/sub/new.txt")" = new ]
  [ ! -e "$T/tree/tests/__init__.py" ]
  [ -x "$T/tree/run_tests.py" ]
  [ "$(readlink "$T/tree/mini/link.py")" = core.py ]
  printf 'a\000b' | cmp - "$T/tree/mini/blob.bin"
  [ ! -e "$T/tree/mini/x.log" ]
}

@test "an agent that crashes, hangs or floods ends its episode with a reason, exit 1 at the end" {
  rec head -n 1 "$F/tasks.mp" > "$T/t1.mp"
  printf '#!/bin/sh\necho partial > mini/new.txt\nexit 3\n' > "$T/crash"
  printf '#!/bin/sh\nsleep 30\n' > "$T/hang"
  printf '#!/bin/sh\nhead -c 3000000 /dev/zero | tr "\\\\0" x\n' > "$T/flood"
  chmod +x "$T/crash" "$T/hang" "$T/flood"
  run -1 --separate-stderr rollout --policy "exec:$T/crash" -o "$T/c.mp" "$T/t1.mp"
  [[ "$stderr" == *"record 1"*"agent exited with status 3"* ]]
  run jq -c '[.stop, .error, (.patch | contains("+partial"))]' <(json "$T/c.mp")
  assert_output '["crash","agent exited with status 3",true]'
  run -1 --separate-stderr rollout --policy "exec:$T/hang" --timeout 1 -o "$T/h.mp" "$T/t1.mp"
  run jq -c '[.stop, .events[-1].kind, .events[-1].detail, .time < 10]' <(json "$T/h.mp")
  assert_output '["timeout","limit","timeout",true]'
  run --separate-stderr rollout --policy "exec:$T/flood" -o "$T/f.mp" "$T/t1.mp"
  assert_success
  run jq -c '[.stop, .output.truncated, (.output.stdout | length) < 10000,
              (.output.stdout | contains("bytes cut"))]' <(json "$T/f.mp")
  assert_output '["exit",true,true,true]'
}

@test "a task whose tree is missing or a checkpoint that does not load still gives records" {
  json "$F/tasks.mp" | jq -c 'if .targets[0].symbol == "clamp" then .tree = ("0" * 40) else . end' |
    rec from-json > "$T/t.mp"
  run -1 --separate-stderr rollout --policy "builtin:$F/ck" --samples 2 --max-tokens 8 \
    -o "$T/r.mp" "$T/t.mp"
  [[ "$stderr" == *"record "[0-9]*": 2 of 2 samples failed: "* ]]
  run jq -c '[.task.targets[0].symbol == "clamp", .stop == "error", (.error // "" | length > 0),
              .patch == ""]' <(json "$T/r.mp")
  assert_output - <<'EOF'
[false,false,false,false]
[false,false,false,false]
[false,false,false,false]
[false,false,false,false]
[true,true,true,true]
[true,true,true,true]
EOF
  run -1 --separate-stderr rollout --policy "builtin:$T/nowhere" -o "$T/n.mp" "$F/tasks.mp"
  [ "$(rec count "$T/n.mp")" = 3 ]
  run jq -e -s 'all(.[]; .stop == "error" and (.error | contains("nowhere")))' <(json "$T/n.mp")
  assert_success
}

@test "a prompt longer than the model's context keeps its end; other records pass through" {
  { echo '{"kind": "note", "id": "n1", "v": 1, "text": "kept"}'; json "$F/tasks.mp"; } |
    rec from-json > "$T/t.mp"
  run --separate-stderr rollout --policy "builtin:$F/short" --max-tokens 100 --no-time \
    -o "$T/r.mp" "$T/t.mp"
  assert_success
  run jq -c 'if .kind == "note" then . else
      [(.tokens | length) <= 64, (.turns[1].tokens | length) <= 32] end' <(json "$T/r.mp")
  assert_output - <<'EOF'
{"kind":"note","id":"n1","v":1,"text":"kept"}
[true,true]
[true,true]
[true,true]
EOF
}

@test "an agent episode runs the model's bash block in the workspace and ends on submit" {
  run --separate-stderr rollout --policy "builtin:$F/agent-ck" --mode agent --temp 0 \
    --max-tokens 300 -o "$T/a.mp" "$F/task1.mp"
  assert_success
  run jq -c '[.mode, .stop, .steps, [.turns[].role], .turns[3].text, .turns[3].exit,
              .turns[4].text, (.turns[2].tokens | length) == (.turns[2].logprobs | length),
              all(.turns[2,4].logprobs[]; . <= 0 and . > -1)]' <(json "$T/a.mp")
  assert_output '["agent","submit",1,["system","user","assistant","tool","assistant"],"exit: 0\n__init__.py\ncore.py\n",0,"```bash\nsubmit\n```",true,true]'
  # what the command wrote is the patch
  run jq -r .patch <(json "$T/a.mp")
  assert_line 'diff --git a/note.txt b/note.txt'
  assert_line '+hi'
}

@test "an agent episode ends at --max-steps, --timeout and --max-tokens" {
  run --separate-stderr rollout --policy "builtin:$F/agent-ck" --mode agent --temp 0 \
    --max-steps 0 -o "$T/s.mp" "$F/task1.mp"
  assert_success
  run jq -c '[.stop, .steps, .patch]' <(json "$T/s.mp")
  assert_output '["max-steps",0,""]'
  run --separate-stderr rollout --policy "builtin:$F/agent-ck" --mode agent --temp 0 \
    --timeout 1 -o "$T/t.mp" "$F/task1.mp"
  assert_success
  run jq -c '[.stop, .steps, (.turns[3].text | startswith("stopped: timeout\n")), .time < 5]' \
    <(json "$T/t.mp")
  assert_output '["timeout",1,true,true]'
  run --separate-stderr rollout --policy "builtin:$F/agent-ck" --mode agent --temp 0 \
    --max-tokens 5 -o "$T/m.mp" "$F/task1.mp"
  run jq -c '[.stop, .steps, (.turns[2].tokens | length)]' <(json "$T/m.mp")
  assert_output '["max-tokens",0,5]'
  # a reply without a bash block ends the episode; a model too short for the prompt says so
  run --separate-stderr rollout --policy "builtin:$F/short" --mode agent -o "$T/c.mp" "$F/task1.mp"
  assert_success
  run jq -r .stop <(json "$T/c.mp")
  assert_output context
  run -2 --separate-stderr rollout --policy "exec:true" --mode agent "$F/task1.mp"
}

@test "the http policy against serve gives the builtin's tokens, log-probs and patches" {
  start_serve --ckpt "tiny=$F/ck"
  for temp in 0 0.9; do
    rollout --policy "http:$URL/v1" --model tiny --samples 2 --seed 4 --temp $temp \
      --max-tokens 24 --ignore-stop --no-time "$F/tasks.mp" > "$T/h.mp"
    rollout --policy "builtin:$F/ck" --samples 2 --seed 4 --temp $temp \
      --max-tokens 24 --ignore-stop --no-time "$F/tasks.mp" > "$T/b.mp"
    diff <(json "$T/h.mp" | jq -c '[.sample, .seed, .turns[1].tokens, .turns[1].logprobs, .patch]') \
      <(json "$T/b.mp" | jq -c '[.sample, .seed, .turns[1].tokens, .turns[1].logprobs, .patch]')
  done
  run jq -c '.policy' <(json "$T/h.mp" | head -1)
  assert_output "{\"backend\":\"http\",\"url\":\"$URL/v1\",\"model\":\"tiny\",\"seed\":4,\"temp\":0.9,\"top_p\":1,\"top_k\":0}"
  # without --ignore-stop the completion is cut where the function ends
  rollout --policy "http:$URL/v1" --max-tokens 24 "$F/tasks.mp" > "$T/c.mp"
  run jq -e -s 'all(.[]; .stop != "error" and (.patch | startswith("diff --git")))' <(json "$T/c.mp")
  assert_success
}

@test "a server that is down or answers garbage gives error records and exit 1" {
  start_serve --ckpt "tiny=$F/ck"
  kill "$(cat "$T/serve.pid")"; rm "$T/serve.pid"; sleep 0.2
  run -1 --separate-stderr rollout --policy "http:$URL/v1" --timeout 5 -o "$T/d.mp" "$F/task1.mp"
  run jq -c '[.stop, (.error | test("connect"))]' <(json "$T/d.mp")
  assert_output '["error",true]'
  # a server that answers with something else than a completion
  start_serve --ckpt "tiny=$F/ck"
  run -1 --separate-stderr rollout --policy "http:$URL/v1" --model nope -o "$T/g.mp" "$F/tasks.mp"
  run jq -r '.error' <(json "$T/g.mp" | head -1)
  assert_output --partial "HTTP 404: no such model"
  [ "$(rec count "$T/g.mp")" = 3 ]
}

@test "an http agent episode against serve gives the builtin's first reply and runs it" {
  start_serve --ckpt "agent=$F/agent-ck"
  run --separate-stderr rollout --policy "http:$URL/v1" --mode agent --temp 0 --max-tokens 300 \
    --max-steps 1 -o "$T/h.mp" "$F/task1.mp"
  assert_success
  rollout --policy "builtin:$F/agent-ck" --mode agent --temp 0 --max-tokens 300 "$F/task1.mp" \
    > "$T/b.mp"
  # the same first reply, token for token; tool output goes back as a user turn, so the
  # second reply is the server's own
  diff <(json "$T/h.mp" | jq -c '.turns[2]') <(json "$T/b.mp" | jq -c '.turns[2]')
  run jq -c '[.policy.backend, .mode, .steps, .turns[3].role, .turns[3].exit,
              (.patch | contains("+hi"))]' <(json "$T/h.mp")
  assert_output '["http","agent",1,"tool",0,true]'
}

@test "the http policy retries 503 and 429 answers and keeps log-probs a server gives without ids" {
  # a server that is busy twice, then answers as servers without token ids do
  cat > "$T/busy.py" <<'PY'
import http.server, json, sys
count = [0]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        count[0] += 1
        if count[0] <= 2:
            self.send_response(503 if count[0] == 1 else 429)
            self.end_headers()
            return
        out = json.dumps({"choices": [{"index": 0, "text": "    return x\n\ndef g():\n",
            "finish_reason": "length", "logprobs": {"tokens": ["a", "b"],
            "token_logprobs": [-0.5, -0.25]}}], "seed": body["seed"],
            "auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("http://127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()
PY
  python3 "$T/busy.py" > "$T/serve.url" &
  echo $! > "$T/serve.pid"
  for _ in $(seq 100); do [ -s "$T/serve.url" ] && break; sleep 0.05; done
  URL=$(cat "$T/serve.url")
  rec head -n 1 "$F/tasks.mp" > "$T/t1.mp"
  run --separate-stderr rollout --policy "http:$URL/v1" -o "$T/r.mp" "$T/t1.mp"
  assert_success
  run jq -c '[.stop, .turns[1].logprobs, .turns[1].tokens, .turns[1].text]' <(json "$T/r.mp")
  assert_output '["max-tokens",[-0.5,-0.25],null,"    return x\n\ndef g():\n"]'
  # the completion was cut where the function ends
  run jq -r .patch <(json "$T/r.mp")
  assert_line '+    return x'
  refute_line '+def g():'
}

@test "an http error quotes the start of the server's answer, escaped, and nothing after it" {
  # answers by path: /busy is busy with a long body, then with a short one;
  # /nocomp is busy, then answers 200 with something else than a completion;
  # /bad answers 400 with bytes that are not text and a character cut by
  # the 200-byte quote; /msg answers 400 with an OpenAI error message
  cat > "$T/errs.py" <<'PY'
import http.server, sys
count = {}
BAD = (b"not json:\n\ttab \xff\x00nul \xc2\x85c1 caf\xc3\xa9 " + b"z" * 167
       + "\u20ac".encode() + b"TAIL")
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        what = self.path.split("/")[1]
        n = count[what] = count.get(what, 0) + 1
        if what in ("busy", "nocomp") and n == 1:
            self.answer(503, b"x" * 230)
        elif what == "busy":
            self.answer(503, b"busy, try later")
        elif what == "nocomp":
            self.answer(200, b'{"object":"list","data":[]}')
        elif what == "bad":
            self.answer(400, BAD)
        else:
            self.answer(400, b'{"error":{"message":"no\\nsuch model"}}')
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("http://127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()
PY
  python3 "$T/errs.py" > "$T/serve.url" &
  echo $! > "$T/serve.pid"
  for _ in $(seq 100); do [ -s "$T/serve.url" ] && break; sleep 0.05; done
  URL=$(cat "$T/serve.url")
  [ -n "$URL" ]
  for what in busy nocomp bad msg; do
    run -1 --separate-stderr rollout --policy "http:$URL/$what/v1" --timeout 5 \
      -o "$T/$what.mp" "$F/task1.mp"
    [ "$(rec count "$T/$what.mp")" = 1 ]
  done
  run jq -r '[.stop, .error] | join(" ")' <(json "$T/busy.mp")
  assert_output "error $URL/busy/v1/completions: HTTP 503: busy, try later"
  run jq -r .error <(json "$T/nocomp.mp")
  assert_output "$URL/nocomp/v1/completions: the answer is not a completion: {\"object\":\"list\",\"data\":[]}"
  run jq -r .error <(json "$T/bad.mp")
  assert_output "$URL/bad/v1/completions: HTTP 400: "'not json:\n\ttab \xff\x00nul \xc2\x85c1 café '"$(printf 'z%.0s' $(seq 167))"
  run jq -r .error <(json "$T/msg.mp")
  assert_output "$URL/msg/v1/completions: HTTP 400: "'no\nsuch model'
}

@test "fill works on the C sample: the completion goes between the braces of the stubbed body" {
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/tally" "$T/tally"
  commit "$T/tally"
  task-mutate --test-cmd 'make -s test' --report tap --store "$T/st.git" --strategy stub-body \
    --max 2 -o "$T/t.mp" "$T/tally" 2>/dev/null
  [ "$(rec count "$T/t.mp")" = 2 ]
  rollout --policy "builtin:$F/ck" --samples 2 --max-tokens 30 --no-time "$T/t.mp" | json > "$T/r.jsonl"
  [ "$(wc -l < "$T/r.jsonl")" = 4 ]
  while read -r line; do
    jq -r .patch <<<"$line" > "$T/p.diff"
    # only the stub goes; the closing brace stays
    [ "$(grep -c '^-[^-]' "$T/p.diff")" = 1 ]
    grep -q '^-	abort(); /\* not implemented \*/$' "$T/p.diff"
    ! grep -q '^-}' "$T/p.diff"
    rm -rf "$T/w" && mkdir "$T/w"
    git -C "$T/st.git" archive "$(jq -r .task.tree <<<"$line")" | tar -x -C "$T/w"
    (cd "$T/w" && git init -q && git apply "$T/p.diff")
    # the prompt is the file up to the stub, ending with the body's brace
    jq -j .turns[0].text <<<"$line" | tail -c 2 | od -c | grep -q '{  *\\n'
  done < "$T/r.jsonl"
}

@test "agent samples share the prefill and sample i is the same whatever --samples" {
  ckpt init "$F/long.json" "$T/rand" --seed 3
  rollout --policy "builtin:$T/rand" --mode agent --samples 3 --seed 8 --max-tokens 60 \
    --no-time "$F/task1.mp" > "$T/k3.mp"
  rollout --policy "builtin:$T/rand" --mode agent --samples 1 --seed 8 --max-tokens 60 \
    --no-time "$F/task1.mp" > "$T/k1.mp"
  diff <(json "$T/k3.mp" | jq -c 'select(.sample == 0)') <(json "$T/k1.mp" | jq -c .)
  [ "$(json "$T/k3.mp" | jq -c '.turns[2].tokens' | sort -u | wc -l)" = 3 ]
  run jq -e -s 'all(.[]; .mode == "agent" and (.stop | IN("no-action", "max-tokens", "submit"))
      and (.turns[2].tokens | length) == (.turns[2].logprobs | length))' <(json "$T/k3.mp")
  assert_success
}

@test "the http policy fits a prompt to the server's context as the builtin does" {
  # prompts longer than the 64 positions of $F/short: both keep the end
  start_serve --ckpt "short=$F/short"
  run jq -c '.data[0].max_model_len' <(curl -s "$URL/v1/models")
  assert_output 64
  for temp in 0 0.9; do
    rollout --policy "http:$URL/v1" --samples 2 --seed 4 --temp $temp --max-tokens 24 \
      --ignore-stop --no-time "$F/tasks.mp" > "$T/h.mp"
    rollout --policy "builtin:$F/short" --samples 2 --seed 4 --temp $temp --max-tokens 24 \
      --ignore-stop --no-time "$F/tasks.mp" > "$T/b.mp"
    [ "$(rec count "$T/h.mp")" = 6 ]
    diff <(json "$T/h.mp" | jq -c '[.stop, .turns[1].tokens, .turns[1].logprobs, .patch]') \
      <(json "$T/b.mp" | jq -c '[.stop, .turns[1].tokens, .turns[1].logprobs, .patch]')
  done
  # max_tokens beyond half the context is cut to it, as the builtin cuts it
  rollout --policy "http:$URL/v1" --temp 0 --max-tokens 50 --ignore-stop --no-time "$F/task1.mp" > "$T/h.mp"
  rollout --policy "builtin:$F/short" --temp 0 --max-tokens 50 --ignore-stop --no-time "$F/task1.mp" > "$T/b.mp"
  diff <(json "$T/h.mp" | jq -c '.turns[1].tokens') <(json "$T/b.mp" | jq -c '.turns[1].tokens')
}

@test "the tools of an agent: files written, read and edited in the workspace; bad calls answered as errors" {
  # an OpenAI-compatible stand-in whose replies are scripted calls: the
  # agent's side of the protocol against the shapes the API gives
  cat > "$T/calls.py" <<'PY'
import http.server, json, sys
script = [
    [("write_file", {"path": "d/new.txt", "content": "one\ntwo\n"})],
    [("str_replace", {"path": "d/new.txt", "old": "two", "new": "three"}),
     ("read_file", {"path": "d/new.txt"})],
    [("str_replace", {"path": "d/new.txt", "old": "absent", "new": "x"}),
     ("nosuch", {}), ("bash", "not json")],
    [("submit", {})],
]
seen = []
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        rq = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/tokenize"):
            self.send_response(404); self.end_headers(); return
        turn = sum(1 for m in rq["messages"] if m["role"] == "assistant")
        seen.append(rq)
        open(sys.argv[2], "w").write(json.dumps(seen))
        calls = [{"id": f"c{turn}{k}", "type": "function",
                  "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                 for k, (n, a) in enumerate(script[turn])]
        body = json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": None, "tool_calls": calls},
            "finish_reason": "tool_calls"}], "usage": {"completion_tokens": 5}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.send_response(404); self.end_headers()
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(f"http://127.0.0.1:{s.server_port}/v1")
s.serve_forever()
PY
  /usr/bin/python3 "$T/calls.py" "$T/url" "$T/seen.json" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.05; done
  run --separate-stderr rollout --policy "http:$(cat "$T/url")" --mode agent --tools \
    --max-tokens 300 -o "$T/c.mp" "$F/task1.mp"
  kill "$pid"
  assert_success
  json "$T/c.mp" > "$T/c.json"
  run jq -c '[.stop, .steps, [.turns[] | select(.role == "tool") | [.call_id, .is_error]]]' "$T/c.json"
  assert_output '["submit",6,[["c00",false],["c10",false],["c11",false],["c20",true],["c21",true],["c22",true]]]'
  run jq -r '.turns[] | select(.call_id == "c11") | .text' "$T/c.json"
  assert_output "$(printf 'exit: 0\none\nthree')"
  run jq -r '.turns[] | select(.call_id == "c20") | .text' "$T/c.json"
  assert_output --partial 'old occurs 0 times, not once'
  run jq -r '.turns[] | select(.call_id == "c21" or .call_id == "c22") | .text' "$T/c.json"
  assert_line "unknown tool 'nosuch'"
  assert_line --partial 'bash: the arguments are not a JSON object: not json'
  # the file is in the patch, edited
  run jq -r .patch "$T/c.json"
  assert_line 'diff --git a/d/new.txt b/d/new.txt'
  assert_line '+three'
  # what went back to the server: the tools declared, each result as a
  # tool message naming its call
  run jq -c '.[-1] | [(.tools | length), ([.messages[] | select(.role == "tool") | .tool_call_id] | join(",")),
              (.messages[2].tool_calls[0].function.name)]' "$T/seen.json"
  assert_output '[5,"c00,c10,c11,c20,c21,c22","write_file"]'
}

# defs: tool definitions of the tests below, each a program of the clean room
defs() {
  mkdir -p "$T/bin"
  printf '#!/bin/sh\ncat\necho\necho bad >&2\nexit 3\n' > "$T/bin/probe"
  chmod +x "$T/bin/probe"
  cat > "$T/defs.json" <<'JSON'
[{"name": "count_lines", "description": "Count the lines of a file.",
  "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                 "required": ["path"]},
  "command": "python3 -c 'import json, sys; print(len(open(json.load(sys.stdin)[\"path\"]).readlines()))'"},
 {"name": "shout", "description": "Say text loudly.",
  "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
  "program": "t/shout.sh"},
 {"name": "probe", "description": "Echo the arguments and fail.", "program": "/tools/probe"},
 {"name": "sleeper", "command": "sleep 30"}]
JSON
}

@test "tools a file defines run in the clean room: arguments on stdin, stdout the result, a failure an error" {
  defs
  cat > "$T/script.json" <<'JSON'
[[["write_file", {"path": "t/shout.sh",
    "content": "#!/bin/sh\nexec python3 -c 'import json, sys; print(json.load(sys.stdin)[\"text\"].upper())'\n"}],
  ["bash", {"command": "chmod +x t/shout.sh"}]],
 [["shout", {"text": "hi there"}], ["count_lines", {"path": "t/shout.sh"}]],
 [["probe", {"n": 1}], ["count_lines", {}], ["count_lines", {"path": 5}]],
 [["submit", {}]]]
JSON
  /usr/bin/python3 "$BATS_TEST_DIRNAME/fixtures/scripted-calls.py" "$T/url" "$T/seen.json" \
    "$T/script.json" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.05; done
  run --separate-stderr rollout --policy "http:$(cat "$T/url")" --mode agent --tool-defs "$T/defs.json" \
    --mount "$T/bin:/tools" --max-tokens 300 -o "$T/c.mp" "$F/task1.mp"
  kill "$pid"
  assert_success
  json "$T/c.mp" > "$T/c.json"
  run jq -c '[.stop, .steps, .policy.tools, (.policy.tool_defs | endswith("defs.json")),
              [.turns[] | select(.role == "tool") | [.call_id, .is_error, .text]][2:]]' "$T/c.json"
  assert_output '["submit",7,true,true,[["c10",false,"HI THERE\n"],["c11",false,"2\n"],["c20",true,"exit: 3\n{\"n\":1}\nstderr:\nbad\n"],["c21",true,"count_lines: no argument '"'path'"'"],["c22",true,"count_lines: argument '"'path'"' is not of type string"]]]'
  # the server was sent the builtin tools and then the defined ones, as declared
  run jq -c '.[0].tools | [length, (.[5:] | map(.function.name)), .[5].function.parameters.required]' \
    "$T/seen.json"
  assert_output '[9,["count_lines","shout","probe","sleeper"],["path"]]'
}

@test "a defined tool that outlasts the episode is stopped, answered as an error, and the episode ends" {
  defs
  echo '[[["sleeper", {}]]]' > "$T/script.json"
  /usr/bin/python3 "$BATS_TEST_DIRNAME/fixtures/scripted-calls.py" "$T/url" "$T/seen.json" \
    "$T/script.json" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.05; done
  SECONDS=0
  run --separate-stderr rollout --policy "http:$(cat "$T/url")" --mode agent --tool-defs "$T/defs.json" \
    --mount "$T/bin:/tools" --timeout 2 --max-tokens 300 -o "$T/c.mp" "$F/task1.mp"
  local took=$SECONDS
  kill "$pid"
  json "$T/c.mp" > "$T/c.json"
  run jq -c '[.stop, .steps, [.turns[] | select(.role == "tool") | [.call_id, .is_error, (.text | split("\n")[0])]]]' "$T/c.json"
  assert_output '["timeout",1,[["c00",true,"stopped: timeout"]]]'
  # the sleep of 30 s was cut at the 2 s the episode had
  [ "$took" -lt 15 ]
}

@test "tool definitions that are not valid are refused with where they are wrong" {
  bad() {
    printf '%s\n' "$1" > "$T/bad.json"
    run --separate-stderr rollout --policy "builtin:$F/agent-ck" --mode agent \
      --tool-defs "$T/bad.json" -o "$T/o.mp" "$F/task1.mp"
    assert_failure 1
    assert_equal "$stderr" "rollout: $T/bad.json: $2"
    [ ! -s "$T/o.mp" ]
  }
  bad '[{"name": "a", "command": "true"},
 {"name": "b" "command": "true"}]' "line 2, column 23: '}' expected near '\"command\"'"
  bad '{"name": "a"}' 'not a JSON array of tool definitions'
  bad '[{"name": "a", "command": "true"}, {"command": "true"}]' "tool 2: no string 'name'"
  bad '[{"name": "a b", "command": "true"}]' 'tool 1 (a b): the name is not 1 to 64 of [A-Za-z0-9_-]'
  bad '[{"name": "bash", "command": "true"}]' "tool 1 (bash): 'bash' is a builtin tool"
  bad '[{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]' "tool 2 (a): 'a' is defined twice"
  bad '[{"name": "a"}]' "tool 1 (a): not one of 'program' (a path) and 'command' (a shell command)"
  bad '[{"name": "a", "program": "p", "command": "c"}]' "tool 1 (a): not one of 'program' (a path) and 'command' (a shell command)"
  bad '[{"name": "a", "run": "p"}]' "tool 1 (a): unknown key 'run' (name, description, parameters, program, command)"
  bad '[{"name": "a", "command": "c", "parameters": {"type": "string"}}]' "tool 1 (a): 'parameters' is not of \"type\": \"object\""
  bad '[{"name": "a", "command": "c", "parameters": {"type": "object", "required": ["x"]}}]' "tool 1 (a): 'parameters.required' names a property it does not define"
  bad '[{"name": "a", "command": "c", "parameters": {"type": "object", "properties": {"x": {"type": "str"}}}}]' "tool 1 (a): a property's 'type' is not a JSON-schema type name"
  run --separate-stderr rollout --policy "builtin:$F/agent-ck" --tool-defs "$T/bad.json" "$F/task1.mp"
  assert_failure 1
  defs
  run --separate-stderr rollout --policy "builtin:$F/agent-ck" --tool-defs "$T/defs.json" "$F/task1.mp"
  assert_failure 2
  assert_equal "${stderr_lines[0]}" 'rollout: --tool-defs needs --mode agent'
}

@test "the builtin policy and serve render the defined tools into the chat alike" {
  defs
  start_serve --ckpt "agent=$F/agent-ck"
  for p in "http:$URL/v1" "builtin:$F/agent-ck"; do
    rollout --policy "$p" --mode agent --tool-defs "$T/defs.json" --temp 0 --max-tokens 24 \
      "$F/task1.mp" | rec json | jq -c '.turns[2] | [.tokens, .logprobs]'
  done > "$T/defs.out"
  rollout --policy "builtin:$F/agent-ck" --mode agent --tools --temp 0 --max-tokens 24 \
    "$F/task1.mp" | rec json | jq -c '.turns[2] | [.tokens, .logprobs]' > "$T/builtin.out"
  run jq -s -c '[(.[0][0] | length), .[0][0] == .[1][0], .[0][1] == .[1][1]]' "$T/defs.out"
  # serve's float log-probs are those of the builtin's, token for token
  assert_output '[24,true,true]'
  # the defined tools are in the prompt: without them the same model says otherwise
  run jq -s -c '.[0][1] == .[1][1]' <(sed -n 2p "$T/defs.out") "$T/builtin.out"
  assert_output 'false'
}

@test "an agent that calls tools finds no history, no remote, no host home and no network, and says so" {
  # the probe of the exec agent, made through tool calls: bash, read_file
  # of a host file, and a defined tool that tries the network
  printf '%s\n' '[{"name": "net", "description": "Connect to 1.1.1.1:80.",
    "command": "python3 -c '"'"'import socket; s = socket.socket(); s.settimeout(2); s.connect((\"1.1.1.1\", 80))'"'"'"}]' \
    > "$T/net.json"
  cat > "$T/script.json" <<'JSON'
[[["bash", {"command": "echo \"commits: $(git log --all --oneline 2>/dev/null | wc -l)\"; echo \"remotes: $(git remote | wc -l)\"; ls /root"}],
  ["read_file", {"path": "/etc/shadow"}], ["net", {}]],
 [["submit", {}]]]
JSON
  /usr/bin/python3 "$BATS_TEST_DIRNAME/fixtures/scripted-calls.py" "$T/url" "$T/seen.json" \
    "$T/script.json" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.05; done
  run --separate-stderr rollout --policy "http:$(cat "$T/url")" --mode agent --tool-defs "$T/net.json" \
    --max-tokens 300 -o "$T/c.mp" "$F/task1.mp"
  kill "$pid"
  assert_success
  json "$T/c.mp" > "$T/c.json"
  run jq -r '.turns[] | select(.call_id == "c00") | .text' "$T/c.json"
  assert_line 'commits: 1'
  assert_line 'remotes: 0'
  assert_line --regexp '/root.*No such file'
  run jq -r '.turns[] | select(.call_id == "c01") | [.is_error, .text] | @json' "$T/c.json"
  assert_output --regexp '^\[true,"exit: 1\\nstderr:\\ncat: /etc/shadow: No such file'
  run jq -r '.turns[] | select(.call_id == "c02") | [.is_error, .text] | @json' "$T/c.json"
  assert_output --partial 'Network is unreachable'
  assert_output --partial '[true,'
}
