#!/usr/bin/env python3
"""Docs against code: fails when docs/reference.md and the code disagree.

Compares, and prints one line per difference (FILE: what differs):

  a. the settings tables of docs/reference.md (#settings) with the
     `GucRegistry::define_*_guc` calls of src/pg/settings.rs: every setting
     and no other, its default (the `GucSetting::new` value of its static,
     through constants), its context (`GucContext::...`) and its range as
     the code checks it: the declared minimum and maximum where they bound
     it; where the declaration is wide (i32::MIN .. i32::MAX) the start-up
     validation's, the `(LO..=HI).contains(&param)` of `IdLayout::new`
     (src/core/layout.rs, its constants evaluated) that `Config::validate`
     (src/core/config.rs) hands the `Settings` field to, or its guard on a
     field it matches (`n >= 0 && .. <= layout.max_node()`: 2^node_bits -
     1); a maximum declared i32::MAX alone bounds nothing (`0 or more`).
     `expects()`, what the server says when it refuses a value, must give
     the same range. A setting with a unit (`GucFlags::UNIT_*`) says it in
     its range, "(milliseconds without a unit)", and one without does not;
  b. the SQLSTATEs of the error tables (#errors, but for the "PostgreSQL's
     own" table) with those src/pg/errors.rs reports (`Code::ERRCODE_*`,
     and the quoted SQLSTATEs of the registry's refusals) and those
     registry/snowflake_registry.sql raises (`ERRCODE = '...'`); the
     "Raised by the registry's SQL" table with the registry's alone; a
     condition name written after a SQLSTATE must be PostgreSQL's. And,
     since equal sets let a condition move to another SQLSTATE unseen,
     each condition's: a row's first cell names its conditions in a marker
     `<!-- ... -->` after the SQLSTATE they raise. In the extension's tables
     a condition is an arm of `Error::report` (errors.rs): `E::Variant`, or
     `E::Variant(Case)` where the arm gives several SQLSTATEs, by a case of
     its pattern, of a match on a kind or a SQLSTATE, or of an `if flag`
     (`flag`, `!flag`). In the tables of the registry's SQL and the portable
     edition a condition is a RAISE EXCEPTION (its message; P0001 without
     ERRCODE), named by a "fragment" of its message, which names every
     message that contains it. Every condition must be named, under the
     SQLSTATE the code gives it, and every name must be a condition; every
     variant of `enum Error` must have an arm read;
  c. the metrics table (#metrics) with monitoring/queries.yaml (a metric
     is `<query>_<column>` for every column that is not a LABEL or
     DISCARD, as prometheus-postgres-exporter names them), with each type;
     the alerts table (#alerts) with monitoring/alerts.yml, with severity;
  d. the functions table (#functions) with the CREATE FUNCTIONs of the
     generated install script sql/snowflake_id--<version>.sql (the newest):
     name and arguments (name, type, default), return type, volatility,
     PARALLEL UNSAFE;
  e. every relative link of README.md, CONTRIBUTING.md, CHANGELOG.md,
     docs/*.md and examples/README.md: the file must exist, and a
     `#anchor` must be a heading of the target page (GitHub's anchors:
     lowercase, punctuation but `-` and `_` dropped, spaces to `-`, a
     repeated heading gets `-1`, `-2`; or an explicit `<a name>`/`id`);
  f. README.md at most 200 lines, every docs/*.md at most 400;
  g. the portable edition (portable/snowflake_id_portable.sql): the
     SQLSTATEs it raises, and each RAISE's (b), with the table "Raised by
     the portable edition" (#errors); its functions in the first schema
     (not snowflake_portable.) with the list of #the-portable-edition, and
     each of them with the same name, arguments and return type as one of
     the extension's (it promises the extension's signatures).

Before the tree it tests itself: it runs on the tree with made-up
mismatches put in (a changed default, context and range, a changed range
check, an `expects()` unlike it, a unit dropped, an extra SQLSTATE on
each side, a condition moved to a SQLSTATE others still raise, a case of
one moved, the cases of an `if` swapped, a variant without an arm, a
condition in no row and a named one the code lacks, a RAISE moved in the
registry and in the portable edition, a RAISE in no row, a missing
metric, a renamed alert, a changed argument, a broken link and anchor, a
long page) and requires each to be reported, and checks its anchor rule
on made-up headings; so that it cannot pass by reading nothing. It also
fails when it finds nothing to compare in a source (a parser that no
longer understands the code).

  python3 tests/lint/docs.py               # the tree
  python3 tests/lint/docs.py --root DIR    # another copy of the tree
"""

import argparse
import fnmatch
import glob
import os
import re
import sys
import urllib.parse

README_MAX = 200
DOCS_MAX = 400
REFERENCE = "docs/reference.md"
SETTINGS_RS = "src/pg/settings.rs"
CONFIG_RS = "src/core/config.rs"
LAYOUT_RS = "src/core/layout.rs"
ERRORS_RS = "src/pg/errors.rs"
REGISTRY_SQL = "registry/snowflake_registry.sql"
PORTABLE_SQL = "portable/snowflake_id_portable.sql"
QUERIES = "monitoring/queries.yaml"
ALERTS = "monitoring/alerts.yml"


class Tree:
    """The files of a tree, with made-up contents laid over some (the
    self-test's mismatches): nothing is written anywhere."""

    def __init__(self, root, overrides=None):
        self.root = root
        self.over = dict(overrides or {})

    def path(self, rel):
        return os.path.join(self.root, rel)

    def read(self, rel):
        if rel in self.over:
            return self.over[rel]
        with open(self.path(rel), encoding="utf-8") as f:
            return f.read()

    def exists(self, rel):
        return rel in self.over or os.path.exists(self.path(rel))

    def isdir(self, rel):
        return os.path.isdir(self.path(rel))

    def glob(self, pattern):
        found = {os.path.relpath(p, self.root) for p in glob.glob(self.path(pattern))}
        found |= {k for k in self.over if fnmatch.fnmatch(k, pattern)}
        return sorted(found)

    def with_(self, **changes):
        over = dict(self.over)
        over.update(changes)
        return Tree(self.root, over)


class Problems(list):
    def add(self, file, text):
        self.append(f"{file}: {text}")


# ---------------------------------------------------------------- markdown

FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def blank_code_blocks(text):
    """The lines of a page with fenced code blocks blanked (line numbers
    kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1) == fence:
                fence = None
            out.append("")
        elif m:
            fence = m.group(1)
            out.append("")
        else:
            out.append(line)
    return out


HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def heading_text(raw):
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # links, images
    t = re.sub(r"<[^>]+>", "", t)  # html tags
    return t


def slug(raw):
    """GitHub's anchor of a heading."""
    t = heading_text(raw).lower()
    t = "".join(c for c in t if c.isalnum() or c in "-_ ")
    return t.replace(" ", "-")


def headings(text):
    """(level, raw text, line number) of each heading outside code."""
    out = []
    for i, line in enumerate(blank_code_blocks(text), 1):
        m = HEADING.match(line)
        if m:
            out.append((len(m.group(1)), m.group(2), i))
    return out


