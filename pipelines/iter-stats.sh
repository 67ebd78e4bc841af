#!/bin/sh
# iter-stats.sh — what teach gave an inner-loop iteration, and the policy's
# entropy, as one JSON line.
#
#   pipelines/iter-stats.sh DIR      DIR an inner-loop.sh output directory
#
# {rollouts, failing, credited, credited_share, differ, rest, n_differ,
#  n_rest, entropy}: failing counts the rollouts teach hinted (every
# rollout not resolved that has a hint), credited those of them that got
# per-token credit (teach.adv; the rest say why in teach.adv_omitted);
# differ and rest are the mean credit on the policy tokens that differ from
# a correct solution of the same group and on the others (teach.adv_split,
# weighted by tokens; null without such a pair); entropy is the mean of
# -log p over the tokens the policy sampled (rollout's logprobs at --temp
# 1: an estimate of its per-token entropy in nats).  Without teach
# (inner-loop.sh --no-teach) the teach fields are 0 or null.
set -eu
d=${1:?usage: iter-stats.sh DIR}
rec json "$d/taught.msgpack" | jq -sc '
  def wmean(f; n): ([.[] | f * n] | add) as $s | ([.[] | n] | add) as $w
    | if $w > 0 then $s / $w else null end;
  [.[] | select(.teach != null and (.teach.hints | length) > 0)] as $h
  | [.[] | .teach.adv_split // empty] as $sp
  | [.[] | .turns[] | select(.role == "assistant") | .logprobs // [] | .[]] as $lp
  | {rollouts: length, failing: ($h | length),
     credited: ([$h[] | select(.teach.adv != null)] | length)}
  | .credited_share = (if .failing > 0 then .credited / .failing else null end)
  | .differ = ($sp | wmean(.differ; .n_differ)) | .rest = ($sp | wmean(.rest; .n_rest))
  | .n_differ = ([$sp[].n_differ] | add // 0) | .n_rest = ([$sp[].n_rest] | add // 0)
  | .entropy = (if ($lp | length) > 0 then -($lp | add) / ($lp | length) else null end)'
