#!/usr/bin/env bats
# task-mutate --strategy history: a repository's own commits become tasks
# ("reach the fix we made"), with the context an engineer had.

bats_require_minimum_version 1.5.0

PYTEST='python3 -m pytest -q -p no:cacheprovider --continue-on-collection-errors --junitxml=$FW_REPORT'

# The billing sample's history, made into tasks once for the whole file.
setup_file() {
  export LC_ALL=C
  H="$BATS_FILE_TMPDIR"
  SAMPLES="$BATS_TEST_DIRNAME/../samples/repos"
  mkdir -p "$H/tmp"
  "$SAMPLES/billing-history.sh" "$H/billing"
  TMPDIR="$H/tmp" "$BIN_DIR/task-mutate" --strategy history --test-cmd "$PYTEST" \
    --store "$H/st.git" --context "$SAMPLES/billing-context" -j 2 -o "$H/tasks.mp" \
    "$H/billing" 2> "$H/stderr"
  "$BIN_DIR/rec" json "$H/tasks.mp" > "$H/tasks.jsonl"
  export H SAMPLES
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  PATH="$BIN_DIR:$PATH"
  T="$BATS_TEST_TMPDIR"
  export TMPDIR="$T/tmp"
  mkdir -p "$TMPDIR"
  R="$H/billing"
}

# commit SUBJECT: the id of the billing commit with that subject
commit() { git -C "$R" log --format=%H --fixed-strings --grep="$1" -n 1; }

# task SUBJECT: the task record (JSON) made from that commit
task() { jq -c --arg c "$(commit "$1")" 'select(.commit == $c)' "$H/tasks.jsonl"; }

# policy SCRIPT TASK: roll TASK (JSON) out with the exec policy SCRIPT; the
# patch it leaves goes to stdout
policy() {
  printf '%s\n' "$2" | rec from-json > "$T/one.mp"
  rollout --policy "exec:$1" -o "$T/roll.mp" "$T/one.mp"
  rec json "$T/roll.mp" | jq -r .patch
}

@test "commits that change code and tests become tasks, newest first, each with its date and commit" {
  assert [ -s "$H/tasks.mp" ]
  run jq -r '.prompt | split("\n")[2] | ltrimstr("    ")' "$H/tasks.jsonl"
  assert_output - <<'EOF'
tax: round half cents up, not to even
Add sales tax by region
Fix the nightly import crash
Read the CRM's nightly feed and write the accounts CSV
Invoices take a percentage discount
Fix the sign of negative amounts: -$5.00, not $-5.00
Add invoices with lines and a total
EOF
  # created is the commit date in UTC, base the parent, orig_tree the commit's tree
  jq -c '[.commit, .created, .base, .orig_tree]' "$H/tasks.jsonl" | while read -r l; do
    c=$(jq -r '.[0]' <<<"$l")
    [ "$(jq -r '.[1]' <<<"$l")" = "$(TZ=UTC git -C "$R" log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd "$c")" ]
    [ "$(jq -r '.[2]' <<<"$l")" = "$(git -C "$R" rev-parse "$c^")" ]
    [ "$(jq -r '.[3]' <<<"$l")" = "$(git -C "$R" rev-parse "$c^{tree}")" ]
  done
  # history tasks are private unless --split says otherwise
  run jq -e -s 'all(.[]; .kind == "task" and .strategy == "history" and .split == "private"
      and (.f2p | length) > 0 and (.p2p | length) > 0 and .tree != .orig_tree
      and (.targets | all(.path | startswith("billing/"))) and (.solution | startswith("diff --git"))
      and (.prompt | contains("These tests fail now and must pass:")))' "$H/tasks.jsonl"
  assert_success
}

@test "refactors, docs, a tests-only commit and the first commit are not tasks, and the summary says why" {
  run cat "$H/stderr"
  assert_output "task-mutate: history: commits 14, candidates 8, validated 7: merge 0, root 1, filtered 0, no-tests 4, no-code 1, too-large 0, broken 0, build-failed 0, timeout 0, no-f2p 1, flaky 0, empty-patch-passes 0, leak 0"
  for s in "money: one rounding helper" "README: the invoice API" "feed: split the row reader" \
      "invoice: name the zero" "tests: a discount on an empty invoice" "Initial import" \
      "tax: one dictionary lookup"; do
    [ -z "$(task "$s")" ]
  done
}