def anchors(text):
    seen, out = {}, set()
    for _, raw, _ in headings(text):
        s = slug(raw)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    for m in re.finditer(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", text):
        out.add(m.group(1).lower())
    for m in re.finditer(r"<[a-z][^>]*\bid\s*=\s*[\"']([^\"']+)[\"']", text):
        out.add(m.group(1).lower())
    return out


def section(text, anchor, exclude=()):
    """The lines of the section whose heading's anchor is `anchor`, up to
    the next heading of its level or above; subsections whose title
    contains one of `exclude` are left out. None when there is none."""
    lines = blank_code_blocks(text)
    hs = headings(text)
    for k, (level, raw, ln) in enumerate(hs):
        if slug(raw) != anchor:
            continue
        end = len(lines)
        for level2, _, ln2 in hs[k + 1:]:
            if level2 <= level:
                end = ln2 - 1
                break
        keep = lines[ln - 1:end]
        if exclude:
            out, skip_level = [], None
            for line in keep[1:]:
                m = HEADING.match(line)
                if m:
                    lv = len(m.group(1))
                    if skip_level is not None and lv <= skip_level:
                        skip_level = None
                    if skip_level is None and any(x in m.group(2) for x in exclude):
                        skip_level = lv
                if skip_level is None:
                    out.append(line)
            keep = keep[:1] + out
        return keep
    return None


def split_row(line):
    """The cells of a table row; a `|` inside backquotes or escaped is no
    separator."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    cells, cur, code = [], "", False
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur += s[i:i + 2]
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    cells.append(cur.strip())
    return cells


def tables(lines):
    """Each table of `lines`: (header cells, rows of cells)."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1]):
            header = [c.lower() for c in split_row(lines[i])]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(split_row(lines[i]))
                i += 1
            out.append((header, rows))
        else:
            i += 1
    return out


def spans(cell):
    return re.findall(r"`([^`]*)`", cell)


def doc_tables(text, anchor, first_header, exclude=()):
    """The rows of the tables under `anchor` whose first header cell is
    `first_header`; None when the section is missing."""
    lines = section(text, anchor, exclude)
    if lines is None:
        return None
    rows = []
    for header, body in tables(lines):
        if header and header[0] == first_header:
            rows += [dict(zip(header, r + [""] * (len(header) - len(r)))) for r in body]
    return rows


# ---------------------------------------------------------------- rust

RAW = re.compile(r'r(#*)"')
CHAR = re.compile(r"'(\\.|[^\\'])'")


def strip_rust_comments(src):
    """`src` without // and /* */ comments (strings and char literals kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and RAW.match(src, i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = RAW.match(src, i).group(1)
            j = src.find('"' + hashes, i + 2 + len(hashes))
            j = n if j < 0 else j + 1 + len(hashes)
            out.append(src[i:j])
            i = j
        elif literal_end(src, i) is not None:
            j = literal_end(src, i)
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def literal_end(src, i):
    """The index of the last character of the string or char literal that
    starts at `i`, or None when none does."""
    if src[i] == '"':
        i += 1
        while i < len(src) and src[i] != '"':
            i += 2 if src[i] == "\\" else 1
        return i
    if src[i] == "'" and CHAR.match(src, i):
        return CHAR.match(src, i).end() - 1
    return None


def balanced(src, open_at):
    """The text between the bracket at `open_at` and its match (strings
    and char literals skipped)."""
    depth, i, n = 0, open_at, len(src)
    while i < n:
        c = src[i]
        end = literal_end(src, i)
        if end is not None:
            i = end
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return src[open_at + 1:i]
        i += 1
    raise ValueError("unbalanced brackets")


def split_top(s, sep=","):
    """`s` split at `sep` outside brackets and quotes."""
    parts, cur, depth, q, i = [], "", 0, None, 0
    while i < len(s):
        c = s[i]
        if q:
            cur += c
            if c == "\\" and i + 1 < len(s):
                cur += s[i + 1]
                i += 1
            elif c == q:
                q = None
        elif c in "\"'":
            q = c
            cur += c
        elif c in "([{<" and not (c == "<" and s[i:i + 2] == "<<"):
            depth += 1
            cur += c
        elif c in ")]}>" and depth > 0:
            depth -= 1
            cur += c
        elif c == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        parts.append(cur.strip())
    return parts


WIDE = object()  # a bound that bounds nothing (i32::MIN, i32::MAX)


def rust_value(expr, consts, depth=0):
    e = expr.strip()
    if depth > 10:
        raise ValueError(f"constants nest too deep at {e}")
    m = re.fullmatch(r"Some\((.*)\)", e, re.S)
    if m:
        return rust_value(m.group(1), consts, depth + 1)
    if e == "None":
        return ""
    m = re.fullmatch(r'c?"((?:\\.|[^"\\])*)"', e, re.S)
    if m:
        return bytes(m.group(1), "utf-8").decode("unicode_escape")
    if e in ("true", "false"):
        return e == "true"
    if re.fullmatch(r"(i|u)(8|16|32|64|128|size)::(MIN|MAX)", e):
        return WIDE
    m = re.fullmatch(r"(-?)\s*([0-9][0-9_]*)(?:_?(?:i|u)(?:8|16|32|64|128|size))?", e)
    if m:
        return int(m.group(1) + m.group(2).replace("_", ""))
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", e) and e in consts:
        return rust_value(consts[e], consts, depth + 1)
    if re.fullmatch(r"[-+*/ ()0-9_A-Z]+", e):
        names = re.findall(r"[A-Z][A-Z0-9_]*", e)
        vals = {n: rust_value(n, consts, depth + 1) for n in names}
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vals.values()):
            expr2 = re.sub(r"[A-Z][A-Z0-9_]*", lambda m: str(vals[m.group(0)]), e).replace("_", "")
            return int(eval(expr2, {"__builtins__": {}}))  # digits and operators only
    raise ValueError(f"cannot evaluate {e!r}")


CONTEXTS = {
    "Postmaster": "postmaster", "Sighup": "sighup", "Suset": "superuser",
    "Userset": "user", "Backend": "backend", "SuBackend": "superuser-backend",
    "Internal": "internal",
}
UNITS_MS = {"ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}
UNIT_WORDS = {"ms": "milliseconds", "s": "seconds", "min": "minutes"}


def code_settings(tree, problems):
    """{name: {default, context, range, range_from, unit, kind}} from
    settings.rs; the range of a setting declared wide from the validation
    (`checked_ranges`). `expects()`, what the server says of a value it
    did not take, must give the same range."""
    raw = tree.read(SETTINGS_RS)
    src = strip_rust_comments(raw)
    consts = {m.group(1): m.group(2) for m in re.finditer(
        r"\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*[^=;]+=\s*(.+?);", src, re.S)}
    statics = {}
    for m in re.finditer(r"\bstatic\s+([A-Z][A-Z0-9_]*)\s*:\s*GucSetting\s*<", src):
        at = src.find("::new(", m.end())
        semi = src.find(";", m.end())
        if at < 0 or (0 <= semi < at):
            continue
        statics[m.group(1)] = balanced(src, at + len("::new"))
    expects = {}
    m = re.search(r"\bfn\s+expects\s*\(", src)
    if m:
        body = balanced(src, src.find("{", m.end()))
        for e in re.finditer(r'"(snowflake_id\.[a-z_]+)"\s*=>\s*"((?:\\.|[^"\\])*)"', body):
            expects[e.group(1)] = e.group(2)
    fields = settings_fields(src)
    checked = checked_ranges(tree, problems)
    out = {}
    for m in re.finditer(r"define_([a-z]+)_guc\s*\(", src):
        kind = m.group(1)
        try:
            args = split_top(balanced(src, m.end() - 1))
        except ValueError as e:
            problems.add(SETTINGS_RS, f"cannot read a define_{kind}_guc call: {e}")
            continue
        name = next((rust_value(a, consts) for a in args if re.match(r'c?"', a)), None)
        var = next((a.lstrip("&").strip() for a in args if a.startswith("&")), None)
        ctx = next((a for a in args if "GucContext::" in a), "")
        flags = next((a for a in args if "GucFlags" in a), "")
        if not name or not var or not ctx:
            problems.add(SETTINGS_RS, f"cannot read the define_{kind}_guc call {args[:1]}")
            continue
        unit = "ms" if "UNIT_MS" in flags else "s" if "UNIT_S" in flags else "min" if "UNIT_MIN" in flags else None
        try:
            default = rust_value(statics[var], consts) if var in statics else None
        except ValueError as e:
            problems.add(SETTINGS_RS, f"{name}: cannot read the default of {var}: {e}")
            default = None
        if var not in statics:
            problems.add(SETTINGS_RS, f"{name}: no `static {var}: GucSetting<..> = GucSetting::new(..)` found")
        rng, rng_from = None, SETTINGS_RS
        if kind in ("int", "float"):
            i_var = args.index(next(a for a in args if a.startswith("&")))
            i_ctx = args.index(ctx)
            bounds = args[i_var + 1:i_ctx]
            lo, hi = (rust_value(b, consts) for b in bounds) if len(bounds) == 2 else (WIDE, WIDE)
            e_lo = e_hi = None
            text = expects.get(name, "")
            em = re.search(r"\bfrom (.+?) to (.+?)(?: \(|,|$)", text) or re.search(r"\bfrom ([^\s,()]+)", text)
            if em:
                e_lo = norm_bound(em.group(1), unit)
                e_hi = norm_bound(em.group(2), unit) if em.lastindex == 2 else None
            field = next((f for f, v in fields.items() if v == var), None)
            if lo is WIDE and hi is WIDE:
                # Declared wide: the range is the start-up validation's.
                if field in checked:
                    lo, hi = (norm_bound(b, unit) for b in checked[field])
                    rng_from = f"{CONFIG_RS}'s validation"
                else:
                    problems.add(SETTINGS_RS, f"setting {name} is declared i32::MIN .. i32::MAX, and no check of its range "
                                 f"(Settings.{field or '?'}) was found in {CONFIG_RS} or {LAYOUT_RS}")
                    lo, hi = e_lo, e_hi
            else:
                lo = e_lo if lo is WIDE else norm_bound(str(lo), unit)
                hi = e_hi if hi is WIDE else norm_bound(str(hi), unit)
            rng = None if lo is None and hi is None else (lo, hi)
            if em and (e_lo, e_hi) != rng:
                problems.add(SETTINGS_RS, f"setting {name}: expects() says {text!r}, which reads {show_range((e_lo, e_hi))}, "
                             f"but the code checks {show_range(rng)}")
        cm = re.search(r"GucContext::(\w+)", ctx)
        out[name] = {
            "default": norm_default(default, unit),
            "context": CONTEXTS.get(cm.group(1), cm.group(1).lower()) if cm else "?",
            "range": rng,
            "range_from": rng_from,
            "unit": unit,
            "kind": kind,
        }
    return out


def settings_fields(src):
    """{field of `Settings`: the static it is read from} of the `Settings {
    .. }` that settings.rs hands to the validation."""
    out = {}
    m = re.search(r"\bSettings\s*\{", src)
    if m:
        for item in split_top(balanced(src, m.end() - 1)):
            f = re.match(r"(\w+)\s*:\s*(.*)", item, re.S)
            v = re.search(r"\b([A-Z][A-Z0-9_]*)\b", f.group(2)) if f else None
            if v:
                out[f.group(1)] = v.group(1)
    return out


def checked_ranges(tree, problems):
    """{field of `Settings`: (lo, hi) as text} as the start-up validation
    checks the settings declared wide: `Config::validate` (config.rs)
    hands fields to `IdLayout::new` (layout.rs), whose
    `(LO..=HI).contains(&param)` checks them (its constants evaluated);
    and its own `n if n >= LO && (n as ..) <= layout.max_node()` guard of
    a field it matches on (`max_node()` read as the mask of the field it
    masks: `2^node_bits - 1`)."""
    out = {}
    config = strip_rust_comments(tree.read(CONFIG_RS))
    layout = strip_rust_comments(tree.read(LAYOUT_RS))
    consts = {m.group(1): re.sub(r"\s+as\s+\w+", "", m.group(2)) for m in re.finditer(
        r"\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*[^=;]+=\s*(.+?);", layout, re.S)}
    m = re.search(r"\bfn\s+validate\s*\(", config)
    validate = balanced(config, config.find("{", m.end())) if m else ""
    m = re.search(r"\bimpl\s+IdLayout\s*\{", layout)
    impl = balanced(layout, m.end() - 1) if m else ""
    m = re.search(r"\bfn\s+new\s*\(([^)]*)\)", impl)
    if not validate or not m:
        problems.add(CONFIG_RS, f"no `fn validate` in {CONFIG_RS} or no `fn new` in {LAYOUT_RS}: the ranges of the settings declared wide are not read")
        return out
    params = [re.sub(r":.*", "", p).strip() for p in m.group(1).split(",") if p.strip()]
    new_body = balanced(impl, impl.find("{", m.end()))
    by_param = {}
    for r in re.finditer(r"\(\s*([^()]+?)\s*\.\.=\s*([^()]+?)\s*\)\s*\.contains\(\s*&(\w+)\s*\)", new_body):
        try:
            by_param[r.group(3)] = tuple(str(rust_value(re.sub(r"\s+as\s+\w+", "", b), consts)) for b in r.group(1, 2))
        except ValueError as e:
            problems.add(LAYOUT_RS, f"cannot evaluate the range of {r.group(3)} in IdLayout::new: {e}")
    call = re.search(r"\bIdLayout::new\s*\(", validate)
    if call:
        for param, arg in zip(params, split_top(balanced(validate, call.end() - 1))):
            f = re.search(r"\bsettings\.(\w+)", arg)
            if f and param in by_param:
                out[f.group(1)] = by_param[param]
    for mm in re.finditer(r"\bmatch\s+settings\.(\w+)\s*\{", validate):
        g = re.search(r"(\w+)\s+if\s+\1\s*>=\s*(-?[0-9]+)\s*&&\s*\(?\s*\1(?:\s+as\s+\w+)?\s*\)?\s*<=\s*layout\.(\w+)\(\)",
                      balanced(validate, mm.end() - 1))
        if not g:
            continue
        fm = re.search(r"\bfn\s+" + g.group(3) + r"\s*\([^)]*\)[^{]*\{\s*mask\(\s*self\.(\w+)\s*\)\s*\}", layout)
        if fm:
            out[mm.group(1)] = (g.group(2), f"2^{fm.group(1)} - 1")
        else:
            problems.add(LAYOUT_RS, f"cannot read layout.{g.group(3)}(), the upper bound of settings.{mm.group(1)}")
    if not out:
        problems.add(CONFIG_RS, "no range check of a setting found: the check reads nothing")
    return out


def norm_bound(text, unit):
    t = text.strip().strip("`'\"")
    if unit:
        m = re.fullmatch(r"(-?[0-9][0-9_]*)\s*([a-z]*)", t)
        if m and (m.group(2) in UNITS_MS or m.group(2) == ""):
            factor = UNITS_MS[m.group(2)] if m.group(2) else UNITS_MS[unit]
            return str(int(m.group(1).replace("_", "")) * factor)
    m = re.fullmatch(r"-?[0-9][0-9_]*", t)
    if m:
        return str(int(t.replace("_", "")))
    return re.sub(r"\s+", "", t)


def norm_default(value, unit):
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return norm_bound(str(value), unit)
    return value


def doc_default(cell, unit, kind):
    sp = spans(cell)
    if not sp:
        return None
    v = sp[0].strip()
    if v in ("''", '""'):
        return ""
    if kind == "bool":
        return {"true": "on", "false": "off"}.get(v.lower(), v.lower())
    if kind in ("int", "float"):
        return norm_bound(v, unit)
    return v


def doc_range(cell, unit):
    plain = cell.replace("`", "").strip()
    m = re.match(r"^(\S+) \.\. (.+?)\s*(?:[,;(]|$)", plain)
    if m:
        return (norm_bound(m.group(1), unit), norm_bound(m.group(2), unit))
    m = re.match(r"^(\S+) or more\b", plain)
    if m:
        return (norm_bound(m.group(1), unit), None)
    return None


def show_range(r):
    if r is None:
        return "none"
    return f"{r[0]} .. {r[1] if r[1] is not None else '(no upper bound)'}"


def check_settings(tree, problems):
    code = code_settings(tree, problems)
    if not code:
        problems.add(SETTINGS_RS, "no setting found (no define_*_guc call read): the check reads nothing")
        return
    rows = doc_tables(tree.read(REFERENCE), "settings", "setting")
    if rows is None:
        problems.add(REFERENCE, "no section #settings")
        return
    seen = set()
    for row in rows:
        sp = spans(row.get("setting", ""))
        if not sp:
            continue
        name = sp[0]
        seen.add(name)
        if name not in code:
            problems.add(REFERENCE, f"setting {name} is documented but {SETTINGS_RS} does not define it")
            continue
        c = code[name]
        d = doc_default(row.get("default", ""), c["unit"], c["kind"])
        if d != c["default"]:
            problems.add(REFERENCE, f"setting {name}: default {row.get('default')!r} reads {d!r}, {SETTINGS_RS} has {c['default']!r}")
        ctx = row.get("context", "").replace("`", "").strip().lower()
        if ctx != c["context"]:
            problems.add(REFERENCE, f"setting {name}: context {ctx!r}, {SETTINGS_RS} has {c['context']!r}")
        r = doc_range(row.get("range", ""), c["unit"])
        if r != c["range"]:
            problems.add(REFERENCE, f"setting {name}: range {row.get('range')!r} reads {show_range(r)}, {c['range_from']} gives {show_range(c['range'])}")
        # A bare number is read in the declared unit (GucFlags::UNIT_*).
        unit = UNIT_WORDS.get(c["unit"])
        said = re.search(r"\((\w+) without a unit\)", row.get("range", ""))
        if (said.group(1) if said else None) != unit:
            problems.add(REFERENCE, f"setting {name}: range {row.get('range')!r} " + (
                f"does not say ({unit} without a unit), the unit {SETTINGS_RS} declares" if unit
                else f"says ({said.group(1)} without a unit), but {SETTINGS_RS} declares no unit"))
    for name in sorted(set(code) - seen):
        problems.add(REFERENCE, f"setting {name} ({SETTINGS_RS}) is missing from the settings table")


# ---------------------------------------------------------------- SQLSTATEs

def errcodes():
    """{macro name without ERRCODE_: (SQLSTATE, condition name)} of
    PostgreSQL (errcodes.txt of 15 to 19; the SQLSTATEs never change)."""
    out = {}
    for item in ERRCODES.split():
        parts = item.split("=")
        code, name = parts[0], parts[1]
        cond = parts[2] if len(parts) > 2 else name.lower()
        out[name] = (code, cond)
    return out


def code_sqlstates(tree, problems):
    """{SQLSTATE: where} of errors.rs and the registry's SQL."""
    table = errcodes()
    known = {code for code, _ in table.values()}
    src = strip_rust_comments(tree.read(ERRORS_RS))
    ext = {}
    for m in re.finditer(r"\bERRCODE_([A-Z0-9_]+)", src):
        if m.group(1) not in table:
            problems.add(ERRORS_RS, f"ERRCODE_{m.group(1)} is not in PostgreSQL's errcodes (the table at the end of tests/lint/docs.py)")
            continue
        ext[table[m.group(1)][0]] = ERRORS_RS
    for m in re.finditer(r'"([0-9A-Z]{5})"', src):
        if m.group(1) in known and re.search(r"[0-9]", m.group(1)):
            ext[m.group(1)] = ERRORS_RS
    if not ext:
        problems.add(ERRORS_RS, "no SQLSTATE found: the check reads nothing")
    return ext, sql_sqlstates(tree, REGISTRY_SQL, problems)


def sql_sqlstates(tree, path, problems):
    """{SQLSTATE: path} that a SQL file raises (ERRCODE = '...')."""
    by_cond = {cond: code for code, cond in errcodes().values() if cond}
    sql = re.sub(r"--[^\n]*", "", tree.read(path))
    out = {}
    for m in re.finditer(r"(?:ERRCODE\s*=\s*|SQLSTATE\s+)'([^']+)'", sql, re.I):
        v = m.group(1)
        code = v if re.fullmatch(r"[0-9A-Z]{5}", v) else by_cond.get(v.lower())
        if code is None:
            problems.add(path, f"ERRCODE '{v}' is no SQLSTATE or condition name")
            continue
        out[code] = path
    if not out:
        problems.add(path, "no ERRCODE found: the check reads nothing")
    return out


def row_codes(cell, problems, table):
    """The SQLSTATEs in a first cell; a condition name after one must be
    PostgreSQL's name for it."""
    codes = set()
    conds = {code: cond for code, cond in table.values()}
    for m in re.finditer(r"`([0-9A-Z]{5})`(?:\s+([a-z][a-z0-9_]+))?", cell):
        codes.add(m.group(1))
        if m.group(2) and m.group(1) in conds and conds[m.group(1)] and m.group(2) != conds[m.group(1)]:
            problems.add(REFERENCE, f"SQLSTATE {m.group(1)} is written {m.group(2)}, PostgreSQL calls it {conds[m.group(1)]}")
    return codes


def check_sqlstates(tree, problems):
    ext, reg = code_sqlstates(tree, problems)
    table = errcodes()
    text = tree.read(REFERENCE)
    # The extension's tables (all but PostgreSQL's own and the registry
    # SQL's) against errors.rs alone, so that a code the registry's SQL
    # also raises cannot hide a change in errors.rs.
    rows = doc_tables(text, "errors", "sqlstate", exclude=("PostgreSQL's own", "registry's SQL", "portable edition"))
    if rows is None:
        problems.add(REFERENCE, "no section #errors")
        return
    doc = set()
    for row in rows:
        doc |= row_codes(row["sqlstate"], problems, table)
    for row in doc_tables(text, "errors", "sqlstate") or []:
        row_codes(row["sqlstate"], Problems(), table)
    for c in sorted(set(ext) - doc):
        problems.add(REFERENCE, f"SQLSTATE {c} ({ERRORS_RS}) is missing from the extension's error tables")
    for c in sorted(doc - set(ext)):
        problems.add(REFERENCE, f"SQLSTATE {c} is in the extension's error tables but {ERRORS_RS} does not raise it")
    for anchor, path, what, codes in (
            ("raised-by-the-registrys-sql", REGISTRY_SQL, "the registry's SQL", reg),
            ("raised-by-the-portable-edition", PORTABLE_SQL, "the portable edition", sql_sqlstates(tree, PORTABLE_SQL, problems))):
        sql_rows = doc_tables(text, anchor, "sqlstate")
        if sql_rows is None:
            problems.add(REFERENCE, f"no section #{anchor}")
            continue
        rdoc = set()
        for row in sql_rows:
            rdoc |= row_codes(row["sqlstate"], Problems(), table)
        for c in sorted(set(codes) - rdoc):
            problems.add(REFERENCE, f"SQLSTATE {c} ({path}) is missing from the table of {what}")
        for c in sorted(rdoc - set(codes)):
            problems.add(REFERENCE, f"SQLSTATE {c} is in the table of {what} but {path} does not raise it")


# ---------------------------------------------------------------- conditions

# A condition of errors.rs is an arm of `Error::report`'s match: `E::Variant`,
# or `E::Variant(Case)` where one variant gets several SQLSTATEs: a case of
# its pattern (`E::Generate(GenerateError::Lease(..))`: `Lease`), of a match
# inside its arm that picks the code (`ErrorKind::BadText => Code::...`:
# `BadText`; `"53400" => Code::...`: `53400`; `_`), or of an
# `if flag { Code::A } else { Code::B }` (`flag`, `!flag`).
MARKER = re.compile(r"<!--(.*?)-->", re.S)
KEY = re.compile(r"E::[A-Z]\w*(?:\([!A-Za-z0-9_]+\))?$")


def rust_items(body):
    """The top-level items of an enum's or a match's body: (start, text),
    split at commas and after blocks, outside brackets, strings and char
    literals."""
    body = re.sub(r"&'\w+\b", "&", body)  # lifetimes are no char literals
    items, depth, start, i, n = [], 0, 0, 0, len(body)
    while i < n:
        c = body[i]
        end = literal_end(body, i)
        if end is not None:
            i = end
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            # An arm whose body is a block ends at its brace (no comma
            # needed): the next item starts after it.
            if depth == 0 and c == "}" and re.match(r"\s*(?:,\s*)?E::", body[i + 1:]) and "=>" in body[start:i]:
                items.append((start, body[start:i + 1]))
                start = i + 1
        elif c == "," and depth == 0:
            items.append((start, body[start:i]))
            start = i + 1
        i += 1
    items.append((start, body[start:]))
    return [(s, t.strip().lstrip(",").strip()) for s, t in items if t.strip().strip(",").strip()]


def split_arm(arm):
    """(pattern, body) of a match arm: split at its first `=>` outside
    brackets."""
    depth = 0
    for i, c in enumerate(arm):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "=" and depth == 0 and arm[i:i + 2] == "=>":
            return arm[:i].strip(), arm[i + 2:].strip()
    return arm, ""


def code_cases(body):
    """{case: ERRCODE macro} of a match inside an arm whose arms each give
    a `Code::ERRCODE_*`, or of an `if flag { Code } else { Code }`; {}
    when there is none."""
    m = re.search(r"\bif\s+(!?\w+)\s*\{\s*Code::ERRCODE_(\w+)\s*\}\s*else\s*\{\s*Code::ERRCODE_(\w+)\s*\}", body)
    if m:
        flag = m.group(1).lstrip("!")
        yes, no = (m.group(2), m.group(3)) if not m.group(1).startswith("!") else (m.group(3), m.group(2))
        return {flag: yes, "!" + flag: no}
    for m in re.finditer(r"\bmatch\s+[^{;]+\{", body):
        arms = [split_arm(a) for a in split_top(balanced(body, m.end() - 1))]
        if not arms or not all(re.fullmatch(r"Code::ERRCODE_\w+", b) for _, b in arms):
            continue
        out = {}
        for pat, b in arms:
            for alt in split_top(pat, "|"):
                alt = alt.strip()
                lit = re.fullmatch(r'"([^"]*)"', alt)
                case = lit.group(1) if lit else "_" if alt == "_" else re.sub(r".*::", "", re.sub(r"[({].*", "", alt, flags=re.S)).strip()
                out[case] = b[len("Code::ERRCODE_"):]
        return out
    return {}


def code_conditions(tree, problems):
    """{key: SQLSTATE} of every condition `Error::report` (errors.rs)
    reports; every variant of `enum Error` must have one (a parser that
    misses an arm must not pass)."""
    table = errcodes()
    src = strip_rust_comments(tree.read(ERRORS_RS))
    m = re.search(r"\benum\s+Error\s*\{", src)
    variants = set()
    if m:
        for _, item in rust_items(balanced(src, m.end() - 1)):
            v = re.match(r"(?:#\[[^\]]*\]\s*)*([A-Z]\w*)", item)
            if v:
                variants.add(v.group(1))
    m = re.search(r"\bfn\s+report\s*\(\s*self\s*\)\s*->\s*Report\s*\{", src)
    body = balanced(src, m.end() - 1) if m else ""
    m = re.search(r"\bmatch\s+self\s*\{", body)
    if not variants or not m:
        problems.add(ERRORS_RS, "no `enum Error` or no `match self` in `fn report`: the check reads nothing")
        return {}
    out, delegated, armed = {}, {}, set()
    for _, arm in rust_items(balanced(body, m.end() - 1)):
        pat, arm_body = split_arm(arm)
        vm = re.match(r"E::([A-Z]\w*)", pat)
        if not vm or not arm_body:
            problems.add(ERRORS_RS, f"cannot read the arm {arm[:60]!r} of `fn report`")
            continue
        variant = vm.group(1)
        armed.add(variant)
        inner = pat[vm.end():]
        subs = sorted(set(re.findall(r"\b[A-Z]\w*::([A-Z]\w*)", inner))) or [None]
        keys = [f"E::{variant}" + (f"({s})" if s else "") for s in subs]
        codes = set(re.findall(r"\bCode::ERRCODE_(\w+)", arm_body))
        if not codes:
            d = re.search(r"\bE::([A-Z]\w*)", arm_body)
            if not d:
                problems.add(ERRORS_RS, f"{keys[0]}: no `Code::ERRCODE_*` and no other condition in its arm")
                continue
            for k in keys:
                delegated[k] = d.group(1)
            continue
        cases = code_cases(arm_body) if len(codes) > 1 else {}
        if len(codes) > 1 and (not cases or set(cases.values()) != codes or subs != [None]):
            problems.add(ERRORS_RS, f"{keys[0]}: its arm gives {', '.join(sorted(codes))} and this check cannot tell which case gets which")
            continue
        found = {f"E::{variant}({c})": macro for c, macro in cases.items()} if cases else {k: next(iter(codes)) for k in keys}
        for k, macro in found.items():
            if macro not in table:
                problems.add(ERRORS_RS, f"{k}: ERRCODE_{macro} is not in PostgreSQL's errcodes (the table at the end of tests/lint/docs.py)")
                continue
            if k in out and out[k] != table[macro][0]:
                problems.add(ERRORS_RS, f"{k} has two arms, with SQLSTATEs {out[k]} and {table[macro][0]}")
            out[k] = table[macro][0]
    for k, target in delegated.items():
        got = {v for key, v in out.items() if key == f"E::{target}" or key.startswith(f"E::{target}(")}
        if len(got) != 1:
            problems.add(ERRORS_RS, f"{k} reports as E::{target}, whose SQLSTATE this check cannot tell")
            continue
        out[k] = got.pop()
    for v in sorted(variants - armed):
        problems.add(ERRORS_RS, f"E::{v} of `enum Error` has no arm in `fn report` that this check reads")
    for v in sorted(armed - variants):
        problems.add(ERRORS_RS, f"`fn report` has an arm for E::{v}, which `enum Error` does not have")
    if not out:
        problems.add(ERRORS_RS, "no condition found in `fn report`: the check reads nothing")
    return out


def strip_sql_comments(sql):
    """`sql` without -- and /* */ comments (quoted text kept)."""
    out, i, n = [], 0, len(sql)
    while i < n:
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif sql[i] in "'\"":
            q, j = sql[i], i + 1
            while j < n and not (sql[j] == q and sql[j + 1:j + 2] != q):
                j += 2 if sql[j] == q else 1
            out.append(sql[i:j + 1])
            i = j + 1
        else:
            out.append(sql[i])
            i += 1
    return "".join(out)


def blank_sql_strings(sql):
    """`sql` with the text inside quotes blanked (same length), so that a
    word in a message is not read as code."""
    out, i, n = list(sql), 0, len(sql)
    while i < n:
        if sql[i] in "'\"":
            q, j = sql[i], i + 1
            while j < n and not (sql[j] == q and sql[j + 1:j + 2] != q):
                j += 2 if sql[j] == q else 1
            for k in range(i + 1, min(j, n)):
                if out[k] != "\n":
                    out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def statement_end(sql, at):
    """The index of the `;` that ends the statement going on at `at`
    (quoted text skipped)."""
    i, n = at, len(sql)
    while i < n:
        if sql[i] in "'\"":
            q, i = sql[i], i + 1
            while i < n and not (sql[i] == q and sql[i + 1:i + 2] != q):
                i += 2 if sql[i] == q else 1
        elif sql[i] == ";":
            return i
        i += 1
    return n


def sql_conditions(tree, path, problems):
    """{message: SQLSTATE} of the RAISE EXCEPTIONs of a SQL file: its
    message (a format string, `%` for each argument) is its key; one
    without ERRCODE raises P0001. RAISE of a lower level (WARNING, NOTICE)
    is no error, and a bare RAISE re-raises."""
    by_cond = {cond: code for code, cond in errcodes().values() if cond}
    sql = strip_sql_comments(tree.read(path))
    out = {}
    for m in re.finditer(r"\bRAISE\b\s*(\w*)\s*", blank_sql_strings(sql), re.I):
        level = m.group(1).upper()
        if level in ("", "DEBUG", "LOG", "INFO", "NOTICE", "WARNING") and (level or sql[m.end():m.end() + 1] == ";"):
            continue
        level = level or "EXCEPTION"  # RAISE 'text': an EXCEPTION
        stmt = sql[m.end():statement_end(sql, m.end())]
        msg = re.match(r"'((?:[^']|'')*)'", stmt)
        if level != "EXCEPTION" or not msg:
            problems.add(path, f"a RAISE this check cannot read: RAISE {level} {stmt[:60]!r}")
            continue
        text = msg.group(1).replace("''", "'")
        e = re.search(r"\bERRCODE\s*=\s*'([^']+)'", stmt[msg.end():], re.I)
        v = e.group(1) if e else "P0001"
        code = v if re.fullmatch(r"[0-9A-Z]{5}", v) else by_cond.get(v.lower())
        if code is None:
            problems.add(path, f"ERRCODE '{v}' of {text!r} is no SQLSTATE or condition name")
            continue
        if out.get(text, code) != code:
            problems.add(path, f"the message {text!r} is raised with SQLSTATEs {out[text]} and {code}")
        out[text] = code
    if not out:
        problems.add(path, "no RAISE EXCEPTION found: the check reads nothing")
    return out


def doc_conditions(text, anchor, problems, exclude=()):
    """[(item, SQLSTATE, first cell)] of the markers of the tables under
    `anchor`: a marker `<!-- ... -->` in a row's first cell names the
    conditions raised with the SQLSTATE written before it (errors.rs's
    keys, `E::Variant`; or, for SQL, "fragments" of messages); None when
    the section is missing."""
    rows = doc_tables(text, anchor, "sqlstate", exclude)
    if rows is None:
        return None
    out = []
    for row in rows:
        cell, code = row["sqlstate"], None
        for m in re.finditer(r"`([0-9A-Z]{5})`|<!--(.*?)-->", cell):
            if m.group(1):
                code = m.group(1)
                continue
            if code is None:
                problems.add(REFERENCE, f"#{anchor}: a marker before any SQLSTATE in {cell!r}")
                continue
            for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', m.group(2)):
                if not (quoted or bare):
                    problems.add(REFERENCE, f"#{anchor}: an empty \"fragment\" in {cell!r}")
                    continue
                out.append((bare or quoted, code, bool(bare)))
    return out


def compare_conditions(problems, where, source, code, marks, keyed):
    """The SQLSTATE of every condition of `code` ({key or message:
    SQLSTATE}) against the row that names it (`marks`): `keyed`, by its
    key (errors.rs); else by a fragment of its message, which names every
    message that contains it. A condition named in no row, or a name that
    is no condition, is a difference too."""
    covered = set()
    for item, doc_code, bare in marks:
        if bare != keyed or (keyed and not KEY.match(item)):
            problems.add(REFERENCE, f"{where}: marker item {item!r} under {doc_code} is not "
                         + ("a condition of errors.rs (E::Variant or E::Variant(Case))" if keyed else 'a "fragment" of a message'))
            continue
        hits = [k for k in code if (k == item if keyed else item in k)]
        if not hits:
            problems.add(REFERENCE, f"{where}: the condition {item!r} (under SQLSTATE {doc_code}) is not in {source}")
        for k in hits:
            covered.add(k)
            if code[k] != doc_code:
                problems.add(REFERENCE, f"{where}: {k if keyed else repr(k)} is documented under SQLSTATE {doc_code}, {source} raises it with {code[k]}")
    for k in sorted(set(code) - covered):
        problems.add(REFERENCE, f"{where}: {k if keyed else repr(k)} ({source}, SQLSTATE {code[k]}) is in no row: "
                     + ("add it to a marker" if keyed else 'add a "fragment" of its message to a marker') + " in the row of its SQLSTATE")


def check_conditions(tree, problems):
    text = tree.read(REFERENCE)
    for anchor, exclude, path, what, keyed in (
            ("errors", ("PostgreSQL's own", "registry's SQL", "portable edition"), ERRORS_RS, "the extension's error tables", True),
            ("raised-by-the-registrys-sql", (), REGISTRY_SQL, "the table of the registry's SQL", False),
            ("raised-by-the-portable-edition", (), PORTABLE_SQL, "the table of the portable edition", False)):
        marks = doc_conditions(text, anchor, problems, exclude)
        if marks is None:
            problems.add(REFERENCE, f"no section #{anchor}")
            continue
        code = code_conditions(tree, problems) if keyed else sql_conditions(tree, path, problems)
        compare_conditions(problems, what, path, code, marks, keyed)


# ---------------------------------------------------------------- metrics and alerts

def code_metrics(tree, problems):
    """{metric: type} of queries.yaml: <query>_<column> for each column
    whose usage is not LABEL or DISCARD."""
    out, query, col, in_metrics = {}, None, None, False
    for line in tree.read(QUERIES).split("\n"):
        s = re.sub(r"\s+#.*$", "", line) if not line.lstrip().startswith("#") else ""
        if not s.strip():
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):\s*$", s)
        if m:
            query, col, in_metrics = m.group(1), None, False
            continue
        if re.match(r"^\s+metrics:\s*$", s):
            in_metrics = True
            continue
        m = re.match(r"^\s+-\s+([A-Za-z_][A-Za-z0-9_]*):\s*$", s)
        if m and in_metrics and query:
            col = m.group(1)
            continue
        m = re.match(r"^\s+usage:\s*\"?([A-Z]+)\"?\s*$", s)
        if m and col:
            if m.group(1) not in ("LABEL", "DISCARD"):
                out[f"{query}_{col}"] = m.group(1).lower()
            col = None
            continue
        if re.match(r"^\s{2}[a-z_]+:", s) and not s.startswith("   "):
            in_metrics = s.strip().startswith("metrics:")
    if not out:
        problems.add(QUERIES, "no metric found: the check reads nothing")
    return out


