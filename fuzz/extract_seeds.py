#!/usr/bin/env python3
"""Writes the body of every `workflow! { ... }` call in compile-tests/ui/**/*.rs to its own seed
file in fuzz/seeds/parse_spec/ (named after the test, e.g. `retry-bad-backoff.txt`).

Run from anywhere: `python3 fuzz/extract_seeds.py`. Re-run it when UI tests are added.
"""
import pathlib
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
UI = ROOT / "compile-tests" / "ui"
OUT = ROOT / "fuzz" / "seeds" / "parse_spec"
OPEN = {"{": "}", "(": ")", "[": "]"}


def skip_literal(src, i):
    """If a string, char, raw string or comment starts at i, the index just past it."""
    c = src[i]
    if src.startswith("//", i):
        end = src.find("\n", i)
        return len(src) if end < 0 else end
    if src.startswith("/*", i):
        depth, i = 1, i + 2
        while i < len(src) and depth:
            if src.startswith("/*", i):
                depth, i = depth + 1, i + 2
            elif src.startswith("*/", i):
                depth, i = depth - 1, i + 2
            else:
                i += 1
        return i
    m = re.match(r'b?r(#*)"', src[i:])
    if m and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
        close = '"' + m.group(1)
        end = src.find(close, i + m.end())
        return len(src) if end < 0 else end + len(close)
    if c == '"':
        i += 1
        while i < len(src) and src[i] != '"':
            i += 2 if src[i] == "\\" else 1
        return i + 1
    if c == "'":
        if src.startswith("\\", i + 1):
            end = src.find("'", i + 3)
            return len(src) if end < 0 else end + 1
        if i + 2 < len(src) and src[i + 2] == "'":
            return i + 3
        return i + 1  # a lifetime
    return None


def bodies(src):
    for m in re.finditer(r"\bworkflow!\s*([{(\[])", src):
        start = m.end()
        stack, i = [OPEN[m.group(1)]], start
        while i < len(src) and stack:
            past = skip_literal(src, i)
            if past is not None:
                i = past
                continue
            c = src[i]
            if c in OPEN:
                stack.append(OPEN[c])
            elif c in ")]}":
                if c != stack.pop():
                    break
                if not stack:
                    yield src[start:i]
                    break
            i += 1


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted(UI.rglob("*.rs")):
        rel = path.relative_to(UI).with_suffix("")
        found = list(bodies(path.read_text()))
        if not found:
            print(f"no workflow! call in {path}", file=sys.stderr)
        for n, body in enumerate(found):
            name = "-".join(rel.parts) + (f"-{n}" if n else "") + ".txt"
            text = textwrap.dedent(body.strip("\n")).strip() + "\n"
            (OUT / name).write_text(text)
            count += 1
    print(f"wrote {count} seeds to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
