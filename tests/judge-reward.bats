#!/usr/bin/env bats
# pipelines/judge-reward.sh at reduced size: the judge's verdict on agent
# episodes becomes grade.reward, and train-step's pg reads that reward.
# (make judge-reward runs it at full size in make check.)
#
# A mini package of three functions with a fast TAP runner: six tasks (each
# asked vaguely and as written), a random checkpoint barely bootstrapped,
# two samples a task, a sweep of two settings.

bats_require_minimum_version 1.5.0

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
  "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$F/mini" > /dev/null
  task-mutate --test-cmd 'python3 run_tests.py' --report tap --store "$F/st.git" \
    --strategy stub-body -o "$F/base.mp" "$F/mini" 2>/dev/null
  JR_TASKS="$F/base.mp" JR_STORE="$F/st.git" JR_EVAL=0.34 JR_BOOT_STEPS=2 JR_BOOT_BATCH=2 \
    JR_SAMPLES=2 JR_MAX_TOKENS=12 JR_PG_STEPS=1 JR_JOBS=1 JR_SWEEP="token:3e-3 seq:3e-3" \
    "$BATS_TEST_DIRNAME/../pipelines/judge-reward.sh" "$F/out" > "$F/stdout" 2> "$F/stderr"
  rec json "$F/out/graded.msgpack" > "$F/graded.json"
  rec json "$F/out/metrics.msgpack" > "$F/metrics.json"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  F="$BATS_FILE_TMPDIR"
}

@test "the tasks: each asked vaguely (expect ask) and as written (expect act), a share held out" {
  run -0 jq -r '[.split, .expect] | @tsv' <(rec json "$F/out/tasks.msgpack")
  assert_equal "$(printf '%s\n' "${lines[@]}" | sort | uniq -c | awk '{print $1, $2, $3}' | tr '\n' ';')" \
    "1 eval act;1 eval ask;2 train act;2 train ask;"
  # a vague request names no function; the one as written names its own
  run -0 jq -r 'select(.expect == "ask") | [.prompt, .targets[0].symbol] | @tsv' <(rec json "$F/out/tasks.msgpack")
  for l in "${lines[@]}"; do [[ "${l%%$'\t'*}" != *"${l##*$'\t'}"* ]]; done
}

@test "grade.reward is the judge's score of the criterion the task expects, on [0, 1]" {
  # 4 training tasks, 2 samples each
  run -0 jq -s 'length' "$F/graded.json"
  assert_output 8
  # the rules judge (samples/judge/rules-judge): a first reply that ends in
  # a question mark asked; on an ask task asks-first scores p(yes), 0.9 when
  # it asked and 0.1 when not; on an act task acts-at-once scores 1 when
  # it did not ask, 0 when it did; the tests weigh 0, and the criteria
  # the task does not expect are not judged
  run -0 jq -s -c 'map(([.turns[] | select(.role == "assistant")][0].text // "" | test("\\?\\s*$")) as $q
    | (if .task.expect == "ask" then "acts-at-once" else "asks-first" end) as $other
    | (if .task.expect == "ask" then (if $q then 0.9 else 0.1 end)
       else (if $q then 0 else 1 end) end) as $want
    | [(.grade.reward - $want | fabs) < 1e-12, .grade.reward_tests == 0,
       (.grade.judge | has($other) | not),
       (.grade.judge | has("skills") | not)]) | unique' "$F/graded.json"
  assert_output '[[true,true,true,true]]'
}

@test "train-step's pg reads those rewards: its reward mean and groups are the graded records'" {
  want=$(jq -s 'map(.grade.reward) | add / length' "$F/graded.json")
  run -0 jq -r --argjson w "$want" '(.reward_mean - $w | fabs) < 1e-9' "$F/metrics.json"
  assert_output true
  # one group a task; a group whose two rewards are equal has no advantage
  run -0 jq -s -c 'group_by(.task.id) | [length, map(select(map(.grade.reward) | unique | length == 1)) | length]' \
    "$F/graded.json"
  assert_output "$(jq -c '[.groups, .skipped_groups]' "$F/metrics.json")"
}

@test "the table: clarifying questions before, after and in the null arm, per kind, with Wilson intervals" {
  run -0 cat "$F/out/rates.tsv"
  assert_equal "${#lines[@]}" 6
  # n: one held-out task of each kind, two samples; the rate is asked/n and
  # the interval holds it
  run -0 awk -F'\t' '$4 != 2 || $5 != $3 / $4 || $6 > $5 || $7 < $5 || $6 < 0 || $7 > 1 { bad++ }
                     END { print NR, bad + 0 }' "$F/out/rates.tsv"
  assert_output "6 0"
  run -0 cut -f1,2 "$F/out/rates.tsv"
  assert_equal "$(echo "$output" | tr '\t\n' ' ;')" "act after;act before;act null;ask after;ask before;ask null;"
  # the counts are the episodes': a question is a first reply with no command
  for when in before after null; do
    f=$F/out/$when.msgpack
    [ "$when" != null ] || f=$F/out/null-after.msgpack
    for kind in ask act; do
      asked=$(rec json "$f" | jq -s --arg k "$kind" '[.[] | select(.task.expect == $k and .steps == 0
        and .stop == "no-action" and ([.turns[] | select(.role == "assistant")][0].text | test("\\?\\s*$")))] | length')
      assert_equal "$(awk -F'\t' -v w="$when" -v k="$kind" '$1 == k && $2 == w { print $3 }' "$F/out/rates.tsv")" "$asked"
    done
  done
  grep -q 'clarifying questions on held-out tasks' "$F/stdout"
  run -0 jq -c '[(.rates | length), .reward, .samples]' "$F/out/reward.json"
  assert_output '[6,"mix:resolved=0,asks-first=1,acts-at-once=1",2]'
  # the gaps are the table's: rate on ask minus rate on act
  for when in before after null; do
    want=$(awk -F'\t' -v w="$when" '$2 == w { r[$1] = $5 } END { printf "%.6f", r["ask"] - r["act"] }' "$F/out/rates.tsv")
    assert_equal "$(jq -r --arg w "$when" '.gap[$w] | . * 1e6 | round / 1e6 | tostring' "$F/out/reward.json" \
      | xargs printf '%.6f')" "$want"
  done
}

