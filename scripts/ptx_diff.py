"""Whether the working tree's kernels compile to the same PTX as a commit's, no GPU needed.

    python scripts/ptx_diff.py REV [--drafts 1,3,7] [--arch 90]

A change that leaves every kernel variant's PTX as it was leaves its GPU timings as they were.
For each K in --drafts this compiles, in the working tree and in a checkout of REV (a
temporary git worktree), every kernel variant spec_ops.warmup reaches for that K with the
production and the all-int64 dtypes (scripts/compile_kernels.py's variants, its other
configuration values), for sm_<arch>, and compares the PTX variant by variant, line-number
and debug information aside. Prints each variant whose PTX differs and a count; exits 1 if
any differs or the two trees warm up different variants, 2 if a tree fails to compile.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_DEBUG_LINES = (".loc", ".file", "//", "$L__tmp", "$L__func")


def hashes(root, drafts, arch):
    """(kernel name, PTX hash) of every variant of the tree at ``root``, in a stable order."""
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path[:0] = [str(root), str(root / "scripts")]
    import compile_kernels
    import spec_ops
    import spec_ops._triton
    for module in (spec_ops, spec_ops._triton):     # not an installed copy of another tree
        assert Path(module.__file__).resolve().is_relative_to(root), module.__file__
    found = set()
    for k in drafts:
        if hasattr(compile_kernels, "NUM_SPECULATIVE_TOKENS"):
            compile_kernels.NUM_SPECULATIVE_TOKENS = (k,)
        else:       # trees from before K was a list
            compile_kernels.CONFIG["num_speculative_tokens"] = k
        found.update(compile_kernels.variants())
    for variant in sorted(found, key=str):
        ptx = compile_kernels.compiled_variant(variant, arch).asm["ptx"].split(".section")[0]
        kept = "\n".join(line for line in ptx.splitlines()
                         if not line.strip().startswith(_DEBUG_LINES))
        name, warps, signature, constexprs = variant
        print(name, warps, [kind for _, kind in signature if kind != "constexpr"],
              [value for _, value in constexprs], hashlib.sha1(kept.encode()).hexdigest(),
              sep="\t", flush=True)


def _run(root, options):
    """``hashes`` of the tree at ``root``, in a process of its own; None if it failed (its
    errors shown)."""
    command = [sys.executable, __file__, "--hashes", str(root), "--drafts", options.drafts,
               "--arch", str(options.arch)]
    # Run from outside both trees, so that no tree is importable from the working directory.
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True,
                          cwd=tempfile.gettempdir())
    if done.returncode:
        print(f"compiling the kernels of {root} failed (exit {done.returncode})")
        return None
    return [line.split("\t") for line in done.stdout.splitlines()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", nargs="?", help="the commit to compare the working tree with")
    parser.add_argument("--drafts", default="1,3,7", help="K values, e.g. 1,3,7")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--hashes", type=Path, help=argparse.SUPPRESS)     # one tree's run
    options = parser.parse_args()
    drafts = [int(k) for k in options.drafts.split(",")]
    if options.hashes:
        hashes(options.hashes.resolve(), drafts, options.arch)
        return 0
    if not options.rev:
        parser.error("REV is required")
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other),
                        options.rev], check=True)
        try:
            # setup.py installs csrc_triton as spec_ops._triton.
            (other / "spec_ops" / "_triton").symlink_to(other / "csrc_triton")
            before, after = _run(other, options), _run(ROOT, options)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(other)])
    if before is None or after is None:
        return 2
    # A variant is its kernel, warps and tensor types; its constexprs may have gained one (a
    # new tile switch, say) between the trees, so they are shown, not matched.
    if [row[:3] for row in before] != [row[:3] for row in after]:
        print(f"the trees warm up different variants: {len(before)} at {options.rev}, "
              f"{len(after)} here")
        return 1
    differing = [(old, new) for old, new in zip(before, after) if old[-1] != new[-1]]
    for old, new in differing:
        print(f"PTX differs: {new[0]} num_warps={new[1]} tensors={new[2]} constexprs={new[3]} "
              f"(at {options.rev}: {old[3]})")
    print(f"K = {options.drafts}, sm_{options.arch}: {len(before) - len(differing)} of "
          f"{len(before)} kernel variants compile to the same PTX as at {options.rev}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