def code_alerts(tree, problems):
    out, cur = {}, None
    for line in tree.read(ALERTS).split("\n"):
        m = re.match(r"^\s*-\s+alert:\s*\"?([A-Za-z0-9_]+)\"?\s*$", line)
        if m:
            cur = m.group(1)
            out[cur] = None
            continue
        m = re.match(r"^\s+severity:\s*\"?([a-z]+)\"?\s*$", line)
        if m and cur:
            out[cur] = m.group(1)
    if not out:
        problems.add(ALERTS, "no alert found: the check reads nothing")
    return out


def compare_table(problems, text, anchor, kind, attr, code, source, missing, unknown):
    """The table under `anchor` (first column `kind`, an `attr` column)
    against `code` ({name: attr value}, None where `source` gives none)."""
    rows = doc_tables(text, anchor, kind)
    if rows is None:
        problems.add(REFERENCE, f"no section #{anchor}")
        return
    doc = {}
    for row in rows:
        for name in spans(row[kind]):
            doc[name] = row.get(attr, "").strip().lower()
    for name in sorted(set(code) - set(doc)):
        problems.add(REFERENCE, f"{kind} {name} {missing}")
    for name in sorted(set(doc) - set(code)):
        problems.add(REFERENCE, f"{kind} {name} {unknown}")
    for name in sorted(set(doc) & set(code)):
        if code[name] and doc[name] != code[name]:
            problems.add(REFERENCE, f"{kind} {name}: {attr} {doc[name]!r}, {source} has {code[name]!r}")


