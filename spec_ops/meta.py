"""The fake (meta) implementation of every spec_ops op, in one place.

A fake runs the op's whole argument check (overlaps decided by storage, as fake and meta
tensors have no addresses), so errors surface at trace time exactly as they do in eager, and
allocates exactly what the real kernel allocates (only compute_new_slot_mapping returns a
tensor). The same functions serve ``device="meta"`` tensors.
"""

import torch

from . import validation
from ._library import KERNELS, LIBRARY

# Ops that write only their out arguments: the fake checks them and allocates nothing.
OUT_ONLY_OPS = (
    "eagle_prepare_next_token_padded",
    "eagle_prepare_inputs_padded",
    "copy_and_expand_eagle_inputs",
    "copy_and_expand_dflash_inputs",
    "eagle_step_update_slot_mapping_and_metadata",
    "eagle_mrope_step_update_slot_mapping_and_metadata",
    "update_num_computed_tokens_for_batch_change",
    "prepare_padded_draft_inputs",
    "eagle_multi_step_slot_mapping",
    "prepare_eagle_round",
    "prepare_parallel_round",
    "prepare_dflash_round",
)


def _register(name):
    return torch.library.register_fake(f"spec_ops::{name}", lib=LIBRARY)


def _out_only_fake(name):
    check = KERNELS[name].check

    def fake(*args):
        check(*args, fake=True)
    return fake


for _name in OUT_ONLY_OPS:
    _register(_name)(_out_only_fake(_name))


@_register("compute_new_slot_mapping")
def compute_new_slot_mapping(*args):
    KERNELS["compute_new_slot_mapping"].check(*args, fake=True)
    return validation.empty_slot_mapping(args[2])
