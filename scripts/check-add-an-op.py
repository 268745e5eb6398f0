#!/usr/bin/env python3
"""Checks that docs/add-an-op.md names exactly the files a new op touches.

Copies the workspace's sources, adds a dummy variant to an op family (element-wise by
default) and lets the compiler list the files where it must be handled. Each round runs
`cargo check --workspace --tests --keep-going`, records the files with errors, and fills
each non-exhaustive match the compiler reports with the arm it suggests (`todo!()`), so
the next round reaches the crates downstream; the rounds stop when the copy compiles.
The files recorded, with the family's module where the variant goes, must be the doc's
list for that family: the `.rs` paths in backticks between `<!-- add-an-op: FAMILY -->`
and `<!-- /add-an-op -->`.

    scripts/check-add-an-op.sh [elementwise|reduce|shape|nn|image|control|attention|fused]

The copy lives in target/add-an-op/FAMILY and is synced file by file (unchanged files
keep their times), so a later run checks only what changed; it builds in
target/add-an-op/FAMILY.target ($GOPT_ADD_AN_OP_TARGET), never in the workspace's own
target directory (cargo would take the copy's crates for the workspace's).
"""

import json
import os
import re
import shutil
import subprocess
import sys

DUMMY = "GoptDummyOp"  # a name no real op has, so no source mentions it
SKIP = {".git", "target", ".venv", "fuzz", "bench", "snapshots"}
SKIP_UNDER = {os.path.join("tests", "data")}
MAX_ROUNDS = 10


def step(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


def sync(src, dst):
    """Makes `dst` a copy of `src`'s sources, rewriting only the files that differ."""
    seen = set()
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        dirs[:] = [
            d
            for d in dirs
            if not (rel_root == "." and d in SKIP)
            and os.path.normpath(os.path.join(rel_root, d)) not in SKIP_UNDER
            and not os.path.islink(os.path.join(root, d))
        ]
        for f in files:
            rel = os.path.normpath(os.path.join(rel_root, f))
            if f.endswith((".snap", ".snap.new")):
                continue
            seen.add(rel)
            a, b = os.path.join(src, rel), os.path.join(dst, rel)
            data = open(a, "rb").read()
            if os.path.exists(b) and open(b, "rb").read() == data:
                continue
            os.makedirs(os.path.dirname(b), exist_ok=True)
            with open(b, "wb") as out:
                out.write(data)
            shutil.copymode(a, b)
    for root, _, files in os.walk(dst):
        for f in files:
            rel = os.path.normpath(os.path.relpath(os.path.join(root, f), dst))
            if rel not in seen:
                os.remove(os.path.join(root, f))


def add_dummy(path):
    src = open(path).read()
    m = re.search(r"op_family!\s*\{.*?\b([A-Z]\w*Op)\s*\{", src, re.S)
    if not m:
        sys.exit(f"{path}: no op_family! declaration")
    with open(path, "w") as out:
        out.write(src[: m.end()] + f"\n        {DUMMY}," + src[m.end() :])


def qualified(arm, file_name):
    """The suggested arm with its op paths from the crate root (`gopt_ir::Op::...`): the
    compiler names them as declared, which the file may not import."""
    root = "crate" if file_name.startswith("ir/src/") else "gopt_ir"
    arm = re.sub(r"(?<![\w:])Op::", f"{root}::Op::", arm)
    return re.sub(r"(?<![\w:])(\w+Op)::", f"{root}::ops::\\1::", arm)


def check_round(copy):
    """One `cargo check`: the files with errors, and the suggested arms applied (their
    count); errors without a suggested arm end the check."""
    run = subprocess.run(
        ["cargo", "check", "--workspace", "--tests", "--keep-going", "--message-format", "json"],
        cwd=copy,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    files, fixes, unfixable = set(), {}, []
    for line in run.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-message":
            continue
        d = msg["message"]
        if d["level"] != "error" or not d["spans"]:
            continue
        span = next((s for s in d["spans"] if s["is_primary"]), d["spans"][0])
        files.add(span["file_name"])
        arms = [
            s
            for c in d["children"]
            for s in c["spans"]
            if DUMMY in (s.get("suggested_replacement") or "")
        ]
        if not arms:
            unfixable.append(f'{span["file_name"]}:{span["line_start"]}: {d["message"]}')
            continue
        s = arms[0]
        fixes.setdefault(s["file_name"], set()).add(
            (s["byte_start"], s["byte_end"], qualified(s["suggested_replacement"], s["file_name"]))
        )
    if unfixable:
        print("errors without a suggested arm (handle them by hand, then rerun):", file=sys.stderr)
        print("\n".join(unfixable), file=sys.stderr)
        sys.exit(1)
    step(f"{len(files)} files with errors, {sum(len(e) for e in fixes.values())} arms added")
    if run.returncode != 0 and not files:
        sys.exit("cargo check failed without a compiler error (run it in the copy to see why)")
    for f, edits in fixes.items():
        path = os.path.join(copy, f)
        data = open(path, "rb").read()
        for start, end, text in sorted(edits, reverse=True):
            data = data[:start] + text.encode() + data[end:]
        with open(path, "wb") as out:
            out.write(data)
    return files, sum(len(e) for e in fixes.values())


def doc_list(doc, family):
    text = open(doc).read()
    m = re.search(rf"<!-- add-an-op: {family} -->(.*?)<!-- /add-an-op -->", text, re.S)
    if not m:
        sys.exit(f"docs/add-an-op.md: no `<!-- add-an-op: {family} -->` section")
    return set(re.findall(r"`([\w./-]+\.rs)`", m.group(1)))


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    family = sys.argv[1] if len(sys.argv) > 1 else "elementwise"
    module = os.path.join("ir", "src", "ops", family, "mod.rs")
    if not os.path.exists(os.path.join(repo, module)):
        sys.exit(f"no op family `{family}` (expected {module})")
    copy = os.path.join(repo, "target", "add-an-op", family)
    # A target directory of its own: cargo hashes a workspace's crates by their paths
    # inside it, so the copy would share (and spoil) the workspace's own artifacts.
    os.environ["CARGO_TARGET_DIR"] = os.environ.get(
        "GOPT_ADD_AN_OP_TARGET", os.path.join(repo, "target", "add-an-op", f"{family}.target")
    )
    step(f"sync the workspace's sources to {os.path.relpath(copy, repo)}")
    sync(repo, copy)
    step(f"add {DUMMY} to the {family} family")
    add_dummy(os.path.join(copy, module))
    touched = {module}
    for r in range(1, MAX_ROUNDS + 1):
        step(f"round {r}: cargo check --workspace --tests")
        files, fixed = check_round(copy)
        touched |= files
        if fixed == 0:
            break
    else:
        sys.exit(f"still failing after {MAX_ROUNDS} rounds")
    print("\n".join(sorted(touched)))
    want = doc_list(os.path.join(repo, "docs", "add-an-op.md"), family)
    if want != touched:
        print(f"docs/add-an-op.md's {family} list is not what the compiler asks for:", file=sys.stderr)
        for f in sorted(want - touched):
            print(f"  only in the doc: {f}", file=sys.stderr)
        for f in sorted(touched - want):
            print(f"  only in the compiler's list: {f}", file=sys.stderr)
        sys.exit(1)
    step(f"a new {family} op touches {len(touched)} files, as docs/add-an-op.md says")


if __name__ == "__main__":
    main()