def check_metrics(tree, problems):
    text = tree.read(REFERENCE)
    compare_table(problems, text, "metrics", "metric", "type", code_metrics(tree, problems), QUERIES,
                  f"({QUERIES}) is missing from the metrics table",
                  f"is in the metrics table but {QUERIES} does not serve it")
    compare_table(problems, text, "alerts", "alert", "severity", code_alerts(tree, problems), ALERTS,
                  f"({ALERTS}) is missing from the alerts table",
                  f"is in the alerts table but not in {ALERTS}")


# ---------------------------------------------------------------- functions

TYPES = {
    "integer": "int", "int4": "int", "int": "int", "bigint": "bigint", "int8": "bigint",
    "smallint": "smallint", "int2": "smallint", "text": "text", "bool": "bool", "boolean": "bool",
    "timestamp with time zone": "timestamptz", "timestamptz": "timestamptz",
    "timestamp without time zone": "timestamp", "timestamp": "timestamp",
    "interval": "interval", "regclass": "regclass", "name": "name", "numeric": "numeric",
    "double precision": "float8", "float8": "float8", "real": "float4", "jsonb": "jsonb",
    "json": "json", "bytea": "bytea", "uuid": "uuid", "date": "date", "void": "void",
}


def norm_type(t):
    t = re.sub(r"\s+", " ", t.strip().strip('"').lower())
    if t.startswith("setof "):
        return "setof " + norm_type(t[6:])
    if t.endswith("[]"):
        return norm_type(t[:-2]) + "[]"
    if re.match(r"table\s*\(", t) or t == "table":
        return "table"
    return TYPES.get(t, t)


