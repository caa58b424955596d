#!/usr/bin/env bash
# Refuses shell lines that pipe a command into a grep that stops reading
# early: grep -q (also -qx, -Fq, -E -q, -sq, --quiet, --silent), grep -m N
# (--max-count) and grep -l/-L. Under `set -o pipefail` such a pipeline
# fails at random although the text is there: grep exits on the first
# match, the writer gets SIGPIPE on its next write (status 141), and
# pipefail makes the whole pipeline fail. bash's echo writes a multi-line
# value one line per write(), psql writes in pieces too.
#
# Write instead
#   grep -q PATTERN <<<"$out"        text already in a variable
#   cmd | grep PATTERN >/dev/null    a command's output: grep reads it all,
#                                    and pipefail still sees cmd fail
#
# It scans every *.sh file and every other bash/sh script (by its #! line
# or a "shellcheck shell=" line) under tests/, scripts/ and bench/, but
# this file. The lines are read as bash reads them: quotes, $(...), ${...},
# $((...)), comments and here-documents are followed, so a pipe in a
# string, a comment or a here-document is no pipe, and a grep on the line
# after a trailing pipe is seen. Before the tree it checks itself on
# made-up lines (each bad one must be reported, no good one may be), so
# that it cannot pass by matching nothing.
#
#   bash tests/lint/shell_patterns.sh          # the tree
#   bash tests/lint/shell_patterns.sh FILE...  # these files only
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SELF=tests/lint/shell_patterns.sh

