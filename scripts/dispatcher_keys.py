"""What the dispatcher costs a round op called through torch.ops, and whether skipping its
autograd keys changes that.

    python scripts/dispatcher_keys.py [--calls N] [--repeats N]

Each round op's schema is defined again in a scratch namespace behind a kernel that does
nothing, registered for the device's dispatch key (CPU, or CUDA where there is one) three
ways: alone (as spec_ops registers its kernels), with torch.library.fallthrough_kernel for
Autograd, and with it for Autograd and ADInplaceOrView. Host µs per torch.ops call with
tensors of 8 int32 elements, the variants taking turns within each repeat, median of repeats.
Without autograd kernels the dispatcher runs its autograd fallback on the way to the kernel; a
fallthrough skips that key. What stays is the conversion of the arguments to C++ values and
back, which every Python-registered op pays.
"""

import argparse
import statistics
import time

import torch

import spec_ops  # noqa: F401  (defines torch.ops.spec_ops)

ROUND_OPS = ("prepare_eagle_round", "prepare_parallel_round", "prepare_dflash_round")
VARIANTS = {"alone": (), "fallthrough Autograd": ("Autograd",),
            "fallthrough Autograd, ADInplaceOrView": ("Autograd", "ADInplaceOrView")}


def _noop(*args):
    return None


def _arguments(schema, device):
    """A value per argument of ``schema``: small int32 tensors, ints, None for optionals."""
    values = []
    for argument in schema.arguments:
        kind = str(argument.type)
        if kind.startswith("Tensor"):
            values.append(torch.zeros(8, dtype=torch.int32, device=device))
        elif kind.endswith("?"):
            values.append(None)
        elif kind == "bool":
            values.append(True)
        else:
            values.append(16)
    return tuple(values)


def _registered(op_name, device_key, libraries):
    """The op's schema behind a no-op kernel, once per variant: {variant: OpOverload}."""
    schema = getattr(torch.ops.spec_ops, op_name).default._schema
    signature = str(schema)[str(schema).index("("):]
    ops = {}
    for index, (variant, keys) in enumerate(VARIANTS.items()):
        namespace = f"spec_ops_dispatch_{op_name}_{index}"
        library = torch.library.Library(namespace, "DEF")
        libraries.append(library)
        library.define("op" + signature)
        library.impl("op", _noop, device_key)
        for key in keys:
            library.impl("op", torch.library.fallthrough_kernel, key)
        ops[variant] = getattr(torch.ops, namespace).op.default
    return schema, ops


def _per_call_us(op, args, calls, device):
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter_ns()
    for _ in range(calls):
        op(*args)
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter_ns() - start) / calls / 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    libraries = []      # kept alive: a Library's registrations go with it
    print(f"host µs per torch.ops call of a no-op kernel ({device}, torch {torch.__version__}), "
          f"median of {args.repeats} x {args.calls} calls")
    print(f"{'op':<24}" + "".join(f"{variant:>40}" for variant in VARIANTS))
    for op_name in ROUND_OPS:
        schema, ops = _registered(op_name, device.upper(), libraries)
        values = _arguments(schema, device)
        times = {variant: [] for variant in ops}
        for op in ops.values():
            _per_call_us(op, values, args.calls // 10, device)          # warm-up
        for _ in range(args.repeats):
            for variant, op in ops.items():
                times[variant].append(_per_call_us(op, values, args.calls, device))
        print(f"{op_name:<24}" + "".join(f"{statistics.median(times[v]):>40.2f}" for v in ops))


if __name__ == "__main__":
    main()