def norm_arg(a):
    a = re.sub(r"/\*.*?\*/", "", a, flags=re.S).strip()
    default = None
    m = re.match(r"(.*?)\s+(?:DEFAULT|=)\s+(.+)$", a, re.I | re.S)
    if m:
        a, default = m.group(1).strip(), m.group(2).strip().lower()
    words = a.replace('"', "").split()
    if words and words[0].lower() in ("in", "inout", "variadic"):
        words = words[1:]
    if len(words) >= 2 and " ".join(words).lower() not in TYPES:
        name, typ = words[0], " ".join(words[1:])
    else:
        name, typ = "", " ".join(words)
    out = f"{name} {norm_type(typ)}".strip()
    return out + (f" default {default}" if default is not None else "")


def signature(name, args):
    return f"{name}({', '.join(norm_arg(a) for a in split_top(args) if a.strip())})"


def install_script(tree):
    scripts = [p for p in tree.glob("sql/snowflake_id--*.sql") if not re.search(r"--[^/]*--", p)]
    def version(p):
        m = re.search(r"--([0-9.]+)\.sql$", p)
        return tuple(int(x) for x in m.group(1).split(".")) if m else ()
    return max(scripts, key=version) if scripts else None


def code_functions(tree, problems, path=None, public_only=False):
    """{signature: {returns, volatility, parallel}} of the CREATE FUNCTIONs
    of the newest install script (or of `path`; `public_only`: only those
    created without a schema). OUT arguments are left out of a signature,
    as PostgreSQL does."""
    path = path or install_script(tree)
    if not path:
        problems.add("sql/", "no install script sql/snowflake_id--<version>.sql")
        return None, {}
    sql = re.sub(r"--[^\n]*", "", tree.read(path))
    out = {}
    for m in re.finditer(r'CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+("?\w+"?\.)?"?(\w+)"?\s*\(', sql, re.I):
        if public_only and m.group(1):
            continue
        args = ", ".join(a for a in split_top(balanced(sql, m.end() - 1))
                         if not re.match(r"\s*OUT\s", a, re.I))
        args_len = len(balanced(sql, m.end() - 1))
        rest = sql[m.end() + args_len:]
        stop = re.search(r"\bAS\b|;", rest)
        clause = re.sub(r"/\*.*?\*/", "", rest[:stop.start() if stop else len(rest)], flags=re.S)
        rm = re.search(r"RETURNS\s+(SETOF\s+\S+|TABLE\s*\(|[\w\[\] ]+?)\s*(?:\n|STRICT|IMMUTABLE|STABLE|VOLATILE|LANGUAGE|PARALLEL|$)", clause, re.I)
        vol = re.search(r"\b(IMMUTABLE|STABLE|VOLATILE)\b", clause, re.I)
        par = re.search(r"\bPARALLEL\s+(SAFE|UNSAFE|RESTRICTED)\b", clause, re.I)
        if re.search(r"RETURNS\s+TABLE\s*\(", clause, re.I):
            returns = norm_type("TABLE(")
        else:
            returns = norm_type(rm.group(1)) if rm else "?"
        out[signature(m.group(2), args)] = {
            "returns": returns,
            "volatility": vol.group(1).upper() if vol else "VOLATILE",
            "parallel": par.group(1).upper() if par else "UNSAFE",
        }
    if not out:
        problems.add(path, "no CREATE FUNCTION found: the check reads nothing")
    return path, out


def check_functions(tree, problems):
    path, code = code_functions(tree, problems)
    rows = doc_tables(tree.read(REFERENCE), "functions", "function")
    if rows is None:
        problems.add(REFERENCE, "no section #functions")
        return
    doc = {}
    for row in rows:
        for sp in spans(row["function"]):
            m = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", sp, re.S)
            if m:
                doc[signature(m.group(1), m.group(2))] = row
    for sig in sorted(set(code) - set(doc)):
        problems.add(REFERENCE, f"function {sig} ({path}) is missing from the functions table")
    for sig in sorted(set(doc) - set(code)):
        problems.add(REFERENCE, f"function {sig} is in the functions table but not in {path}")
    for sig in sorted(set(doc) & set(code)):
        row, c = doc[sig], code[sig]
        vol = re.findall(r"\b(IMMUTABLE|STABLE|VOLATILE)\b", row.get("volatility", ""))
        if vol != [c["volatility"]]:
            problems.add(REFERENCE, f"function {sig}: volatility {row.get('volatility')!r}, {path} has {c['volatility']}")
        unsafe = "PARALLEL UNSAFE" in row.get("volatility", "")
        if unsafe != (c["parallel"] == "UNSAFE"):
            problems.add(REFERENCE, f"function {sig}: {path} has PARALLEL {c['parallel']}, the table says {'PARALLEL UNSAFE' if unsafe else 'nothing (PARALLEL SAFE)'}")
        ret = spans(row.get("returns", ""))
        if ret and norm_type(ret[0]) != c["returns"]:
            problems.add(REFERENCE, f"function {sig}: returns {ret[0]!r}, {path} has {c['returns']}")


