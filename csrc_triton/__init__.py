"""spec_ops' Triton kernels and their launchers (installed as ``spec_ops._triton``).

Launchers take already-validated tensors and sizes; nothing here knows about torch.library.
"""

from .computed_tokens import launch_update_num_computed_tokens
from .dflash import launch_copy_and_expand_dflash_inputs
from .draft_step import launch_mrope_step, launch_multi_step, launch_step
from .expand import launch_compute_new_slot_mapping, launch_copy_and_expand_eagle_inputs
from .padded_batch import (
    launch_next_token,
    launch_prepare_inputs_padded,
    launch_prepare_padded_draft_inputs,
)
from .rounds import (
    launch_prepare_dflash_round,
    launch_prepare_eagle_round,
    launch_prepare_parallel_round,
)

__all__ = [
    "launch_compute_new_slot_mapping",
    "launch_copy_and_expand_dflash_inputs",
    "launch_copy_and_expand_eagle_inputs",
    "launch_mrope_step",
    "launch_multi_step",
    "launch_next_token",
    "launch_prepare_inputs_padded",
    "launch_prepare_dflash_round",
    "launch_prepare_eagle_round",
    "launch_prepare_padded_draft_inputs",
    "launch_prepare_parallel_round",
    "launch_step",
    "launch_update_num_computed_tokens",
]
