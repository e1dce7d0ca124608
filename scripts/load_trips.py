"""How many dependent global-memory round trips a kernel's threads wait for, read from its
SASS: compiled on any machine (Triton's bundled ptxas and nvdisasm, no GPU), for the kernel
variants that spec_ops.warmup launches (scripts/compile_kernels.py).

    python scripts/load_trips.py [KERNEL ...] [--arch 90] [--warps N] [--all | --tile |
                                                                      --parameters]

A warp issues in order and waits at the first instruction that reads a register a load has not
filled yet. Walking the instructions in order, each global load's trip is therefore one more
than the deepest load result read by any instruction before it: the loads of trip 1 go out
right after the grid-dependency wait, those of trip 2 once a trip-1 value has arrived, and so
on. The estimate does not follow branches: code after a branch counts on from the deepest trip
before it, so a loop's body shows up as further trips. Up to the first branch it is what the
hardware does. Printed per kernel variant: each load with its trip and source line (--all), or
the trips before the first branch and the number of loads at each. --tile counts instead from
the first branch to the first unconditional one: the round ops' lanes kernels branch first
to send their remainder programs away, and the straight code that follows is the tile's (it
also prints the trips before the tile's own first branch: 6.3's tile reads the block table
again behind one only where a guessed position missed, _indexing.checked_block).
--parameters prints instead which 64-byte lines of the kernel's parameters (the constant bank
from 0x210, sm_90's parameter offset) its SASS reads before the grid-dependency wait (ACQBULK)
and which only after it: the first read of a line on an SM waits for the constant cache to
fetch it, and only a fetch before the wait overlaps the kernel before (DESIGN.md, "Where a
round op's GPU and host time go").
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)    # before triton is imported: compile, not interpret
sys.path.insert(0, str(Path(__file__).resolve().parent))

import compile_kernels  # noqa: E402
import triton  # noqa: E402

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
INSTRUCTION = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)\s*(.*)")
REGISTER = re.compile(r"\bR(\d+)(\.64|\.128)?\b")
SOURCE = re.compile(r'File "([^"]+)", line (\d+)')
CONSTANT = re.compile(r"c\[0x0\]\[(0x[0-9a-f]+)\]")
PARAMETER_BASE = 0x210      # where sm_90 puts a kernel's parameters in constant bank 0


def sass_with_lines(variant, arch, num_warps):
    """[(instruction text, "file:line" or None)] of the variant's cubin."""
    compiled = compile_kernels.compiled_variant(variant, arch, num_warps)
    with tempfile.TemporaryDirectory() as directory:
        cubin = Path(directory) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        text = subprocess.run([BIN / "nvdisasm", "--print-line-info", "-c", str(cubin)],
                              capture_output=True, text=True, check=True).stdout
    lines, where = [], None
    for line in text.splitlines():
        source = SOURCE.search(line) if line.strip().startswith("//##") else None
        if source:
            where = f"{Path(source.group(1)).name}:{source.group(2)}"
        elif line.strip().startswith("/*"):
            lines.append((line.split(";")[0].strip(), where))
    return lines


def _registers(operand):
    """The registers an operand names, both halves of a 64-bit pair, all four of a 128-bit."""
    found = []
    for number, width in REGISTER.findall(operand):
        count = {".64": 2, ".128": 4}.get(width, 1)
        found += range(int(number), int(number) + count)
    return found


def load_trips(lines):
    """[(address, opcode, trip, source)] in program order: trip None for a conditional
    branch, 0 for an unconditional one."""
    filled_by = {}      # register -> trip of the load that writes it
    waited = 0          # the deepest trip the warp has waited for so far
    trips = []
    for text, where in lines:
        match = INSTRUCTION.match(text)
        if not match:
            continue
        address, predicate, opcode, rest = match.groups()
        operands = [operand.strip() for operand in rest.split(",")] if rest else []
        writes = not opcode.startswith(("ST", "BRA", "EXIT", "RET", "BAR", "RED", "ATOM"))
        destinations, sources = (operands[:1], operands[1:]) if writes and operands else ([],
                                                                                    operands)
        waited = max([waited] + [filled_by.get(r, 0) for s in sources for r in _registers(s)])
        if opcode.startswith("LDG"):
            width = 4 if ".128" in opcode else 2 if ".64" in opcode else 1
            for destination in destinations:
                for first in _registers(destination)[:1]:
                    filled_by.update(dict.fromkeys(range(first, first + width), waited + 1))
            trips.append((address, opcode, waited + 1, where))
        else:
            for destination in destinations:
                for register in _registers(destination):
                    filled_by.pop(register, None)
            if opcode.startswith("BRA"):
                trips.append((address, opcode, 0 if predicate is None else None, where))
    return trips


def parameter_lines(lines):
    """(before, after): the 64-byte lines of the parameter bank read before the first
    grid-dependency wait (ACQBULK) and those read only after it, as sorted line offsets."""
    before, after, waited = set(), set(), False
    for text, _ in lines:
        match = INSTRUCTION.match(text)
        if not match:
            continue
        if match.group(3).startswith("ACQBULK"):
            waited = True
        for hex_offset in CONSTANT.findall(text):
            offset = int(hex_offset, 16)
            if offset >= PARAMETER_BASE:
                (after if waited else before).add((offset - PARAMETER_BASE) // 64)
    return sorted(before), sorted(after - before)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", help="kernel names (default: every kernel)")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--warps", type=int, default=None, help="override num_warps")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--all", action="store_true", help="every load and branch")
    shown.add_argument("--tile", action="store_true",
                       help="from the first branch to the first unconditional one")
    shown.add_argument("--parameters", action="store_true",
                       help="parameter lines read before and only after the wait")
    options = parser.parse_args()
    for variant in compile_kernels.variants():
        name, warps, _, constexprs = variant
        if options.kernels and name not in options.kernels:
            continue
        lines = sass_with_lines(variant, options.arch, options.warps)
        print(f"{name} num_warps={options.warps or warps} "
              f"constexprs={[value for _, value in constexprs]}")
        if options.parameters:
            before, after = parameter_lines(lines)
            print(f"  parameter lines read before the wait: {before}; only after it: {after}")
            continue
        trips = load_trips(lines)
        if options.all:
            for address, opcode, trip, where in trips:
                print(f"  {address} {opcode:12s} {'branch' if not trip else trip:>6} "
                      f"{where or ''}")
            continue
        if options.tile:
            start = next((i for i, (_, _, trip, _) in enumerate(trips) if not trip), len(trips))
            stop = next((i for i, (_, _, trip, _) in enumerate(trips) if trip == 0 and i > start),
                        len(trips))
            section, label = trips[start + 1:stop], "tile path"
        else:
            stop = next((i for i, (_, _, trip, _) in enumerate(trips) if not trip), len(trips))
            section, label = trips[:stop], "before the first branch"
        counted = [trip for _, _, trip, _ in section if trip]
        counts = {trip: counted.count(trip) for trip in sorted(set(counted))}
        straight = next((i for i, (_, _, trip, _) in enumerate(section) if not trip),
                        len(section))
        before = max((trip for _, _, trip, _ in section[:straight] if trip), default=0)
        print(f"  {label}: {max(counted, default=0)} trips, loads per trip {counts}; "
              f"{before} before its first branch")


if __name__ == "__main__":
    main()
