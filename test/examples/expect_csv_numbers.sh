#!/bin/sh
# Exits 0 when the last row of CSV holds a number in each named column, else says which is not.
#   expect_csv_numbers.sh CSV COLUMN...
csv=$1
shift
[ -s "$csv" ] || { echo "expect_csv_numbers: $csv is missing or empty" >&2; exit 1; }
awk -F, -v wanted="$*" '
  NR == 1 { for (c = 1; c <= NF; ++c) col[$c] = c; next }
  { last = $0 }
  END {
    n = split(wanted, names, " ")
    split(last, values, ",")
    for (i = 1; i <= n; ++i) {
      v = (names[i] in col) ? values[col[names[i]]] : "(no such column)"
      if (v !~ /^-?[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$/) { print FILENAME ": " names[i] " is " v ", not a number"; bad = 1 }
    }
    exit bad
  }' "$csv"