# The scanner: prints FILE:LINE: TEXT for each grep reading from a pipe
# with an option that makes it stop early (LINE: the grep's line).
AWK_PROG=$(cat <<'AWK'
function push(t) { sp++; ctype[sp] = t; depth[sp] = 0; mode[sp] = 0; nw[sp] = 0; cur[sp] = ""; inword[sp] = 0; redir[sp] = 0 }
function pop(    t) {
  t = ctype[sp]; sp--
  # A $(...) or (( )) that ends inside a word of the code around it.
  if ((t == "code" || t == "arith") && ctype[sp] == "code") { cur[sp] = cur[sp] "$"; inword[sp] = 1 }
}
function code(    d) { for (d = sp; d > 0; d--) if (ctype[d] == "code") return d; return 1 }
function addc(c,    d) { d = code(); cur[d] = cur[d] c; inword[d] = 1 }
function endword(d,    w) {
  if (!inword[d]) return
  w = cur[d]; cur[d] = ""; inword[d] = 0
  if (redir[d]) { redir[d] = 0; return }   # a redirection's target
  if (mode[d] == 1) {
    if (w == "!" || w == "{" || w == "command" || w == "exec" || w == "time" || w ~ /^[A-Za-z_][A-Za-z0-9_]*=/) return
    if (w ~ /(^|\/)[efz]?grep$/) { mode[d] = 2; nw[d] = 0; gline[d] = FNR } else mode[d] = 0
  } else if (mode[d] == 2) { nw[d]++; word[d, nw[d]] = w }
}
function stops_early(d,    i, j, w, ch, n, skip) {
  skip = 0
  for (i = 1; i <= nw[d]; i++) {
    w = word[d, i]
    if (skip) { skip = 0; continue }
    if (w == "--") return 0
    if (w ~ /^--/) {
      if (w ~ /^--(quiet|silent|max-count|files-with-matches|files-without-match)(=|$)/) return 1
      if (w ~ /^--(regexp|file|after-context|before-context|context|devices|directories|binary-files|label|include|exclude|exclude-dir|exclude-from|color|colour|group-separator)$/) skip = 1
      continue
    }
    if (w !~ /^-./) continue
    n = length(w)
    for (j = 2; j <= n; j++) {
      ch = substr(w, j, 1)
      if (ch == "q" || ch == "m" || ch == "l" || ch == "L") return 1
      if (index("efABCdD", ch)) { if (j == n) skip = 1; break }
    }
  }
  return 0
}
function finish(d,    t) {
  endword(d)
  if (mode[d] == 2 && stops_early(d)) {
    if (!((FILENAME, gline[d]) in told)) {
      told[FILENAME, gline[d]] = 1
      t = lines[gline[d]]; sub(/^[ \t]+/, "", t)
      printf "%s:%d: %s\n", FILENAME, gline[d], t
    }
  }
  mode[d] = 0; redir[d] = 0
}
function pipe(d) { finish(d); mode[d] = 1 }
# heredoc(s, i): reads the delimiter of the here-document whose << ends
# before i; returns the index after it.
function heredoc(s, i, dash,    n, c, delim, q) {
  n = length(s); delim = ""; q = ""
  while (i <= n && (substr(s, i, 1) == " " || substr(s, i, 1) == "\t")) i++
  while (i <= n) {
    c = substr(s, i, 1)
    if (q != "") { if (c == q) q = ""; else delim = delim c; i++; continue }
    if (c == "\047" || c == "\"") { q = c; i++; continue }
    if (c == "\\") { delim = delim substr(s, i + 1, 1); i += 2; continue }
    if (c ~ /[ \t;|&<>()]/) break
    delim = delim c; i++
  }
  if (delim != "") { hn++; hdelim[hn] = delim; hdash[hn] = dash }
  return i
}
FNR == 1 { sp = 0; push("code"); inhd = 0; hn = 0; hi = 0; split("", lines) }
{
  lines[FNR] = $0
  if (inhd) {
    t = $0; if (hdash[hi]) sub(/^\t+/, "", t)
    if (t == hdelim[hi]) { hi++; if (hi > hn) { inhd = 0; hn = 0 } }
    next
  }
  s = $0; n = length(s); i = 1; cont = 0
  while (i <= n) {
    c = substr(s, i, 1); c2 = substr(s, i, 2); t = ctype[sp]
    if (t == "sq") { if (c == "\047") sp--; else addc(c); i++; continue }
    if (t == "ansi") {
      if (c == "\\") { addc(substr(s, i + 1, 1)); i += 2; continue }
      if (c == "\047") sp--; else addc(c); i++; continue
    }
    if (t == "dq" || t == "brace") {
      if (c == "\\") { addc(substr(s, i + 1, 1)); i += 2; continue }
      if (t == "dq" && c == "\"") { sp--; i++; continue }
      if (t == "brace" && c == "}") { sp--; i++; continue }
      if (c2 == "$(") { if (substr(s, i + 2, 1) == "(") { push("arith"); depth[sp] = 2; i += 3 } else { push("code"); depth[sp] = 1; i += 2 }; continue }
      if (c2 == "${") { push("brace"); i += 2; continue }
      if (t == "brace" && c == "\047") { push("sq"); i++; continue }
      if (t == "brace" && c == "\"") { push("dq"); i++; continue }
      addc(c); i++; continue
    }
    if (t == "arith") {
      if (c2 == "$(") { if (substr(s, i + 2, 1) == "(") { push("arith"); depth[sp] = 2; i += 3 } else { push("code"); depth[sp] = 1; i += 2 }; continue }
      if (c2 == "${") { push("brace"); i += 2; continue }
      if (c == "(") depth[sp]++
      if (c == ")") { depth[sp]--; if (depth[sp] == 0) { pop(); i++; continue } }
      i++; continue
    }
    # code: the top level, or the inside of $(...) or <(...)
    d = sp
    if (c == " " || c == "\t") { endword(d); i++; continue }
    if (c == "#" && !inword[d]) break
    if (c == "\\") { if (i == n) cont = 1; else addc(substr(s, i + 1, 1)); i += 2; continue }
    if (c == "\047") { inword[d] = 1; push("sq"); i++; continue }
    if (c == "\"") { inword[d] = 1; push("dq"); i++; continue }
    if (c2 == "$'") { inword[d] = 1; push("ansi"); i += 2; continue }
    if (c2 == "$(") { inword[d] = 1; if (substr(s, i + 2, 1) == "(") { push("arith"); depth[sp] = 2; i += 3 } else { push("code"); depth[sp] = 1; i += 2 }; continue }
    if (c2 == "${") { inword[d] = 1; push("brace"); i += 2; continue }
    if (c2 == "((" && !inword[d]) { finish(d); push("arith"); depth[sp] = 2; i += 2; continue }
    if (c2 == "||") { finish(d); i += 2; continue }
    if (c2 == "|&") { pipe(d); i += 2; continue }
    if (c == "|") { pipe(d); i++; continue }
    if (c2 == "&&") { finish(d); i += 2; continue }
    if (c2 == "&>") { endword(d); redir[d] = 1; i += 2; if (substr(s, i, 1) == ">") i++; continue }
    if (c == "&" || c == ";") { finish(d); i++; continue }
    if (c == "(") { if (d > 1) depth[d]++; if (mode[d] != 1) finish(d); i++; continue }
    if (c == ")") {
      if (d > 1) { depth[d]--; if (depth[d] == 0) { finish(d); pop(); i++; continue } }
      finish(d); i++; continue
    }
    if (c == "<" || c == ">") {
      if (c2 == "<(" || c2 == ">(") { endword(d); push("code"); depth[sp] = 1; i += 2; continue }
      endword(d)
      if (substr(s, i, 3) == "<<<") { redir[d] = 1; i += 3; continue }
      if (substr(s, i, 3) == "<<-") { i = heredoc(s, i + 3, 1); continue }
      if (c2 == "<<") { i = heredoc(s, i + 2, 0); continue }
      redir[d] = 1; i++
      c = substr(s, i, 1)
      if (c == ">" || c == "&" || c == "|") i++
      continue
    }
    addc(c); i++
  }
  # The end of the line: a new command, unless continued (a backslash, a
  # pipe waiting for its command, an open quote or a $(...) inside one).
  if (!cont && ctype[sp] == "code") { if (mode[sp] == 1) endword(sp); else finish(sp) }
  if (hn > 0 && !inhd) { inhd = 1; hi = 1 }
}
AWK
)

scan() { awk "$AWK_PROG" "$@"; }

