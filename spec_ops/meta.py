"""The fake (meta) implementation of every spec_ops op, in one place.

A fake runs the op's full argument check, so shape errors surface at trace time exactly as
they do in eager, and allocates exactly what the real kernel allocates (only
compute_new_slot_mapping returns a tensor). The same functions serve ``device="meta"`` tensors.
"""

import torch

from . import validation
from ._library import LIBRARY


def _register(name):
    return torch.library.register_fake(f"spec_ops::{name}", lib=LIBRARY)


@_register("eagle_prepare_next_token_padded")
def eagle_prepare_next_token_padded(*args):
    validation.check_eagle_prepare_next_token_padded(*args)


@_register("eagle_prepare_inputs_padded")
def eagle_prepare_inputs_padded(*args):
    validation.check_eagle_prepare_inputs_padded(*args)


@_register("copy_and_expand_eagle_inputs")
def copy_and_expand_eagle_inputs(*args):
    validation.check_copy_and_expand_eagle_inputs(*args)


@_register("copy_and_expand_dflash_inputs")
def copy_and_expand_dflash_inputs(*args):
    validation.check_copy_and_expand_dflash_inputs(*args)


@_register("eagle_step_update_slot_mapping_and_metadata")
def eagle_step_update_slot_mapping_and_metadata(*args):
    validation.check_eagle_step_update_slot_mapping_and_metadata(*args)


@_register("update_num_computed_tokens_for_batch_change")
def update_num_computed_tokens_for_batch_change(*args):
    validation.check_update_num_computed_tokens_for_batch_change(*args)


@_register("compute_new_slot_mapping")
def compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                             is_rejected_token_mask, block_size, num_new_tokens, max_model_len):
    validation.check_compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                                              is_rejected_token_mask, block_size,
                                              num_new_tokens, max_model_len)
    return validation.empty_slot_mapping(new_positions)


@_register("prepare_padded_draft_inputs")
def prepare_padded_draft_inputs(*args):
    validation.check_prepare_padded_draft_inputs(*args)


@_register("eagle_multi_step_slot_mapping")
def eagle_multi_step_slot_mapping(*args):
    validation.check_eagle_multi_step_slot_mapping(*args)