# asked and n of one kind among the first moves of FILE's episodes
first_moves() {
  rec json "$1" | jq -s -r --arg k "$2" '[.[] | select(.task.expect == $k)]
    | [(map(select(.steps == 0 and .stop == "no-action"
        and ([.turns[] | select(.role == "assistant")][0].text | test("\\?\\s*$")))) | length), length] | @tsv'
}

@test "the sweep: each setting scored on the training tasks from its own rollouts, the best chosen" {
  run -0 cut -f1,2 "$F/out/sweep.tsv"
  assert_equal "$(echo "$output" | tr '\t\n' ' ;')" "token 3e-3;seq 3e-3;"
  while IFS=$'\t' read -r norm lr aa an ca cn right; do
    d=$F/out/sweep/$norm-$lr
    # the counts are the setting's rollouts on the training tasks (2 of each
    # kind, 2 samples), the held-out tasks not among them
    assert_equal "$(first_moves "$d/train-after.msgpack" ask)" "$aa"$'\t'"$an"
    assert_equal "$(first_moves "$d/train-after.msgpack" act)" "$ca"$'\t'"$cn"
    assert_equal "$an $cn" "4 4"
    run -0 jq -s -r 'map(.task.split) | unique | join(",")' <(rec json "$d/train-after.msgpack")
    assert_output train
    # the score: the mean of the rate of a question on ask and of none on act
    assert_equal "$right" "$(awk -v a="$aa" -v b="$an" -v c="$ca" -v d="$cn" 'BEGIN { printf "%.4f", (a / b + 1 - c / d) / 2 }')"
  done < "$F/out/sweep.tsv"
  # the chosen setting: the highest score, the first of the sweep on a tie
  want=$(awk -F'\t' '$7 > b || NR == 1 { b = $7; w = $1 "-" $2 } END { print w }' "$F/out/sweep.tsv")
  assert_equal "$(readlink "$F/out/pg")" "sweep/$want/pg"
  cmp "$F/out/metrics.msgpack" "$F/out/sweep/$want/metrics.msgpack"
  run -0 jq -r '"\(.chosen.norm)-\(.chosen.lr) \(.sweep | length)"' "$F/out/reward.json"
  assert_equal "$(echo "$output" | sed 's/-0.003 /-3e-3 /')" "$want 2"
  grep -q "chosen: --norm ${want%%-*} --lr ${want#*-}" "$F/stdout"
}

@test "the null arm: each group's rewards rotated, the chosen setting trained on them" {
  # per group the same multiset of rewards as the graded file, in another order
  run -0 jq -s -c 'group_by(.task.id) | map(map(.grade.reward) | sort)' "$F/graded.json"
  want=$output
  run -0 jq -s -c 'group_by(.task.id) | map(map(.grade.reward) | sort)' <(rec json "$F/out/null/graded.msgpack")
  assert_equal "$output" "$want"
  # rotated by one: episode i of a group gets episode i+1's reward
  run -0 jq -s -c 'group_by(.task.id) | map(map(.grade.reward)) | map(.[1:] + .[:1])' "$F/graded.json"
  want=$output
  run -0 jq -s -c 'group_by(.task.id) | map(map(.grade.reward))' <(rec json "$F/out/null/graded.msgpack")
  assert_equal "$output" "$want"
  # the episodes are the same, only the rewards moved
  want=$(jq -s -c 'group_by(.task.id) | map(map(del(.grade.reward)))' "$F/graded.json" | md5sum)
  assert_equal "$(rec json "$F/out/null/graded.msgpack" | jq -s -c 'group_by(.task.id) | map(map(del(.grade.reward)))' | md5sum)" "$want"
  # its run read those rewards, with the chosen setting's learning rate
  run -0 jq -s -r 'map(.grade.reward) | add / length' <(rec json "$F/out/null/graded.msgpack")
  want=$output
  run -0 jq -r --argjson w "$want" '(.reward_mean - $w | fabs) < 1e-9' <(rec json "$F/out/null/metrics.msgpack")
  assert_output true
  [ -f "$F/out/null/pg/latest/model.bin" ] || [ -e "$F/out/null/pg/latest" ]
}
