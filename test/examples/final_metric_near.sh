#!/bin/sh
# final_metric_near.sh REFERENCE.csv OTHER.csv COLUMN TOLERANCE [BETTER]: the last row's COLUMN of
# two runs' per-epoch CSV logs differ by at most TOLERANCE (bf16 against fp32 on the same data and
# steps); TOLERANCE with a % sign (2%) is relative to REFERENCE's value. BETTER (higher or lower:
# which way the metric improves) makes it a floor: OTHER may be better than REFERENCE by any margin,
# worse by at most TOLERANCE.
set -eu
last() {
  awk -F, -v column="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == column) c = i; next }
                          { value = $c } END { if (!c || value == "") exit 1; print value }' "$1" ||
    { echo "final_metric_near: $1 has no $2 column or no rows" >&2; exit 1; }
}
reference=$(last "$1" "$3")
other=$(last "$2" "$3")
case $4 in
  *%) allowed=$(awk -v a="$reference" -v p="${4%\%}" 'BEGIN { if (a < 0) a = -a; print a * p / 100 }') ;;
  *) allowed=$4 ;;
esac
better=${5:-}
case $better in
  higher) worse='b < a - t' what="is lower than $reference by more than $4" ;;
  lower) worse='b > a + t' what="is higher than $reference by more than $4" ;;
  '') worse='b < a - t || b > a + t' what="differs from $reference by more than $4" ;;
  *) echo "final_metric_near: BETTER must be higher or lower, got '$better'" >&2; exit 2 ;;
esac
echo "final_metric_near: $3 $reference in $1, $other in $2 (tolerance $4: $allowed${better:+, $better is better})"
awk -v a="$reference" -v b="$other" -v t="$allowed" "BEGIN { exit ($worse) }" ||
  { echo "final_metric_near: $3 $other $what" >&2; exit 1; }