# --- the self-check: made-up lines ("PIPE" stands for the pipe sign, so
# that these lines are no findings of this file themselves).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each bad example reports one line: the last line of the example.
bad_examples=(
  'echo "$out" PIPE grep -q x'
  'psql -c "SELECT 1" PIPE grep -Fq x || fail "no x"'
  'cmd PIPE grep -E -q "a|b" && echo yes'
  'cmd PIPE grep --quiet x'
  'cmd PIPE grep --silent x'
  'cmd PIPE grep -sq x'
  'cmd PIPE grep -m1 x'
  'cmd PIPE grep -m 1 x'
  'cmd PIPE grep x --max-count=1'
  'cmd PIPE grep -A2 x PIPE grep -iq y'
  '! cmd PIPE grep -qx ""'
  'if cmd 2>&1 PIPE grep -Eiq -- "$re"; then :; fi'
  'cmd PIPE& egrep -q x'
  'cmd PIPE LC_ALL=C grep -q x'
  'sql_value n "SELECT 1" PIPE grep -l x'
  'x="$(cmd "$a" PIPE grep -c x)$(other PIPE grep -q y)"'
  'n=$(( $(cmd PIPE grep -qc x) + 1 ))'
  'for f in a b; do cmd "$f" PIPE grep -q x || fail "$f"; done'
  'cmd PIPE { grep -q x; }'
  $'cmd "a\n  b" PIPE grep -q x'
  $'cmd PIPE\n  grep -q x'
  $'cmd \\\n  PIPE grep -q x'
  $'cat <<EOF\nbody PIPE grep -q y\nEOF\ncmd PIPE grep -q x'
)
good_examples=(
  'grep -q x <<<"$out"'
  'grep -qx "" <<<"$(cmd)"'
  'cmd PIPE grep x >/dev/null'
  'cmd PIPE grep -c x'
  'cmd PIPE grep -v x >/dev/null'
  'cmd PIPE grep -e -q >/dev/null'
  'cmd PIPE grep -A2 x PIPE tail -1'
  '[ "$rc" -ne 0 ] PIPEPIPE grep -q x "$file"'
  'a PIPEPIPE grep -qm1 x "$file"'
  'grep -m3 x "$file" || tail -5 "$file"'
  '# cmd PIPE grep -q x'
  'echo "$x" # cmd PIPE grep -q x'
  "echo 'cmd PIPE grep -q x'"
  'fail "cmd PIPE grep -q x"'
  $'fail "cmd\n  PIPE grep -q x"'
  'n=$(( a PIPE 2 )); echo "${#n} ${n:-PIPE} $#"'
  $'x=$(( 1 << 2 ))\ncmd PIPE grep x >/dev/null'
  $'cat <<\'EOF\'\ncmd PIPE grep -q x\nEOF'
  $'cat <<-EOF\n\tcmd PIPE grep -q x\n\tEOF'
  $'out=$(psql <<SQL\nSELECT 1 PIPE grep -q x;\nSQL\n)'
  'case "$x" in a|grep) echo -q ;; esac'
  'cmd PIPE sed -n 1,4p'
)
line=0
: > "$tmp/bad.sh"
expected=()
for ex in "${bad_examples[@]}"; do
  printf '%s\n' "${ex//PIPE/|}" >> "$tmp/bad.sh"
  line=$((line + $(printf '%s\n' "$ex" | wc -l)))
  expected+=("$tmp/bad.sh:$line")
done
: > "$tmp/good.sh"
for ex in "${good_examples[@]}"; do printf '%s\n' "${ex//PIPE/|}" >> "$tmp/good.sh"; done
got=$(scan "$tmp/bad.sh" "$tmp/good.sh" | cut -d: -f1,2)
want=$(printf '%s\n' "${expected[@]}")
if [ "$got" != "$want" ]; then
  echo "shell patterns: the self-check failed: the lint does not find what it should, or finds what it should not"
  diff <(echo "$want") <(echo "$got") | sed 's/^/  /' || true
  exit 1
fi

# --- the tree
cd "$ROOT"
files=()
while IFS= read -r -d '' f; do
  [ "$f" = "$SELF" ] && continue
  case "$f" in
    *.sh) files+=("$f") ;;
    *) top=$(head -n 3 "$f" 2>/dev/null | tr -d '\0' || true)
       if grep -Eq '^#!.*(bash|/sh)\b|^# shellcheck shell=(bash|sh)' <<<"$top"; then files+=("$f"); fi ;;
  esac
done < <(if [ $# -gt 0 ]; then printf '%s\0' "$@"; else find tests scripts bench -type f -print0 | sort -z; fi)

findings=""
[ ${#files[@]} -eq 0 ] || findings=$(scan "${files[@]}")
failed=0
if [ -n "$findings" ]; then
  printf '%s\n' "$findings"
  failed=$(printf '%s\n' "$findings" | cut -d: -f1 | sort -u | wc -l)
  echo
  echo "A grep that stops reading early (-q, -m, -l, --quiet) after a pipe fails at random under pipefail (the writer gets SIGPIPE)."
  echo "Write: grep -q PATTERN <<<\"\$out\" for text in a variable; cmd | grep PATTERN >/dev/null for a command's output."
fi
echo "shell patterns: ${#files[@]} files checked, $failed failed"
[ "$failed" -eq 0 ]
