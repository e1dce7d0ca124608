"""1.6 (docs/ops.md): correct computed-token counts after an async-scheduling batch change.

The op's schema, CUDA kernel (a Triton launch), CPU kernel (vectorized torch) and public
function. The fake is in meta.py.
"""

import torch

from . import validation
from ._library import define
from ._torch_indexing import take, write
from ._triton import launch_update_num_computed_tokens


def _update_num_computed_tokens_cpu(num_computed_tokens, num_accepted_tokens, prev_positions,
                                    valid_sampled_token_count, prev_num_draft_tokens,
                                    cpu_num_computed_tokens, num_prev_rows):
    num_rows = prev_positions.shape[0]
    prev = prev_positions.long()
    participates = (prev >= 0) & (prev < num_prev_rows)
    participates &= take(prev_num_draft_tokens, prev) > 0
    accepted = take(valid_sampled_token_count, prev)
    computed = torch.where(participates, take(num_computed_tokens, prev) + accepted,
                           cpu_num_computed_tokens[:num_rows].long())
    # Every read above happened before these writes.
    write(num_computed_tokens, computed)
    write(num_accepted_tokens, accepted, participates)


_update_num_computed_tokens_op = define(
    "update_num_computed_tokens_for_batch_change(Tensor(a!) num_computed_tokens, "
    "Tensor(b!) num_accepted_tokens, Tensor prev_positions, Tensor valid_sampled_token_count, "
    "Tensor prev_num_draft_tokens, Tensor cpu_num_computed_tokens) -> ()",
    validation.check_update_num_computed_tokens_for_batch_change,
    launch_update_num_computed_tokens, _update_num_computed_tokens_cpu)


def update_num_computed_tokens_for_batch_change(num_computed_tokens, num_accepted_tokens,
                                                prev_positions, valid_sampled_token_count,
                                                prev_num_draft_tokens, cpu_num_computed_tokens):
    """Correct computed-token counts after an async batch reorder (docs/ops.md, 1.6).

    Row i with p = prev_positions[i] participates when p >= 0 (and in range) and
    prev_num_draft_tokens[p] > 0: then num_computed_tokens[i] = num_computed_tokens[p] +
    valid[p] and num_accepted_tokens[i] = valid[p]; otherwise num_computed_tokens[i] =
    cpu_num_computed_tokens[i]. All reads happen before any write.
    """
    _update_num_computed_tokens_op(num_computed_tokens, num_accepted_tokens, prev_positions,
                                   valid_sampled_token_count, prev_num_draft_tokens,
                                   cpu_num_computed_tokens)
