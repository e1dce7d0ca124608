"""spec_ops: speculative-decoding operators as ``torch.ops.spec_ops.*``.

Importing the package registers every op (Triton kernel on CUDA, vectorized torch on CPU, an
explicit fake for torch.compile and meta tensors). docs/ is the contract.
"""

from .computed_tokens import update_num_computed_tokens_for_batch_change
from .dflash import copy_and_expand_dflash_inputs
from .draft_step import (
    eagle_mrope_step_update_slot_mapping_and_metadata,
    eagle_multi_step_slot_mapping,
    eagle_step_update_slot_mapping_and_metadata,
)
from .expand import compute_new_slot_mapping, copy_and_expand_eagle_inputs
from .metadata import (
    CommonAttentionMetadata,
    advance_draft_step_metadata,
    advance_mrope_draft_step_metadata,
    dflash_query_metadata,
    dflash_round_metadata,
    draft_decode_metadata,
    draft_step_metadata,
    eagle_round_metadata,
    extend_all_queries_by_N,
    parallel_round_metadata,
)
from .padded_batch import (
    eagle_prepare_inputs_padded,
    eagle_prepare_next_token_padded,
    prepare_padded_draft_inputs,
)
from .rounds import prepare_dflash_round, prepare_eagle_round, prepare_parallel_round
from .utils import PADDING_SLOT_ID, next_power_of_2, unconditional_to_conditional_rates
from .warmup import warmup

from . import meta  # noqa: E402,F401,I001  (registers the fakes; needs the ops defined first)

__version__ = "0.1.0"

__all__ = [
    "PADDING_SLOT_ID",
    "CommonAttentionMetadata",
    "advance_draft_step_metadata",
    "advance_mrope_draft_step_metadata",
    "compute_new_slot_mapping",
    "copy_and_expand_dflash_inputs",
    "copy_and_expand_eagle_inputs",
    "dflash_query_metadata",
    "dflash_round_metadata",
    "draft_decode_metadata",
    "draft_step_metadata",
    "eagle_mrope_step_update_slot_mapping_and_metadata",
    "eagle_multi_step_slot_mapping",
    "eagle_prepare_inputs_padded",
    "eagle_prepare_next_token_padded",
    "eagle_round_metadata",
    "eagle_step_update_slot_mapping_and_metadata",
    "extend_all_queries_by_N",
    "next_power_of_2",
    "parallel_round_metadata",
    "prepare_dflash_round",
    "prepare_eagle_round",
    "prepare_padded_draft_inputs",
    "prepare_parallel_round",
    "unconditional_to_conditional_rates",
    "update_num_computed_tokens_for_batch_change",
    "warmup",
]