def check_portable_functions(tree, problems):
    """The portable edition's functions: each the extension's namesake
    (name, arguments, return type), and listed in #the-portable-edition."""
    _, ext = code_functions(tree, Problems())
    _, port = code_functions(tree, problems, PORTABLE_SQL, public_only=True)
    for sig in sorted(set(port) - set(ext)):
        problems.add(PORTABLE_SQL, f"function {sig} has no namesake among the extension's")
    for sig in sorted(set(port) & set(ext)):
        if port[sig]["returns"] != ext[sig]["returns"]:
            problems.add(PORTABLE_SQL, f"function {sig} returns {port[sig]['returns']}, the extension's {ext[sig]['returns']}")
    sec = section(tree.read(REFERENCE), "the-portable-edition")
    if sec is None:
        problems.add(REFERENCE, "no section #the-portable-edition")
        return
    listed = set(re.findall(r"`(snowflake_\w+)\(", "\n".join(sec)))
    names = {sig.split("(")[0] for sig in port}
    for n in sorted(names - listed):
        problems.add(REFERENCE, f"the portable edition's function {n} is not listed in #the-portable-edition")
    for n in sorted(listed - names):
        problems.add(REFERENCE, f"#the-portable-edition lists {n}, which {PORTABLE_SQL} does not create")


# ---------------------------------------------------------------- links and lengths

def pages(tree):
    out = [p for p in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "examples/README.md") if tree.exists(p)]
    return out + tree.glob("docs/*.md")


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\"']*[\"'])?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"<(?:a|img)\s[^>]*\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.I)


def check_links(tree, problems):
    cache = {}

    def anchors_of(rel):
        if rel not in cache:
            cache[rel] = anchors(tree.read(rel))
        return cache[rel]

    for page in pages(tree):
        text = tree.read(page)
        for ln, line in enumerate(blank_code_blocks(text), 1):
            line = re.sub(r"(`+)(?:(?!\1).)+\1", "", line)  # code spans
            targets = [m.group(1) for m in LINK.finditer(line)] + [m.group(1) for m in HREF.finditer(line)]
            m = REFDEF.match(line)
            if m:
                targets.append(m.group(1))
            for t in targets:
                if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) or t.startswith("//"):
                    continue
                path, _, anchor = t.partition("#")
                path = urllib.parse.unquote(path)
                if path.startswith("/"):
                    rel = os.path.normpath(path.lstrip("/"))
                elif path:
                    rel = os.path.normpath(os.path.join(os.path.dirname(page), path))
                else:
                    rel = page
                if rel.startswith(".."):
                    problems.add(page, f"line {ln}: link {t} leaves the repository")
                    continue
                if not (tree.exists(rel) or tree.isdir(rel)):
                    problems.add(page, f"line {ln}: link {t}: no file {rel}")
                    continue
                if anchor and rel.endswith(".md") and not tree.isdir(rel):
                    a = urllib.parse.unquote(anchor).lower()
                    if a not in anchors_of(rel):
                        problems.add(page, f"line {ln}: link {t}: {rel} has no heading #{anchor}")


def check_lengths(tree, problems):
    for page in pages(tree):
        limit = README_MAX if page == "README.md" else DOCS_MAX if page.startswith("docs/") else None
        if limit is None:
            continue
        n = len(tree.read(page).rstrip("\n").split("\n"))
        if n > limit:
            problems.add(page, f"{n} lines, over {limit}")


# ---------------------------------------------------------------- the run

CHECKS = (check_settings, check_sqlstates, check_conditions, check_metrics, check_functions, check_portable_functions, check_links,
          check_lengths)


def run(tree):
    problems = Problems()
    for check in CHECKS:
        try:
            check(tree, problems)
        except (OSError, ValueError, KeyError) as e:
            problems.add(check.__name__, f"could not run: {e!r}")
    return problems


def replace_once(text, pattern, repl, what):
    new, n = re.subn(pattern, repl, text, count=1, flags=re.M)
    if n != 1:
        raise SelfTestError(f"cannot make the mismatch '{what}': /{pattern}/ not found")
    return new


class SelfTestError(Exception):
    pass


def self_test(tree):
    """Made-up mismatches, each of which must be reported; and the anchor
    rule on made-up headings."""
    failures = []
    made_up = "# A\n## `snowflake_stats()`\n## Synchronous lease (`snowflake_id.lease_sync`)\n## A\n## A\n## What's new? 1.0!\n<a name=\"Kept\"></a>\n```\n# not a heading\n```\n"
    want = {"a", "snowflake_stats", "synchronous-lease-snowflake_idlease_sync", "a-1", "a-2", "whats-new-10", "kept"}
    if anchors(made_up) != want:
        failures.append(f"anchors of made-up headings: {sorted(anchors(made_up))}, want {sorted(want)}")
    base = set(run(tree))
    settings = tree.read(SETTINGS_RS)
    errors = tree.read(ERRORS_RS)
    reference = tree.read(REFERENCE)
    script = install_script(tree) or "sql/none.sql"
    cases = []

    def case(what, expect, **files):
        cases.append((what, expect, files))

    try:
        m = re.search(r"static\s+([A-Z_]+)\s*:\s*GucSetting<i32>\s*=\s*GucSetting::<i32>::new\((-?[0-9][0-9_]*)\)", settings)
        if not m:
            raise SelfTestError("no integer setting with a literal default in settings.rs")
        name = re.search(r'define_int_guc\(\s*c"([^"]+)"[^;]*?&' + m.group(1) + r"\b", settings, re.S)
        target = name.group(1) if name else m.group(1)
        case("a changed default", f"setting {target}: default",
             **{SETTINGS_RS: settings.replace(m.group(0), m.group(0)[:-len(m.group(2)) - 1] + str(int(m.group(2).replace('_', '')) + 1) + ")", 1)})
        case("a changed context", ": context",
             **{SETTINGS_RS: replace_once(settings, r"GucContext::Sighup", "GucContext::Suset", "context")})
        case("a changed range", ": range",
             **{SETTINGS_RS: replace_once(settings, r"\b3_600_000\b", "7_200_000", "range")})
        case("a unit dropped", "setting snowflake_id.max_clock_offset: range '`0 .. 1h` (milliseconds without a unit)' says",
             **{SETTINGS_RS: replace_once(settings, r"(c\"snowflake_id\.max_clock_offset\"[^;]*?)GucFlags::UNIT_MS", r"\1GucFlags::default()", "unit")})
        case("a setting only in the docs", "is documented but",
             **{REFERENCE: replace_once(reference, r"^(\| `snowflake_id\.node_bits` .*)$", r"\1\n| `snowflake_id.made_up` | `1` | `0 .. 1` | sighup | made up |", "extra setting")})
        case("an extra SQLSTATE in the code", "SQLSTATE 53100",
             **{ERRORS_RS: replace_once(errors, r"Code::ERRCODE_INTERNAL_ERROR", "Code::ERRCODE_DISK_FULL", "extra SQLSTATE")})
        case("an extra SQLSTATE in the docs", "SQLSTATE 57014",
             **{REFERENCE: replace_once(reference, r"^(\| `58000` .*)$", r"\1\n| `57014` query_canceled | made up |", "extra documented SQLSTATE")})
        case("a SQLSTATE of the registry changed", "SQLSTATE 53300",
             **{REGISTRY_SQL: replace_once(tree.read(REGISTRY_SQL), r"ERRCODE = '53400'", "ERRCODE = '53300'", "registry SQLSTATE")})
        case("a SQLSTATE of the portable edition changed", "SQLSTATE 25001",
             **{PORTABLE_SQL: replace_once(tree.read(PORTABLE_SQL), r"ERRCODE = '25006'", "ERRCODE = '25001'", "portable SQLSTATE")})
        # One condition moved to a SQLSTATE that others still raise: the
        # sets of SQLSTATEs stay the same, only the conditions' check sees it.
        arm = re.search(r"E::([A-Z]\w*) => report\(\s*Code::ERRCODE_(?!OBJECT_NOT_IN_PREREQUISITE_STATE\b)\w+", errors)
        if not arm:
            raise SelfTestError("no arm `E::Variant => report(Code::..` in errors.rs")
        case("a condition moved to another SQLSTATE", f"E::{arm.group(1)} is documented under SQLSTATE",
             **{ERRORS_RS: errors.replace(arm.group(0), re.sub(r"ERRCODE_\w+$", "ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE", arm.group(0)), 1)})
        case("a case of a condition moved", "E::TextForm(BadText) is documented under SQLSTATE 22P02",
             **{ERRORS_RS: replace_once(errors, r"(ErrorKind::BadText => Code::)ERRCODE_\w+", r"\1ERRCODE_INVALID_PARAMETER_VALUE", "moved case")})
        case("the cases of an `if` swapped", "E::RegistryGrantEnded(lost) is documented under SQLSTATE 55000",
             **{ERRORS_RS: replace_once(errors, r"\bif lost \{(\s*Code::)", r"if !lost {\1", "swapped if")})
        case("a variant without an arm read", "E::MadeUp of `enum Error`",
             **{ERRORS_RS: replace_once(errors, r"pub enum Error \{", "pub enum Error {\n    MadeUp,", "new variant")})
        case("a condition in no row", "E::ClockSteppedBack (src/pg/errors.rs, SQLSTATE 01000) is in no row",
             **{REFERENCE: replace_once(reference, r"\s*<!-- E::ClockSteppedBack -->", "", "unmarked condition")})
        case("a documented condition that is not in the code", "the condition 'E::MadeUp' (under SQLSTATE 01000)",
             **{REFERENCE: replace_once(reference, r"<!-- E::ClockSteppedBack -->", "<!-- E::ClockSteppedBack E::MadeUp -->", "made-up condition")})
        case("a RAISE of the registry moved", "'snowflake_registry: the rows of node_ids are never deleted' is documented under SQLSTATE 55000",
             **{REGISTRY_SQL: replace_once(tree.read(REGISTRY_SQL), r"(never deleted'\s*USING ERRCODE = ')55000'", r"\g<1>22023'", "moved RAISE")})
        case("a RAISE of the portable edition moved", "'snowflake_id: the epoch is infinite' is documented under SQLSTATE 22008",
             **{PORTABLE_SQL: replace_once(tree.read(PORTABLE_SQL), r"(the epoch is infinite' USING ERRCODE = ')22008'", r"\g<1>22003'", "moved portable RAISE")})
        case("a RAISE in no row", "'snowflake_registry: made up' (registry/snowflake_registry.sql, SQLSTATE 55000) is in no row",
             **{REGISTRY_SQL: tree.read(REGISTRY_SQL) + "\nDO $$ BEGIN RAISE EXCEPTION 'snowflake_registry: made up' USING ERRCODE = '55000'; END $$;\n"})
        case("a changed range check", "setting snowflake_id.node_bits: range",
             **{LAYOUT_RS: replace_once(tree.read(LAYOUT_RS), r"(const MIN_TIME_BITS: u32 = )35;", r"\g<1>36;", "range check")})
        case("expects() unlike the check", "setting snowflake_id.sequence_bits: expects() says",
             **{SETTINGS_RS: replace_once(settings, r'"an integer from 1 to 28\b', '"an integer from 1 to 29', "expects")})
        case("a portable function unlike the extension's", "function snowflake_node(id bigint, epoch text, node_bits bigint",
             **{PORTABLE_SQL: replace_once(tree.read(PORTABLE_SQL), r"FUNCTION snowflake_node\(id bigint, epoch text, node_bits int",
                                           "FUNCTION snowflake_node(id bigint, epoch text, node_bits bigint", "portable argument")})
        documented = {n for r in doc_tables(reference, "metrics", "metric") or [] for n in spans(r["metric"])}
        metric = next((n for n in sorted(code_metrics(tree, Problems())) if n in documented), None)
        if metric is None:
            raise SelfTestError("no metric both in queries.yaml and in the metrics table")
        case("a missing metric", f"metric {metric} ",
             **{REFERENCE: replace_once(reference, r"^\|[^\n]*`" + re.escape(metric) + r"`[^\n]*\n", "", "missing metric")})
        case("a metric added to queries.yaml", "metric snowflake_id_made_up",
             **{QUERIES: tree.read(QUERIES) + "\nsnowflake_id_made:\n  query: SELECT 1 AS up\n  metrics:\n    - up:\n        usage: \"GAUGE\"\n        description: \"made up\"\n"})
        case("a renamed alert", "alert SnowflakeMadeUp",
             **{ALERTS: replace_once(tree.read(ALERTS), r"alert: SnowflakeDriftErrors", "alert: SnowflakeMadeUp", "alert")})
        case("a changed argument", "function snowflake_next_batch(n bigint)",
             **{script: replace_once(tree.read(script), r'"snowflake_next_batch"\(\s*"n" INT', '"snowflake_next_batch"(\n\t"n" bigint', "argument")})
        case("a broken anchor", "has no heading #no-such-heading",
             **{REFERENCE: reference + "\nSee [nothing](#no-such-heading).\n"})
        case("a link to no file", "no file docs/no-such-page.md",
             **{REFERENCE: reference + "\nSee [nothing](no-such-page.md).\n"})
        case("a page too long", "lines, over 400",
             **{REFERENCE: reference + "\n" * 401 + "end\n"})
    except SelfTestError as e:
        failures.append(str(e))
    for what, expect, files in cases:
        new = set(run(tree.with_(**files))) - base
        if not any(expect in p for p in new):
            failures.append(f"{what}: not reported (wanted a line with {expect!r}; new lines: {sorted(new) or 'none'})")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")),
                        help="the tree to check (default: this script's repository)")
    parser.add_argument("--no-self-test", action="store_true", help="skip the self-test")
    args = parser.parse_args()
    tree = Tree(os.path.abspath(args.root))
    if not args.no_self_test:
        failures = self_test(tree)
        if failures:
            print("docs: the self-test failed: the check does not report what it should")
            for f in failures:
                print(f"  {f}")
            return 1
    problems = run(tree)
    for p in problems:
        print(p)
    print(f"docs: {len(pages(tree))} pages and {REFERENCE}'s tables checked against the code, {len(problems)} differences")
    return 1 if problems else 0


