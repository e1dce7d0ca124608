"""Whether the working tree's kernels compile to the same PTX as a commit's, no GPU needed.

    python scripts/ptx_diff.py REV [--drafts 1,3,7] [--arch 90]

A change that leaves every kernel variant's PTX as it was leaves its GPU timings as they were.
For each K in --drafts this compiles, in the working tree and in a checkout of REV (a
temporary git worktree), every kernel variant spec_ops.warmup reaches for that K with the
production and the all-int64 dtypes (scripts/compile_kernels.py's variants, its other
configuration values), for sm_<arch>, and compares the PTX variant by variant, line-number
and debug information aside. Prints each variant whose PTX differs and a count; exits 1 if
any differs or the two trees warm up different variants.
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
    assert Path(spec_ops.__file__).resolve().is_relative_to(root), spec_ops.__file__
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
        name, warps, _, constexprs = variant
        print(name, warps, [value for _, value in constexprs],
              hashlib.sha1(kept.encode()).hexdigest(), sep="\t", flush=True)


def _run(root, options):
    command = [sys.executable, __file__, "--hashes", str(root), "--drafts", options.drafts,
               "--arch", str(options.arch)]
    output = subprocess.run(command, check=True, capture_output=True, text=True,
                            cwd=tempfile.gettempdir()).stdout
    return [line.split("\t") for line in output.splitlines()]


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
                            str(other)], check=True)
    if [row[0] for row in before] != [row[0] for row in after]:
        print(f"the trees warm up different variants: {len(before)} at {options.rev}, "
              f"{len(after)} here")
        return 1
    differing = [(old, new) for old, new in zip(before, after) if old[-1] != new[-1]]
    for old, new in differing:
        print(f"PTX differs: {new[0]} num_warps={new[1]} constexprs={new[2]} "
              f"(at {options.rev}: {old[2]})")
    print(f"K = {options.drafts}, sm_{options.arch}: {len(before) - len(differing)} of "
          f"{len(before)} kernel variants compile to the same PTX as at {options.rev}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