@test "-v names each commit left out and why" {
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --range "$(commit 'feed: split the row reader')~1..$(commit 'Fix the nightly import crash')" \
    -v -o "$T/t.mp" "$R"
  assert_success
  [[ "$stderr" == *"$(commit 'feed: split the row reader' | cut -c1-12) feed: split the row reader out of read_feed: no-tests: no test file changes"* ]]
  [ "$(rec count "$T/t.mp")" = 1 ]
}

@test "the task tree is the parent with the commit's tests; the solution gives back the commit's tree and touches no test" {
  jq -c . "$H/tasks.jsonl" | while read -r line; do
    c=$(jq -r .commit <<<"$line")
    rm -rf "$T/w" "$T/p" && mkdir "$T/w" "$T/p"
    git -C "$H/st.git" archive "$(jq -r .tree <<<"$line")" | tar -x -C "$T/w"
    git -C "$R" archive "$c^" | tar -x -C "$T/p"
    # every test file is the commit's; every other file the parent's
    for f in $(cd "$T/w" && find . -type f | sed 's|^\./||'); do
      case $f in
        tests/*) diff -q "$T/w/$f" <(git -C "$R" show "$c:$f") ;;
        *) diff -q "$T/w/$f" "$T/p/$f" ;;
      esac
    done
    jq -r .solution <<<"$line" > "$T/fix.diff"
    ! grep -q '^+++ b/tests/' "$T/fix.diff"
    (cd "$T/w" && git init -q && git apply "$T/fix.diff" && git add -A &&
      [ "$(git write-tree)" = "$(git -C "$R" rev-parse "$c^{tree}")" ])
  done
}

@test "graded as rollouts, the commit's own change scores 1 and an empty patch 0" {
  jq -c '{kind: "rollout", id: ("s" + .id), v: 1, task: del(.solution), patch: .solution},
         {kind: "rollout", id: ("e" + .id), v: 1, task: del(.solution), patch: ""}' \
    "$H/tasks.jsonl" | rec from-json > "$T/r.mp"
  run --separate-stderr grade -o "$T/g.mp" "$T/r.mp"
  assert_success
  run jq -r -s -c 'group_by(.id[0:1]) | map([.[0].id[0:1], (map(.grade.reward) | unique)]) | .[]' \
    <(rec json "$T/g.mp")
  assert_output - <<'EOF'
["e",[0]]
["s",[1]]
EOF
}

@test "no object of the commit or later is in the workspace: each one is the task tree's or its root commit" {
  cat > "$T/objects.sh" <<'EOF'
#!/bin/sh
find . -path ./.git -prune -o -type f -print -o -type l -print | sed 's|^\./|file |' | sort > files.txt
git cat-file --batch-all-objects --batch-check='%(objectname) %(objecttype)' > objects.txt
git rev-list --count HEAD >> objects.txt
EOF
  chmod +x "$T/objects.sh"
  jq -c . "$H/tasks.jsonl" | while read -r line; do
    c=$(jq -r .commit <<<"$line") tree=$(jq -r .tree <<<"$line")
    policy "$T/objects.sh" "$line" > "$T/patch"
    sed -n 's/^+\([0-9a-f]\{40\} [a-z]*\)$/\1/p' "$T/patch" > "$T/ws"
    # what the commit and every later one brought, less what the task tree holds
    git -C "$R" rev-list --objects "$c^..main" | cut -c1-40 | sort -u > "$T/future"
    { echo "$tree"; git -C "$H/st.git" ls-tree -r -t "$tree" | cut -f1 | awk '{print $3}'; } |
      sort -u > "$T/task"
    comm -23 "$T/future" "$T/task" > "$T/new"
    grep -qx "$c" "$T/new"
    grep -qx "$(git -C "$R" rev-parse "$c:$(jq -r '.targets[0].path' <<<"$line")")" "$T/new"
    # none of them is in the workspace, whose objects are the task tree's and one commit
    [ -z "$(cut -d' ' -f1 "$T/ws" | sort -u | comm -12 - "$T/new")" ]
    [ "$(grep -c ' commit$' "$T/ws")" = 1 ]
    [ -z "$(grep -v ' commit$' "$T/ws" | cut -d' ' -f1 | sort -u | comm -23 - "$T/task")" ]
    # and no file beside the task tree's: no cached build output (__pycache__,
    # .pytest_cache) from the runs at the commit, no file of a later commit
    sed -n 's/^+file \(.*\)$/\1/p' "$T/patch" | grep -vx files.txt > "$T/files"
    diff "$T/files" <(git -C "$H/st.git" ls-tree -r --name-only "$tree" | sort)
    ! grep -q '__pycache__\|\.pyc$\|\.pytest_cache' "$T/files"
  done
}

@test "the context bundle is listed in the prompt, readable and read-only in the clean room" {
  t=$(task "Fix the nightly import crash")
  run jq -r '.context[] | [.kind, .name, .size] | @tsv' <<<"$t"
  assert_output "$(printf 'log\tnightly-import.log\t%s\nchat\tops-thread.txt\t%s' \
    "$(wc -c < "$SAMPLES/billing-context/nightly-import.log")" \
    "$(wc -c < "$SAMPLES/billing-context/ops-thread.txt")")"
  jq -r .prompt <<<"$t" | grep -Fx -- "- /context/nightly-import.log (log)"
  jq -r .prompt <<<"$t" | grep -Fx -- "- /context/ops-thread.txt (chat)"
  # the other tasks have none
  [ "$(jq -s 'map(select(.context | length > 0)) | length' "$H/tasks.jsonl")" = 1 ]
  cat > "$T/look.sh" <<'EOF'
#!/bin/sh
cat /context/nightly-import.log /context/ops-thread.txt > seen.txt
touch /context/new 2> /dev/null && echo "created a file" >> seen.txt
echo more 2> /dev/null >> /context/ops-thread.txt && echo "appended" >> seen.txt
rm -f /context/ops-thread.txt 2> /dev/null; [ -e /context/ops-thread.txt ] || echo "removed" >> seen.txt
echo done >> seen.txt
EOF
  chmod +x "$T/look.sh"
  policy "$T/look.sh" "$t" | sed -n 's/^+//p' | sed 1d > "$T/seen"
  diff "$T/seen" <(cat "$SAMPLES/billing-context/nightly-import.log" \
    "$SAMPLES/billing-context/ops-thread.txt"; echo done)
  # and the bundle's directory is gone afterwards
  [ -z "$(ls "$TMPDIR" | grep fw-context)" ]
}

@test "--created-after and --created-before select tasks, and their rollouts, by the commit date" {
  run traj-filter --created-after 2024-03-01 "$H/tasks.mp"
  assert_success
  [ "$(rec json "$H/tasks.mp" | jq -r 'select(.created > "2024-03-01") | .id' | sort)" = \
    "$(traj-filter -q --created-after 2024-03-01 "$H/tasks.mp" | rec get .id | sort)" ]
  [ "$(traj-filter -q --created-after 2024-03-01 "$H/tasks.mp" | rec count)" = 4 ]
  [ "$(traj-filter -q --created-before 2024-03-01 "$H/tasks.mp" | rec count)" = 3 ]
  [ "$(traj-filter -q --created-after 2024-03-12T10:31:00Z --created-before 2024-04-16 "$H/tasks.mp" |
       rec get .created)" = 2024-04-02T08:55:00Z ]
  # an offset, and a rollout's task.created
  [ "$(traj-filter -q --created-after 2024-04-16T17:19:00+02:00 "$H/tasks.mp" | rec count)" = 1 ]
  jq -c '{kind: "rollout", id: ("r" + .id), v: 1, task: del(.solution), patch: ""}' "$H/tasks.jsonl" |
    rec from-json > "$T/r.mp"
  [ "$(traj-filter -q --created-after 2024-04-01 "$T/r.mp" | rec count)" = 2 ]
  # a record without a date is dropped and counted
  printf '{"kind":"task","id":"x"}\n' | rec from-json > "$T/nodate.mp"
  run --separate-stderr traj-filter --created-after 2024-01-01 "$T/nodate.mp" "$H/tasks.mp"
  assert_success
  [ "$stderr" = "traj-filter: created: dropped 0 records outside the dates, 1 without a created date" ]
  run -2 --separate-stderr traj-filter --created-after 2024-02-30 "$H/tasks.mp"
  [[ "$stderr" == "traj-filter: bad date '2024-02-30'"* ]]
}

@test "--grep, --since, --until, --path, --test-path, --range and --max-lines choose the commits" {
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --grep 'fix|closes #' --since 2024-03-01 -o "$T/a.mp" "$R"
  assert_success
  [ "$(rec get .commit "$T/a.mp")" = "$(commit 'Fix the nightly import crash')" ]
  [[ "$stderr" == *"commits 14, candidates 1, validated 1: merge 0, root 1, filtered 12, "* ]]
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --path billing/tax.py --until 2024-04-10 -o "$T/b.mp" "$R"
  assert_success
  [ "$(rec get .commit "$T/b.mp")" = "$(commit 'Add sales tax by region')" ]
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --test-path tests/test_feed.py --until 2024-03-05 -o "$T/d.mp" "$R"
  assert_success
  [ "$(rec get .commit "$T/d.mp")" = "$(commit "Read the CRM's nightly feed")" ]
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --range "$(commit 'Fix the sign of negative')~1..$(commit 'Invoices take a percentage')" \
    --max-lines 6 -o "$T/c.mp" "$R"
  assert_success
  [ "$(rec get .commit "$T/c.mp")" = "$(commit 'Fix the sign of negative')" ]
  [[ "$stderr" == *"commits 3, candidates 1, validated 1: merge 0, root 0, filtered 0, no-tests 1, no-code 0, too-large 1,"* ]]
}

@test "--split puts history tasks in the named splits" {
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --grep 'nightly import crash' --split train=1 -o "$T/t.mp" "$R"
  assert_success
  [ "$(rec get .split "$T/t.mp")" = train ]
}

@test "a context file that holds the fix is a leak, and the task is dropped" {
  mkdir "$T/ctx"
  c=$(commit 'Fix the nightly import crash')
  git -C "$R" show "$c:billing/money.py" > "$T/ctx/paste.txt"
  printf '{"%s": [{"kind": "chat", "name": "paste.txt"}]}\n' "${c:0:10}" > "$T/ctx/context.json"
  run --separate-stderr task-mutate --strategy history --test-cmd "$PYTEST" --store "$T/st.git" \
    --grep 'nightly import crash' --context "$T/ctx" -v -o "$T/t.mp" "$R"
  assert_success
  [ "$(rec count "$T/t.mp")" = 0 ]
  [[ "$stderr" == *"Fix the nightly import crash: leak: context paste.txt: "* ]]
}

@test "bad dates, patterns, context bundles and history options without the strategy are errors" {
  run -2 --separate-stderr task-mutate --strategy history --test-cmd true --since yesterday "$R"
  [[ "$stderr" == *"bad date 'yesterday'"* ]]
  run -2 --separate-stderr task-mutate --test-cmd true --grep fix "$R"
  [[ "$stderr" == *"go with --strategy history"* ]]
  run -1 --separate-stderr task-mutate --strategy history --test-cmd true --grep '(' \
    --store "$T/st.git" "$R"
  [[ "$stderr" == *"bad pattern '('"* ]]
  run -1 --separate-stderr task-mutate --strategy history --test-cmd true \
    --store "$T/st.git" --range nosuch..main "$R"
  [[ "$stderr" == *"no revision 'nosuch..main'"* ]]
  mkdir "$T/ctx"
  printf '{"0123456789": [{"kind": "log", "name": "gone.log"}]}\n' > "$T/ctx/context.json"
  run -1 --separate-stderr task-mutate --strategy history --test-cmd true --context "$T/ctx" "$R"
  [[ "$stderr" == *"cannot read '$T/ctx/gone.log'"* ]]
  printf '{"0123456789": [{"kind": "log", "name": "../x"}]}\n' > "$T/ctx/context.json"
  run -1 --separate-stderr task-mutate --strategy history --test-cmd true --context "$T/ctx" "$R"
  [[ "$stderr" == *"want a kind (a lowercase word) and a name (no '/')"* ]]
}

@test "the inner loop refuses a training input that holds a private task" {
  ROOT="$BATS_TEST_DIRNAME/.."
  mkdir -p "$T/it"
  ckpt init "$ROOT/samples/models/tiny-llama.json" "$T/m0" --seed 1 > /dev/null
  # every stage before train-step is done: its output is there
  jq -c '.split = "train" | .id = "t" + .id' "$H/tasks.jsonl" | head -n 2 | rec from-json > "$T/train.mp"
  cat "$T/train.mp" "$H/tasks.mp" > "$T/all.mp"
  rec cat "$T/train.mp" > "$T/it/train.tasks"
  # the rollouts of the two training tasks, and of five private ones
  { rec json "$T/train.mp"; tail -n 5 "$H/tasks.jsonl"; } |
    jq -c '{kind: "rollout", id: ("r" + .id), v: 1, task: del(.solution), prompt: "def f():", completion: " pass"}' |
    rec from-json > "$T/it/taught.msgpack"
  cp "$T/it/taught.msgpack" "$T/it/rollouts.msgpack"
  cp "$T/it/taught.msgpack" "$T/it/graded.msgpack"
  run -1 --separate-stderr "$ROOT/pipelines/inner-loop.sh" -c "$T/m0" -t "$T/all.mp" \
    -s "$H/st.git" -o "$T/it"
  [ "$(grep -c "^train-step: $T/it/taught.msgpack: record [3-7] (byte [0-9]*): refusing to train on private task " <<<"$stderr")" = 5 ]
  [[ "$stderr" == *"train-step: no step taken: 5 record(s) of private tasks in the training input"* ]]
  [ ! -e "$T/it/ckpt" ] && [ ! -e "$T/it/metrics.msgpack" ] && [ ! -e "$T/it/run/latest" ]
  # the same private tasks relabelled "train" in the rollouts are still
  # known by their ids in TASKS
  rec json "$T/it/taught.msgpack" | jq -c '.task.split = "train"' | rec from-json > "$T/relabelled.mp"
  mv "$T/relabelled.mp" "$T/it/taught.msgpack"
  run -1 --separate-stderr "$ROOT/pipelines/inner-loop.sh" -c "$T/m0" -t "$T/all.mp" \
    -s "$H/st.git" -o "$T/it"
  [[ "$stderr" == *"no step taken: 5 record(s) of private tasks"* ]]
  # the ids of a --private file count too (here JSON Lines)
  jq -c '{kind: "rollout", id: "r1", v: 1, task: {kind: "task", id: "pe-2", split: "train"}, prompt: "a", completion: "b"}' \
    -n | rec from-json > "$T/it/taught.msgpack"
  run -1 --separate-stderr "$ROOT/pipelines/inner-loop.sh" -c "$T/m0" -t "$T/train.mp" \
    -s "$H/st.git" -o "$T/it" --private "$ROOT/samples/evals/private-eval.jsonl"
  [[ "$stderr" == *"taught.msgpack: record 1 (byte 0): refusing to train on private task pe-2"* ]]
  # and without a private task the step is taken
  jq -c '{kind: "rollout", id: "r1", v: 1, task: {kind: "task", id: "t1", split: "train"}, prompt: "a", completion: "b", grade: {reward: 1}}' \
    -n | rec from-json > "$T/it/taught.msgpack"
  run -0 --separate-stderr "$ROOT/pipelines/inner-loop.sh" -c "$T/m0" -t "$T/all.mp" \
    -s "$H/st.git" -o "$T/it" --objective sft
  [ -s "$T/it/ckpt" ]
}