# PostgreSQL's SQLSTATEs (errcodes.txt of 15 and 19): SQLSTATE=MACRO (without
# ERRCODE_)[=condition name, where it is not the macro in lower case].
ERRCODES = """
00000=SUCCESSFUL_COMPLETION 01000=WARNING
01003=WARNING_NULL_VALUE_ELIMINATED_IN_SET_FUNCTION=null_value_eliminated_in_set_function
01004=WARNING_STRING_DATA_RIGHT_TRUNCATION=string_data_right_truncation
01006=WARNING_PRIVILEGE_NOT_REVOKED=privilege_not_revoked
01007=WARNING_PRIVILEGE_NOT_GRANTED=privilege_not_granted
01008=WARNING_IMPLICIT_ZERO_BIT_PADDING=implicit_zero_bit_padding
0100C=WARNING_DYNAMIC_RESULT_SETS_RETURNED=dynamic_result_sets_returned
01P01=WARNING_DEPRECATED_FEATURE=deprecated_feature 02000=NO_DATA
02001=NO_ADDITIONAL_DYNAMIC_RESULT_SETS_RETURNED
03000=SQL_STATEMENT_NOT_YET_COMPLETE 08000=CONNECTION_EXCEPTION
08001=SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION
08003=CONNECTION_DOES_NOT_EXIST
08004=SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION
08006=CONNECTION_FAILURE 08007=TRANSACTION_RESOLUTION_UNKNOWN
08P01=PROTOCOL_VIOLATION 09000=TRIGGERED_ACTION_EXCEPTION
0A000=FEATURE_NOT_SUPPORTED 0B000=INVALID_TRANSACTION_INITIATION
0F000=LOCATOR_EXCEPTION
0F001=L_E_INVALID_SPECIFICATION=invalid_locator_specification
0L000=INVALID_GRANTOR 0LP01=INVALID_GRANT_OPERATION
0P000=INVALID_ROLE_SPECIFICATION 0Z000=DIAGNOSTICS_EXCEPTION
0Z002=STACKED_DIAGNOSTICS_ACCESSED_WITHOUT_ACTIVE_HANDLER
10608=INVALID_ARGUMENT_FOR_XQUERY 20000=CASE_NOT_FOUND
21000=CARDINALITY_VIOLATION 22000=DATA_EXCEPTION
22001=STRING_DATA_RIGHT_TRUNCATION 22002=NULL_VALUE_NO_INDICATOR_PARAMETER
22003=NUMERIC_VALUE_OUT_OF_RANGE 22004=NULL_VALUE_NOT_ALLOWED
22005=ERROR_IN_ASSIGNMENT 22007=INVALID_DATETIME_FORMAT
22008=DATETIME_FIELD_OVERFLOW 22008=DATETIME_VALUE_OUT_OF_RANGE=
22009=INVALID_TIME_ZONE_DISPLACEMENT_VALUE 2200B=ESCAPE_CHARACTER_CONFLICT
2200C=INVALID_USE_OF_ESCAPE_CHARACTER 2200D=INVALID_ESCAPE_OCTET
2200F=ZERO_LENGTH_CHARACTER_STRING 2200G=MOST_SPECIFIC_TYPE_MISMATCH
2200H=SEQUENCE_GENERATOR_LIMIT_EXCEEDED 2200L=NOT_AN_XML_DOCUMENT
2200M=INVALID_XML_DOCUMENT 2200N=INVALID_XML_CONTENT
2200S=INVALID_XML_COMMENT 2200T=INVALID_XML_PROCESSING_INSTRUCTION
22010=INVALID_INDICATOR_PARAMETER_VALUE 22011=SUBSTRING_ERROR
22012=DIVISION_BY_ZERO 22013=INVALID_PRECEDING_OR_FOLLOWING_SIZE
22014=INVALID_ARGUMENT_FOR_NTILE=invalid_argument_for_ntile_function
22015=INTERVAL_FIELD_OVERFLOW
22016=INVALID_ARGUMENT_FOR_NTH_VALUE=invalid_argument_for_nth_value_function
22018=INVALID_CHARACTER_VALUE_FOR_CAST 22019=INVALID_ESCAPE_CHARACTER
2201B=INVALID_REGULAR_EXPRESSION
2201E=INVALID_ARGUMENT_FOR_LOG=invalid_argument_for_logarithm
2201F=INVALID_ARGUMENT_FOR_POWER_FUNCTION
2201G=INVALID_ARGUMENT_FOR_WIDTH_BUCKET_FUNCTION
2201W=INVALID_ROW_COUNT_IN_LIMIT_CLAUSE
2201X=INVALID_ROW_COUNT_IN_RESULT_OFFSET_CLAUSE
22021=CHARACTER_NOT_IN_REPERTOIRE 22022=INDICATOR_OVERFLOW
22023=INVALID_PARAMETER_VALUE 22024=UNTERMINATED_C_STRING
22025=INVALID_ESCAPE_SEQUENCE 22026=STRING_DATA_LENGTH_MISMATCH
22027=TRIM_ERROR 2202E=ARRAY_ELEMENT_ERROR= 2202E=ARRAY_SUBSCRIPT_ERROR
2202G=INVALID_TABLESAMPLE_REPEAT 2202H=INVALID_TABLESAMPLE_ARGUMENT
22030=DUPLICATE_JSON_OBJECT_KEY_VALUE
22031=INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION
22032=INVALID_JSON_TEXT 22033=INVALID_SQL_JSON_SUBSCRIPT
22034=MORE_THAN_ONE_SQL_JSON_ITEM 22035=NO_SQL_JSON_ITEM
22036=NON_NUMERIC_SQL_JSON_ITEM 22037=NON_UNIQUE_KEYS_IN_A_JSON_OBJECT
22038=SINGLETON_SQL_JSON_ITEM_REQUIRED 22039=SQL_JSON_ARRAY_NOT_FOUND
2203A=SQL_JSON_MEMBER_NOT_FOUND 2203B=SQL_JSON_NUMBER_NOT_FOUND
2203C=SQL_JSON_OBJECT_NOT_FOUND 2203D=TOO_MANY_JSON_ARRAY_ELEMENTS
2203E=TOO_MANY_JSON_OBJECT_MEMBERS 2203F=SQL_JSON_SCALAR_REQUIRED
2203G=SQL_JSON_ITEM_CANNOT_BE_CAST_TO_TARGET_TYPE
22P01=FLOATING_POINT_EXCEPTION 22P02=INVALID_TEXT_REPRESENTATION
22P03=INVALID_BINARY_REPRESENTATION 22P04=BAD_COPY_FILE_FORMAT
22P05=UNTRANSLATABLE_CHARACTER 22P06=NONSTANDARD_USE_OF_ESCAPE_CHARACTER
22P07=DATUM_VERSION_MISMATCH 23000=INTEGRITY_CONSTRAINT_VIOLATION
23001=RESTRICT_VIOLATION 23502=NOT_NULL_VIOLATION
23503=FOREIGN_KEY_VIOLATION 23505=UNIQUE_VIOLATION 23514=CHECK_VIOLATION
23P01=EXCLUSION_VIOLATION 24000=INVALID_CURSOR_STATE
25000=INVALID_TRANSACTION_STATE 25001=ACTIVE_SQL_TRANSACTION
25002=BRANCH_TRANSACTION_ALREADY_ACTIVE
25003=INAPPROPRIATE_ACCESS_MODE_FOR_BRANCH_TRANSACTION
25004=INAPPROPRIATE_ISOLATION_LEVEL_FOR_BRANCH_TRANSACTION
25005=NO_ACTIVE_SQL_TRANSACTION_FOR_BRANCH_TRANSACTION
25006=READ_ONLY_SQL_TRANSACTION
25007=SCHEMA_AND_DATA_STATEMENT_MIXING_NOT_SUPPORTED
25008=HELD_CURSOR_REQUIRES_SAME_ISOLATION_LEVEL
25P01=NO_ACTIVE_SQL_TRANSACTION 25P02=IN_FAILED_SQL_TRANSACTION
25P03=IDLE_IN_TRANSACTION_SESSION_TIMEOUT 25P04=TRANSACTION_TIMEOUT
26000=INVALID_SQL_STATEMENT_NAME 26000=UNDEFINED_PSTATEMENT=
27000=TRIGGERED_DATA_CHANGE_VIOLATION
28000=INVALID_AUTHORIZATION_SPECIFICATION 28P01=INVALID_PASSWORD
2B000=DEPENDENT_PRIVILEGE_DESCRIPTORS_STILL_EXIST
2BP01=DEPENDENT_OBJECTS_STILL_EXIST 2D000=INVALID_TRANSACTION_TERMINATION
2F000=SQL_ROUTINE_EXCEPTION
2F002=S_R_E_MODIFYING_SQL_DATA_NOT_PERMITTED=modifying_sql_data_not_permitted
2F003=S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED=prohibited_sql_statement_attempted
2F004=S_R_E_READING_SQL_DATA_NOT_PERMITTED=reading_sql_data_not_permitted
2F005=S_R_E_FUNCTION_EXECUTED_NO_RETURN_STATEMENT=function_executed_no_return_statement
34000=INVALID_CURSOR_NAME 34000=UNDEFINED_CURSOR=
38000=EXTERNAL_ROUTINE_EXCEPTION
38001=E_R_E_CONTAINING_SQL_NOT_PERMITTED=containing_sql_not_permitted
38002=E_R_E_MODIFYING_SQL_DATA_NOT_PERMITTED=modifying_sql_data_not_permitted
38003=E_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED=prohibited_sql_statement_attempted
38004=E_R_E_READING_SQL_DATA_NOT_PERMITTED=reading_sql_data_not_permitted
39000=EXTERNAL_ROUTINE_INVOCATION_EXCEPTION
39001=E_R_I_E_INVALID_SQLSTATE_RETURNED=invalid_sqlstate_returned
39004=E_R_I_E_NULL_VALUE_NOT_ALLOWED=null_value_not_allowed
39P01=E_R_I_E_TRIGGER_PROTOCOL_VIOLATED=trigger_protocol_violated
39P02=E_R_I_E_SRF_PROTOCOL_VIOLATED=srf_protocol_violated
39P03=E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED=event_trigger_protocol_violated
3B000=SAVEPOINT_EXCEPTION
3B001=S_E_INVALID_SPECIFICATION=invalid_savepoint_specification
3D000=INVALID_CATALOG_NAME 3D000=UNDEFINED_DATABASE=
3F000=INVALID_SCHEMA_NAME 3F000=UNDEFINED_SCHEMA= 40000=TRANSACTION_ROLLBACK
40001=T_R_SERIALIZATION_FAILURE=serialization_failure
40002=T_R_INTEGRITY_CONSTRAINT_VIOLATION=transaction_integrity_constraint_violation
40003=T_R_STATEMENT_COMPLETION_UNKNOWN=statement_completion_unknown
40P01=T_R_DEADLOCK_DETECTED=deadlock_detected
42000=SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION 42501=INSUFFICIENT_PRIVILEGE
42601=SYNTAX_ERROR 42602=INVALID_NAME 42611=INVALID_COLUMN_DEFINITION
42622=NAME_TOO_LONG 42701=DUPLICATE_COLUMN 42702=AMBIGUOUS_COLUMN
42703=UNDEFINED_COLUMN 42704=UNDEFINED_OBJECT 42710=DUPLICATE_OBJECT
42712=DUPLICATE_ALIAS 42723=DUPLICATE_FUNCTION 42725=AMBIGUOUS_FUNCTION
42803=GROUPING_ERROR 42804=DATATYPE_MISMATCH 42809=WRONG_OBJECT_TYPE
42830=INVALID_FOREIGN_KEY 42846=CANNOT_COERCE 42883=UNDEFINED_FUNCTION
428C9=GENERATED_ALWAYS 42939=RESERVED_NAME 42P01=UNDEFINED_TABLE
42P02=UNDEFINED_PARAMETER 42P03=DUPLICATE_CURSOR 42P04=DUPLICATE_DATABASE
42P05=DUPLICATE_PSTATEMENT=duplicate_prepared_statement
42P06=DUPLICATE_SCHEMA 42P07=DUPLICATE_TABLE 42P08=AMBIGUOUS_PARAMETER
42P09=AMBIGUOUS_ALIAS 42P10=INVALID_COLUMN_REFERENCE
42P11=INVALID_CURSOR_DEFINITION 42P12=INVALID_DATABASE_DEFINITION
42P13=INVALID_FUNCTION_DEFINITION
42P14=INVALID_PSTATEMENT_DEFINITION=invalid_prepared_statement_definition
42P15=INVALID_SCHEMA_DEFINITION 42P16=INVALID_TABLE_DEFINITION
42P17=INVALID_OBJECT_DEFINITION 42P18=INDETERMINATE_DATATYPE
42P19=INVALID_RECURSION 42P20=WINDOWING_ERROR 42P21=COLLATION_MISMATCH
42P22=INDETERMINATE_COLLATION 44000=WITH_CHECK_OPTION_VIOLATION
53000=INSUFFICIENT_RESOURCES 53100=DISK_FULL 53200=OUT_OF_MEMORY
53300=TOO_MANY_CONNECTIONS 53400=CONFIGURATION_LIMIT_EXCEEDED
54000=PROGRAM_LIMIT_EXCEEDED 54001=STATEMENT_TOO_COMPLEX
54011=TOO_MANY_COLUMNS 54023=TOO_MANY_ARGUMENTS
55000=OBJECT_NOT_IN_PREREQUISITE_STATE 55006=OBJECT_IN_USE
55P02=CANT_CHANGE_RUNTIME_PARAM 55P03=LOCK_NOT_AVAILABLE
55P04=UNSAFE_NEW_ENUM_VALUE_USAGE 57000=OPERATOR_INTERVENTION
57014=QUERY_CANCELED 57P01=ADMIN_SHUTDOWN 57P02=CRASH_SHUTDOWN
57P03=CANNOT_CONNECT_NOW 57P04=DATABASE_DROPPED 57P05=IDLE_SESSION_TIMEOUT
58000=SYSTEM_ERROR 58030=IO_ERROR 58P01=UNDEFINED_FILE 58P02=DUPLICATE_FILE
58P03=FILE_NAME_TOO_LONG 72000=SNAPSHOT_TOO_OLD F0000=CONFIG_FILE_ERROR
F0001=LOCK_FILE_EXISTS HV000=FDW_ERROR HV001=FDW_OUT_OF_MEMORY
HV002=FDW_DYNAMIC_PARAMETER_VALUE_NEEDED HV004=FDW_INVALID_DATA_TYPE
HV005=FDW_COLUMN_NAME_NOT_FOUND HV006=FDW_INVALID_DATA_TYPE_DESCRIPTORS
HV007=FDW_INVALID_COLUMN_NAME HV008=FDW_INVALID_COLUMN_NUMBER
HV009=FDW_INVALID_USE_OF_NULL_POINTER HV00A=FDW_INVALID_STRING_FORMAT
HV00B=FDW_INVALID_HANDLE HV00C=FDW_INVALID_OPTION_INDEX
HV00D=FDW_INVALID_OPTION_NAME HV00J=FDW_OPTION_NAME_NOT_FOUND
HV00K=FDW_REPLY_HANDLE HV00L=FDW_UNABLE_TO_CREATE_EXECUTION
HV00M=FDW_UNABLE_TO_CREATE_REPLY HV00N=FDW_UNABLE_TO_ESTABLISH_CONNECTION
HV00P=FDW_NO_SCHEMAS HV00Q=FDW_SCHEMA_NOT_FOUND HV00R=FDW_TABLE_NOT_FOUND
HV010=FDW_FUNCTION_SEQUENCE_ERROR HV014=FDW_TOO_MANY_HANDLES
HV021=FDW_INCONSISTENT_DESCRIPTOR_INFORMATION
HV024=FDW_INVALID_ATTRIBUTE_VALUE
HV090=FDW_INVALID_STRING_LENGTH_OR_BUFFER_LENGTH
HV091=FDW_INVALID_DESCRIPTOR_FIELD_IDENTIFIER P0000=PLPGSQL_ERROR
P0001=RAISE_EXCEPTION P0002=NO_DATA_FOUND P0003=TOO_MANY_ROWS
P0004=ASSERT_FAILURE XX000=INTERNAL_ERROR XX001=DATA_CORRUPTED
XX002=INDEX_CORRUPTED
"""


if __name__ == "__main__":
    sys.exit(main())
