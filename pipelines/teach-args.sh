# teach-args.sh — sourced by demo.sh and ablate.sh: teach_args prints the
# inner-loop.sh arguments of a loop with teach, from
#   DEMO_DISTILL (0.1)     the weight of the distill term (0: none)
#   DEMO_TOPK (0)          teach --topk K: the hinted teacher's K most likely
#                          tokens per credited token (0: none, no topk term)
#   DEMO_TOPK_WEIGHT (1)   the weight of the topk term
#   DEMO_TOPK_FIRST (0)    1: the topk term only up to a rollout's first token
#                          the teacher would not have chosen (--topk-first-miss)
# and checks them (exit 2 on a bad value).
teach_args() {
  _d=${DEMO_DISTILL:-0.1} _k=${DEMO_TOPK:-0} _w=${DEMO_TOPK_WEIGHT:-1} _f=${DEMO_TOPK_FIRST:-0}
  for _x in "$_d" "$_w"; do
    case $_x in
      *[!0-9.]* | *.*.* | . | '') echo "DEMO_DISTILL, DEMO_TOPK_WEIGHT: want numbers, not '$_x'" >&2; exit 2 ;;
    esac
  done
  case $_k in *[!0-9]* | '') echo "DEMO_TOPK: want 0 to 64, not '$_k'" >&2; exit 2 ;; esac
  [ "$_k" -le 64 ] || { echo "DEMO_TOPK: want 0 to 64, not '$_k'" >&2; exit 2; }
  _o=pg
  if awk -v x="$_d" 'BEGIN { exit !(x > 0) }'; then _o="$_o,distill:$_d"; fi
  if [ "$_k" -gt 0 ] && awk -v x="$_w" 'BEGIN { exit !(x > 0) }'; then
    if [ "$_f" = 1 ]; then _f=" --topk-first-miss"; else _f=; fi
    printf '%s\n' "--objective $_o,topk:$_w --topk $_k$_f"
  else
    printf '%s\n' "--objective $_o"
  fi
}
